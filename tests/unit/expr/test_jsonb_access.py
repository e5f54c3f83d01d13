"""`->`/`->>` column fast path (`jsonb.access_column`) equals the row-by-row `access`.

The fast path parses with orjson once per column and re-parses exactly only when the
selected value involves a float; Hypothesis draws documents with decimals whose written
digits matter (1.50), huge integers, nested objects and arrays, NULLs and odd strings.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.expr import jsonb

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.sampled_from([Decimal("1.50"), Decimal("9199.99"), Decimal("-0.0"), Decimal("2")]),
    st.text(max_size=5),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "ü", ""]), inner, max_size=3),
    ),
    max_leaves=8,
)
KEYS = ["a", "b", "ü", "", "zz", 0, 1, -1, 5]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), values), max_size=6), st.sampled_from(KEYS), st.booleans())
def test_access_column_equals_access(docs: list[Any], key: Any, as_text: bool) -> None:
    texts = [None if d is None else jsonb.jsonb_canonical(d) for d in docs]
    col = pa.array(texts, pa.string())
    expected = jsonb.access(texts, [key] * len(texts), as_text)
    assert jsonb.access_column(col, key, as_text).equals(expected)
    # a second key over the same column hits the parse cache
    assert jsonb.access_column(col, "a", True).equals(jsonb.access(texts, ["a"] * len(texts), True))


def test_digits_and_huge_integers_are_kept() -> None:
    col = pa.array(['{"p": 1.50, "q": {"r": 2.0}, "n": 123456789012345678901234567890}'])
    assert jsonb.access_column(col, "p", True).to_pylist() == ["1.50"]
    assert jsonb.access_column(col, "q", False).to_pylist() == ['{"r": 2.0}']
    assert jsonb.access_column(col, "n", True).to_pylist() == ["123456789012345678901234567890"]
    assert jsonb.canonicalize_text('{"b": "x\\u0001", "a": 1.50}') == '{"a": 1.50, "b": "x\\u0001"}'
