"""Parse schema-change statements: ALTER ... ADD/DROP/RENAME COLUMN, RENAME TO, SET SCHEMA,
and COMMENT ON (sqlglot reads most of them as commands without structure).

    ALTER TABLE [IF EXISTS] t ADD [COLUMN] [IF NOT EXISTS] c type [DEFAULT expr]
    ALTER TABLE [IF EXISTS] t DROP [COLUMN] [IF EXISTS] c [CASCADE | RESTRICT]
    ALTER TABLE [IF EXISTS] t RENAME [COLUMN] a TO b
    ALTER { TABLE | MATERIALIZED VIEW | VIEW | SOURCE | SINK } [IF EXISTS] name RENAME TO new
    ALTER { TABLE | MATERIALIZED VIEW | VIEW | SOURCE | SINK } [IF EXISTS] name SET SCHEMA s
    ALTER MATERIALIZED VIEW [IF EXISTS] name SET PARALLELISM { = | TO } { n | ADAPTIVE }
    COMMENT ON { TABLE | MATERIALIZED VIEW | VIEW | SOURCE | SINK } name IS { 'text' | NULL }
    COMMENT ON COLUMN relation.column IS { 'text' | NULL }

Produces `Statement("alter_relation", text, args={...})` with `kind` (the relation kind
word), `name`, `schema`, `if_exists`, `action` (`add_column` / `drop_column` /
`rename_column` / `rename` / `set_schema` / `set_parallelism`) and the action's fields; or
`Statement("comment", ...)` with `target` (`relation` / `column`). Lifecycle: pure
functions called by `engine.sql.parser`; `engine.handlers.alter` runs them.
"""

from __future__ import annotations

import re
from typing import Any

from engine.errors import SqlSyntaxError
from engine.sql.create_function import parse_type
from engine.sql.identifiers import fold_ident as ident

_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_QUAL = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"
_KIND = r"TABLE|MATERIALIZED\s+VIEW|VIEW|SOURCE|SINK"
_HEAD = re.compile(
    rf"^ALTER\s+(?P<kind>{_KIND})\s+(?P<ie>IF\s+EXISTS\s+)?(?P<name>{_QUAL})\s+(?P<rest>.*?)\s*;?\s*$",
    re.I | re.S,
)
_ADD = re.compile(
    rf"^ADD\s+(?:COLUMN\s+)?(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<col>{_IDENT})\s+(?P<def>.+)$",
    re.I | re.S,
)
_DROP = re.compile(
    rf"^DROP\s+(?:COLUMN\s+)?(?P<ie>IF\s+EXISTS\s+)?(?P<col>{_IDENT})"
    r"(?:\s+(?P<mode>CASCADE|RESTRICT))?$",
    re.I | re.S,
)
_RENAME_COL = re.compile(
    rf"^RENAME\s+(?:COLUMN\s+)?(?P<old>{_IDENT})\s+TO\s+(?P<new>{_IDENT})$", re.I | re.S
)
_RENAME = re.compile(rf"^RENAME\s+TO\s+(?P<new>{_IDENT})$", re.I | re.S)
_SET_SCHEMA = re.compile(rf"^SET\s+SCHEMA\s+(?P<schema>{_IDENT})$", re.I | re.S)
_SET_PARALLELISM = re.compile(r"^SET\s+PARALLELISM\s*(?:=|TO)\s*(?P<value>\S+)$", re.I | re.S)
_COMMENT = re.compile(
    rf"^COMMENT\s+ON\s+(?P<kind>{_KIND}|COLUMN)\s+(?P<name>{_QUAL}(?:\s*\.\s*{_IDENT})?)\s+IS\s+"
    r"(?P<value>NULL|'(?:[^']|'')*')\s*;?\s*$",
    re.I | re.S,
)


def split_qualified(raw: str) -> list[str]:
    return [ident(p) for p in re.findall(_IDENT, raw)]


def _kind(raw: str) -> str:
    return " ".join(raw.lower().split())


def parse_alter(body: str, text: str) -> Any:
    """The Statement of a schema-change ALTER, or None when `body` is another ALTER."""
    from engine.sql.statement import Statement

    m = _HEAD.match(body)
    if not m:
        return None
    parts = split_qualified(m["name"])
    args: dict[str, Any] = {
        "kind": _kind(m["kind"]),
        "name": parts[-1],
        "schema": parts[0] if len(parts) == 2 else None,
        "if_exists": bool(m["ie"]),
    }
    rest = m["rest"].strip()
    if (mm := _RENAME.match(rest)) is not None:
        args.update(action="rename", new=ident(mm["new"]))
    elif (mm := _SET_SCHEMA.match(rest)) is not None:
        args.update(action="set_schema", new_schema=ident(mm["schema"]))
    elif (mm := _SET_PARALLELISM.match(rest)) is not None:
        args.update(action="set_parallelism", value=mm["value"])
    elif args["kind"] == "table" and (mm := _RENAME_COL.match(rest)) is not None:
        args.update(action="rename_column", old=ident(mm["old"]), new=ident(mm["new"]))
    elif args["kind"] == "table" and (mm := _ADD.match(rest)) is not None:
        definition = mm["def"].strip()
        default = None
        dm = re.search(r"\bDEFAULT\b", definition, re.I)
        type_text = definition
        if dm is not None:
            type_text = definition[: dm.start()].strip()
            default = definition[dm.end() :].strip()
            if not default:
                raise SqlSyntaxError("syntax error at end of input")
        if re.search(r"\b(PRIMARY|UNIQUE|REFERENCES|CHECK|GENERATED)\b", type_text, re.I):
            raise SqlSyntaxError(
                "syntax error at or near " + repr(type_text.split()[-1]),
                detail="ALTER TABLE ... ADD COLUMN takes a name, a type and an optional "
                "DEFAULT (no constraints).",
            )
        not_null = bool(re.search(r"\bNOT\s+NULL\b", type_text, re.I))
        type_text = re.sub(r"\b(?:NOT\s+)?NULL\b", "", type_text, flags=re.I).strip()
        args.update(
            action="add_column",
            column=ident(mm["col"]),
            type=parse_type(type_text),
            default=default,
            not_null=not_null,
            if_not_exists=bool(mm["ine"]),
        )
    elif args["kind"] == "table" and (mm := _DROP.match(rest)) is not None:
        args.update(
            action="drop_column",
            column=ident(mm["col"]),
            if_exists=args["if_exists"],
            column_if_exists=bool(mm["ie"]),
            cascade=(mm["mode"] or "").upper() == "CASCADE",
        )
    else:
        return None
    return Statement("alter_relation", text, args=args)


def parse_comment(body: str, text: str) -> Any:
    from engine.sql.statement import Statement

    m = _COMMENT.match(body)
    if not m:
        raise SqlSyntaxError(
            'syntax error at or near "COMMENT"',
            detail="Swell supports COMMENT ON { TABLE | MATERIALIZED VIEW | VIEW | SOURCE | "
            "SINK | COLUMN } name IS 'text' | NULL.",
        )
    raw = m["value"]
    value = None if raw.upper() == "NULL" else raw[1:-1].replace("''", "'")
    parts = split_qualified(m["name"])
    kind = _kind(m["kind"])
    if kind == "column":
        if len(parts) < 2:
            raise SqlSyntaxError("column name must be qualified")
        args = {
            "target": "column",
            "kind": None,
            "schema": parts[-3] if len(parts) == 3 else None,
            "name": parts[-2],
            "column": parts[-1],
            "value": value,
        }
    else:
        if len(parts) > 2:
            raise SqlSyntaxError(f"improper qualified name (too many dotted names): {m['name']}")
        args = {
            "target": "relation",
            "kind": kind,
            "schema": parts[0] if len(parts) == 2 else None,
            "name": parts[-1],
            "column": None,
            "value": value,
        }
    return Statement("comment", text, args=args)
