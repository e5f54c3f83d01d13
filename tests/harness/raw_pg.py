"""`RawPg`: a byte-level PostgreSQL protocol client for end-to-end tests.

Why: drivers never send what an attacker sends (a password message declaring a gigabyte,
an oversized startup packet, a flood of logins), and libpq reports no SQLSTATE for a
refused connection. `RawPg` writes exactly the bytes a test asks for and returns every
backend message, with `error_fields` to read an ErrorResponse's SQLSTATE and message.

Lifecycle: one socket per object, opened in `__init__`, closed by `close()` (or the
context manager); blocking with a timeout so a server that never answers fails the test.
"""

from __future__ import annotations

import socket
import struct
from typing import Self

PROTOCOL_3_0 = 196608
CANCEL_REQUEST = 80877102


def cstr(s: str) -> bytes:
    return s.encode() + b"\x00"


def error_fields(body: bytes) -> dict[str, str]:
    """An ErrorResponse/NoticeResponse body as {field code: value} (`C` is the SQLSTATE,
    `M` the message, `S` the severity)."""
    out: dict[str, str] = {}
    for part in body.split(b"\x00"):
        if part:
            out[chr(part[0])] = part[1:].decode()
    return out


class RawPg:
    """A blocking protocol client that sends raw frames and reads backend messages."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_startup(self, **params: str) -> None:
        params = {"user": "root", "database": "dev", **params}
        payload = b"".join(cstr(k) + cstr(v) for k, v in params.items()) + b"\x00"
        body = struct.pack(">i", PROTOCOL_3_0) + payload
        self.sock.sendall(struct.pack(">i", len(body) + 4) + body)

    def send(self, kind: bytes, body: bytes = b"") -> None:
        self.sock.sendall(kind + struct.pack(">i", len(body) + 4) + body)

    def send_header(self, kind: bytes, declared_length: int) -> None:
        """Only a message's type and length: the body the length promises never comes."""
        self.sock.sendall(kind + struct.pack(">i", declared_length))

    def read(self) -> tuple[bytes, bytes]:
        self._fill(5)
        kind = self.buf[:1]
        (length,) = struct.unpack(">i", self.buf[1:5])
        self._fill(1 + length)
        body = self.buf[5 : 1 + length]
        self.buf = self.buf[1 + length :]
        return kind, body

    def until(self, *kinds: bytes) -> list[tuple[bytes, bytes]]:
        """Messages up to and including the first of one of `kinds`."""
        out = []
        while True:
            m = self.read()
            out.append(m)
            if m[0] in kinds:
                return out

    def error(self) -> dict[str, str]:
        """Read until an ErrorResponse and return its fields."""
        return error_fields(self.until(b"E")[-1][1])

    def closed_by_server(self) -> bool:
        """True once the server closed the socket (messages before that are discarded)."""
        try:
            while True:
                self.read()
        except (EOFError, ConnectionResetError):
            return True

    def _fill(self, n: int) -> None:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
