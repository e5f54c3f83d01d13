"""Password authentication during startup: MD5 and SCRAM-SHA-256 (server side).

Which method a connection uses follows the user's stored verifier, as in PostgreSQL with
`scram-sha-256`/`md5` in pg_hba.conf: no password means trust (the playground default),
`md5...` means the MD5 challenge, `SCRAM-SHA-256$...` means a SASL exchange
(RFC 5802 / 7677; no channel binding, so only `SCRAM-SHA-256` is offered, also over TLS).
An unknown user fails before any challenge with 28000 `role "x" does not exist`; a wrong
password fails with 28P01 `password authentication failed for user "x"`.

Lifecycle: `authenticate(conn, user)` is awaited once by `Connection._open_session` after
the StartupMessage and before the engine session opens; it reads the client's password
messages (`p`) itself and returns when the client proved the password (the caller then
sends AuthenticationOk), or raises.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from typing import TYPE_CHECKING

from engine.errors import InvalidPassword, ProtocolViolation
from pgwire import messages as msg

if TYPE_CHECKING:
    from pgwire.connection import Connection

SCRAM_PREFIX = "SCRAM-SHA-256$"
MECHANISM = "SCRAM-SHA-256"


def _failed(user: str) -> InvalidPassword:
    return InvalidPassword(f'password authentication failed for user "{user}"')


async def authenticate(conn: Connection, user: str) -> None:
    """Run the password exchange the user's verifier calls for (none for trust)."""
    verifier = await conn.call(conn.server.db.password_verifier, user)
    if verifier is None:
        return
    if verifier.startswith(SCRAM_PREFIX):
        await _scram(conn, user, verifier)
    else:
        await _md5(conn, user, verifier)


async def _password_message(conn: Connection) -> bytes:
    await conn.flush()
    kind, body = await conn.read_message()
    if kind != b"p":
        raise ProtocolViolation(f"expected password response, got message type {kind[0]}")
    return body


# -- MD5 -------------------------------------------------------------------------------------
async def _md5(conn: Connection, user: str, verifier: str) -> None:
    salt = secrets.token_bytes(4)
    conn.send(msg.frame(b"R", struct.pack(">i", 5) + salt))
    body = await _password_message(conn)
    answer = msg.Reader(body).cstring()
    expected = "md5" + hashlib.md5(verifier[3:].encode() + salt).hexdigest()
    if not hmac.compare_digest(answer.encode(), expected.encode()):
        raise _failed(user)


# -- SCRAM-SHA-256 -----------------------------------------------------------------------------
def _attrs(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) >= 2 and part[1] == "=":
            out.setdefault(part[0], part[2:])
    return out


async def _scram(conn: Connection, user: str, verifier: str) -> None:
    iterations, salt, stored_key, server_key = _parse_verifier(verifier)
    conn.send(msg.frame(b"R", struct.pack(">i", 10) + msg.cstr(MECHANISM) + b"\x00"))

    r = msg.Reader(await _password_message(conn))
    mechanism = r.cstring()
    if mechanism != MECHANISM:
        raise ProtocolViolation("client selected an invalid SASL authentication mechanism")
    n = r.int32()
    client_first = r.data[r.pos : r.pos + n].decode() if n >= 0 else ""
    # gs2 header: "n,," (no binding) or "y,," (client could bind; we offered none)
    if not client_first.startswith(("n,", "y,")):
        raise ProtocolViolation("malformed SCRAM message (channel binding not supported)")
    header_end = client_first.index(",", 2) + 1
    gs2_header = client_first[:header_end]
    client_first_bare = client_first[header_end:]
    client_nonce = _attrs(client_first_bare).get("r")
    if not client_nonce:
        raise ProtocolViolation("malformed SCRAM message (missing nonce)")

    nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
    server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
    conn.send(msg.frame(b"R", struct.pack(">i", 11) + server_first.encode()))

    client_final = (await _password_message(conn)).decode()
    attrs = _attrs(client_final)
    if attrs.get("r") != nonce:
        raise ProtocolViolation("malformed SCRAM message (nonce mismatch)")
    if attrs.get("c") != base64.b64encode(gs2_header.encode()).decode():
        raise ProtocolViolation("malformed SCRAM message (unexpected channel-binding data)")
    proof_at = client_final.rfind(",p=")
    if proof_at < 0:
        raise ProtocolViolation("malformed SCRAM message (missing proof)")
    without_proof = client_final[:proof_at]
    proof = base64.b64decode(client_final[proof_at + 3 :])
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_signature = hmac.digest(stored_key, auth_message, "sha256")
    if len(proof) != len(client_signature):
        raise _failed(user)
    client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
    if not hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key):
        raise _failed(user)
    server_signature = hmac.digest(server_key, auth_message, "sha256")
    final = "v=" + base64.b64encode(server_signature).decode()
    conn.send(msg.frame(b"R", struct.pack(">i", 12) + final.encode()))


def _parse_verifier(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    head, keys = verifier[len(SCRAM_PREFIX) :].split("$", 1)
    iterations, salt = head.split(":", 1)
    stored, server = keys.split(":", 1)
    d = base64.b64decode
    return int(iterations), d(salt), d(stored), d(server)
