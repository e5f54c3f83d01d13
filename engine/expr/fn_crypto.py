"""Binary and signature functions: hmac, secure_compare, encode/decode, sha2, md5(bytea), bytea ||.

They exist for webhook VALIDATE expressions (GitHub `x-hub-signature-256: sha256=<hex
hmac>`, Segment `x-signature` hmac-sha1, HubSpot sha256 of secret || body), and behave as
in RisingWave/PostgreSQL when used in any query:

* `secure_compare(a, b)` -> boolean, compares in constant time (`hmac.compare_digest`);
* `hmac(key varchar|bytea, message bytea|varchar, 'sha1'|'sha256'|'sha512'...)` -> bytea;
* `encode(bytea, 'hex'|'base64'|'escape')` -> varchar (base64 without line breaks, as
  RisingWave), `decode(varchar, 'hex'|'base64'|'escape')` -> bytea;
* `sha224/sha256/sha384/sha512(bytea)` -> bytea, `md5(bytea)` -> varchar (hex);
* `convert_from(bytea, 'utf8')` -> varchar, `convert_to(varchar, 'utf8')` -> bytea;
* `bytea || bytea` (an untyped literal operand counts as bytea) -> bytea.

Kernels work one row at a time in Python: hashing has no Arrow kernel, and these run on
one row per HTTP request (a true row boundary), not in the per-row hot path of a view.

Lifecycle: the resolvers register under their function names when this module is imported.
sqlglot gives `encode`, `decode`, `sha256` and `md5` their own node types and `||` is bound
by the binder itself, so the general `ExprBinder` routes those nodes to `bind_node` first
(`crypto_hook` wraps it for callers with their own hook).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac as _hmac
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from sqlglot import exp

from engine.errors import InvalidParameterValue
from engine.expr.coerce import implicit_cast, is_untyped
from engine.expr.core import Expr, Func, per_row
from engine.expr.registry import FUNCTIONS, coerce_to, no_function, register
from engine.types import BOOLEAN, BYTEA, VARCHAR, TypeKind

K = TypeKind

_DIGESTS = {
    "md5": hashlib.md5,
    "sha1": hashlib.sha1,
    "sha224": hashlib.sha224,
    "sha256": hashlib.sha256,
    "sha384": hashlib.sha384,
    "sha512": hashlib.sha512,
}


def _bytes_or_text(e: Expr, name: str, args: list[Expr]) -> Expr:
    """Keep a bytea argument; anything else goes to varchar (encoded as UTF-8 when used)."""
    if e.type.kind is K.BYTEA and not is_untyped(e):
        return e
    c = implicit_cast(e, VARCHAR)
    if c is None:
        raise no_function(name, args)
    return c


def _as_bytes(v: bytes | str) -> bytes:
    return v if isinstance(v, bytes) else v.encode()


# -- secure_compare ------------------------------------------------------------------------------
def _secure_compare(a: bytes | str, b: bytes | str) -> bool:
    return _hmac.compare_digest(_as_bytes(a), _as_bytes(b))


@register("secure_compare")
def _secure_compare_fn(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("secure_compare", args)
    a = [_bytes_or_text(x, "secure_compare", args) for x in args]
    return Func("secure_compare", tuple(a), BOOLEAN, per_row(_secure_compare, pa.bool_()))


# -- hmac / digests ------------------------------------------------------------------------------
def _digest(algo: str) -> Callable[..., Any]:
    d = _DIGESTS.get(algo.lower())
    if d is None:
        raise InvalidParameterValue(
            f'unsupported hash algorithm "{algo}"', hint="Supported: " + ", ".join(_DIGESTS) + "."
        )
    return d


def _hmac_row(key: bytes | str, msg: bytes | str, algo: str) -> bytes:
    return _hmac.new(_as_bytes(key), _as_bytes(msg), _digest(algo)).digest()


@register("hmac")
def _hmac_fn(args: list[Expr]) -> Expr:
    if len(args) != 3:
        raise no_function("hmac", args)
    key = _bytes_or_text(args[0], "hmac", args)
    msg = (
        args[1]
        if args[1].type.kind is K.BYTEA and not is_untyped(args[1])
        else _bytes_or_text(args[1], "hmac", args)
    )
    algo = coerce_to("hmac", [args[2]], [VARCHAR])[0]
    return Func("hmac", (key, msg, algo), BYTEA, per_row(_hmac_row, pa.binary()))


def _sha(name: str) -> Callable[[list[Expr]], Expr]:
    d = _DIGESTS[name]

    def resolve(args: list[Expr]) -> Expr:
        (a,) = coerce_to(name, args, [BYTEA])
        return Func(name, (a,), BYTEA, per_row(lambda b: d(b).digest(), pa.binary()))

    return resolve


for _n in ("sha224", "sha256", "sha384", "sha512"):
    register(_n)(_sha(_n))


def md5_bytea(args: list[Expr]) -> Expr:
    """md5 over bytea -> hex text (md5 over text stays with the string functions)."""
    (a,) = args
    return Func("md5", (a,), VARCHAR, per_row(lambda b: hashlib.md5(b).hexdigest(), pa.string()))


# -- encode / decode / convert -------------------------------------------------------------------
def _encode_row(b: bytes, fmt: str) -> str:
    f = fmt.lower()
    if f == "hex":
        return b.hex()
    if f == "base64":
        return base64.b64encode(b).decode()
    if f == "escape":
        return "".join(
            chr(c) if 32 <= c < 127 and c != 92 else ("\\\\" if c == 92 else f"\\{c:03o}")
            for c in b
        )
    raise InvalidParameterValue(f'unrecognized encoding: "{fmt}"')


def _decode_row(s: str, fmt: str) -> bytes:
    f = fmt.lower()
    try:
        if f == "hex":
            return bytes.fromhex(s)
        if f == "base64":
            return base64.b64decode("".join(s.split()), validate=True)
        if f == "escape":
            return s.encode("latin-1", "backslashreplace")
    except (ValueError, binascii.Error) as e:
        raise InvalidParameterValue(f'invalid {f} data: "{s[:40]}"') from e
    raise InvalidParameterValue(f'unrecognized encoding: "{fmt}"')


@register("encode")
def _encode_fn(args: list[Expr]) -> Expr:
    a = coerce_to("encode", args, [BYTEA, VARCHAR])
    return Func("encode", tuple(a), VARCHAR, per_row(_encode_row, pa.string()))


@register("decode")
def _decode_fn(args: list[Expr]) -> Expr:
    a = coerce_to("decode", args, [VARCHAR, VARCHAR])
    return Func("decode", tuple(a), BYTEA, per_row(_decode_row, pa.binary()))


def _check_utf8(enc: str) -> None:
    if enc.lower().replace("-", "").replace("_", "") not in ("utf8", "unicode"):
        raise InvalidParameterValue(f'invalid encoding name "{enc}"')


def _convert_from_row(b: bytes, enc: str) -> str:
    _check_utf8(enc)
    try:
        return b.decode()
    except UnicodeDecodeError as e:
        raise InvalidParameterValue('invalid byte sequence for encoding "UTF8"') from e


def _convert_to_row(s: str, enc: str) -> bytes:
    _check_utf8(enc)
    return s.encode()


@register("convert_from")
def _convert_from_fn(args: list[Expr]) -> Expr:
    a = coerce_to("convert_from", args, [BYTEA, VARCHAR])
    return Func("convert_from", tuple(a), VARCHAR, per_row(_convert_from_row, pa.string()))


@register("convert_to")
def _convert_to_fn(args: list[Expr]) -> Expr:
    a = coerce_to("convert_to", args, [VARCHAR, VARCHAR])
    return Func("convert_to", tuple(a), BYTEA, per_row(_convert_to_row, pa.binary()))


# -- bytea || bytea ------------------------------------------------------------------------------
def bytea_concat(left: Expr, right: Expr) -> Expr | None:
    """`a || b` when one side is bytea and the other bytea or an untyped literal; else None."""
    lb = left.type.kind is K.BYTEA and not is_untyped(left)
    rb = right.type.kind is K.BYTEA and not is_untyped(right)
    if not (lb or rb):
        return None
    if not ((lb or is_untyped(left)) and (rb or is_untyped(right))):
        return None
    lc, rc = implicit_cast(left, BYTEA), implicit_cast(right, BYTEA)
    assert lc is not None and rc is not None
    return Func("bytea_concat", (lc, rc), BYTEA, per_row(lambda a, b: a + b, pa.binary()), op="||")


# -- binder routing ------------------------------------------------------------------------------
#: sqlglot node types that `bind_node` handles (the general binder routes them here first).
CRYPTO_NODES: tuple[type, ...] = (
    exp.Encode,
    exp.Decode,
    exp.SHA2Digest,
    exp.SHA2,
    exp.MD5,
    exp.DPipe,
)


def bind_node(binder: Any, node: exp.Expression) -> Expr | None:
    """Bind sqlglot's Encode/Decode/SHA2Digest/MD5(bytea)/`||` (bytea) nodes; None for others."""
    t = type(node)
    if t is exp.Encode:
        return _encode_fn([binder.bind(node.this), binder.bind(node.args["charset"])])
    if t is exp.Decode:
        return _decode_fn([binder.bind(node.this), binder.bind(node.args["charset"])])
    if t is exp.SHA2Digest or t is exp.SHA2:
        length = node.args.get("length")
        bits = int(length.this) if isinstance(length, exp.Literal) else 256
        name = f"sha{bits}"
        if name not in ("sha224", "sha256", "sha384", "sha512"):
            raise no_function(name, [binder.bind(node.this)])
        return FUNCTIONS[name]([binder.bind(node.this)])
    if t is exp.MD5:
        a = binder.bind(node.this)
        if a.type.kind is K.BYTEA and not is_untyped(a):
            return md5_bytea([a])
        return FUNCTIONS["md5"]([a])
    if t is exp.DPipe:
        left, right = binder.bind(node.this), binder.bind(node.expression)
        out = bytea_concat(left, right)
        if out is not None:
            return out
        from engine.expr.fn_string import bind_concat_op

        return bind_concat_op(left, right)
    return None


def crypto_hook(
    binder: Any, inner: Callable[[exp.Expression], Expr | None] | None = None
) -> Callable[[exp.Expression], Expr | None]:
    """An ExprBinder hook: `inner` first, then `bind_node`. The general binder already routes
    these nodes itself; the hook stays for callers that build a binder with their own hook.
    """

    def hook(node: exp.Expression) -> Expr | None:
        if inner is not None:
            r = inner(node)
            if r is not None:
                return r
        return bind_node(binder, node)

    return hook
