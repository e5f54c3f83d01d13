"""Random tables and random queries for the differential SQL fuzzer.

Everything is drawn from one `random.Random`, so a seed reproduces a case exactly. The
tables (`fz_t`, `fz_u`) have integer, bigint, numeric, double, text, boolean and date
columns whose values include the edges that break engines: NULL, 0, -1, the integer
limits, float NaN and infinities, empty and mixed-case strings, duplicates. Queries come from a small typed
grammar: scalar expressions by result type (arithmetic, CASE, COALESCE/NULLIF, casts,
string functions, comparisons, IS [NOT] NULL, IN lists, BETWEEN, LIKE; `_extra_expr` adds
concat/format/padding/trimming, mixed-type CASE/COALESCE/greatest, numeric rounding,
date/interval arithmetic and date_part), combined into projections, WHERE, joins
(inner/outer, equi, multi-key, IS NOT DISTINCT FROM and residual conditions, three-way),
IN/EXISTS/scalar subqueries, GROUP BY with aggregates (FILTER, ordered string_agg, exact
variances), outer joins under aggregation, HAVING, GROUPING SETS/ROLLUP, window functions
and ROWS/RANGE/GROUPS frames with offsets, DISTINCT and DISTINCT ON, UNION
[ALL]/INTERSECT/EXCEPT, ORDER BY ... LIMIT over every output column and FETCH FIRST ...
WITH TIES (so the result is deterministic as a multiset). fuzz.grammar_views adds the
shapes views are made of (top-N per group, windows over aggregates, aggregates joined to
aggregates, HAVING over joins, aggregates over set operations, nested subqueries), casts
between the numeric types and more text functions; fuzz.grammar_types expressions through
jsonb, arrays, timestamps and intervals, and DISTINCT / ordered aggregates.

The grammar only produces SQL PostgreSQL 15 accepts for these tables (errors PostgreSQL
raises at run time, such as division by zero, are part of what is compared).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fuzz.grammar_types import distinct_agg, typed_expr
from fuzz.grammar_views import SHAPES as VIEW_SHAPES
from fuzz.grammar_views import numeric_cast, string_fn

INT_EDGES = [0, 1, -1, 2, 7, 10, -13, 100, 2147483647, -2147483648]
BIG_EDGES = [0, -1, 3, 9223372036854775807, -9223372036854775807, 1000000000000]
NUM_EDGES = [
    "0",
    "1.5",
    "-2.25",
    "100.125",
    "0.001",
    "-0.5",
    "12345.6789",
    "'NaN'",
    "'Infinity'",
    "'-Infinity'",
]
FLOAT_EDGES = ["0", "1.5", "-3.25", "1e10", "-1e-5", "2.5", "100"]
#: the float specials PostgreSQL orders -Infinity < numbers < Infinity < NaN
FLOAT_SPECIALS = ["'NaN'::float8", "'Infinity'::float8", "'-Infinity'::float8"]
TEXT_EDGES = ["", "a", "A", "abc", "Abc", "b%", "x_y", "hello world", "zz", "a'b"]
DATE_EDGES = ["2024-01-01", "1999-12-31", "2000-02-29", "2024-03-10", "1970-01-01"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # int, big, num, float, text, bool, date


TABLES: dict[str, list[Column]] = {
    "fz_t": [
        Column("id", "int"),
        Column("a", "int"),
        Column("b", "int"),
        Column("g", "big"),
        Column("n", "num"),
        Column("f", "float"),
        Column("s", "text"),
        Column("flag", "bool"),
        Column("d", "date"),
    ],
    "fz_u": [
        Column("id", "int"),
        Column("a", "int"),
        Column("c", "int"),
        Column("s", "text"),
        Column("n", "num"),
    ],
}
SQL_TYPES = {
    "int": "INT",
    "big": "BIGINT",
    "num": "NUMERIC",
    "float": "DOUBLE PRECISION",
    "text": "VARCHAR",
    "bool": "BOOLEAN",
    "date": "DATE",
}


def create_statements() -> list[str]:
    out = []
    for name, cols in TABLES.items():
        defs = ", ".join(
            f"{c.name} {SQL_TYPES[c.kind]}" + (" PRIMARY KEY" if c.name == "id" else "")
            for c in cols
        )
        out.append(f"CREATE TABLE {name} ({defs})")
    return out


def _literal(kind: str, r: random.Random, null_rate: float = 0.15) -> str:
    if r.random() < null_rate:
        return "NULL"
    if kind == "int":
        return str(r.choice(INT_EDGES) if r.random() < 0.3 else r.randint(-5, 12))
    if kind == "big":
        return str(r.choice(BIG_EDGES) if r.random() < 0.3 else r.randint(-5, 12))
    if kind == "num":
        return r.choice(NUM_EDGES)
    if kind == "float":
        return r.choice(FLOAT_SPECIALS) if r.random() < 0.1 else r.choice(FLOAT_EDGES)
    if kind == "text":
        return "'" + r.choice(TEXT_EDGES).replace("'", "''") + "'"
    if kind == "bool":
        return r.choice(["true", "false"])
    return f"DATE '{r.choice(DATE_EDGES)}'"


def _value(c: Column, r: random.Random) -> str:
    # integer limits only in fz_t.b and fz_t.g (arithmetic over them overflows; over the
    # other columns it computes)
    if c.name in ("b", "g") or c.kind not in ("int", "big"):
        return _literal(c.kind, r)
    return "NULL" if r.random() < 0.15 else str(r.randint(-5, 12))


def insert_statements(r: random.Random) -> list[str]:
    out = []
    for name, cols in TABLES.items():
        rows = []
        for i in range(r.randint(8, 16)):
            vals = [str(i + 1) if c.name == "id" else _value(c, r) for c in cols]
            rows.append("(" + ", ".join(vals) + ")")
        out.append(f"INSERT INTO {name} VALUES " + ", ".join(rows))
    return out


def change_statements(r: random.Random, next_id: dict[str, int]) -> list[str]:
    """One epoch of changes to both tables: inserts of new ids, updates of non-key columns
    (by id or by a predicate) and deletes, so views see retractions of every kind. Every
    statement succeeds on both engines and changes the same rows. `next_id` holds each
    table's next free id and is advanced."""
    out = []
    for name, cols in TABLES.items():
        hi = next_id[name]
        for _ in range(r.randint(0, 3)):
            vals = [str(next_id[name]) if c.name == "id" else _value(c, r) for c in cols]
            next_id[name] += 1
            out.append(f"INSERT INTO {name} VALUES ({', '.join(vals)})")
        others = [c for c in cols if c.name != "id"]
        for _ in range(r.randint(0, 3)):
            sets = ", ".join(
                f"{c.name} = {_value(c, r)}" for c in r.sample(others, r.randint(1, 2))
            )
            if r.random() < 0.7:
                where = f"id = {r.randint(1, hi)}"
            else:
                c = r.choice([c for c in others if c.kind == "int"])
                where = f"{c.name} {r.choice(['=', '<', '>'])} {r.randint(-2, 8)}"
            out.append(f"UPDATE {name} SET {sets} WHERE {where}")
        for _ in range(r.randint(0, 2)):
            if r.random() < 0.8:
                out.append(f"DELETE FROM {name} WHERE id = {r.randint(1, hi)}")
            else:
                out.append(f"DELETE FROM {name} WHERE a = {r.randint(-2, 8)}")
    return out


class QueryGen:
    """One random query per `query()` call (see module docstring)."""

    def __init__(self, r: random.Random, streaming: bool = False) -> None:
        self.r = r
        # views kept through changes: regression aggregates over integers only (over
        # floats their sums keep the rounding of a retracted large value, a documented
        # limitation of float sums under retractions)
        self.streaming = streaming

    # -- expressions by type ------------------------------------------------------------
    def cols(self, alias: str, table: str, kind: str) -> list[str]:
        return [f"{alias}.{c.name}" for c in TABLES[table] if c.kind == kind]

    def expr(self, kind: str, scope: list[tuple[str, str]], depth: int = 0) -> str:
        r = self.r
        cands = [c for a, t in scope for c in self.cols(a, t, kind)]
        if depth >= 3 or r.random() < 0.35:
            if cands and r.random() < 0.8:
                return r.choice(cands)
            return _literal(kind, r, 0.1)
        d = depth + 1
        if r.random() < 0.25:
            extra = self._extra_expr(kind, scope, d)
            if extra is not None:
                return extra
        if r.random() < 0.06:
            typed = typed_expr(self, kind, scope, d)
            if typed is not None:
                return typed
        if r.random() < 0.08:
            more = (
                string_fn(self, scope, d) if kind == "text" else numeric_cast(self, kind, scope, d)
            )
            if more is not None:
                return more
        if kind == "int" and r.random() < 0.3:
            choice = r.randrange(6)
            if choice == 0:
                return f"({self.expr('int', scope, d)} / {r.choice([2, 3, -2, 7])})"
            if choice == 1:
                return f"CAST({self.expr('num', scope, d)} AS INT)"
            if choice == 2:
                return f"CAST({self.expr('float', scope, d)} AS INT)"
            if choice == 3:
                date = self.expr("date", scope, d)
                if date == "NULL":  # extract(year FROM NULL) is ambiguous in PostgreSQL
                    date = "DATE '2020-05-06'"
                return f"CAST(extract(year FROM {date}) AS INT)"
            if choice == 4:
                return f"({self.expr('date', scope, d)} - DATE '2000-01-01')"
            if r.random() < 0.5:  # an element of an array, or of a slice of one
                items = ", ".join(self.expr("int", scope, d) for _ in range(r.randint(1, 3)))
                sub = r.choice(["1", "2", "0", "-1", self.expr("int", scope, d)])
                if r.random() < 0.4:
                    lo = r.choice(["", "1", "2", self.expr("int", scope, d)])
                    hi = r.choice(["", "2", "3"])
                    return f"((ARRAY[{items}])[{lo}:{hi}])[{sub}]"
                return f"(ARRAY[{items}])[{sub}]"
            return f"strpos({self.expr('text', scope, d)}, {_literal('text', r, 0)})"
        if kind == "int":
            choice = r.randrange(9)
            if choice == 0:
                op = r.choice(["+", "-", "*"])
                return f"({self.expr('int', scope, d)} {op} {r.randint(-3, 5)})"
            if choice == 1:
                return (
                    f"({self.expr('int', scope, d)} {r.choice(['+', '-'])} "
                    f"{self.expr('int', scope, d)})"
                )
            if choice == 2:
                return f"abs({self.expr('int', scope, d)})"
            if choice == 3:
                return f"coalesce({self.expr('int', scope, d)}, {r.randint(-2, 2)})"
            if choice == 4:
                return (
                    f"CASE WHEN {self.pred(scope, d)} THEN {self.expr('int', scope, d)} "
                    f"ELSE {self.expr('int', scope, d)} END"
                )
            if choice == 5:
                return f"nullif({self.expr('int', scope, d)}, {r.randint(-1, 2)})"
            if choice == 6:
                return f"length({self.expr('text', scope, d)})"
            if choice == 7:
                return f"({self.expr('int', scope, d)} % {r.choice([2, 3, 5, -4])})"
            return (
                f"{r.choice(['greatest', 'least'])}({self.expr('int', scope, d)}, "
                f"{self.expr('int', scope, d)})"
            )
        if kind == "text" and r.random() < 0.3:
            choice = r.randrange(5)
            if choice == 0:
                return f"replace({self.expr('text', scope, d)}, 'a', 'xy')"
            if choice == 1:
                return f"split_part({self.expr('text', scope, d)}, ' ', {r.randint(1, 2)})"
            if choice == 2:
                return (
                    f"{r.choice(['left', 'right'])}({self.expr('text', scope, d)}, "
                    f"{r.randint(-1, 3)})"
                )
            if choice == 3:
                return f"trim({self.expr('text', scope, d)})"
            return f"CAST({self.expr('date', scope, d)} AS VARCHAR)"
        if kind == "text":
            choice = r.randrange(6)
            if choice == 0:
                return f"lower({self.expr('text', scope, d)})"
            if choice == 1:
                return f"upper({self.expr('text', scope, d)})"
            if choice == 2:
                return f"({self.expr('text', scope, d)} || {self.expr('text', scope, d)})"
            if choice == 3:
                return (
                    f"substr({self.expr('text', scope, d)}, {r.randint(1, 3)}, {r.randint(0, 3)})"
                )
            if choice == 4:
                return f"coalesce({self.expr('text', scope, d)}, 'none')"
            return f"CAST({self.expr('int', scope, d)} AS VARCHAR)"
        if kind == "num":
            choice = r.randrange(5)
            if choice == 4:
                return f"({self.expr('num', scope, d)} / {r.choice(['2', '3', '0.5', '-4'])})"
            if choice == 0:
                return (
                    f"({self.expr('num', scope, d)} {r.choice(['+', '-', '*'])} "
                    f"{self.expr('num', scope, d)})"
                )
            if choice == 1:
                return f"round({self.expr('num', scope, d)}, {r.randint(0, 3)})"
            if choice == 2:
                return f"CAST({self.expr('int', scope, d)} AS NUMERIC)"
            return f"abs({self.expr('num', scope, d)})"
        if kind == "float":
            return f"({self.expr('float', scope, d)} * {r.choice(['2', '0.5', '-1.5'])})"
        if kind == "date":
            # an untyped NULL + 3 is an integer in PostgreSQL, not a date
            x = self.expr("date", scope, d)
            return f"({'CAST(NULL AS DATE)' if x == 'NULL' else x} + {r.randint(-3, 40)})"
        if kind == "big":
            return f"({self.expr('big', scope, d)} + {self.expr('int', scope, d)})"
        if kind == "bool":
            return self.pred(scope, d)
        return r.choice(cands) if cands else _literal(kind, r, 0)

    def _extra_expr(self, kind: str, scope: list[tuple[str, str]], d: int) -> str | None:
        """Forms beyond the basic grammar: string functions, mixed-type CASE / COALESCE /
        greatest, numeric rounding and precision, date/interval arithmetic, date_part."""
        r = self.r

        def e(k: str) -> str:
            return self.expr(k, scope, d)

        def date() -> str:
            x = e("date")
            return "DATE '2020-05-06'" if x == "NULL" else x  # extract(f FROM NULL) is ambiguous

        if kind == "text":
            forms = [
                lambda: f"concat({e('text')}, {e('int')}, {e('bool')})",
                # (no numeric as text: Swell's display scale of a quotient is not PostgreSQL's)
                lambda: f"concat_ws('-', {e('text')}, {e('int')}, {e('date')})",
                lambda: f"lpad({e('text')}, {r.randint(-1, 6)}, 'xy')",
                lambda: f"rpad({e('text')}, {r.randint(0, 6)})",
                lambda: f"reverse({e('text')})",
                lambda: f"repeat({e('text')}, {r.randint(0, 2)})",
                lambda: f"initcap({e('text')})",
                lambda: f"{r.choice(['ltrim', 'rtrim', 'btrim'])}({e('text')}, 'ab')",
                lambda: f"translate({e('text')}, 'ab%', 'x')",
                lambda: f"substring({e('text')} FROM {r.randint(-1, 3)} FOR {r.randint(0, 3)})",
                lambda: f"format('%s|%s', {e('text')}, {e(r.choice(['int', 'bool', 'date']))})",
                lambda: f"({e('text')} || {e('int')})",
                lambda: f"to_char({date()}, 'YYYY-MM-DD Dy')",
                lambda: f"CASE WHEN {self.pred(scope, d)} THEN {e('text')} END",
                lambda: f"CAST({e('bool')} AS VARCHAR)",
            ]
        elif kind == "int":
            forms = [
                lambda: f"position('a' IN {e('text')})",
                lambda: f"char_length({e('text')})",
                lambda: (
                    f"CAST(extract({r.choice(['dow', 'month', 'doy', 'day'])} FROM {date()}) AS INT)"
                ),
                lambda: (
                    f"CAST(date_part('{r.choice(['isodow', 'week', 'quarter'])}', {date()}) AS INT)"
                ),
                lambda: f"sign({e('int')})",
                lambda: f"mod({e('int')}, {r.choice([3, -2, 7])})",
                lambda: f"CASE {e('int')} WHEN 1 THEN {e('int')} WHEN 2 THEN 20 ELSE NULL END",
            ]
        elif kind == "num":
            forms = [
                lambda: f"coalesce({e('int')}, {e('num')})",
                lambda: f"CASE WHEN {self.pred(scope, d)} THEN {e('int')} ELSE {e('num')} END",
                lambda: f"{r.choice(['greatest', 'least'])}({e('int')}, {e('num')}, {e('big')})",
                lambda: f"trunc({e('num')}, {r.randint(0, 2)})",
                lambda: f"{r.choice(['ceil', 'floor', 'sign'])}({e('num')})",
                lambda: f"mod({e('num')}, {r.choice(['2.5', '3', '-0.7'])})",
                lambda: f"({e('num')} * {e('num')})",
                lambda: f"round({e('num')} / {r.choice(['7', '3.5', '-11'])}, {r.randint(0, 5)})",
                lambda: f"CAST({e('big')} AS NUMERIC)",
            ]
        elif kind == "float":
            forms = [
                lambda: f"(CAST({e('int')} AS DOUBLE PRECISION) / {r.choice(['3', '-7', '0.5'])})",
                lambda: f"abs({e('float')})",
                lambda: f"date_part('{r.choice(['doy', 'year', 'dow'])}', {date()})",
                lambda: f"({e('float')} + {e('int')})",
                lambda: f"coalesce({e('float')}, {e('int')})",
            ]
        elif kind == "date":
            forms = [
                lambda: f"({date()} - {r.randint(-3, 40)})",
                lambda: (
                    f"CAST({date()} + INTERVAL '{r.choice(['1 month', '1 year', '-1 month', '10 days', '1 mon 2 days'])}' AS DATE)"
                ),
                lambda: (
                    f"CAST(date_trunc('{r.choice(['month', 'year', 'week', 'quarter'])}', {date()}) AS DATE)"
                ),
                lambda: (
                    f"CASE WHEN {self.pred(scope, d)} THEN {e('date')} ELSE DATE '2001-01-01' END"
                ),
            ]
        elif kind == "bool":
            forms = [
                lambda: f"starts_with({e('text')}, 'a')",
                lambda: f"({e('date')} BETWEEN DATE '1999-01-01' AND DATE '2024-02-01')",
                lambda: f"({e('num')} IN (1.5, -2.25, 0))",
            ]
        else:
            return None
        return r.choice(forms)()

    def pred(self, scope: list[tuple[str, str]], depth: int = 0) -> str:
        r = self.r
        d = depth + 1
        choice = r.randrange(10) if depth < 3 else r.randrange(5)
        if choice in (0, 1):
            kind = r.choice(["int", "int", "text", "num", "date", "big"])
            op = r.choice(["=", "<>", "<", "<=", ">", ">="])
            return f"{self.expr(kind, scope, d)} {op} {self.expr(kind, scope, d)}"
        if choice == 2:
            kind = r.choice(["int", "text", "num"])
            neg = r.choice(["", "NOT "])
            return f"{self.expr(kind, scope, d)} IS {neg}NULL"
        if choice == 3:
            kind = r.choice(["int", "text"])
            items = ", ".join(_literal(kind, r, 0.1) for _ in range(r.randint(1, 4)))
            neg = r.choice(["", "NOT "])
            return f"{self.expr(kind, scope, d)} {neg}IN ({items})"
        if choice == 4:
            cands = [c for a, t in scope for c in self.cols(a, t, "bool")]
            if cands:
                return r.choice(cands)
            return f"{self.expr('int', scope, d)} BETWEEN {r.randint(-3, 2)} AND {r.randint(2, 9)}"
        if choice == 5:
            return f"({self.pred(scope, d)} AND {self.pred(scope, d)})"
        if choice == 6:
            return f"({self.pred(scope, d)} OR {self.pred(scope, d)})"
        if choice == 7:
            return f"NOT ({self.pred(scope, d)})"
        if choice == 9 and r.random() < 0.5:
            kind = r.choice(["int", "text", "num"])
            neg = r.choice(["", "NOT "])
            return f"{self.expr(kind, scope, d)} IS {neg}DISTINCT FROM {self.expr(kind, scope, d)}"
        if choice == 9 and r.random() < 0.5:
            op = r.choice(["=", "<", ">="])
            return f"{self.expr('int', scope, d)} {op} {self.expr('num', scope, d)}"
        if choice == 8:
            pat = r.choice(["a%", "%b%", "_", "A%", "%", "x\\_y"])
            return (
                f"{self.expr('text', scope, d)} {r.choice(['LIKE', 'ILIKE', 'NOT LIKE'])} '{pat}'"
            )
        return f"{self.expr('int', scope, d)} BETWEEN {r.randint(-3, 2)} AND {r.randint(2, 9)}"

    # -- queries ------------------------------------------------------------------------
    def query(self) -> str:
        r = self.r
        shape = r.choice(
            [
                "project",
                "project",
                "agg",
                "agg",
                "join",
                "subquery",
                "window",
                "setop",
                "grouping_sets",
                "distinct",
                "derived",
                "join_agg",
                "cte",
                "frames",
                "distinct_on",
                "ties",
                "outer_agg",
                "join3",
                *VIEW_SHAPES,
            ]
        )
        if shape in VIEW_SHAPES:
            return VIEW_SHAPES[shape](self)
        return getattr(self, "_" + shape)()

    def _select_list(self, scope: list[tuple[str, str]], n: int) -> list[str]:
        kinds = ["int", "int", "text", "num", "bool", "big", "date", "float"]
        return [f"{self.expr(self.r.choice(kinds), scope)} AS c{i}" for i in range(n)]

    def _maybe_where(self, scope: list[tuple[str, str]]) -> str:
        return f" WHERE {self.pred(scope)}" if self.r.random() < 0.7 else ""

    def _order_limit(self, n: int) -> str:
        if self.r.random() < 0.3:
            dirs = ", ".join(
                f"{i + 1}{self.r.choice(['', ' DESC', ' NULLS FIRST', ' DESC NULLS LAST'])}"
                for i in range(n)
            )
            return f" ORDER BY {dirs} LIMIT {self.r.randint(0, 6)} OFFSET {self.r.randint(0, 2)}"
        return ""

    def _project(self) -> str:
        scope = [("t", "fz_t")]
        n = self.r.randint(1, 4)
        return (
            f"SELECT {', '.join(self._select_list(scope, n))} FROM fz_t t"
            f"{self._maybe_where(scope)}{self._order_limit(n)}"
        )

    def _distinct(self) -> str:
        scope = [("t", "fz_t")]
        n = self.r.randint(1, 2)
        return (
            f"SELECT DISTINCT {', '.join(self._select_list(scope, n))} FROM fz_t t"
            f"{self._maybe_where(scope)}"
        )

    def _aggs(self, scope: list[tuple[str, str]], k: int) -> list[str]:
        r = self.r
        out = []
        for i in range(k):
            fn = r.choice(
                [
                    "count(*)",
                    "count",
                    "sum",
                    "min",
                    "max",
                    "avg",
                    "sum_num",
                    "count_distinct",
                    "bool_and",
                    "string_agg",
                    "regr",
                    "percentile",
                    "more",
                    "distinct",
                ]
            )
            if fn == "count(*)":
                out.append(f"count(*) AS a{i}")
            elif fn == "count_distinct":
                out.append(f"count(DISTINCT {self.expr('int', scope, 2)}) AS a{i}")
            elif fn == "sum_num":
                out.append(f"sum({self.expr('num', scope, 2)}) AS a{i}")
            elif fn == "bool_and":
                out.append(f"bool_or({self.pred(scope, 2)}) AS a{i}")
            elif fn == "string_agg":
                out.append(f"min({self.expr('text', scope, 2)}) AS a{i}")
            elif fn == "avg":
                out.append(f"round(avg({self.expr('int', scope, 2)}), 4) AS a{i}")
            elif fn == "regr":
                name = r.choice(
                    ["corr", "covar_pop", "covar_samp", "regr_count", "regr_intercept"]
                    + ["regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_avgy"]
                )
                x_kind = "int" if self.streaming else r.choice(["int", "float"])
                y, x = self.expr("int", scope, 2), self.expr(x_kind, scope, 1)
                if "t." not in x and "u." not in x:
                    # a constant X: PostgreSQL's float Sxx of equal values can be 1e-42
                    # instead of 0 (Youngs-Cramer rounding), a slope of 1e16 for NULL
                    x = "t.id"
                out.append(f"{name}({y}, {x}) AS a{i}")
            elif fn == "percentile":
                desc = r.choice(["", " DESC"])
                frac = r.choice(["0", "0.25", "0.5", "0.9", "1", "ARRAY[0.5, 0]", "ARRAY[1, 0.25]"])
                form = r.choice(["percentile_cont", "percentile_disc", "mode"])
                kind = "int" if form == "percentile_cont" else r.choice(["int", "text", "date"])
                arg = "" if form == "mode" else frac
                order = f"ORDER BY {self.expr(kind, scope, 1)}{desc}"
                out.append(f"{form}({arg}) WITHIN GROUP ({order}) AS a{i}")
            elif fn == "more":
                out.append(self._more_agg(scope) + f" AS a{i}")
            elif fn == "distinct":
                out.append(distinct_agg(self, scope) + f" AS a{i}")
            else:
                out.append(f"{fn}({self.expr('int', scope, 2)}) AS a{i}")
        return out

    def _more_agg(self, scope: list[tuple[str, str]]) -> str:
        """Aggregates beyond the basic list: exact variances, FILTER, ordered string_agg,
        every / bit_or, DISTINCT over text and numeric."""
        r = self.r
        choice = r.randrange(8)
        if choice == 0:
            fn = r.choice(["stddev", "variance", "var_pop", "stddev_pop"])
            return f"{fn}({self.expr(r.choice(['int', 'num']), scope, 2)})"
        if choice == 1:
            return f"count(*) FILTER (WHERE {self.pred(scope, 2)})"
        if choice == 2:
            return f"sum({self.expr('int', scope, 2)}) FILTER (WHERE {self.pred(scope, 2)})"
        if choice == 3:
            x = self.expr("text", scope, 2)
            return f"string_agg({x}, ',' ORDER BY {x})"
        if choice == 4:
            return f"every({self.pred(scope, 2)})"
        if choice == 5:
            return f"bit_or({self.expr('int', scope, 2)})"
        if choice == 6:
            return f"count(DISTINCT {self.expr(r.choice(['text', 'num', 'date']), scope, 2)})"
        return f"avg({self.expr('num', scope, 2)})"

    def _agg(self) -> str:
        r = self.r
        scope = [("t", "fz_t")]
        keys = r.sample(["t.a", "t.s", "t.flag", "(t.b % 3)", "t.d"], r.randint(0, 2))
        aggs = self._aggs(scope, r.randint(1, 3))
        items = [f"{k} AS k{i}" for i, k in enumerate(keys)] + aggs
        q = f"SELECT {', '.join(items)} FROM fz_t t{self._maybe_where(scope)}"
        if keys:
            q += " GROUP BY " + ", ".join(keys) + r.choice(["", "", "", ", ()"])
        elif r.random() < 0.2:
            q += " GROUP BY ()"
        if r.random() < 0.3:
            q += f" HAVING count(*) > {r.randint(0, 2)}"
        return q + self._order_limit(len(items))

    def _grouping_sets(self) -> str:
        r = self.r
        scope = [("t", "fz_t")]
        keys = r.sample(["t.a", "t.s", "t.flag"], 2)
        form = r.choice(
            [
                f"GROUPING SETS (({keys[0]}, {keys[1]}), ({keys[0]}), ())",
                f"ROLLUP ({keys[0]}, {keys[1]})",
                f"CUBE ({keys[0]}, {keys[1]})",
            ]
        )
        aggs = self._aggs(scope, r.randint(1, 2))
        items = [
            f"{keys[0]} AS k0",
            f"{keys[1]} AS k1",
            f"grouping({keys[0]}, {keys[1]}) AS gm",
            *aggs,
        ]
        return f"SELECT {', '.join(items)} FROM fz_t t{self._maybe_where(scope)} GROUP BY {form}"

    def _join(self) -> str:
        r = self.r
        scope = [("t", "fz_t"), ("u", "fz_u")]
        kind = r.choice(["JOIN", "LEFT JOIN", "JOIN", "RIGHT JOIN", "FULL JOIN"])
        on = r.choice(["t.a = u.a", "t.s = u.s", "t.b = u.c", "t.a = u.c"])
        if r.random() < 0.3:
            on += f" AND {self.pred(scope, 2)}"
        n = r.randint(1, 3)
        q = f"SELECT {', '.join(self._select_list(scope, n))} FROM fz_t t {kind} fz_u u ON {on}"
        return q + self._maybe_where(scope) + self._order_limit(n)

    def _subquery(self) -> str:
        r = self.r
        scope = [("t", "fz_t")]
        inner = [("u", "fz_u")]
        form = r.randrange(4)
        if form == 0:
            cond = f"t.a IN (SELECT u.a FROM fz_u u WHERE {self.pred(inner, 2)})"
        elif form == 1:
            cond = (
                f"{r.choice(['', 'NOT '])}EXISTS (SELECT 1 FROM fz_u u WHERE u.a = t.a"
                f"{' AND ' + self.pred(inner, 2) if r.random() < 0.5 else ''})"
            )
        elif form == 2:
            cond = f"t.b > (SELECT {r.choice(['min', 'max', 'count'])}(u.c) FROM fz_u u)"
        else:
            cond = "t.a = (SELECT max(u.c) FROM fz_u u WHERE u.a = t.a)"
        n = r.randint(1, 3)
        return f"SELECT {', '.join(self._select_list(scope, n))} FROM fz_t t WHERE {cond}"

    def _window(self) -> str:
        r = self.r
        part = r.choice(["t.a", "t.s", "t.flag"])
        fn = r.choice(
            [
                "row_number() OVER (PARTITION BY {p} ORDER BY t.id)",
                "rank() OVER (PARTITION BY {p} ORDER BY t.b, t.id)",
                "dense_rank() OVER (ORDER BY t.b)",
                "sum(t.b) OVER (PARTITION BY {p} ORDER BY t.id)",
                "count(*) OVER (PARTITION BY {p})",
                "lag(t.b) OVER (ORDER BY t.id)",
                "ntile(3) OVER (ORDER BY t.id)",
                "first_value(t.s) OVER (PARTITION BY {p} ORDER BY t.id)",
                "avg(t.a) OVER (PARTITION BY {p})",
                "sum(t.a) OVER (ORDER BY t.a)",
                "lead(t.a, 2) OVER (PARTITION BY {p} ORDER BY t.id)",
                "max(t.a) OVER (PARTITION BY {p} ORDER BY t.id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
            ]
        ).format(p=part)
        return f"SELECT t.id, {fn} AS w FROM fz_t t{self._maybe_where([('t', 'fz_t')])}"

    def _derived(self) -> str:
        r = self.r
        inner_scope = [("t", "fz_t")]
        key = r.choice(["t.a", "t.s", "t.flag"])
        aggs = self._aggs(inner_scope, r.randint(1, 2))
        where = self._maybe_where(inner_scope)
        inner = f"SELECT {key} AS k, {', '.join(aggs)} FROM fz_t t{where} GROUP BY {key}"
        cond = r.choice(["x.a0 IS NOT NULL", "x.k IS NULL", "true", "x.a0 > 1"])
        return f"SELECT * FROM ({inner}) AS x WHERE {cond}"

    def _join_agg(self) -> str:
        r = self.r
        scope = [("t", "fz_t"), ("u", "fz_u")]
        kind = r.choice(["JOIN", "LEFT JOIN"])
        key = r.choice(["u.s", "t.a", "u.c", "t.flag"])
        aggs = self._aggs(scope, r.randint(1, 2))
        return (
            f"SELECT {key} AS k, {', '.join(aggs)} FROM fz_t t {kind} fz_u u ON t.a = u.a"
            f"{self._maybe_where(scope)} GROUP BY {key}"
        )

    def _cte(self) -> str:
        r = self.r
        inner = f"SELECT t.id, t.a, t.s FROM fz_t t{self._maybe_where([('t', 'fz_t')])}"
        outer = r.choice(
            [
                "SELECT c.a, count(*) AS n FROM c GROUP BY c.a",
                "SELECT c.id, c.s FROM c JOIN fz_u u ON c.a = u.a",
                "SELECT c.s, max(c.id) AS m FROM c GROUP BY c.s HAVING count(*) > 1",
            ]
        )
        return f"WITH c AS ({inner}) {outer}"

    def _setop(self) -> str:
        r = self.r
        op = r.choice(["UNION ALL", "UNION", "INTERSECT", "EXCEPT"])
        a = f"SELECT t.a AS x, t.s AS y FROM fz_t t{self._maybe_where([('t', 'fz_t')])}"
        b = f"SELECT u.c, u.s FROM fz_u u{self._maybe_where([('u', 'fz_u')])}"
        return f"{a} {op} {b}"

    def _frames(self) -> str:
        """Window aggregates over explicit ROWS / RANGE / GROUPS frames with offsets; ROWS
        frames and value functions order by a unique tail (t.id), RANGE and GROUPS frames
        by one key, whose peers make the frame (and a sum over it) deterministic."""
        r = self.r
        part = r.choice(
            ["", "PARTITION BY t.flag ", "PARTITION BY t.s ", "PARTITION BY (t.a % 2) "]
        )

        def bound(end: bool) -> str:
            k = r.randint(0, 3)
            forms = [f"{k} PRECEDING", f"{k} FOLLOWING", "CURRENT ROW"]
            forms.append("UNBOUNDED FOLLOWING" if end else "UNBOUNDED PRECEDING")
            return r.choice(forms)

        start, end = bound(False), bound(True)
        mode = r.choice(["ROWS", "RANGE", "GROUPS"])
        fn = r.choice(["sum(t.b)", "count(*)", "count(t.s)", "max(t.s)", "min(t.a)", "avg(t.n)"])
        fn = fn if r.random() < 0.8 else r.choice(["sum(t.n)", "max(t.d)", "bool_or(t.flag)"])
        if mode == "ROWS":
            order = r.choice(["t.id", "t.a, t.id", "t.b DESC, t.id", "t.d NULLS FIRST, t.id"])
            if r.random() < 0.3:
                fn = r.choice(["first_value(t.s)", "last_value(t.a)", "nth_value(t.b, 2)"])
        elif mode == "RANGE" and r.random() < 0.3:
            order, start, end = (
                "t.d",
                "INTERVAL '10 days' PRECEDING",
                r.choice(["CURRENT ROW", "INTERVAL '1 month' FOLLOWING", "UNBOUNDED FOLLOWING"]),
            )
        else:
            order = r.choice(["t.a", "t.a DESC", "t.g", "t.a NULLS FIRST"])
        frame = f"{mode} BETWEEN {start} AND {end}"
        w = f"{fn} OVER ({part}ORDER BY {order} {frame})"
        return f"SELECT t.id, {w} AS w FROM fz_t t{self._maybe_where([('t', 'fz_t')])}"

    def _distinct_on(self) -> str:
        r = self.r
        scope = [("t", "fz_t")]
        key = r.choice(["t.a", "t.flag", "t.s", "(t.b % 3)", "t.d"])
        tail = r.choice(["t.id", "t.id DESC", "t.b, t.id", "t.s DESC NULLS LAST, t.id"])
        items = ", ".join(self._select_list(scope, r.randint(1, 2)))
        return (
            f"SELECT DISTINCT ON ({key}) {key} AS k, t.id, {items} FROM fz_t t"
            f"{self._maybe_where(scope)} ORDER BY {key}, {tail}"
        )

    def _ties(self) -> str:
        """Top-N with ties (FETCH FIRST n ROWS WITH TIES) and with a unique order."""
        r = self.r
        scope = [("t", "fz_t")]
        key = r.choice(
            ["t.a", "t.flag", "t.s", "t.d", "t.a DESC", "t.n", "t.f DESC", "t.flag, t.a"]
        )
        items = ", ".join(self._select_list(scope, r.randint(1, 2)))
        n = r.randint(0, 5)
        if r.random() < 0.7:
            tail = f"FETCH FIRST {n} ROWS WITH TIES"
        else:
            tail = f"FETCH NEXT {n} ROWS ONLY"
            key += ", t.id"
        # an OFFSET may split a group of ties (which of them it skips is not defined)
        off = f" OFFSET {r.randint(1, 3)} ROWS" if r.random() < 0.3 and "ONLY" in tail else ""
        return (
            f"SELECT t.id, {items} FROM fz_t t{self._maybe_where(scope)} ORDER BY {key}{off} {tail}"
        )

    def _outer_agg(self) -> str:
        """Outer joins under aggregation: NULL-extended rows in groups and aggregates."""
        r = self.r
        scope = [("t", "fz_t"), ("u", "fz_u")]
        kind = r.choice(["LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
        on = r.choice(["t.a = u.a", "t.s = u.s", "t.b = u.c", "t.a = u.a AND t.s = u.s"])
        if r.random() < 0.3 and kind != "FULL JOIN":  # PostgreSQL: FULL JOIN on = only
            on += f" AND {self.pred(scope, 2)}"
        key = r.choice(["u.s", "t.a", "u.c", "t.flag", "coalesce(t.a, u.a)", "(u.id IS NULL)"])
        aggs = [
            r.choice(["count(t.id)", "count(u.id)", "count(*)", "sum(u.c)", "max(t.s)", "min(u.n)"])
            + f" AS x{i}"
            for i in range(r.randint(1, 3))
        ]
        aggs += self._aggs(scope, r.randint(0, 1))
        having = f" HAVING count(u.id) > {r.randint(0, 1)}" if r.random() < 0.2 else ""
        return (
            f"SELECT {key} AS k, {', '.join(aggs)} FROM fz_t t {kind} fz_u u ON {on}"
            f"{self._maybe_where(scope)} GROUP BY {key}{having}"
        )

    def _join3(self) -> str:
        """Three-way joins over NULL-able keys, IS NOT DISTINCT FROM and multi-key joins."""
        r = self.r
        scope = [("t", "fz_t"), ("u", "fz_u"), ("v", "fz_u")]
        k1 = r.choice(["t.a = u.a", "t.a IS NOT DISTINCT FROM u.a", "t.s = u.s AND t.a = u.a"])
        k2 = r.choice(["v.c = t.b", "v.a = u.c", "v.s = t.s", "v.a IS NOT DISTINCT FROM u.a"])
        j1 = r.choice(["JOIN", "LEFT JOIN"])
        # PostgreSQL runs FULL JOIN only on merge- or hash-joinable (=) conditions
        j2 = r.choice(["JOIN", "LEFT JOIN"] + (["FULL JOIN"] if "DISTINCT" not in k2 else []))
        n = r.randint(1, 3)
        return (
            f"SELECT {', '.join(self._select_list(scope, n))} FROM fz_t t {j1} fz_u u ON {k1} "
            f"{j2} fz_u v ON {k2}{self._maybe_where(scope)}{self._order_limit(n)}"
        )
