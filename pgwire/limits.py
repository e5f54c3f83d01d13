"""What one client may cost the server, and how it must authenticate.

Why: pgwire accepts sockets from anyone who can reach the port. Before a client has
proved who it is, it must not make the server buffer large messages, hold many
connections or guess passwords quickly; after, a message may be large (COPY data, big
statements) but still bounded. These numbers are the server's policy, fixed at start
(`swell playground` flags) and read by every `Connection`:

* `auth`: `trust` (users without a password log in without one, the playground default as
  in RisingWave) or `password` (every user proves a password; users without one cannot
  log in, unknown users get the same answer as a wrong password, as PostgreSQL);
* `max_connections`: connections past their startup message, counted until they close;
  one more is refused with 53300 `sorry, too many clients already`;
* `max_message_bytes`: the largest message accepted after authentication (before it,
  startup packets are bounded by `MAX_STARTUP_BYTES` and password messages by
  `MAX_AUTH_MESSAGE_BYTES`);
* `auth_failure_delay_s`: how long a failed authentication waits before its error is sent
  (PostgreSQL's auth_delay): a client guessing passwords gets one guess per delay per
  connection, and connections are bounded by `max_connections`.

Lifecycle: built once by the CLI (or left at the defaults by tests and embedders), handed
to `pgwire.server.serve`, read-only afterwards.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from engine.errors import ProtocolViolation

AUTH_MODES = ("trust", "password")
MAX_STARTUP_BYTES = 10_000  # PostgreSQL's MAX_STARTUP_PACKET_LENGTH
MAX_AUTH_MESSAGE_BYTES = 8_192  # SCRAM / MD5 messages are well under 1 KB
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_AUTH_FAILURE_DELAY_S = 1.0


class MessageTooLong(ProtocolViolation):
    """A message declared longer than the limit: FATAL, because its body is never read and
    the stream cannot be resynchronised (statement handlers re-raise it)."""

    severity = "FATAL"


@dataclass(frozen=True)
class Limits:
    """The server's authentication mode and per-client limits (see the module docstring)."""

    auth: str = "trust"
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    auth_failure_delay_s: float = DEFAULT_AUTH_FAILURE_DELAY_S

    def __post_init__(self) -> None:
        if self.auth not in AUTH_MODES:
            raise ValueError(f"auth must be one of {', '.join(AUTH_MODES)}, got {self.auth!r}")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if self.max_message_bytes < MAX_STARTUP_BYTES:
            raise ValueError(f"max_message_bytes must be at least {MAX_STARTUP_BYTES}")
        if self.auth_failure_delay_s < 0:
            raise ValueError("auth_failure_delay_s must not be negative")


def is_loopback(host: str) -> bool:
    """True when `host` (a listen address) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface
