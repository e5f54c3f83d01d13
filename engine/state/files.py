"""The data directory's permissions: only the server's own OS user may read it.

Why: the data directory holds every table's rows, the WAL, password verifiers and
(encrypted) connector credentials. Other local users must not read them, as PostgreSQL
refuses a data directory readable by group or others. `secure_data_dir` creates the
directory with mode 0700 and tightens an existing one (older versions created 0755
directories and 0644 files): directories 0700, files 0600. `restrict_umask` makes every
file the process creates afterwards (RocksDB tables, the WAL, key files, staged sink
files) 0600 from the start.

Lifecycle: the CLI calls `restrict_umask()` once at start and `secure_data_dir(path)`
before the database opens; both are idempotent.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("swell.database")

DIR_MODE = 0o700
FILE_MODE = 0o600


def restrict_umask() -> None:
    """Files and directories created by this process get no group/other permissions."""
    os.umask(0o077)


def secure_data_dir(path: Path) -> int:
    """Create `path` (0700) or tighten it and everything below; returns how many entries
    had their mode changed. Symbolic links are left alone (never followed)."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    changed = _tighten(path, DIR_MODE)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            changed += _tighten(Path(root) / name, DIR_MODE)
        for name in files:
            changed += _tighten(Path(root) / name, FILE_MODE)
    if changed:
        log.info("data directory permissions tightened path=%s entries=%d", path, changed)
    return changed


def _tighten(p: Path, mode: int) -> int:
    try:
        st = p.lstat()
    except FileNotFoundError:  # removed meanwhile (e.g. a RocksDB temporary file)
        return 0
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
        return 0
    current = stat.S_IMODE(st.st_mode)
    if current & 0o077 == 0:
        return 0
    os.chmod(p, current & mode)
    return 1
