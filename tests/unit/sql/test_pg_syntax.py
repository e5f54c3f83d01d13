"""Spellings normalised before sqlglot parses: parameters written without spaces."""

from __future__ import annotations

import pytest

from engine.sql.parser import parse_statements
from engine.sql.pg_syntax import space_parameters


@pytest.mark.parametrize(
    ("sql", "spaced"),
    [
        ("SELECT $1,$2", "SELECT $1 ,$2"),
        ("VALUES ($1,$2)", "VALUES ($1 ,$2 )"),
        ("SELECT $1 , $2", "SELECT $1 , $2"),
        ("SELECT '$1,$2', $1", "SELECT '$1,$2', $1"),
        ("SELECT $$a$1,$$, $1,$2", "SELECT $$a$1,$$, $1 ,$2"),
        ("SELECT $q$ $1,$2 $q$", "SELECT $q$ $1,$2 $q$"),
        ("SELECT E'x\\'$1,', $1,$2 -- $1,\n", "SELECT E'x\\'$1,', $1 ,$2 -- $1,\n"),
        ('SELECT "a$1,b", $1/* $1, */', 'SELECT "a$1,b", $1 /* $1, */'),
    ],
)
def test_space_parameters(sql: str, spaced: str) -> None:
    assert space_parameters(sql) == spaced


def test_unchanged_text_is_the_same_object() -> None:
    sql = "SELECT 1"
    assert space_parameters(sql) is sql


def test_parameters_without_spaces_parse() -> None:
    (st,) = parse_statements("INSERT INTO t VALUES ($1,$2,$3)")
    assert st.ast is not None
    assert st.ast.sql().count("@") == 3
