"""`CREATE SINK`: parsed by us (sqlglot has no tree for it).

    CREATE SINK [IF NOT EXISTS] [schema.]name [INTO table [(col, ...)]]
        { FROM relation | AS query }
        [WITH (connector = '...', ...)] [FORMAT f ENCODE e [(...)]] [KEY ENCODE e]

The suffix clauses are taken out first by `engine.sql.clauses.parse_ddl_clauses` (same
scanner as CREATE TABLE/SOURCE); what is left is the head parsed here and the query text,
which the handler plans with the streaming planner. Lifecycle: a pure function called
once per statement by `engine.sql.parser`; the result rides on `Statement.args["sink"]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot.tokens import TokenType

from engine.errors import SqlSyntaxError
from engine.sql.clauses import DdlClauses, _Cursor, _name, _syntax, parse_ddl_clauses, tokenize


@dataclass
class CreateSink:
    name: str
    schema: str | None
    if_not_exists: bool
    clauses: DdlClauses
    from_name: str | None = None  # FROM relation
    from_schema: str | None = None
    query: str | None = None  # AS query (text)
    query_offset: int = 0  # where the query starts in the statement (error positions)
    into: str | None = None  # INTO table
    into_schema: str | None = None
    into_columns: list[str] = field(default_factory=list)


def _qualified(cur: _Cursor) -> tuple[str, str | None]:
    first = _name(cur.ident())
    p = cur.peek()
    if p is not None and p.token_type is TokenType.DOT:
        cur.next()
        return _name(cur.ident()), first
    return first, None


def parse_create_sink(text: str) -> CreateSink:
    clauses = parse_ddl_clauses(text)
    body = clauses.stripped
    toks = tokenize(body)
    cur = _Cursor(body, toks)
    cur.expect("CREATE", "SINK")
    exists = False
    if cur.word() == "IF":
        cur.expect("IF", "NOT", "EXISTS")
        exists = True
    name, schema = _qualified(cur)
    out = CreateSink(name, schema, exists, clauses)
    if cur.word() == "INTO":
        cur.next()
        out.into, out.into_schema = _qualified(cur)
        p = cur.peek()
        if p is not None and p.token_type is TokenType.L_PAREN:
            cur.next()
            while True:
                out.into_columns.append(_name(cur.ident()))
                sep = cur.next()
                if sep.token_type is TokenType.R_PAREN:
                    break
                if sep.token_type is not TokenType.COMMA:
                    raise _syntax(sep, body)
    t = cur.peek()
    if t is None:
        raise SqlSyntaxError(
            "syntax error at end of input",
            detail="CREATE SINK needs FROM <relation> or AS <query>.",
            position=len(text) + 1,
        )
    if t.token_type is TokenType.FROM:
        cur.next()
        out.from_name, out.from_schema = _qualified(cur)
        if cur.peek() is not None:
            raise _syntax(cur.peek(), body)
    elif t.token_type is TokenType.ALIAS:
        cur.next()
        q = cur.peek()
        if q is None:
            raise _syntax(None, body)
        out.query = body[q.start :].strip()
        out.query_offset = q.start
    else:
        raise _syntax(t, body)
    return out
