"""Password authentication during startup: MD5 and SCRAM-SHA-256 (server side).

Which method a connection uses follows the user's stored verifier, as in PostgreSQL with
`scram-sha-256`/`md5` in pg_hba.conf: `md5...` means the MD5 challenge,
`SCRAM-SHA-256$...` means a SASL exchange (RFC 5802 / 7677); over TLS
`SCRAM-SHA-256-PLUS` with tls-server-end-point channel binding is offered too (libpq uses
it by default there). A user without a password is trusted when the server runs with
`auth = trust` (the playground default); with `auth = password` such a user, and an
unknown one, go through a SCRAM exchange against a made-up verifier that no password
matches (PostgreSQL's mock authentication), so a client learns nothing about which users
exist. With `trust`, an unknown user fails before any challenge with 28000 `role "x" does
not exist`; a wrong password fails with 28P01 `password authentication failed for user
"x"`.

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

from engine.errors import InvalidAuthorization, InvalidPassword, ProtocolViolation
from pgwire import messages as msg

if TYPE_CHECKING:
    from pgwire.connection import Connection

SCRAM_PREFIX = "SCRAM-SHA-256$"
MECHANISM = "SCRAM-SHA-256"
MECHANISM_PLUS = "SCRAM-SHA-256-PLUS"


def _failed(user: str) -> InvalidPassword:
    return InvalidPassword(f'password authentication failed for user "{user}"')


async def authenticate(conn: Connection, user: str) -> None:
    """Run the password exchange the user's verifier calls for (none for trust)."""
    require_password = conn.server.limits.auth == "password"
    try:
        verifier = await conn.call(conn.server.db.password_verifier, user)
    except InvalidAuthorization:
        if not require_password:
            raise
        verifier = None
    if verifier is None:
        if not require_password:
            return
        await _scram(conn, user, _mock_verifier(conn.server.mock_auth_secret, user))
        raise _failed(user)  # not reached: no proof matches a mock verifier
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


def channel_binding_data(cert_der: bytes) -> bytes:
    """tls-server-end-point (RFC 5929): the server certificate hashed with its signature's
    hash, SHA-256 for MD5/SHA-1/SHA-256 signatures. The signature algorithm is found by
    its OID in the DER (RSA and ECDSA with SHA-384/512), SHA-256 otherwise."""
    if _OID_SHA512 & _oids(cert_der):
        return hashlib.sha512(cert_der).digest()
    if _OID_SHA384 & _oids(cert_der):
        return hashlib.sha384(cert_der).digest()
    return hashlib.sha256(cert_der).digest()


_OID_SHA384 = {bytes.fromhex("2a864886f70d01010c"), bytes.fromhex("2a8648ce3d040303")}
_OID_SHA512 = {bytes.fromhex("2a864886f70d01010d"), bytes.fromhex("2a8648ce3d040304")}


def _oids(der: bytes) -> set[bytes]:
    # the outer signatureAlgorithm is the last AlgorithmIdentifier before the signature
    return {oid for oid in _OID_SHA384 | _OID_SHA512 if oid in der}


async def _scram(conn: Connection, user: str, verifier: str) -> None:
    iterations, salt, stored_key, server_key = _parse_verifier(verifier)
    cert = conn.server.tls_cert_der if conn.tls else None
    offered = msg.cstr(MECHANISM_PLUS) if cert else b""
    offered += msg.cstr(MECHANISM) + b"\x00"
    conn.send(msg.frame(b"R", struct.pack(">i", 10) + offered))

    r = msg.Reader(await _password_message(conn))
    mechanism = r.cstring()
    if mechanism not in (MECHANISM, MECHANISM_PLUS) or (mechanism == MECHANISM_PLUS and not cert):
        raise ProtocolViolation("client selected an invalid SASL authentication mechanism")
    n = r.int32()
    client_first = r.data[r.pos : r.pos + n].decode() if n >= 0 else ""
    # gs2 header: "n,," (no binding), "y,," (client could bind but thinks we cannot) or
    # "p=tls-server-end-point,," (binding, only with SCRAM-SHA-256-PLUS)
    binding = b""
    if mechanism == MECHANISM_PLUS:
        if not client_first.startswith("p=tls-server-end-point,"):
            raise ProtocolViolation("unsupported SCRAM channel-binding type")
        assert cert is not None
        binding = channel_binding_data(cert)
    elif client_first.startswith("y,") and cert:
        # the client believes we do not support binding, but we offered it: downgrade
        raise ProtocolViolation("SCRAM channel binding negotiation error")
    elif not client_first.startswith(("n,", "y,")):
        raise ProtocolViolation("malformed SCRAM message (channel binding not supported)")
    header_end = client_first.index(",", client_first.index(",") + 1) + 1
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
    if attrs.get("c") != base64.b64encode(gs2_header.encode() + binding).decode():
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


def _mock_verifier(secret: bytes, user: str) -> str:
    """A SCRAM verifier for a user who has none: the salt is stable per user (a client
    probing twice sees the same one, as for a real user), the keys are random."""
    salt = hmac.digest(secret, user.encode(), "sha256")[:16]
    b64 = base64.b64encode
    keys = f"{b64(secrets.token_bytes(32)).decode()}:{b64(secrets.token_bytes(32)).decode()}"
    return f"{SCRAM_PREFIX}4096:{b64(salt).decode()}${keys}"


def _parse_verifier(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    head, keys = verifier[len(SCRAM_PREFIX) :].split("$", 1)
    iterations, salt = head.split(":", 1)
    stored, server = keys.split(":", 1)
    d = base64.b64decode
    return int(iterations), d(salt), d(stored), d(server)
