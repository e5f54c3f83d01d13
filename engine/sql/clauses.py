"""RisingWave's DDL suffix clauses, parsed by us so the rest of the statement can go to sqlglot.

sqlglot's `risingwave` dialect parses column lists, types and queries well but falls back to
an opaque `Command` (or misparses) on the streaming clauses RisingWave adds after them:

    WITH ( k = 'v', a.b.c = 'v', k = true, k = 10, k = secret s, ... )
    FORMAT <f> ENCODE <e> [( k = 'v', ... )]   KEY ENCODE <e>
    INCLUDE <what> [<inner>] [<type>] [AS <name>]   (repeatable)
    APPEND ONLY
    ON CONFLICT { DO NOTHING | OVERWRITE | DO UPDATE IF NOT NULL } [WITH VERSION COLUMN (c)]
    VALIDATE [SECRET s] AS <expression>        (always last)

`parse_ddl_clauses(text)` finds these at parenthesis depth 0 with sqlglot's tokenizer (so
quotes, comments and positions are right), records them in a `DdlClauses`, and returns the
statement with each clause blanked out by spaces (`stripped`): the same length and line
breaks as the original, so error positions sqlglot reports still point into the user's text.

Also here: the two statements sqlglot has no tree for at all, `CREATE SECRET s WITH
(backend = 'meta') AS 'value'` and `DROP SECRET [IF EXISTS] s` (`parse_create_secret`,
`parse_drop_secret`). Lifecycle: pure functions, called once per statement by
`engine.sql.parser`; the results ride on `Statement.args`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from engine.errors import SqlSyntaxError, not_supported

DIALECT = "risingwave"

ON_CONFLICT_ACTIONS = ("DO NOTHING", "OVERWRITE", "DO UPDATE IF NOT NULL")


@dataclass
class IncludeClause:
    """`INCLUDE key AS k`, `INCLUDE header 'h' varchar AS c`: kept for source connectors."""

    what: str  # lower-cased: key, partition, offset, timestamp, header, payload, ...
    inner: str | None = None  # the header name of `INCLUDE header 'h'`
    type_sql: str | None = None
    alias: str | None = None


@dataclass
class DdlClauses:
    """What `parse_ddl_clauses` found. Keys of `options` are lower-cased dotted names."""

    stripped: str
    options: dict[str, str] = field(default_factory=dict)
    # option key -> secret name, for `k = secret s` (such keys are not in `options`)
    secret_refs: dict[str, str] = field(default_factory=dict)
    has_with: bool = False
    format: str | None = None  # upper-cased: PLAIN, UPSERT, DEBEZIUM, ...
    encode: str | None = None  # upper-cased: JSON, AVRO, ...
    format_options: dict[str, str] = field(default_factory=dict)
    format_secret_refs: dict[str, str] = field(default_factory=dict)
    key_encode: str | None = None
    include: list[IncludeClause] = field(default_factory=list)
    append_only: bool = False
    on_conflict: str | None = None  # one of ON_CONFLICT_ACTIONS
    version_column: str | None = None
    validate: str | None = None  # the expression text after VALIDATE ... AS
    validate_secret: str | None = None
    validate_position: int | None = None  # 0-based offset of the expression in the text
    # `CREATE TABLE t (...) FROM src TABLE 'schema.table'` (a table of a shared CDC source)
    from_source: str | None = None
    from_table: str | None = None

    @property
    def any(self) -> bool:
        return bool(
            self.has_with
            or self.format
            or self.key_encode
            or self.include
            or self.append_only
            or self.on_conflict
            or self.validate is not None
        )


@dataclass
class SecretDef:
    """`CREATE SECRET [IF NOT EXISTS] name WITH (backend = 'meta') AS 'value'`."""

    name: str
    value: str
    options: dict[str, str]
    if_not_exists: bool = False


def tokenize(text: str) -> list[Token]:
    try:
        return list(sqlglot.tokenize(text, read=DIALECT))
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}") from e


def _up(t: Token) -> str:
    """Upper-cased keyword text of an unquoted word token ('' for strings, quoted names)."""
    if t.token_type in (
        TokenType.STRING,
        TokenType.IDENTIFIER,
        TokenType.BYTE_STRING,
        TokenType.NATIONAL_STRING,
        TokenType.RAW_STRING,
    ):
        return ""
    return t.text.upper()


def _syntax(t: Token | None, text: str) -> SqlSyntaxError:
    if t is None:
        return SqlSyntaxError("syntax error at end of input", position=len(text) + 1)
    return SqlSyntaxError(
        f'syntax error at or near "{text[t.start : t.end + 1]}"', position=t.start + 1
    )


def _peek_is(cur: _Cursor, *types: TokenType, end: bool = False) -> bool:
    """Whether the next token is one of `types` (`end`: what the end of input counts as)."""
    nxt = cur.peek()
    return end if nxt is None else nxt.token_type in types


def _name(t: Token) -> str:
    """An identifier as the catalog stores it: quoted keeps case, unquoted is lower-cased."""
    return t.text if t.token_type is TokenType.IDENTIFIER else t.text.lower()


class _Cursor:
    def __init__(self, text: str, toks: list[Token], i: int = 0) -> None:
        self.text, self.toks, self.i = text, toks, i

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise _syntax(None, self.text)
        self.i += 1
        return t

    def word(self, k: int = 0) -> str:
        t = self.peek(k)
        return _up(t) if t is not None else ""

    def expect(self, *words: str) -> None:
        for w in words:
            t = self.next()
            if _up(t) != w:
                raise _syntax(t, self.text)

    def expect_type(self, tt: TokenType) -> Token:
        t = self.next()
        if t.token_type is not tt:
            raise _syntax(t, self.text)
        return t

    def ident(self) -> Token:
        t = self.next()
        if t.token_type in (
            TokenType.STRING,
            TokenType.NUMBER,
            TokenType.L_PAREN,
            TokenType.R_PAREN,
            TokenType.COMMA,
            TokenType.EQ,
        ):
            raise _syntax(t, self.text)
        return t


# -- WITH ( ... ) option lists -----------------------------------------------------------------
def _option_list(cur: _Cursor) -> tuple[dict[str, str], dict[str, str]]:
    """Parse `( k = v, ... )` starting at the opening paren."""
    cur.expect_type(TokenType.L_PAREN)
    options: dict[str, str] = {}
    secrets: dict[str, str] = {}
    if cur.peek() is not None and cur.peek().token_type is TokenType.R_PAREN:  # type: ignore[union-attr]
        cur.next()
        return options, secrets
    while True:
        key_tok = cur.ident()
        parts = [_option_key_part(key_tok)]
        while cur.peek() is not None and cur.peek().token_type is TokenType.DOT:  # type: ignore[union-attr]
            cur.next()
            parts.append(_option_key_part(cur.ident()))
        key = ".".join(parts)
        eq = cur.next()
        if eq.token_type is not TokenType.EQ:
            raise _syntax(eq, cur.text)
        if key in options or key in secrets:
            raise SqlSyntaxError(
                f'option "{key}" specified more than once', position=key_tok.start + 1
            )
        v = cur.next()
        tt = v.token_type
        if (
            tt
            in (
                TokenType.STRING,
                TokenType.BYTE_STRING,
                TokenType.NATIONAL_STRING,
                TokenType.RAW_STRING,
            )
            or tt is TokenType.NUMBER
        ):
            options[key] = v.text
        elif tt is TokenType.DASH and _peek_is(cur, TokenType.NUMBER):
            options[key] = "-" + cur.next().text
        elif tt in (TokenType.TRUE, TokenType.FALSE):
            options[key] = v.text.lower()
        elif _up(v) == "SECRET" and not _peek_is(cur, TokenType.COMMA, TokenType.R_PAREN, end=True):
            secrets[key] = _name(cur.ident())
        elif tt in (TokenType.COMMA, TokenType.R_PAREN, TokenType.L_PAREN, TokenType.EQ):
            raise _syntax(v, cur.text)
        else:  # a bare word: `type = upsert`, `connection = my_conn`, `s.x = schema.name`
            val = _name(v)
            while cur.peek() is not None and cur.peek().token_type is TokenType.DOT:  # type: ignore[union-attr]
                cur.next()
                val += "." + _name(cur.ident())
            options[key] = val
        sep = cur.next()
        if sep.token_type is TokenType.R_PAREN:
            return options, secrets
        if sep.token_type is not TokenType.COMMA:
            raise _syntax(sep, cur.text)


def _option_key_part(t: Token) -> str:
    return t.text if t.token_type is TokenType.IDENTIFIER else t.text.lower()


# -- the clause scanner ------------------------------------------------------------------------
def parse_ddl_clauses(text: str) -> DdlClauses:
    """Find and remove RisingWave's suffix clauses from a CREATE TABLE/SOURCE/SINK text.

    >>> c = parse_ddl_clauses("CREATE TABLE t (a INT) WITH (connector = 'datagen') APPEND ONLY")
    >>> c.options, c.append_only, c.stripped.split()
    ({'connector': 'datagen'}, True, ['CREATE', 'TABLE', 't', '(a', 'INT)'])
    """
    toks = tokenize(text)
    out = DdlClauses(stripped=text)
    blank: list[tuple[int, int]] = []  # [start, end) character spans to blank out
    depth = 0
    i = 0
    n = len(toks)
    while i < n:
        t = toks[i]
        tt = t.token_type
        if tt is TokenType.L_PAREN:
            depth += 1
            i += 1
            continue
        if tt is TokenType.R_PAREN:
            depth -= 1
            i += 1
            continue
        if depth != 0:
            i += 1
            continue
        w = _up(t)
        nxt = toks[i + 1] if i + 1 < n else None
        cur = _Cursor(text, toks, i)
        if tt is TokenType.WITH and nxt is not None and nxt.token_type is TokenType.L_PAREN:
            if out.has_with:
                raise SqlSyntaxError("WITH options specified more than once", position=t.start + 1)
            cur.next()
            out.options, out.secret_refs = _option_list(cur)
            out.has_with = True
        elif (
            w == "FORMAT"
            and nxt is not None
            and nxt.token_type is not TokenType.L_PAREN
            and i + 2 < n
            and _up(toks[i + 2]) == "ENCODE"
        ):
            if out.format is not None:
                raise SqlSyntaxError("FORMAT specified more than once", position=t.start + 1)
            cur.next()
            out.format = cur.next().text.upper()
            cur.expect("ENCODE")
            out.encode = cur.next().text.upper()
            p = cur.peek()
            if p is not None and p.token_type is TokenType.L_PAREN:
                out.format_options, out.format_secret_refs = _option_list(cur)
        elif w == "KEY" and nxt is not None and _up(nxt) == "ENCODE":
            cur.next()
            cur.next()
            out.key_encode = cur.next().text.upper()
        elif w == "INCLUDE" and nxt is not None and nxt.token_type is not TokenType.L_PAREN:
            cur.next()
            out.include.append(_include(cur))
        elif w == "APPEND" and nxt is not None and _up(nxt) == "ONLY":
            cur.next()
            cur.next()
            out.append_only = True
        elif tt is TokenType.ON and nxt is not None and _up(nxt) == "CONFLICT":
            cur.next()
            cur.next()
            _on_conflict(cur, out)
        elif (
            w == "FROM"
            and nxt is not None
            and i + 3 < n
            and _up(toks[i + 2]) == "TABLE"
            and toks[i + 3].token_type is TokenType.STRING
        ):
            cur.next()
            src = cur.ident()
            out.from_source = (
                src.text if src.token_type is TokenType.IDENTIFIER else src.text.lower()
            )
            cur.next()
            out.from_table = cur.next().text
        elif (
            w == "VALIDATE"
            and nxt is not None
            and (_up(nxt) in ("SECRET", "AS") or nxt.token_type is TokenType.ALIAS)
        ):
            cur.next()
            if cur.word() == "SECRET":
                cur.next()
                out.validate_secret = _name(cur.ident())
            a = cur.next()
            if a.token_type is not TokenType.ALIAS and _up(a) != "AS":
                raise _syntax(a, text)
            first = cur.peek()
            if first is None:
                raise _syntax(None, text)
            last = toks[-1]
            out.validate = text[first.start : last.end + 1]
            out.validate_position = first.start
            cur.i = n
        else:
            i += 1
            continue
        end = toks[cur.i - 1].end + 1
        blank.append((t.start, end))
        i = cur.i
    out.stripped = _blank(text, blank)
    return out


def _include(cur: _Cursor) -> IncludeClause:
    what = cur.ident().text.lower()
    inc = IncludeClause(what)
    p = cur.peek()
    if p is not None and p.token_type is TokenType.STRING:
        inc.inner = cur.next().text
    # an optional type (one word, possibly with [] or a parenthesised modifier)
    p = cur.peek()
    if (
        p is not None
        and p.token_type is not TokenType.ALIAS
        and _up(p) not in _CLAUSE_WORDS
        and p.token_type not in (TokenType.WITH, TokenType.ON, TokenType.L_PAREN)
    ):
        start = cur.next()
        end = start
        while cur.peek() is not None and cur.peek().token_type in (  # type: ignore[union-attr]
            TokenType.L_BRACKET,
            TokenType.R_BRACKET,
        ):
            end = cur.next()
        inc.type_sql = cur.text[start.start : end.end + 1]
    p = cur.peek()
    if p is not None and p.token_type is TokenType.ALIAS:
        cur.next()
        inc.alias = _name(cur.ident())
    return inc


_CLAUSE_WORDS = {"INCLUDE", "FORMAT", "KEY", "APPEND", "VALIDATE", "ENGINE", "AS"}


def _on_conflict(cur: _Cursor, out: DdlClauses) -> None:
    if cur.word() == "OVERWRITE":
        cur.next()
        out.on_conflict = "OVERWRITE"
    elif cur.word() == "DO" and cur.word(1) == "NOTHING":
        cur.next()
        cur.next()
        out.on_conflict = "DO NOTHING"
    elif cur.word() == "DO" and cur.word(1) == "UPDATE":
        cur.next()
        cur.next()
        cur.expect("IF", "NOT", "NULL")
        out.on_conflict = "DO UPDATE IF NOT NULL"
    else:
        raise _syntax(cur.peek(), cur.text)
    if cur.word() == "WITH" and cur.word(1) == "VERSION":
        cur.next()
        cur.next()
        cur.expect("COLUMN")
        cur.expect_type(TokenType.L_PAREN)
        out.version_column = _name(cur.ident())
        cur.expect_type(TokenType.R_PAREN)


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    chars = list(text)
    for s, e in spans:
        for k in range(s, min(e, len(chars))):
            if chars[k] not in "\r\n":
                chars[k] = " "
    return "".join(chars)


# -- CREATE SECRET / DROP SECRET ---------------------------------------------------------------
def parse_create_secret(text: str) -> SecretDef:
    """`CREATE SECRET [IF NOT EXISTS] s WITH (backend = 'meta') AS 'value'`.

    The value never appears in an error raised here (errors point at positions only).
    """
    try:
        return _create_secret(text)
    except SqlSyntaxError as e:  # the message could quote the value: keep the position only
        raise SqlSyntaxError("syntax error in CREATE SECRET", position=e.position) from None


def _create_secret(text: str) -> SecretDef:
    cur = _Cursor(text, tokenize(text))
    cur.expect("CREATE", "SECRET")
    exists = False
    if cur.word() == "IF":
        cur.expect("IF", "NOT", "EXISTS")
        exists = True
    name = _name(cur.ident())
    if cur.peek() is not None and cur.peek().token_type is TokenType.DOT:  # type: ignore[union-attr]
        cur.next()
        name = _name(cur.ident())  # schema-qualified: one schema (public) for now
    options: dict[str, str] = {}
    p = cur.peek()
    if p is not None and p.token_type is TokenType.WITH:
        cur.next()
        options, refs = _option_list(cur)
        if refs:
            raise not_supported("secret references inside CREATE SECRET options")
    a = cur.next()
    if a.token_type is not TokenType.ALIAS:
        raise _syntax(a, text)
    v = cur.next()
    if v.token_type not in (
        TokenType.STRING,
        TokenType.NATIONAL_STRING,
        TokenType.RAW_STRING,
        TokenType.BYTE_STRING,
    ):
        raise SqlSyntaxError(
            "syntax error: the secret value must be a string literal", position=v.start + 1
        )
    if cur.peek() is not None:
        raise _syntax(cur.peek(), text)
    backend = options.get("backend", "meta").lower()
    if backend != "meta":
        raise not_supported(
            f"secret backend '{backend}'", hint="Only backend = 'meta' is supported."
        )
    for k in options:
        if k != "backend":
            raise not_supported(
                f'option "{k}" of CREATE SECRET', hint="Only backend = 'meta' is supported."
            )
    return SecretDef(name, v.text, options, exists)


def parse_drop_secret(text: str) -> tuple[str, bool]:
    """`DROP SECRET [IF EXISTS] s` -> (name, if_exists)."""
    cur = _Cursor(text, tokenize(text))
    cur.expect("DROP", "SECRET")
    exists = False
    if cur.word() == "IF":
        cur.expect("IF", "EXISTS")
        exists = True
    name = _name(cur.ident())
    if cur.peek() is not None and cur.peek().token_type is TokenType.DOT:  # type: ignore[union-attr]
        cur.next()
        name = _name(cur.ident())
    if cur.peek() is not None:
        raise _syntax(cur.peek(), text)
    return name, exists


def create_object_kind(text: str) -> str | None:
    """The object word after CREATE [OR REPLACE] [TEMPORARY|TEMP]: TABLE, SOURCE, SINK, SECRET,
    CONNECTION, MATERIALIZED, VIEW, ... (None if `text` is not a CREATE statement)."""
    try:
        toks = tokenize(text)
    except SqlSyntaxError:
        return None
    words = [_up(t) for t in toks[:6]]
    if not words or words[0] != "CREATE":
        return None
    k = 1
    if words[k : k + 2] == ["OR", "REPLACE"]:
        k += 2
    if k < len(words) and words[k] in ("TEMPORARY", "TEMP"):
        k += 1
    return words[k] if k < len(words) else None
