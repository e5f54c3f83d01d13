"""`jsonb_many.canonicalize_many` (the webhook decode fast path) equals `canonicalize_text`.

Hypothesis writes JSON texts the way clients do (compact, spaced, keys in any order,
duplicate keys, numbers as `1.50`, `1e3`, `-0.0`, huge integers, strings full of quotes,
backslashes, commas, colons and non-ASCII) and checks every text canonicalises exactly as
the row-by-row exact path does, in batches that mix fast and exact-path rows.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import EngineError
from engine.expr import jsonb, jsonb_many
from engine.expr.jsonb import canonicalize_text
from engine.expr.jsonb_many import canonicalize_many

NUMBERS = [
    "0",
    "-0",
    "7",
    "-12",
    "1.50",
    "9199.99",
    "-0.0",
    "0.0",
    "1e3",
    "2.5E-3",
    "1.0",
    "123456789012345678901234567890",
    "-18446744073709551617",
    "0.1",
    "3.141592653589793",
    "100000000000000000000.0",
    "12345.678901234567",
]
KEYS = ["a", "b", "zz", "é", "ключ", "", "a,b", "c:d", 'q"', "bs\\", "aa", "long_key_name"]

strings = st.text(
    alphabet=st.sampled_from(list('ab ,:"\\\n\t/é€😀{}[]') + ["\x00", "\x1f"]), max_size=6
)


def _text(draw: st.DrawFn, depth: int) -> str:
    sep, colon = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " : ")]))
    kind = draw(st.integers(0, 5 if depth < 3 else 3))
    if kind == 0:
        return draw(st.sampled_from(NUMBERS))
    if kind == 1:
        return json.dumps(draw(strings), ensure_ascii=draw(st.booleans()))
    if kind == 2:
        return draw(st.sampled_from(["true", "false", "null"]))
    if kind == 3:
        return json.dumps(
            draw(st.integers(-(2**70), 2**70))
            if draw(st.booleans())
            else draw(st.floats(allow_nan=False, allow_infinity=False))
        )
    if kind == 4:
        items = draw(st.lists(st.deferred(lambda: st.just(0)), max_size=4))
        return "[" + sep.join(_text(draw, depth + 1) for _ in items) + "]"
    n = draw(st.integers(0, 4))
    keys = [draw(st.sampled_from(KEYS)) for _ in range(n)]  # duplicates on purpose
    return (
        "{"
        + sep.join(json.dumps(k, ensure_ascii=False) + colon + _text(draw, depth + 1) for k in keys)
        + "}"
    )


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    return " " * draw(st.integers(0, 1)) + _text(draw, 0) + draw(st.sampled_from(["", " ", "\r"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(json_texts(), min_size=1, max_size=12))
def test_many_equals_row_by_row(texts: list[str]) -> None:
    assert canonicalize_many(texts).to_pylist() == [canonicalize_text(t) for t in texts]


def test_edge_cases() -> None:
    texts = [
        '{"b":1,"a":[1,2,{"dd":"x,y:z","c":null}],"a":true}',  # duplicate: last wins
        '{"k\\\\":"v\\\\\\"q,:", "z": "\\\\"}',
        '{"x": 1.50, "y": 9199.99, "z": -0.0, "w": 0.0, "e": 1e3, "big": 1234567890123456789012}',
        '  {"é": "ü", "aa": 1, "ключ": "значение 😀"}  ',
        '{"a": {"b": {"c": [1, {"zz": 1, "y": 2}]}}}',
        '"\\u0000\\n\\t\\u00e9"',
        "[]",
        "{}",
        "null",
        "-5",
        "3.0",
    ]
    got = canonicalize_many(texts).to_pylist()
    assert got == [canonicalize_text(t) for t in texts]
    assert got[0] == '{"a": true, "b": 1}'
    assert got[2] == (
        '{"e": 1000, "w": 0.0, "x": 1.50, "y": 9199.99, "z": 0.0, "big": 1234567890123456789012}'
    )
    assert got[3] == '{"aa": 1, "é": "ü", "ключ": "значение 😀"}'
    assert got[4] == '{"a": {"b": {"c": [1, {"y": 2, "zz": 1}]}}}'


def test_many_rows_and_large_batches() -> None:
    one = '{"event_id": "e", "properties": {"price": 9199.99, "category": "x"}, "n": 1}'
    texts = [one.replace('"n": 1', f'"n": {i}') for i in range(1000)] + ['{"n": 1.10}']
    got = canonicalize_many(texts).to_pylist()
    assert got[7] == '{"n": 7, "event_id": "e", "properties": {"price": 9199.99, "category": "x"}}'
    assert got[-1] == '{"n": 1.10}' and len(got) == 1001


@pytest.mark.parametrize("bad", ["{", '{"a": 1,}', "NaN", "1e400", '"\\ud800"', "[1] 2", "", "01"])
def test_invalid_raises_like_exact_path(bad: str) -> None:
    with pytest.raises(EngineError) as want:
        canonicalize_text(bad)
    with pytest.raises(type(want.value)):
        canonicalize_many(['{"ok": 1}', bad])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(json_texts(), min_size=1, max_size=8),
    st.sampled_from([*KEYS, 0, 1, -1]),
    st.booleans(),
)
def test_access_column_over_canonical_texts(texts: list[str], key: object, as_text: bool) -> None:
    """`->`/`->>` over stored (canonical) text parse once with exact-enough floats and
    serialise in C; they must equal the row-by-row exact `access`."""
    col = canonicalize_many(texts)
    docs = col.to_pylist()
    got = jsonb.access_column(col, key, as_text).to_pylist()
    assert got == jsonb.access(docs, [key] * len(docs), as_text).to_pylist()
    # and on the results (data->'a'->>'b' reuses the parsed sub-values)
    sub = jsonb.access_column(col, key, False)
    subdocs = sub.to_pylist()
    for k2 in ("a", "zz", 0):
        assert (
            jsonb.access_column(sub, k2, as_text).to_pylist()
            == jsonb.access(subdocs, [k2] * len(subdocs), as_text).to_pylist()
        )


def test_access_keeps_huge_integers() -> None:
    """orjson reads integers beyond 64 bits as floats; neither access path may."""
    texts = ['{"a": -9223372036854775809, "b": {"c": 18446744073709551616}}']
    col = canonicalize_many(texts)
    for got in (jsonb.access_column(col, "a", True), jsonb.access(texts, ["a"], True)):
        assert got.to_pylist() == ["-9223372036854775809"]
    sub = jsonb.access_column(col, "b", False)
    assert jsonb.access_column(sub, "c", True).to_pylist() == ["18446744073709551616"]
    assert jsonb.access(sub.to_pylist(), ["c"], True).to_pylist() == ["18446744073709551616"]


@pytest.mark.parametrize(
    "values",
    [["x", "y\\"], [1.5, 9199.99], [7, -(2**70)], [{"b": 1, "a": [2.50]}, {}], [True, None]],
)
@pytest.mark.parametrize("null_row", [False, True])
def test_access_column_one_type_per_key(values: list[object], null_row: bool) -> None:
    """Columns whose rows all hold the key with one value type take a whole-column path."""
    texts = [json.dumps({"k": v, "o": i}) for i, v in enumerate(values)]
    texts = [t.replace("2.5]", "2.50]") for t in texts]
    col = canonicalize_many(texts)
    if null_row:
        col = pa.concat_arrays([col, pa.array([None], pa.string())])
    docs = col.to_pylist()
    for as_text in (False, True):
        got = jsonb.access_column(col, "k", as_text).to_pylist()
        assert got == jsonb.access(docs, ["k"] * len(docs), as_text).to_pylist()
    sub = jsonb.access_column(col, "k", False)
    assert (
        jsonb.access_column(sub, "a", True).to_pylist()
        == jsonb.access(sub.to_pylist(), ["a"] * len(docs), True).to_pylist()
    )


def test_access_chain_over_cached_columns() -> None:
    """Big columns are cached with their parsed values, and a `->` result with its own, so
    `j -> 'p' ->> 'x'` reads the cached sub-values; results equal the exact row path."""
    rows = [f'{{"p": {{"x": {i}.50, "y": "s{i}", "z": [{i}, 1.5]}}, "q": {i}}}' for i in range(150)]
    rows[7] = '{"p": {"x": 123456789012345678901234567890}, "q": null}'
    col = pa.concat_arrays([canonicalize_many(rows), pa.array([None], pa.string())])
    docs = col.to_pylist()
    n = len(docs)
    sub = jsonb.access_column(col, "p", False)
    assert sub.to_pylist() == jsonb.access(docs, ["p"] * n, False).to_pylist()
    assert jsonb.access_column(col, "p", False) is sub  # the cached result
    for k in ("x", "y", "z"):
        for as_text in (True, False):
            got = jsonb.access_column(sub, k, as_text).to_pylist()
            assert got == jsonb.access(sub.to_pylist(), [k] * n, as_text).to_pylist()
    assert jsonb.access_column(sub, "x", True).to_pylist()[:2] == ["0.50", "1.50"]
    assert jsonb.access_column(sub, "x", True).to_pylist()[7] == "123456789012345678901234567890"


SHAPE_VALUES = [
    *NUMBERS,
    "null",
    "true",
    '"x"',
    '"a\\"b\\\\c\\n\\u00e9\\u0001"',
    '"1e5 -0 1.50 0.00001"',  # number-like text inside strings: only slower
    '"\\ud83d\\ude00"',
    "[]",
    '[1, "a", null, 2.5]',
    "[1e5, -0.0, [2 ,3]]",
    '[{"b": 1, "a": 2}]',
    '{"zz": 1, "a": {"y": 2, "x": -0}}',  # an object where the shape has a scalar
    '"{ } [ ]: 1e5"',
    '"é ключ \u2028"',
    "-0.000",
    "-0.05",
    "1.25",
    "-3.5",
    "0.5",
    "10.0",
]


@st.composite
def same_shape_texts(draw: st.DrawFn) -> list[str]:
    """Texts of one object shape (keys, nesting) with values that vary per text, keys in
    any order and any spacing: what a stream of webhook events looks like."""
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=5, unique=True))
    nested = draw(st.sampled_from([None, *keys]))
    sub_keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    out = []
    for _ in range(draw(st.integers(jsonb_many.SHAPE_MIN_TEXTS, 16))):
        parts = []
        for k in draw(st.permutations(keys)):
            if k == nested and draw(st.integers(0, 9)):
                inner = ", ".join(
                    f"{json.dumps(s)}: {draw(st.sampled_from(SHAPE_VALUES))}"
                    for s in draw(st.permutations(sub_keys))
                )
                v = "{" + inner + "}"
            else:
                v = draw(st.sampled_from(SHAPE_VALUES))
            parts.append(f"{json.dumps(k)}{draw(st.sampled_from([':', ': ', ' :']))}{v}")
        if draw(st.integers(0, 9)) == 0:
            parts.append(f'"extra_{len(out)}": 1')  # another shape now and then
        out.append("{" + draw(st.sampled_from([",", ", ", " ,\n"])).join(parts) + "}")
    return out


@settings(max_examples=300, deadline=None)
@given(same_shape_texts())
def test_shape_tier_equals_row_by_row(texts: list[str]) -> None:
    got = canonicalize_many(texts).to_pylist()
    assert got == [canonicalize_text(t) for t in texts]


def test_shape_tier_duplicate_keys_and_invalid_text() -> None:
    base = ['{"b": 1, "a": "x"}'] * jsonb_many.SHAPE_MIN_TEXTS
    assert canonicalize_many([*base, '{"a": "y", "b": 2, "a": "z"}']).to_pylist()[-1] == (
        canonicalize_text('{"a": "y", "b": 2, "a": "z"}')
    )
    with pytest.raises(EngineError):
        canonicalize_many([*base, '{"a": "\\ud800", "b": 1}'])
    with pytest.raises(EngineError):
        canonicalize_many([*base, '{"a": "x", "b": 1'])
