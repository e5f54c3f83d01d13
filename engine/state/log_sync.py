"""LogSync: fsync RocksDB's write-ahead log files with one system call per live log file.

Why: `StateStore.write(sync=True)` writes without RocksDB's sync and then fsyncs the log
files itself, because rocksdict keeps the interpreter lock for a whole synced write
(`engine.state.store`). Listing the directory and opening and closing each log file at
every sync cost three more system calls, and each one releases the interpreter lock and
must win it back: on a busy server (a barrier computing a big epoch) every such hand-over
waits for another thread's switch interval, and a webhook ack waits for all of them. So
the open files are kept between syncs and the directory is listed again only when the set
of log files may have changed.

When it may have changed: RocksDB creates a log file only when it switches memtables and
deletes one only after a flush made it obsolete; both install a new "super version", whose
number (`rocksdb.current-super-version-number`, read without releasing the interpreter
lock) therefore changes. A sync reads the number first: the same number as when the files
were listed means no log file was created or deleted since (the listing happened after
that number was read), so a record written before the sync is in one of the open files.
A new number lists the directory again and opens the files (a directory fsync when new
names appear, as RocksDB does for a new log). A log deleted after the listing was flushed
to SST files RocksDB synced before deleting it, so fsyncing its open descriptor is
harmless and nothing is lost.

Lifecycle: `LogSync(path, version)` with a callable giving the current super-version
number (None when RocksDB does not tell: every sync lists the directory again); `sync()`
from any thread (concurrent syncs share a listing; a listing's files are closed once it
is replaced and no sync still uses it); `close()` closes every file (the store's close).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

_fsync = getattr(os, "fdatasync", os.fsync)
"""What RocksDB itself uses for a log (its `use_fsync` is off): the data and the size."""


class _Listing:
    """The log files open at one super-version number, and how many syncs use them."""

    __slots__ = ("version", "names", "fds", "users", "retired")

    def __init__(self, version: int | None, names: list[str], fds: list[int]) -> None:
        self.version = version
        self.names = names
        self.fds = fds
        self.users = 0
        self.retired = False

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


class LogSync:
    """Keeps RocksDB's log files open and fsyncs them; see the module docstring."""

    def __init__(self, path: Path, version: Callable[[], int | None]) -> None:
        self.path = Path(path)
        self._version = version
        self._lock = threading.Lock()
        self._current: _Listing | None = None
        self.listings = 0
        """How many times the directory was listed (for tests and metrics)."""

    def sync(self) -> None:
        """Make every byte written to RocksDB's log before this call durable."""
        listing = self._acquire()
        try:
            for fd in listing.fds:
                _fsync(fd)
        finally:
            self._release(listing)

    def _acquire(self) -> _Listing:
        version = self._version()
        with self._lock:
            cur = self._current
            if cur is not None and version is not None and cur.version == version:
                cur.users += 1
                return cur
            new = self._list(version, cur)
            if cur is not None:
                cur.retired = True
                if cur.users == 0:
                    cur.close()
            self._current = new
            new.users += 1
            return new

    def _release(self, listing: _Listing) -> None:
        with self._lock:
            listing.users -= 1
            if listing.retired and listing.users == 0:
                listing.close()

    def _list(self, version: int | None, old: _Listing | None) -> _Listing:
        """Open the log files present now (under the lock; `version` was read before)."""
        self.listings += 1
        names = sorted(n for n in os.listdir(self.path) if n.endswith(".log"))
        fds: list[int] = []
        kept: list[str] = []
        try:
            for name in names:
                try:
                    fds.append(os.open(self.path / name, os.O_RDONLY))
                except FileNotFoundError:
                    continue  # obsolete: flushed to synced SST files, then deleted
                kept.append(name)
            if old is None or any(n not in old.names for n in kept):
                dfd = os.open(self.path, os.O_RDONLY)  # a new log's directory entry
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return _Listing(version, kept, fds)

    def close(self) -> None:
        """Close the open files (a sync still running keeps its listing until it ends)."""
        with self._lock:
            cur, self._current = self._current, None
            if cur is not None:
                cur.retired = True
                if cur.users == 0:
                    cur.close()
