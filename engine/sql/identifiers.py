"""PostgreSQL's identifier rules, applied once to every parsed statement tree.

PostgreSQL folds unquoted identifiers to lower case, truncates every identifier to
NAMEDATALEN - 1 = 63 bytes (with a NOTICE) and refuses the zero-length quoted name `""`.
sqlglot keeps identifiers as written, so without this pass `SELECT L.x FROM t AS L` would
compare the qualifier `L` with the alias `L` in one place and with `l` in another. Doing it
right after parsing means every later consumer (planner, binder, DDL handlers, the stored
view text regenerated from the tree) sees the folded names and nobody has to remember to
fold.

Also here: the select-list forms RisingWave does not have. sqlglot reads DuckDB's
`* EXCLUDE (...)` as `* EXCEPT (...)` and accepts `* REPLACE (...)`; RisingWave's parser
refuses both, so we do too (a syntax error at the word), from the token stream.

Lifecycle: pure functions called by `engine.sql.parser` for each statement; the notices
ride on `Statement.args["notices"]` and the session sends them with the result.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from engine.errors import SqlSyntaxError

NAME_MAX_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1
_STAR_AFTER = (TokenType.SELECT, TokenType.COMMA, TokenType.DOT, TokenType.DISTINCT, TokenType.ALL)


def fold_ident(raw: str) -> str:
    """A SQL identifier's name as written in a statement: quoted as written (doubled
    quotes undone), unquoted lower-cased. For the hand-written statement parsers."""
    raw = raw.strip()
    if raw.startswith('"'):
        return raw[1:-1].replace('""', '"')
    return raw.lower()


def truncate_name(name: str) -> str:
    """`name` cut to 63 bytes of UTF-8 without splitting a character."""
    raw = name.encode()
    if len(raw) <= NAME_MAX_BYTES:
        return name
    return raw[:NAME_MAX_BYTES].decode(errors="ignore")


def normalize_identifiers(tree: exp.Expression, offset: int = 0) -> list[str]:
    """Fold, truncate and check every identifier of `tree` in place.

    Returns the NOTICE messages of truncated names (one per occurrence, as PostgreSQL
    sends them). `offset` is where the statement starts in the query string, for the
    position of a `""` error.
    """
    notices: list[str] = []
    for node in tree.walk():
        if not isinstance(node, exp.Identifier):
            continue
        name = node.this
        if not isinstance(name, str):
            continue
        quoted = bool(node.args.get("quoted"))
        if quoted and name == "":
            meta = getattr(node, "_meta", None) or {}
            start = meta.get("start")
            raise SqlSyntaxError(
                'zero-length delimited identifier at or near """"',
                position=None if start is None else offset + start + 1,
            )
        folded = name if quoted else name.lower()
        cut = truncate_name(folded)
        if cut != folded:
            notices.append(f'identifier "{folded}" will be truncated to "{cut}"')
        if cut != name:
            node.set("this", cut)
    return notices


def check_star_modifiers(tokens: list[Token], offset: int = 0) -> None:
    """Refuse `* EXCLUDE (...)` and `* REPLACE (...)` (RisingWave has only `* EXCEPT`)."""
    for i in range(1, len(tokens) - 2):
        if tokens[i].token_type is not TokenType.STAR:
            continue
        if tokens[i - 1].token_type not in _STAR_AFTER:
            continue  # a multiplication, not a select-list wildcard
        nxt = tokens[i + 1]
        word = nxt.text.upper()
        if word in ("EXCLUDE", "REPLACE") and tokens[i + 2].token_type is TokenType.L_PAREN:
            raise SqlSyntaxError(
                f'syntax error at or near "{nxt.text}"', position=offset + nxt.start + 1
            )
