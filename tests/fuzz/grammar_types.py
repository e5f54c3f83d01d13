"""Expressions over the types beyond the fuzz tables' own, for the fuzz grammar.

fuzz.grammar draws scalar expressions over the tables' integer, numeric, double, text,
boolean and date columns; the forms here build values of other types from them and come
back to a table type, so the comparison stays on values psycopg reads the same from both
engines: jsonb built from columns (`->`, `->>`, `#>>`, `?`, `@>`, `||`, jsonb_typeof,
casts out of jsonb), arrays built from columns (subscripts, slices, array_position,
array_remove, array_to_string, cardinality, = ANY), timestamps and intervals (date +
interval, integer * interval, justify_*, extract/date_part/date_trunc, age, to_char, an
interval shown as text, where PostgreSQL's months and days stay apart), and aggregates
with DISTINCT (sum, avg, string_agg, array_agg, count over expressions). Each function
takes the `QueryGen` and returns the SQL text of one expression (or None when it has no
form for the requested kind).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fuzz.grammar import QueryGen

INTERVALS = [
    "1 day",
    "1 month",
    "-1 month",
    "1 year 2 months",
    "36 hours",
    "1 day -2 hours",
    "90 minutes",
    "1 mon 2 days 03:04:05",
    "-3 days",
    "0 seconds",
]
JSON_DOCS = [
    '{"a": 1, "b": [1, 2, {"c": "x"}], "s": "hi"}',
    '{"a": null, "b": [], "n": 1.50}',
    '[1, "two", null, {"a": 3}]',
    '{"a": {"a": {"a": 7}}, "b": true}',
    '"str"',
    "12.5",
    "null",
    "[]",
]
KEYS = ["'a'", "'s'", "'b'"]
PATHS = ["{b,2,c}", "{a,a,a}", "{a}", "{0}", "{b,0}"]
SEPS = ["','", "''", "'-'"]
HAS_KEYS = [*KEYS, "'x'"]


def typed_expr(g: QueryGen, kind: str, scope: list[tuple[str, str]], d: int) -> str | None:
    """One expression of `kind` (int, text, bool, num, date) through jsonb, arrays,
    timestamps or intervals; None for the kinds this module has no form for."""
    r = g.r

    def e(k: str) -> str:
        return g.expr(k, scope, d)

    def pick(options: list[str]) -> str:
        return r.choice(options)

    def date() -> str:
        x = e("date")
        return "DATE '2021-03-04'" if x == "NULL" else x

    def small() -> str:
        # (an integer limit times an interval is out of range: kept to the forms above)
        return f"({e('int')} % 1000)"

    def iv() -> str:
        return f"INTERVAL '{r.choice(INTERVALS)}'"

    def ts() -> str:
        return r.choice(
            [
                f"CAST({date()} AS TIMESTAMP)",
                f"({date()} + {iv()})",
                f"({date()} + {small()} * INTERVAL '1 hour 30 minutes')",
                f"(TIMESTAMP '2024-02-29 12:30:00' + {small()} * {iv()})",
            ]
        )

    def doc() -> str:
        if r.random() < 0.5:
            lit = r.choice(JSON_DOCS).replace("'", "''")
            return f"CAST('{lit}' AS JSONB)"
        return r.choice(
            [
                f"jsonb_build_object('a', {e('int')}, 's', {e('text')}, 'b', {e('bool')})",
                f"jsonb_build_array({e('int')}, {e('text')}, NULL)",
                f"to_jsonb(CAST({e('int')} AS INT))",
                f"(jsonb_build_object('a', {e('int')}) || jsonb_build_object('s', {e('text')}))",
            ]
        )

    def arr() -> str:
        k = r.choice(["int", "int", "text"])
        items = ", ".join(e(k) for _ in range(r.randint(1, 4)))
        return f"ARRAY[{items}]"

    def int_arr() -> str:
        return f"ARRAY[{', '.join(e('int') for _ in range(r.randint(1, 4)))}]"

    if kind == "text":
        forms = [
            lambda: f"({doc()} ->> {pick(KEYS + ['0', '1'])})",
            lambda: f"({doc()} #>> '{pick(PATHS)}')",
            lambda: f"CAST({doc()} -> {pick(KEYS + ['1', '-1'])} AS VARCHAR)",
            lambda: f"jsonb_typeof({doc()})",
            lambda: f"CAST({doc()} AS VARCHAR)",
            lambda: f"array_to_string({arr()}, {pick(SEPS)}, '*')",
            lambda: f"array_to_string({arr()}, ',')",
            lambda: f"CAST({ts()} AS VARCHAR)",
            lambda: f"CAST({small()} * {iv()} AS VARCHAR)",
            lambda: f"CAST({iv()} + {iv()} AS VARCHAR)",
            lambda: f"CAST(justify_interval({small()} * {iv()}) AS VARCHAR)",
            lambda: f"CAST(justify_hours({small()} * INTERVAL '7 hours') AS VARCHAR)",
            lambda: f"CAST(justify_days({small()} * INTERVAL '11 days') AS VARCHAR)",
            lambda: f"CAST(age({ts()}, TIMESTAMP '2000-01-31') AS VARCHAR)",
            lambda: f"CAST({ts()} - {ts()} AS VARCHAR)",
            lambda: (
                f"to_char({ts()}, '{r.choice(['YYYY-MM-DD HH24:MI:SS', 'HH12:MI AM', 'Mon DD, YYYY', 'DDD IW Q', 'FMMonth FMDD'])}')"
            ),
            lambda: (
                f"CAST(date_trunc('{r.choice(['hour', 'day', 'month', 'year', 'week'])}', {ts()}) AS VARCHAR)"
            ),
            lambda: (
                f"(ARRAY[{e('text')}, {e('text')}, 'z'])[{r.choice(['1', '2', '3', '4', e('int')])}]"
            ),
            lambda: (
                f"CAST((CAST(regexp_split_to_array({e('text')}, ' ') AS VARCHAR[]))[1] AS VARCHAR)"
            ),
        ]
    elif kind == "int":
        forms = [
            lambda: f"CAST({doc()} ->> 'a' AS INT)",
            lambda: f"jsonb_array_length(jsonb_build_array({e('int')}, {e('text')}))",
            lambda: f"cardinality({arr()})",
            lambda: f"array_position({int_arr()}, {e('int')})",
            lambda: f"array_length(array_remove({int_arr()}, {e('int')}), 1)",
            lambda: f"(array_append({int_arr()}, {e('int')}))[{r.randint(1, 4)}]",
            lambda: f"(array_prepend({e('int')}, {int_arr()}))[{r.randint(1, 3)}]",
            lambda: f"(array_replace({int_arr()}, {e('int')}, 0))[{r.randint(1, 3)}]",
            lambda: (
                f"CAST(extract({r.choice(['hour', 'minute', 'day', 'month', 'year', 'dow', 'doy', 'isodow', 'week'])} FROM {ts()}) AS INT)"
            ),
            lambda: (
                f"CAST(extract({r.choice(['day', 'hour', 'month', 'year'])} FROM {small()} * {iv()}) AS INT)"
            ),
            lambda: (
                f"CAST(date_part('{r.choice(['day', 'hour', 'minute'])}', {iv()} * {small()}) AS INT)"
            ),
            lambda: f"(CAST({ts()} AS DATE) - {date()})",
        ]
    elif kind == "bool":
        forms = [
            lambda: f"({doc()} ? {pick(HAS_KEYS)})",
            lambda: f"({doc()} @> jsonb_build_object('a', {e('int')}))",
            lambda: f"({doc()} = {doc()})",
            lambda: f"({e('int')} = ANY({int_arr()}))",
            lambda: f"({e('int')} <> ALL({int_arr()}))",
            lambda: f"({ts()} < {ts()})",
            lambda: f"({small()} * {iv()} > {iv()})",
            lambda: f"({ts()} BETWEEN TIMESTAMP '2000-01-01' AND {ts()})",
        ]
    elif kind == "num":
        forms = [
            lambda: f"extract(epoch FROM {small()} * {iv()})",
            lambda: f"extract(epoch FROM {ts()} - TIMESTAMP '2000-01-01')",
            lambda: f"CAST({doc()} ->> 'n' AS NUMERIC)",
            lambda: f"CAST(jsonb_build_object('v', {e('num')}) ->> 'v' AS NUMERIC)",
            lambda: f"extract({r.choice(['second', 'epoch', 'julian'])} FROM {ts()})",
        ]
    elif kind == "date":
        forms = [
            lambda: f"CAST({ts()} AS DATE)",
            lambda: f"CAST({date()} - {iv()} AS DATE)",
            lambda: (
                f"CAST(date_trunc('month', {ts()}) + INTERVAL '1 month' - INTERVAL '1 day' AS DATE)"
            ),
            lambda: f"make_date(2000 + {r.randint(0, 30)}, {r.randint(1, 12)}, {r.randint(1, 28)})",
        ]
    else:
        return None
    return r.choice(forms)()


def distinct_agg(g: QueryGen, scope: list[tuple[str, str]]) -> str:
    """An aggregate over the distinct values of its argument."""
    r = g.r

    def e(k: str) -> str:
        x = g.expr(k, scope, 2)
        # a literal argument: PostgreSQL refuses string_agg(DISTINCT 'a' ORDER BY 'a')
        # (two unknowns) and jsonb_agg(NULL) (no type)
        fallback = {"int": "t.id", "text": "t.s", "date": "t.d", "num": "t.n", "bool": "t.flag"}
        return x if "t." in x or "u." in x else fallback[k]

    forms = [
        lambda: f"sum(DISTINCT {e('int')})",
        lambda: f"round(avg(DISTINCT {e('int')}), 6)",
        lambda: f"count(DISTINCT {e(r.choice(['int', 'text', 'bool', 'date']))})",
        lambda: f"min(DISTINCT {e('text')})",
        lambda: f"max(DISTINCT {e('date')})",
        lambda: f"sum(DISTINCT {e('num')})",
        lambda: "string_agg(DISTINCT {x}, '|' ORDER BY {x})".format(x=e("text")),
        lambda: "array_agg(DISTINCT {x} ORDER BY {x})".format(x=e("int")),
        lambda: "array_agg({x} ORDER BY {x} NULLS FIRST)".format(x=e("int")),
        lambda: "CAST(jsonb_agg({x} ORDER BY {x}) AS VARCHAR)".format(x=e("int")),
        lambda: f"count(DISTINCT {e('int')}) FILTER (WHERE {g.pred(scope, 2)})",
        lambda: f"bool_and(DISTINCT {g.pred(scope, 2)})",
    ]
    return r.choice(forms)()
