"""The one Swell server a whole pytest session shares (per xdist worker, if any).

Starting a server costs about a second, so most end-to-end tests (and every .slt file)
share one. It lives in the pytest `Config` stash rather than only in a session fixture
because sqllogictest items are not Python functions and cannot request fixtures; both the
`server` fixture and the .slt items call `shared_server(config)`.

Lifecycle:

1. The first `shared_server(config)` call starts the server in a fresh temporary data
   directory. If it fails to start, the first caller gets the full error (with the server
   log) and every later caller a one-line reminder at once (no 30 s wait per test).
2. After each test that used it, `check_shared_server(config, nodeid)` verifies the process
   is still alive. If it died, the server is restarted on the same data directory (so the
   following tests still run) and `ServerError` is raised, which pytest reports as an error
   in that test's teardown: the test that crashed the server is the one that is flagged.
3. `shutdown_shared_server(config, keep_data=...)` (from `pytest_sessionfinish`) stops it
   gracefully; a shutdown that hangs or crashes is reported and fails the session. The data
   directory (with `swell-server.log`) is removed unless the session failed, in which case
   its path is printed for debugging.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.server import ServerError, SwellServer


@dataclass
class _Shared:
    server: SwellServer | None = None
    error: ServerError | None = None
    data_root: Path | None = None
    problems: list[str] = field(default_factory=list)
    kept_data: Path | None = None


_KEY = pytest.StashKey[_Shared]()


def _state(config: pytest.Config) -> _Shared:
    st = config.stash.get(_KEY, None)
    if st is None:
        st = _Shared()
        config.stash[_KEY] = st
    return st


def shared_server(config: pytest.Config) -> SwellServer:
    """The session's shared server, started on first use."""
    st = _state(config)
    if st.error is not None:
        first = str(st.error).splitlines()[0]
        raise ServerError(
            f"the shared swell server is not available ({first}); "
            f"see the first test that used it for the server log"
        )
    if st.server is None:
        st.data_root = Path(tempfile.mkdtemp(prefix="swell-shared-"))
        srv = SwellServer(st.data_root / "data")
        st.server = srv
        try:
            srv.start()
        except ServerError as e:
            st.error = e
            raise
    return st.server


def check_shared_server(config: pytest.Config, nodeid: str) -> None:
    """Raise (after restarting it) if the shared server died during test `nodeid`."""
    st = _state(config)
    srv = st.server
    if srv is None or st.error is not None or srv.is_running:
        return
    msg = srv.describe_failure(
        f"the shared swell server died during {nodeid} (exit code {srv.returncode}); "
        f"it was restarted on the same data directory for the following tests"
    )
    st.problems.append(msg)
    try:
        srv.start()
    except ServerError as e:
        st.error = e
        msg += f"\n\nrestart failed:\n{e}"
    raise ServerError(msg)


def shutdown_shared_server(
    config: pytest.Config, *, keep_data: bool
) -> tuple[list[str], Path | None]:
    """Stop the shared server; return the problems seen during the session (if any) and
    the data directory if it was kept."""
    st = _state(config)
    srv = st.server
    if srv is not None:
        try:
            if srv.is_running:
                rc = srv.stop()
                if rc not in (0, None):
                    st.problems.append(
                        srv.describe_failure(
                            f"the shared swell server exited with code {rc} after SIGTERM "
                            f"(expected a clean shutdown, exit code 0)"
                        )
                    )
        except ServerError as e:
            st.problems.append(str(e))
    if st.data_root is not None:
        if keep_data or st.problems:
            st.kept_data = st.data_root
        else:
            shutil.rmtree(st.data_root, ignore_errors=True)
    st.server = None
    st.data_root = None
    return st.problems, st.kept_data
