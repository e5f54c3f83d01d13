"""Which WITH options carry credentials, and how they are shown: `'[REDACTED]'`.

Why: sources, sinks, connections and Iceberg tables take passwords, tokens, keys and
OAuth/JAAS configurations as WITH options. The connectors need the values; nobody else
should see them again. A key names a credential when one of its words (split at `.`,
`_`, `-`) contains `password`, `secret`, `token` or `credential`, or is one of
`CREDENTIAL_WORDS` (`jaas`, `oauthbearer`, `private`, `passphrase`...), or is `key` after
a word such as `access`, `secret`, `api`, `account`, `ssl`, `sasl` (`s3.secret.key`,
`access_key_id`, `properties.ssl.key.pem`), or is in `CREDENTIAL_KEYS` (credentials
under a neutral name, such as `gcs.service.account`). `primary_key`, `key.encode` and
other structural keys do not match.

What this module gives the rest of the engine:
* `is_credential(key)`, `redact_options(options)` (values replaced for display);
* `redact_definition(sql)`: a CREATE statement's text with the values of credential keys
  inside `WITH (...)` and `ENCODE x (...)` replaced by `'[REDACTED]'` (`k = SECRET s`
  stays: it names the secret only). `Catalog.add` stores definitions this way, so the
  statement as kept, shown (SHOW CREATE, rw_catalog, logs) and persisted never holds them;
* `scrub(text, values)`: `text` with each of `values` replaced, for error messages that
  might echo an option (the session scrubs every error with the statement's credentials
  and the secrets' values before a client or the log sees it);
* `redact_validate(sql)`: the string literals of a webhook table's `VALIDATE AS ...`
  expression replaced (header names after `->`/`->>` kept), for viewers other than the
  table's owner and superusers.

Lifecycle: pure functions over strings, no state.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

REDACTED = "[REDACTED]"
_REDACTED_LITERAL = "'[REDACTED]'"

# a word containing one of these makes the key a credential
_CONTAINS = ("password", "passwd", "secret", "token", "credential")
# a word equal to one of these makes the key a credential
CREDENTIAL_WORDS = frozenset(
    {
        "pwd",
        "jaas",
        "oauthbearer",
        "oauth",
        "private",
        "passphrase",
        "apikey",
        "signature",
        "keytab",
        "sas",
        "accesskey",
        "secretkey",
    }
)
# `key` after one of these words is a credential (`s3.secret.key`, `api_key`, `ssl.key.pem`)
_KEY_AFTER = frozenset(
    {
        "access",
        "secret",
        "api",
        "account",
        "private",
        "ssl",
        "sasl",
        "encryption",
        "master",
        "client",
        "session",
        "signing",
        "shared",
        "app",
        "auth",
    }
)
# credentials under names that say nothing about it
CREDENTIAL_KEYS = frozenset(
    {
        "gcs.service.account",
        "connection.string",
        "azblob.connection.string",
        "catalog.header",
        "s3.credentials.access",
        "s3.credentials.secret",
    }
)
_SPLIT = re.compile(r"[._\-\s]+")


@functools.lru_cache(maxsize=4096)  # checked for every option key at every checkpoint
def is_credential(key: str) -> bool:
    """True when the WITH option `key` carries a credential (see the module docstring)."""
    k = key.strip().strip('"').lower()
    if k in CREDENTIAL_KEYS:
        return True
    words = [w for w in _SPLIT.split(k) if w]
    for i, w in enumerate(words):
        if w in CREDENTIAL_WORDS or any(c in w for c in _CONTAINS):
            return True
        if w == "key" and i > 0 and words[i - 1] in _KEY_AFTER:
            return True
    return False


def redact_options(
    options: Mapping[str, str], also: frozenset[str] = frozenset()
) -> dict[str, str]:
    """`options` with every credential value (and the keys in `also`, such as options
    resolved from secrets) replaced by `[REDACTED]`."""
    return {k: (REDACTED if k in also or is_credential(k) else v) for k, v in options.items()}


# -- statement text ----------------------------------------------------------------------------
_STRINGS = frozenset(
    {
        TokenType.STRING,
        TokenType.NATIONAL_STRING,
        TokenType.BYTE_STRING,
        TokenType.RAW_STRING,
        TokenType.HEREDOC_STRING,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.UNICODE_STRING,
    }
)


def _tokens(sql: str) -> list[Token] | None:
    try:
        return list(sqlglot.tokenize(sql, read="risingwave"))
    except (TokenError, ValueError):
        return None


def _splice(sql: str, spans: list[tuple[int, int]]) -> str:
    out, pos = [], 0
    for start, end in sorted(spans):
        out.append(sql[pos:start])
        out.append(_REDACTED_LITERAL)
        pos = end + 1
    out.append(sql[pos:])
    return "".join(out)


def _option_key(toks: list[Token], eq: int) -> str:
    """The dotted key written before the `=` at `toks[eq]` ('' when there is none)."""
    parts: list[str] = []
    i = eq - 1
    while i >= 0:
        t = toks[i]
        if t.token_type in _STRINGS or t.token_type in (TokenType.COMMA, TokenType.L_PAREN):
            break
        if t.token_type is TokenType.DOT:
            i -= 1
            continue
        parts.append(t.text)
        if i == 0 or toks[i - 1].token_type is not TokenType.DOT:
            break
        i -= 1
    return ".".join(reversed(parts))


def redact_definition(sql: str) -> str:
    """`sql` with the values of credential options in its WITH / ENCODE option lists
    replaced by `'[REDACTED]'`; statements without such options come back unchanged."""
    if "=" not in sql:
        return sql
    toks = _tokens(sql)
    if toks is None:  # cannot tokenize: hide every literal rather than risk one
        return re.sub(r"'(?:[^']|'')*'", _REDACTED_LITERAL, sql)
    spans: list[tuple[int, int]] = []
    depth = 0
    option_depth: list[int] = []  # depths of the open option lists
    for i, t in enumerate(toks):
        tt = t.token_type
        if tt is TokenType.L_PAREN:
            prev = toks[i - 1] if i else None
            prev2 = toks[i - 2] if i > 1 else None
            opens_options = prev is not None and (
                prev.token_type is TokenType.WITH
                or (prev2 is not None and prev2.text.upper() == "ENCODE")
            )
            depth += 1
            if opens_options and depth == 1:
                option_depth.append(depth)
            continue
        if tt is TokenType.R_PAREN:
            if option_depth and option_depth[-1] == depth:
                option_depth.pop()
            depth -= 1
            continue
        if tt is not TokenType.EQ or not option_depth or depth != option_depth[-1]:
            continue
        if i + 1 >= len(toks) or not is_credential(_option_key(toks, i)):
            continue
        value = toks[i + 1]
        if value.text.upper() == "SECRET" and value.token_type not in _STRINGS:
            continue  # `k = SECRET s`: a reference, not the value
        if value.token_type in (TokenType.COMMA, TokenType.R_PAREN):
            continue
        spans.append(_span(sql, value))
    return _splice(sql, spans) if spans else sql


def _span(sql: str, t: Token) -> tuple[int, int]:
    """(start, end) of a token in `sql`, inclusive (a string's prefix and quotes included)."""
    return t.start, t.end


def redact_validate(sql: str) -> str:
    """`sql` with the string literals after `VALIDATE` replaced, except header names
    (a literal right after `->` or `->>`)."""
    m = re.search(r"\bVALIDATE\b", sql, re.I)
    if m is None:
        return sql
    toks = _tokens(sql)
    if toks is None:
        return sql[: m.start()] + re.sub(r"'(?:[^']|'')*'", _REDACTED_LITERAL, sql[m.start() :])
    spans = []
    for i, t in enumerate(toks):
        if t.start < m.start() or t.token_type not in _STRINGS:
            continue
        prev = toks[i - 1] if i else None
        if prev is not None and prev.token_type in (TokenType.ARROW, TokenType.DARROW):
            continue
        spans.append(_span(sql, t))
    return _splice(sql, spans) if spans else sql


def scrub(text: str | None, values: list[str]) -> str | None:
    """`text` with every occurrence of one of `values` (4 characters or longer, longest
    first) replaced by `[REDACTED]`."""
    if not text:
        return text
    for v in sorted((v for v in values if len(v) >= 4), key=len, reverse=True):
        if v in text:
            text = text.replace(v, REDACTED)
    return text


def option_credentials(options: Mapping[str, str]) -> list[str]:
    """The values of the credential options in `options`."""
    return [v for k, v in options.items() if isinstance(v, str) and is_credential(k)]
