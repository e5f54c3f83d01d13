"""Query shapes a streaming user writes into materialized views, for the fuzz grammar.

fuzz.grammar's `QueryGen` draws its basic shapes (projections, joins, aggregates, set
operations, windows) itself; the shapes here combine them the way dashboards and pipelines
do: top-N per group over a window function in a derived table, window functions over
aggregated rows, aggregates joined to aggregates, aggregation over joins with HAVING on
aggregate expressions, aggregation over set operations (and set operations of aggregates,
with ALL), nested and correlated subqueries (NOT IN with NULLs, = ANY / > ALL, a
correlated scalar subquery in the select list, derived tables of derived tables) and
casts between the numeric types. Each function takes the `QueryGen` (its random source
and expression grammar) and returns one query; every result is deterministic as a
multiset (window functions that number rows order by a unique tail, t.id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fuzz.grammar import QueryGen

T = [("t", "fz_t")]
U = [("u", "fz_u")]
TU = [("t", "fz_t"), ("u", "fz_u")]


def numeric_cast(g: QueryGen, kind: str, scope: list[tuple[str, str]], d: int) -> str | None:
    """A cast between numeric types producing `kind` (overflow errors are compared too)."""
    r = g.r

    def e(k: str) -> str:
        return g.expr(k, scope, d)

    if kind == "int":
        forms = [
            lambda: f"CAST({e('big')} AS INT)",
            lambda: f"CAST(CAST({e('int')} AS SMALLINT) AS INT)",
            lambda: f"CAST(CAST({e('num')} AS SMALLINT) AS INT)",
            lambda: f"CAST(round({e('float')}) AS INT)",
            lambda: f"CAST(CAST({e('int')} AS REAL) AS INT)",
        ]
    elif kind == "big":
        forms = [
            lambda: f"CAST({e('int')} AS BIGINT)",
            lambda: f"CAST({e('num')} AS BIGINT)",
            lambda: f"CAST({e('float')} AS BIGINT)",
            lambda: f"(CAST({e('int')} AS BIGINT) * {e('int')})",
        ]
    elif kind == "num":
        forms = [
            lambda: f"CAST({e('num')} AS NUMERIC(10, {r.randint(0, 3)}))",
            lambda: f"CAST({e('float')} AS NUMERIC)",
            lambda: f"CAST({e('int')} AS NUMERIC(5, 1))",
            # (not divided: PostgreSQL keeps 16-20 significant digits of a small quotient,
            # Swell at most 10 fractional digits, so an ORDER BY over quotients that agree
            # in those 10 digits breaks ties apart)
            lambda: f"(CAST({e('big')} AS NUMERIC) % {r.choice(['3', '7', '-2'])})",
        ]
    elif kind == "float":
        forms = [
            lambda: f"CAST({e('num')} AS DOUBLE PRECISION)",
            lambda: f"CAST({e('big')} AS DOUBLE PRECISION)",
            lambda: f"(CAST({e('int')} AS DOUBLE PRECISION) * {e('float')})",
        ]
    else:
        return None
    return r.choice(forms)()


def string_fn(g: QueryGen, scope: list[tuple[str, str]], d: int) -> str:
    """Text functions beyond the basic grammar's."""
    r = g.r

    def e(k: str) -> str:
        return g.expr(k, scope, d)

    forms = [
        lambda: f"md5({e('text')})",
        lambda: f"overlay({e('text')} PLACING 'zz' FROM {r.randint(1, 3)} FOR {r.randint(0, 2)})",
        lambda: f"split_part({e('text')}, 'b', {r.choice([1, 2, -1])})",
        lambda: f"regexp_replace({e('text')}, '[aeiou]', '*', 'g')",
        lambda: f"left({e('text')}, {r.choice([-2, 0, 1, 5])}) || right({e('text')}, 1)",
        lambda: f"to_hex(CAST({e('int')} AS INT))",  # to_hex(NULL) is ambiguous
        lambda: f"CAST({e('big')} AS VARCHAR)",
        lambda: f"quote_literal({e('text')})",
        lambda: f"CAST(octet_length({e('text')}) AS VARCHAR)",
    ]
    return r.choice(forms)()


def topn_per_group(g: QueryGen) -> str:
    """Top-N per group: a ranking window in a derived table filtered on its rank."""
    r = g.r
    part = r.choice(["t.a", "t.s", "t.flag", "(t.b % 3)"])
    fn = r.choice(["row_number()", "rank()", "dense_rank()"])
    order = r.choice(["t.b, t.id", "t.b DESC, t.id", "t.id DESC", "t.n NULLS FIRST, t.id"])
    if fn != "row_number()" and r.random() < 0.5:
        order = r.choice(["t.b", "t.s DESC", "t.d"])  # ties share a rank
    items = ", ".join(g._select_list(T, r.randint(1, 2)))
    inner = (
        f"SELECT t.id, {part} AS p, {items}, {fn} OVER (PARTITION BY {part} ORDER BY {order})"
        f" AS rn FROM fz_t t{g._maybe_where(T)}"
    )
    cond = r.choice(["x.rn <= 2", "x.rn = 1", "x.rn < 4 AND x.p IS NOT NULL", "x.rn > 1"])
    return f"SELECT * FROM ({inner}) AS x WHERE {cond}"


def window_over_agg(g: QueryGen) -> str:
    """Window functions over grouped rows (ranking groups by an aggregate)."""
    r = g.r
    key = r.choice(["t.a", "t.s", "t.flag", "t.d"])
    agg = r.choice(["sum(t.b)", "count(*)", "max(t.n)", "min(t.s)", "sum(t.a * 2)"])
    fn = r.choice(
        [
            f"rank() OVER (ORDER BY {agg})",
            f"dense_rank() OVER (ORDER BY {agg} DESC)",
            f"sum(count(*)) OVER (ORDER BY {key})",
            "count(*) OVER ()",
            f"max({agg}) OVER ()",
            f"row_number() OVER (ORDER BY {key} NULLS FIRST)",
        ]
    )
    having = f" HAVING count(*) > {r.randint(0, 1)}" if r.random() < 0.3 else ""
    return (
        f"SELECT {key} AS k, {agg} AS v, {fn} AS w FROM fz_t t{g._maybe_where(T)}"
        f" GROUP BY {key}{having}"
    )


def agg_join_agg(g: QueryGen) -> str:
    """Two aggregates joined on their group keys (the per-key report of two streams)."""
    r = g.r
    kind = r.choice(["JOIN", "LEFT JOIN", "FULL JOIN", "RIGHT JOIN"])
    key_t, key_u = r.choice([("t.a", "u.a"), ("t.s", "u.s"), ("t.b", "u.c")])
    left = (
        f"SELECT {key_t} AS k, {r.choice(['count(*)', 'sum(t.b)', 'max(t.s)', 'avg(t.a)'])}"
        f" AS x FROM fz_t t{g._maybe_where(T)} GROUP BY {key_t}"
    )
    right = (
        f"SELECT {key_u} AS k, {r.choice(['count(*)', 'sum(u.c)', 'min(u.n)', 'count(u.s)'])}"
        f" AS y FROM fz_u u{g._maybe_where(U)} GROUP BY {key_u}"
    )
    cols = r.choice(["l.k, l.x, r.y", "coalesce(l.k, r.k) AS k, l.x, r.y", "l.k, r.k AS rk, r.y"])
    where = r.choice(["", "", " WHERE l.x IS NOT NULL", " WHERE r.y IS NULL OR l.x IS NULL"])
    return f"SELECT {cols} FROM ({left}) AS l {kind} ({right}) AS r ON l.k = r.k{where}"


def join_agg_having(g: QueryGen) -> str:
    """Aggregation over an inner, outer or three-way join with HAVING on aggregates."""
    r = g.r
    scope = [*TU, ("v", "fz_u")] if r.random() < 0.3 else TU
    frm = f"fz_t t {r.choice(['JOIN', 'LEFT JOIN', 'FULL JOIN'])} fz_u u ON t.a = u.a"
    if len(scope) == 3:
        frm += f" {r.choice(['JOIN', 'LEFT JOIN'])} fz_u v ON v.c = t.b"
    key = r.choice(["t.a", "u.s", "t.flag", "coalesce(u.c, t.b)", "(t.id % 3)"])
    aggs = g._aggs(scope, r.randint(1, 2))
    having = r.choice(
        [
            f"count(*) > {r.randint(1, 3)}",
            f"sum(u.c) > {r.randint(-2, 6)}",
            f"min(t.s) < '{r.choice(['a', 'b', 'h'])}' OR count(u.id) = 0",
            "max(u.n) IS NOT NULL",
            f"count(DISTINCT t.id) >= {r.randint(1, 3)}",
            f"avg(t.b) BETWEEN {r.randint(-5, 0)} AND {r.randint(1, 10)}",
        ]
    )
    return (
        f"SELECT {key} AS k, {', '.join(aggs)} FROM {frm}{g._maybe_where(scope)}"
        f" GROUP BY {key} HAVING {having}"
    )


def setop_agg(g: QueryGen) -> str:
    """Aggregation over a set operation, or a set operation of aggregates (with ALL)."""
    r = g.r
    op = r.choice(["UNION ALL", "UNION", "INTERSECT", "EXCEPT", "INTERSECT ALL", "EXCEPT ALL"])
    if r.random() < 0.5:
        a = f"SELECT t.a AS x, t.s AS y FROM fz_t t{g._maybe_where(T)}"
        b = f"SELECT u.c, u.s FROM fz_u u{g._maybe_where(U)}"
        agg = r.choice(["count(*)", "count(s.y)", "max(s.y)", "sum(s.x)", "count(DISTINCT s.y)"])
        return f"SELECT s.x, {agg} AS n FROM ({a} {op} {b}) AS s GROUP BY s.x"
    a = f"SELECT t.a AS k, count(*) AS n FROM fz_t t{g._maybe_where(T)} GROUP BY t.a"
    b = f"SELECT u.a, count(*) FROM fz_u u{g._maybe_where(U)} GROUP BY u.a"
    return f"{a} {op} {b}"


def nested_subquery(g: QueryGen) -> str:
    """Nested and correlated subqueries: NOT IN over NULLs, ANY/ALL, a correlated scalar
    subquery in the select list, an IN whose subquery has its own subquery, and derived
    tables two deep."""
    r = g.r
    form = r.randrange(6)
    items = ", ".join(g._select_list(T, r.randint(1, 2)))
    if form == 0:
        col = r.choice(["u.c", "u.a"])
        cond = f"t.a NOT IN (SELECT {col} FROM fz_u u WHERE {g.pred(U, 2)})"
    elif form == 1:
        cmp = r.choice(["= ANY", "> ALL", "< ANY", "<> ALL"])
        cond = f"t.b {cmp} (SELECT u.c FROM fz_u u WHERE {g.pred(U, 2)})"
    elif form == 2:
        sub = r.choice(
            [
                "(SELECT count(*) FROM fz_u u WHERE u.a = t.a)",
                "(SELECT max(u.n) FROM fz_u u WHERE u.a = t.a)",
                "(SELECT min(u.s) FROM fz_u u WHERE u.c = t.b)",
            ]
        )
        return f"SELECT t.id, {items}, {sub} AS sq FROM fz_t t{g._maybe_where(T)}"
    elif form == 3:
        cond = (
            "t.a IN (SELECT u.a FROM fz_u u WHERE u.c >= "
            "(SELECT min(v.c) FROM fz_u v WHERE v.s = u.s))"
        )
    elif form == 4:
        cond = (
            f"{r.choice(['', 'NOT '])}EXISTS (SELECT 1 FROM fz_u u WHERE u.a = t.a AND "
            "u.c IN (SELECT v.a FROM fz_u v))"
        )
    else:
        inner = f"SELECT t.a, t.b, t.s FROM fz_t t{g._maybe_where(T)}"
        mid = f"SELECT x.a AS k, count(*) AS n, sum(x.b) AS sb FROM ({inner}) AS x GROUP BY x.a"
        return f"SELECT y.k, y.n, y.sb FROM ({mid}) AS y WHERE {r.choice(['y.n > 1', 'y.sb IS NULL', 'y.k > 0', 'true'])}"
    return f"SELECT t.id, {items} FROM fz_t t WHERE {cond}"


SHAPES = {
    "topn_per_group": topn_per_group,
    "window_over_agg": window_over_agg,
    "agg_join_agg": agg_join_agg,
    "join_agg_having": join_agg_having,
    "setop_agg": setop_agg,
    "nested_subquery": nested_subquery,
}
