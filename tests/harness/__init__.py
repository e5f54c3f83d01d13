"""End-to-end test harness: runs the real Swell server as a subprocess for tests.

Owns `SwellServer` (start/stop/kill/restart one server on free loopback ports with its own
data directory) and the session-shared server used by both the `server` fixture and the
sqllogictest items. Depends only on the `swell playground` command line (pgwire.cli) and
psycopg; tests/conftest.py, tests/slt/ and tests/clients/ depend on it.
"""

from __future__ import annotations

from harness.server import ServerError, SwellServer, free_port
from harness.shared import shared_server

__all__ = ["ServerError", "SwellServer", "free_port", "shared_server"]
