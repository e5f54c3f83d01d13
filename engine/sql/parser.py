"""Split a query string into statements and parse each one.

`parse_statements(sql)` returns `Statement`s: a `kind` (what the session dispatches on),
the original text, and either a sqlglot tree (`ast`) or the fields our own parsers pulled
out (`args`). Keeping the raw text matters: it is what SHOW CREATE prints and what a
materialized view is re-planned from after a restart.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from engine.errors import SqlSyntaxError
from engine.sql.clauses import (
    create_object_kind,
    parse_create_secret,
    parse_ddl_clauses,
    parse_drop_secret,
)
from engine.sql.identifiers import check_star_modifiers, normalize_identifiers
from engine.sql.object_stmts import parse_drop_connection, parse_schema_statement
from engine.sql.pg_syntax import normalize_pg_syntax, space_parameters
from engine.sql.statement import Statement as Statement  # re-exported: users import it here

DIALECT = "risingwave"


def _keep_pg_functions() -> None:
    """sqlglot rewrites `to_char(x, 'YYYY')` into its strftime node, losing the template
    (`Day` becomes `%uay`); parsed as a plain call it reaches engine.expr's to_char. It
    also folds `upper(to_hex(x))` into to_hex(x) and `lower(to_hex(x))` into a node of its
    own, as if to_hex's digits were upper case (PostgreSQL's are lower case): upper and
    lower are built as written."""
    from sqlglot.dialects.risingwave import RisingWave

    parser = RisingWave.Parser
    parser.FUNCTIONS = {k: v for k, v in parser.FUNCTIONS.items() if k != "TO_CHAR"}
    parser.FUNCTIONS["UPPER"] = lambda args: exp.Upper(this=args[0] if args else None)
    parser.FUNCTIONS["LOWER"] = lambda args: exp.Lower(this=args[0] if args else None)


#: meta key of a parsed call's name as written (`variance`, `char_length`): PostgreSQL names
#: an output column after the function as written, sqlglot merges synonyms into one node
WRITTEN_NAME = "written_name"


def _remember_written_names() -> None:
    """Wrap each known-function builder so the node it builds records the name the query
    wrote (`engine.plan.helpers._output_name` reads it)."""
    from sqlglot.dialects.risingwave import RisingWave

    def wrap(name: str, fn: Any) -> Any:
        def build(args: list[Any], dialect: Any = None) -> Any:
            try:
                node = fn(args)
            except TypeError:
                if dialect is None:
                    raise  # sqlglot retries with the dialect
                node = fn(args, dialect=dialect)
            if isinstance(node, exp.Expression):
                node.meta[WRITTEN_NAME] = name.lower()
            return node

        return build

    parser = RisingWave.Parser
    parser.FUNCTIONS = {k: wrap(k, v) for k, v in parser.FUNCTIONS.items()}
    date_part = parser.FUNCTION_PARSERS["DATE_PART"]  # parsed into an Extract node

    def parse_date_part(self: Any) -> Any:
        node = date_part(self)
        if isinstance(node, exp.Expression):
            node.meta[WRITTEN_NAME] = "date_part"
        return node

    parser.FUNCTION_PARSERS = {**parser.FUNCTION_PARSERS, "DATE_PART": parse_date_part}


def _full_grouping_elements() -> None:
    """ROLLUP / CUBE / GROUPING SETS elements are any expression in PostgreSQL
    (`ROLLUP (a > 1, b)`); sqlglot parses them without comparisons or AND/OR."""
    from sqlglot.dialects.risingwave import RisingWave

    parser = RisingWave.Parser

    def parse_cube_or_rollup(self: Any, with_prefix: bool = False) -> Any:
        if self._match(TokenType.CUBE):
            kind: Any = exp.Cube
        elif self._match(TokenType.ROLLUP):
            kind = exp.Rollup
        else:
            return None
        items = [] if with_prefix else self._parse_wrapped_csv(self._parse_disjunction)
        return self.expression(kind(expressions=items))

    def parse_grouping_set(self: Any) -> Any:
        return (
            self._parse_grouping_sets() or self._parse_cube_or_rollup() or self._parse_disjunction()
        )

    parser._parse_cube_or_rollup = parse_cube_or_rollup  # type: ignore[method-assign]
    parser._parse_grouping_set = parse_grouping_set  # type: ignore[method-assign]


def _subscripts_as_written() -> None:
    """sqlglot keeps subscripts 0-based inside its trees: parsing PostgreSQL it subtracts
    1 from a literal subscript and wraps an integer expression in `+ -1`, then simplifies
    it. An offset of 0 keeps `a[length(s)]` as written (engine.expr.subscript binds it
    1-based), and SQL generated for either dialect prints it back unchanged."""
    from sqlglot.dialects.postgres import Postgres
    from sqlglot.dialects.risingwave import RisingWave

    RisingWave.INDEX_OFFSET = 0
    Postgres.INDEX_OFFSET = 0


def _round_as_written() -> None:
    """sqlglot prints `round(x, n)` over what it takes for a double precision `x` as
    `ROUND(CAST(x AS DECIMAL), n)`, the rewrite a query for PostgreSQL needs. A view's
    query is planned from its regenerated text, so that cast made a view accept the
    `round(double precision, integer)` an ad-hoc query refuses (42883, as PostgreSQL
    does): the call prints as written."""
    from sqlglot.dialects.postgres import Postgres
    from sqlglot.dialects.risingwave import RisingWave

    def round_sql(self: Any, e: exp.Round) -> str:
        return str(self.func("ROUND", e.this, e.args.get("decimals")))

    for gen in (Postgres.Generator, RisingWave.Generator):
        gen.TRANSFORMS = {**gen.TRANSFORMS, exp.Round: round_sql}


def _date_part_as_written() -> None:
    """date_part(f, x) parses into sqlglot's Extract and would print back as EXTRACT(f
    FROM x); a view's query is planned from its regenerated text, where the call must stay
    date_part (double precision; extract is numeric)."""
    from sqlglot.dialects.postgres import Postgres
    from sqlglot.dialects.risingwave import RisingWave

    for gen in (Postgres.Generator, RisingWave.Generator):
        default = gen.TRANSFORMS.get(exp.Extract) or gen.extract_sql

        def extract_sql(self: Any, e: exp.Extract, default: Any = default) -> str:
            field = e.this
            if e.meta.get(WRITTEN_NAME) == "date_part" and isinstance(field, exp.Var):
                return str(self.func("DATE_PART", exp.Literal.string(field.name), e.expression))
            return str(default(self, e))

        gen.TRANSFORMS = {**gen.TRANSFORMS, exp.Extract: extract_sql}


_keep_pg_functions()
_remember_written_names()
_date_part_as_written()
_full_grouping_elements()
_subscripts_as_written()
_round_as_written()


def split_statements(sql: str) -> list[tuple[str, int]]:
    """Split on top-level semicolons using sqlglot's tokenizer (quotes and comments aware)."""
    try:
        tokens = sqlglot.tokenize(sql, read=DIALECT)
    except TokenError as e:
        spaced = space_parameters(sql)
        if spaced is sql:
            raise SqlSyntaxError(f"syntax error: {e}") from e
        return split_statements(spaced)
    pieces: list[tuple[str, int]] = []
    start = 0
    for tok in tokens:
        if tok.token_type is TokenType.SEMICOLON:
            text = sql[start : tok.start]
            if text.strip():
                pieces.append((text, start))
            start = tok.end + 1
    tail = sql[start:]
    if _strip_comments(tail).strip():
        pieces.append((tail, start))
    return pieces


def _strip_comments(s: str) -> str:
    s = re.sub(r"--[^\n]*", "", s)
    return re.sub(r"/\*.*?\*/", "", s, flags=re.S)


def parse_statements(sql: str) -> list[Statement]:
    if not _strip_comments(sql).strip().strip(";").strip():
        return [Statement("empty", sql)]
    return [parse_one(text, off) for text, off in split_statements(sql)]


_WORD = re.compile(r"\s*([A-Za-z_]+)")


def _words(text: str, n: int) -> list[str]:
    out = []
    pos = 0
    for _ in range(n):
        m = _WORD.match(text, pos)
        if not m:
            break
        out.append(m.group(1).upper())
        pos = m.end()
    return out


def parse_one(text: str, offset: int = 0) -> Statement:
    """Parse one statement (no trailing semicolon)."""
    body = _strip_comments(text).strip()
    words = _words(body, 4)
    head = words[0] if words else ""
    st = _parse_own(head, words, body, text)
    if st is not None:
        st.offset = offset
        return st
    append_only = False
    watermark_ttl = False
    sql_for_glot = text
    clauses = None
    if head == "CREATE" and create_object_kind(body) in ("TABLE", "SOURCE", "SINK"):
        # RisingWave's WITH/FORMAT/INCLUDE/ON CONFLICT/VALIDATE clauses: parsed by us,
        # blanked out (same length) for sqlglot; handlers read st.args["clauses"]
        clauses = parse_ddl_clauses(text)
        sql_for_glot = clauses.stripped
        append_only = clauses.append_only
        # WATERMARK FOR ts AS ... WITH TTL (blanked, same length; read by define_watermark)
        m = _TTL_RE.search(sql_for_glot)
        if m is not None:
            a, b = m.span(1)
            sql_for_glot = sql_for_glot[:a] + " " * (b - a) + sql_for_glot[b:]
            watermark_ttl = True
    elif head == "CREATE" and re.search(r"\bAPPEND\s+ONLY\b", body, re.I):
        append_only = True
        sql_for_glot = re.sub(r"\bAPPEND\s+ONLY\b", "", text, flags=re.I)
    eowc = head == "CREATE" and _EOWC_RE.search(sql_for_glot) is not None
    if eowc:  # CREATE MATERIALIZED VIEW ... EMIT ON WINDOW CLOSE (blanked, same length)
        sql_for_glot = _EOWC_RE.sub(lambda m: " " * len(m.group(0)), sql_for_glot)
    time_travel = None
    if head in ("SELECT", "WITH") and re.search(r"\bFOR\s+SYSTEM_(?:VERSION|TIME)\b", body, re.I):
        from engine.sql.time_travel import strip_time_travel

        sql_for_glot, time_travel = strip_time_travel(sql_for_glot)
    ast = _glot(sql_for_glot, offset)
    notices = normalize_identifiers(ast, offset)
    st = _classify(ast, text)
    if notices:
        st.args["notices"] = notices
    if time_travel:
        st.args["time_travel"] = time_travel
    st.offset = offset
    if clauses is not None:
        st.args["clauses"] = clauses
    if append_only:
        st.args["append_only"] = True
    if watermark_ttl:
        st.args["watermark_ttl"] = True
    if eowc:
        st.args["emit_on_window_close"] = True
    return st


_TTL_RE = re.compile(r"\bWATERMARK\s+FOR\b[^;]*?(\bWITH\s+TTL\b)", re.I)
_EOWC_RE = re.compile(r"\bEMIT\s+ON\s+WINDOW\s+CLOSE\b(?=\s*(?:--[^\n]*\s*)*;?\s*$)", re.I)


def _glot(text: str, offset: int) -> exp.Expression:
    text = normalize_pg_syntax(text, DIALECT)
    if "*" in text:
        with contextlib.suppress(TokenError):  # reported by the parse below
            check_star_modifiers(list(sqlglot.tokenize(text, read=DIALECT)), offset)
    try:
        trees = _parse_calls_as_written(text)
    except ParseError as e:
        errs = e.errors or [{}]
        first = errs[0]
        head = _first_token(text)
        if head is not None and head.token_type is TokenType.VAR:
            # no statement starts with a bare name: `SELEC * FROM t` is wrong at SELEC
            raise SqlSyntaxError(
                f'syntax error at or near "{head.text}"', position=offset + head.start + 1
            ) from e
        near = first.get("highlight") or ""
        msg = f'syntax error at or near "{near}"' if near else "syntax error"
        pos = None
        start = first.get("start_context")
        if start is not None:
            pos = offset + len(start) + 1
        raise SqlSyntaxError(msg, position=pos) from e
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}") from e
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise SqlSyntaxError("syntax error: expected exactly one statement")
    return trees[0]


_ARG_COUNT = re.compile(r"number of provided arguments \(\d+\) is greater than")


def _parse_calls_as_written(text: str) -> list[Any]:
    """sqlglot refuses a known function called with too many arguments (`abs(1, 2, 3)`) as
    a syntax error; PostgreSQL answers 42883 naming the argument types. Such a call is
    re-read schema-qualified (`pg_catalog.abs(...)`, which sqlglot keeps as a plain call)
    so the binder reports it with the argument types. The inserted prefixes are then taken
    out of the tree's token positions again, so errors point into the text as written."""
    inserted: list[int] = []  # where a prefix starts, in the current (rewritten) text
    for _ in range(8):
        try:
            trees = sqlglot.parse(text, read=DIALECT, error_level=sqlglot.ErrorLevel.RAISE)
            break
        except ParseError as e:
            first = (e.errors or [{}])[0]
            ctx = first.get("start_context")
            if ctx is None or not _ARG_COUNT.search(first.get("description") or ""):
                raise
            name = _call_name_before(text, text.find(ctx) + len(ctx))
            if name is None:
                raise
            text = text[: name.start] + _QUALIFIER + text[name.start :]
            inserted = [q + len(_QUALIFIER) if q >= name.start else q for q in inserted]
            inserted.append(name.start)
    else:
        trees = sqlglot.parse(text, read=DIALECT, error_level=sqlglot.ErrorLevel.RAISE)
    if inserted:
        _unshift_positions(trees, inserted)
    return trees


_QUALIFIER = "pg_catalog."


def _unshift_positions(trees: list[Any], inserted: list[int]) -> None:
    """Map token offsets of a text with `_QUALIFIER` inserted at `inserted` back to the
    text as written (the prefix itself maps onto the name it qualifies)."""
    n = len(_QUALIFIER)

    def back(pos: int) -> int:
        return pos - sum(min(n, max(0, pos - q)) for q in inserted)

    for tree in trees:
        if tree is None:
            continue
        for node in tree.walk():
            meta = node._meta
            if not meta:
                continue
            for key in ("start", "end"):
                if isinstance(meta.get(key), int):
                    meta[key] = back(meta[key])


def _call_name_before(text: str, close: int) -> Any:
    """The function-name token of the call whose `)` starts at `close`."""
    try:
        toks = sqlglot.tokenize(text, read=DIALECT)
    except TokenError:
        return None
    idx = next((i for i, t in enumerate(toks) if t.start == close), None)
    if idx is None or toks[idx].token_type is not TokenType.R_PAREN:
        return None
    depth = 0
    for j in range(idx, -1, -1):
        tt = toks[j].token_type
        if tt is TokenType.R_PAREN:
            depth += 1
        elif tt is TokenType.L_PAREN:
            depth -= 1
            if depth == 0:
                return toks[j - 1] if j > 0 else None
    return None


def _first_token(text: str) -> Any:
    try:
        toks = sqlglot.tokenize(text, read=DIALECT)
    except TokenError:
        return None
    return toks[0] if toks else None


def _classify(ast: exp.Expression, text: str) -> Statement:
    if isinstance(ast, exp.Command):
        word = str(ast.this).upper()
        raise SqlSyntaxError(
            f'syntax error at or near "{word}"',
            detail="This statement form is not supported by Swell yet.",
        )
    if isinstance(ast, (exp.Select, exp.Union, exp.Intersect, exp.Except)):
        return Statement("select", text, ast)
    if isinstance(ast, exp.Values):
        return Statement("select", text, ast)
    if isinstance(ast, exp.Insert):
        return Statement("insert", text, ast)
    if isinstance(ast, exp.Update):
        return Statement("update", text, ast)
    if isinstance(ast, exp.Delete):
        return Statement("delete", text, ast)
    if isinstance(ast, exp.Create):
        kind = (ast.args.get("kind") or "").upper()
        props = ast.args.get("properties")
        materialized = bool(
            props and any(isinstance(p, exp.MaterializedProperty) for p in props.expressions)
        )
        if kind == "TABLE":
            return Statement("create_table", text, ast)
        if kind == "SOURCE":
            return Statement("create_source", text, ast)
        if kind == "VIEW" and materialized:
            return Statement("create_mv", text, ast)
        if kind == "VIEW":
            return Statement("create_view", text, ast)
        raise SqlSyntaxError(
            f'syntax error at or near "{kind}"',
            detail=f"CREATE {kind} is not supported by Swell yet.",
        )
    if isinstance(ast, exp.Drop):
        return Statement("drop", text, ast)
    if isinstance(ast, exp.Describe):
        return Statement("describe", text, ast)
    if isinstance(ast, (exp.Column, exp.Identifier)):
        raise SqlSyntaxError(f'syntax error at or near "{ast.sql()}"')
    raise SqlSyntaxError(
        f'syntax error at or near "{type(ast).__name__.upper()}"',
        detail="This statement is not supported by Swell.",
    )


# -- our own statements ----------------------------------------------------------------------
_SET_RE = re.compile(
    r"^SET\s+(?:(SESSION|LOCAL)\s+)?(?P<name>[A-Za-z_][\w.]*)\s*(?:=|\bTO\b)\s*(?P<value>.+)$",
    re.I | re.S,
)
_SET_TZ_RE = re.compile(
    r"^SET\s+(?:(?:SESSION|LOCAL)\s+)?TIME\s+ZONE\s+(?P<value>.+)$", re.I | re.S
)
_SHOW_LIST = {
    "TABLES": "table",
    "MATERIALIZED": "materialized view",
    "VIEWS": "view",
    "SOURCES": "source",
    "SINKS": "sink",
}


_SESSION_HEADS = ("SAVEPOINT", "RELEASE", "ROLLBACK", "DECLARE", "FETCH", "MOVE", "CLOSE", "COPY")


def _parse_own(head: str, words: list[str], body: str, text: str) -> Statement | None:
    from engine.sql.subscription_stmts import (
        is_subscription_statement,
        parse_subscription_statement,
    )

    if is_subscription_statement(head, words, body):
        sub_kind, sub_args = parse_subscription_statement(head, body)
        return Statement(sub_kind, text, args=sub_args)
    if head in _SESSION_HEADS:
        from engine.sql.session_stmts import parse_session_statement

        st = parse_session_statement(head, body, text, parse_one)
        if st is not None:
            return st
    from engine.sql.index_stmts import is_index_statement, parse_index_statement

    if is_index_statement(head, words):
        idx_kind, idx_args = parse_index_statement(head, body)
        return Statement(idx_kind, text, args=idx_args)
    if head == "CREATE" and create_object_kind(body) == "SINK":
        from engine.sql.create_sink import parse_create_sink

        return Statement("create_sink", text, args={"sink": parse_create_sink(text)})
    if head == "CREATE" and create_object_kind(body) in ("SECRET", "CONNECTION"):
        kind = create_object_kind(body)
        if kind == "SECRET":
            return Statement("create_secret", text, args={"secret": parse_create_secret(text)})
        return Statement("create_connection", text, args={"clauses": parse_ddl_clauses(text)})
    if head == "DROP" and words[1:2] == ["CONNECTION"]:
        return Statement("drop_connection", text, args=parse_drop_connection(body))
    if head == "CREATE" and re.match(
        r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|AGGREGATE)\b", body, re.I
    ):
        from engine.sql.create_function import parse_create_function

        return parse_create_function(body)
    if head == "DROP" and words[1:2] in (["FUNCTION"], ["AGGREGATE"]):
        from engine.sql.create_function import parse_drop_function

        return parse_drop_function(body)
    if (head in ("CREATE", "DROP") and words[1:2] == ["DATABASE"]) or (
        head == "ALTER"
        and words[1:2] == ["DATABASE"]
        and not re.search(r"\bOWNER\s+TO\b", body, re.I)
    ):
        from engine.sql.database_stmts import parse_database_statement

        return parse_database_statement(head, body, text)
    if head in ("CREATE", "DROP") and words[1:2] == ["SCHEMA"]:
        return parse_schema_statement(head, body, text)
    if head == "DROP" and words[1:2] == ["SECRET"]:
        name, exists = parse_drop_secret(text)
        return Statement("drop_secret", text, args={"name": name, "if_exists": exists})
    if head in ("GRANT", "REVOKE"):
        from engine.sql.grant_stmts import parse_grant

        return Statement("grant", text, args=parse_grant(body))
    if head == "ALTER" and re.search(r"\bOWNER\s+TO\b", body, re.I):
        from engine.sql.grant_stmts import parse_alter_owner

        owner_args = parse_alter_owner(body)
        if owner_args is not None:
            return Statement("alter_owner", text, args=owner_args)
    if head == "ALTER":
        from engine.sql.alter_stmts import parse_alter

        alter = parse_alter(body, text)
        if alter is not None:
            return alter  # type: ignore[no-any-return]
    if head == "COMMENT":
        from engine.sql.alter_stmts import parse_comment

        return parse_comment(body, text)  # type: ignore[no-any-return]
    if head in ("CREATE", "ALTER", "DROP") and words[1:2] in (["USER"], ["ROLE"]):
        from engine.sql.user_stmts import parse_user_statement

        return Statement("user", text, args=parse_user_statement(body))
    if head == "VERIFY":
        from engine.sql.subscription_stmts import parse_verify

        return Statement("verify", text, args=parse_verify(body))
    if head == "FLUSH" and len(words) == 1:
        return Statement("flush", text)
    if head == "WAIT" and len(words) == 1:
        return Statement("wait", text)
    if head == "CANCEL" and words[1:2] in (["JOBS"], ["JOB"]):
        return Statement("cancel_jobs", text, args={"ids": _job_ids(body)})
    if head in ("BEGIN", "START"):
        return Statement("begin", text)
    if head in ("COMMIT", "END"):
        return Statement("commit", text)
    if head in ("ROLLBACK", "ABORT"):
        return Statement("rollback", text)
    if head == "DISCARD":
        return Statement("discard", text)
    if head in ("DEALLOCATE", "CLOSE", "UNLISTEN", "LISTEN", "CHECKPOINT"):
        return Statement("noop", text, args={"tag": head})
    if head == "SET":
        m = _SET_TZ_RE.match(body)
        if m:
            return Statement(
                "set", text, args={"name": "timezone", "value": _set_value(m["value"])}
            )
        if (
            len(words) > 1
            and words[1] == "TRANSACTION"
            or words[1:3] == ["SESSION", "CHARACTERISTICS"]
        ):
            return Statement("noop", text, args={"tag": "SET"})
        m = _SET_RE.match(body)
        if not m:
            raise SqlSyntaxError('syntax error at or near "SET"')
        return Statement(
            "set", text, args={"name": m["name"].lower(), "value": _set_value(m["value"])}
        )
    if head == "RESET":
        rest = body[5:].strip()
        return Statement("reset", text, args={"name": rest.lower()})
    if head == "SHOW":
        return _parse_show(words, body, text)
    if head in ("DESCRIBE", "DESC") and len(words) >= 2:
        name = body.split(None, 1)[1].strip()
        return Statement("describe", text, args={"name": name})
    if head == "EXPLAIN":
        m = re.match(r"^EXPLAIN\s*(\([^)]*\))?\s*(VERBOSE\s+)?", body, flags=re.I)
        verbose = bool(m and (m.group(2) or re.search(r"verbose", m.group(1) or "", re.I)))
        inner = re.sub(r"^EXPLAIN\s*(\([^)]*\))?\s*", "", body, flags=re.I)
        inner = re.sub(r"^(VERBOSE|ANALYZE)\s+", "", inner, flags=re.I)
        return Statement("explain", text, args={"inner": inner, "verbose": verbose})
    return None


def _set_value(raw: str) -> str | None:
    v = raw.strip()
    if v.upper() == "DEFAULT":
        return None
    parts = [p.strip() for p in _split_commas(v)]
    out = []
    for p in parts:
        if len(p) >= 2 and p[0] == p[-1] and p[0] in "'\"":
            p = p[1:-1].replace("''", "'") if p[0] == "'" else p[1:-1]
        out.append(p)
    return ", ".join(out)


def _split_commas(v: str) -> list[str]:
    out, cur, q = [], [], None
    for ch in v:
        if q:
            cur.append(ch)
            if ch == q:
                q = None
        elif ch in "'\"":
            q = ch
            cur.append(ch)
        elif ch == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _parse_show(words: list[str], body: str, text: str) -> Statement:
    rest = body[4:].strip()
    w1 = words[1] if len(words) > 1 else ""
    if w1 in _SHOW_LIST:
        m = re.match(
            r"^(?:TABLES|MATERIALIZED\s+VIEWS|VIEWS|SOURCES|SINKS)"
            r"(?:\s+(?:FROM|IN)\s+(?P<schema>\w+))?(?:\s+LIKE\s+'(?P<like>[^']*)')?\s*$",
            rest,
            re.I,
        )
        if not m:
            raise SqlSyntaxError(f'syntax error at or near "{rest.split()[-1]}"')
        return Statement(
            "show_objects",
            text,
            args={"kind": _SHOW_LIST[w1], "schema": m["schema"], "like": m["like"]},
        )
    if w1 == "CONNECTIONS":
        return Statement("show_connections", text)
    if w1 == "FUNCTIONS":
        return Statement("show_functions", text)
    if w1 == "CREATE":
        m = re.match(
            r"^CREATE\s+(TABLE|MATERIALIZED\s+VIEW|VIEW|SOURCE|SINK)\s+(.+)$", rest, re.I | re.S
        )
        if not m:
            raise SqlSyntaxError('syntax error at or near "CREATE"')
        return Statement(
            "show_create", text, args={"kind": " ".join(m[1].lower().split()), "name": m[2].strip()}
        )
    if w1 in ("DATABASES", "SCHEMAS", "SECRETS", "PARAMETERS", "ALL", "JOBS"):
        return Statement("show_special", text, args={"what": w1.lower()})
    if w1 in ("COLUMNS",):
        m = re.match(r"^COLUMNS\s+(?:FROM|IN)\s+(.+)$", rest, re.I)
        if not m:
            raise SqlSyntaxError('syntax error at or near "COLUMNS"')
        return Statement("describe", text, args={"name": m[1].strip()})
    if not rest:
        raise SqlSyntaxError("syntax error at end of input")
    name = " ".join(rest.split()).lower()
    if name == "time zone":
        name = "timezone"
    return Statement("show", text, args={"name": name})


def _job_ids(body: str) -> list[int]:
    """The ids of `CANCEL JOBS 1, 2`."""
    m = re.match(r"^CANCEL\s+JOBS?\s+(\d+(?:\s*,\s*\d+)*)\s*;?\s*$", body, re.I | re.S)
    if m is None:
        raise SqlSyntaxError('syntax error at or near "CANCEL"', hint="CANCEL JOBS id [, id ...]")
    return [int(x) for x in m[1].split(",")]
