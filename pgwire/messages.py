"""PostgreSQL v3 message framing: building backend messages and reading frontend ones.

Backend builders return complete framed `bytes` (type byte, int32 length, body) that the
connection appends to its output buffer. `Reader` wraps a frontend message body and hands
out its fields in order (int16/int32, C strings, length-prefixed byte strings), raising
`ProtocolViolation` (08P01) when a client sends a malformed body.

Stateless: no connection state lives here, so a protocol trace can be rebuilt from these
functions alone in tests.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from engine.errors import ProtocolViolation
from engine.types import Field, TypeKind

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
PROTOCOL_3_0 = 196608

NULL_LEN = b"\xff\xff\xff\xff"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ci")


def frame(kind: bytes, body: bytes = b"") -> bytes:
    return _HEAD.pack(kind, len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode() + b"\x00"


# -- backend messages -------------------------------------------------------------------------
def authentication_ok() -> bytes:
    return frame(b"R", _I32.pack(0))


def parameter_status(name: str, value: str) -> bytes:
    return frame(b"S", cstr(name) + cstr(value))


def backend_key_data(pid: int, key: int) -> bytes:
    return frame(b"K", struct.pack(">ii", pid, key))


def ready_for_query(status: str) -> bytes:
    return frame(b"Z", status.encode())


def negotiate_protocol_version(newest_minor: int, unrecognized: Sequence[str]) -> bytes:
    body = struct.pack(">ii", newest_minor, len(unrecognized))
    return frame(b"v", body + b"".join(cstr(o) for o in unrecognized))


def command_complete(tag: str) -> bytes:
    return frame(b"C", cstr(tag))


def empty_query_response() -> bytes:
    return frame(b"I")


def parse_complete() -> bytes:
    return frame(b"1")


def bind_complete() -> bytes:
    return frame(b"2")


def close_complete() -> bytes:
    return frame(b"3")


def no_data() -> bytes:
    return frame(b"n")


def portal_suspended() -> bytes:
    return frame(b"s")


def parameter_description(oids: Sequence[int]) -> bytes:
    return frame(b"t", _I16.pack(len(oids)) + b"".join(_I32.pack(o) for o in oids))


def wire_oid(kind_oid: int, kind: TypeKind) -> int:
    """OID announced to clients; the UNKNOWN type is described as text so drivers can read
    its (always NULL or text) values."""
    return 25 if kind is TypeKind.UNKNOWN else kind_oid


def row_description(
    columns: Sequence[Field], formats: Sequence[int], oids: Sequence[int] | None = None
) -> bytes:
    """RowDescription: name, table oid and attnum (when the column reads a relation column
    unchanged, else 0), type oid, typlen, typmod -1, format.

    `oids` overrides the announced type OIDs (driver shims answer with catalog types such
    as `oid[]` that have no engine SqlType)."""
    parts = [_I16.pack(len(columns))]
    for i, (col, fmt) in enumerate(zip(columns, formats, strict=True)):
        t = col.type
        oid = oids[i] if oids is not None else wire_oid(t.oid, t.kind)
        parts.append(cstr(col.name))
        table_oid, attnum = getattr(col, "origin", None) or (0, 0)
        parts.append(struct.pack(">ihihih", table_oid, attnum, oid, t.typlen, -1, fmt))
    return frame(b"T", b"".join(parts))


def data_row(values: Iterable[bytes | None]) -> bytes:
    parts: list[bytes] = []
    n = 0
    for v in values:
        n += 1
        if v is None:
            parts.append(NULL_LEN)
        else:
            parts.append(_I32.pack(len(v)))
            parts.append(v)
    body = _I16.pack(n) + b"".join(parts)
    return _HEAD.pack(b"D", len(body) + 4) + body


def error_or_notice(kind: bytes, fields: Sequence[tuple[str, str]]) -> bytes:
    """ErrorResponse (`E`) or NoticeResponse (`N`) from (field code, value) pairs."""
    body = b"".join(code.encode() + cstr(value) for code, value in fields) + b"\x00"
    return frame(kind, body)


# -- frontend messages -------------------------------------------------------------------------
class Reader:
    """Sequential field reader over one frontend message body."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("invalid message format")

    def int16(self) -> int:
        self._need(2)
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def int32(self) -> int:
        self._need(4)
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def uint32(self) -> int:
        return self.int32() & 0xFFFFFFFF

    def byte(self) -> bytes:
        self._need(1)
        b = self.data[self.pos : self.pos + 1]
        self.pos += 1
        return b

    def cstring(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise ProtocolViolation("invalid string in message")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation('invalid byte sequence for encoding "UTF8"') from None

    def bytes_or_null(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        self._need(n)
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def remaining(self) -> int:
        return len(self.data) - self.pos


def parse_startup_params(body: bytes) -> dict[str, str]:
    """Key/value C-string pairs of a StartupMessage (after the protocol version)."""
    r = Reader(body)
    params: dict[str, str] = {}
    while r.remaining() > 0:
        key = r.cstring()
        if key == "":
            break
        params[key] = r.cstring()
    return params
