"""The per-query memory limit of ad-hoc queries (`query_memory_limit`, SQLSTATE 53200).

An ad-hoc query streams bounded chunks wherever it can (scans, filters, projections, the
probe side of joins, LIMIT); what an operator must hold whole (a join's build side, the
input of a sort or a window, the result of a subquery, aggregation groups) is charged to
the query's `MemoryBudget` when it is built, and released when the Arrow object is freed
(a `weakref.finalize` on it), so the budget follows the bytes the query keeps alive, not
the bytes it ever touched. Before an operator builds something whose size is known in
advance (a cross product of materialized inputs: rows x row width), it asks `reserve`,
so a query that would need hundreds of gigabytes is refused at once instead of after it
grew the server.

Why not pyarrow's memory pool: its counters are process-wide (every session and the
barrier loop allocate from the same pool), kernels only accept a per-call pool argument,
and polars and numpy allocate outside it, so per-query numbers read from it would blame
the wrong query. Charging the materialized Arrow tables the executor itself builds is
exact for what the query holds and cheap (one `nbytes` per built table).

The limit is a session setting (PostgreSQL memory units: `SET query_memory_limit =
'2GB'`; 0 turns it off); its default is a quarter of the machine's physical memory.
Exceeding it raises `OutOfMemory` ("out of memory", 53200) and frees what the query held.
"""

from __future__ import annotations

import threading
import weakref

import pyarrow as pa

from engine.errors import OutOfMemory
from engine.session_vars import default_limit as default_limit  # its default
from engine.setting_units import show_bytes

SETTING = "query_memory_limit"


class MemoryBudget:
    """Bytes held by one query's materialized intermediates, against `limit` (0: off)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.live = 0
        self.peak = 0
        self._lock = threading.Lock()

    def reserve(self, nbytes: int, what: str) -> None:
        """Refuse now when building `nbytes` more for `what` would exceed the limit."""
        if self.limit and self.live + nbytes > self.limit:
            raise self._error(nbytes, what)

    def charge(self, t: pa.Table, what: str) -> pa.Table:
        """Count `t` as held until it is freed; 53200 when that exceeds the limit."""
        n = int(t.nbytes) if t.num_rows else 0
        if n == 0:
            return t
        self.reserve(n, what)
        with self._lock:
            self.live += n
            self.peak = max(self.peak, self.live)
        weakref.finalize(t, self._release, n)
        return t

    def _release(self, n: int) -> None:
        with self._lock:
            self.live -= n

    def _error(self, nbytes: int, what: str) -> OutOfMemory:
        return OutOfMemory(
            "out of memory",
            detail=(
                f"The query needs more than {SETTING} ({show_bytes(self.limit)}) to hold "
                f"{what} (about {_human(self.live + nbytes)})."
            ),
            hint=f"Narrow the query (join conditions, filters, LIMIT) or raise {SETTING}.",
        )


def row_width(schema: pa.Schema) -> int:
    """Estimated bytes per row of `schema`: fixed widths exactly, 32 for variable ones."""
    w = 0
    for f in schema:
        try:
            bits = f.type.bit_width
        except ValueError:
            bits = 32 * 8
        w += max(1, bits // 8)
    return max(w, 1)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
