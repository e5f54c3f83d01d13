"""regexp_matches' per-chunk kernel: match counts, flat text[] values and offsets per row."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import InvalidParameterValue, InvalidRegularExpression
from engine.expr.fn_regex import regexp_matches_columns


def _rows(lens: list[int], flat: pa.Array, offs: list[int]) -> list[list[list[str | None]]]:
    values = flat.to_pylist()
    return [values[o : o + n] for n, o in zip(lens, offs, strict=True)]


def test_rows_with_and_without_g_and_nulls() -> None:
    s = pa.array(["a1b2", "zz", None, "c3"])
    p = pa.array(["([a-z])([0-9])"] * 4)
    for flags, want in (
        ("g", [[["a", "1"], ["b", "2"]], [], [], [["c", "3"]]]),
        ("", [[["a", "1"]], [], [], [["c", "3"]]]),
    ):
        lens, flat, offs = regexp_matches_columns([s, p, pa.array([flags] * 4)], 4)
        assert _rows(list(lens), flat, list(offs)) == want


def test_whole_match_without_groups_and_unmatched_group_is_null() -> None:
    lens, flat, offs = regexp_matches_columns(
        [pa.array(["abab", "abc"]), pa.array(["ab", "(a)|(x)"]), pa.array(["g", "g"])], 2
    )
    assert _rows(list(lens), flat, list(offs)) == [[["ab"], ["ab"]], [["a", None]]]


def test_errors() -> None:
    with pytest.raises(InvalidRegularExpression):
        regexp_matches_columns([pa.array(["a"]), pa.array(["("])], 1)
    with pytest.raises(InvalidParameterValue):
        regexp_matches_columns([pa.array(["a"]), pa.array(["a"]), pa.array(["z"])], 1)
