"""FETCH/MOVE position rules of SQL cursors (checked against PostgreSQL 15 by hand)."""

from __future__ import annotations

import pytest

from engine.errors import ObjectNotInPrerequisiteState
from engine.handlers.txn import Cursor, _walk
from engine.sql.session_stmts import copy_options, parse_direction


def cursor(n: int = 5, scroll: bool = True) -> Cursor:
    return Cursor("c", [], [(i,) for i in range(1, n + 1)], False, False, scroll)


def test_forward_backward_absolute_relative() -> None:
    c = cursor()
    assert _walk(c, "forward", 2) == [1, 2]
    assert _walk(c, "backward", 1) == [1]
    assert _walk(c, "forward", -1) == [2, 3, 4, 5]  # ALL
    assert c.pos == 6
    assert _walk(c, "forward", 1) == []
    assert _walk(c, "backward", 2) == [5, 4]
    assert _walk(c, "absolute", -1) == [5]
    assert _walk(c, "absolute", 2) == [2]
    assert _walk(c, "relative", 0) == [2]
    assert _walk(c, "relative", 10) == [] and c.pos == 6
    assert _walk(c, "backward", -1) == [5, 4, 3, 2, 1] and c.pos == 0
    assert _walk(c, "absolute", 0) == [] and c.pos == 0


def test_no_scroll_refuses_backward() -> None:
    c = cursor(scroll=False)
    assert _walk(c, "forward", 3) == [1, 2, 3]
    with pytest.raises(ObjectNotInPrerequisiteState, match="cursor can only scan forward"):
        _walk(c, "backward", 1)
    with pytest.raises(ObjectNotInPrerequisiteState):
        _walk(c, "absolute", 1)
    assert _walk(c, "relative", 1) == [4]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ("forward", 1)),
        ("NEXT", ("forward", 1)),
        ("PRIOR", ("backward", 1)),
        ("5", ("forward", 5)),
        ("-2", ("backward", 2)),
        ("ALL", ("forward", -1)),
        ("FORWARD ALL", ("forward", -1)),
        ("BACKWARD 3", ("backward", 3)),
        ("FIRST", ("absolute", 1)),
        ("LAST", ("absolute", -1)),
        ("ABSOLUTE -2", ("absolute", -2)),
        ("RELATIVE 0", ("relative", 0)),
    ],
)
def test_fetch_directions(raw: str, expected: tuple[str, int]) -> None:
    assert parse_direction(raw) == expected


def test_copy_options_both_syntaxes() -> None:
    assert copy_options("WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'n')") == {
        "format": "csv",
        "header": True,
        "delimiter": ";",
        "null": "n",
    }
    assert copy_options("CSV HEADER QUOTE AS '''' ") == {
        "format": "csv",
        "header": True,
        "quote": "'",
    }
    assert copy_options(None) == {"format": "text", "header": False}
