"""One memory budget for state: operator caches, RocksDB's block cache and its memtables.

Why: with RocksDB as the source of truth (`engine.state.disk_table`), the memory a server
spends on state is what its caches hold, and a user sets that with one number
(`swell playground --state-cache-mb N`). `StateBudget` splits it:

* half to RocksDB's block cache (an LRU `Cache` shared by every table of the one
  database; index and bloom filter blocks stay in the table readers, outside it, about
  1.5 bytes per key);
* a quarter to memtables, through a `WriteBufferManager` whose usage is also charged to
  the block cache, so RocksDB's part stays under three quarters in total;
* a quarter to the operator caches of hot rows (`disk_table.HotCache`).

The default (`default_mb`) is a quarter of the machine's physical memory, between 256 MB
and 8 GB. Operators whose state is still fully resident (`StateTable`) are outside the
budget; `docs/architecture.md` says which.

Lifecycle: built once from the CLI option by the database (`Config.state_cache_mb`),
handed to `StateStore.open` (the RocksDB part) and to the runtime (the operator part).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MB = 1 << 20
MIN_MB = 32
"""Below this RocksDB's own fixed costs dominate; smaller budgets are raised to it."""


def machine_memory_bytes() -> int:
    """Physical memory of the machine (or 4 GiB when the platform does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def default_mb() -> int:
    """A quarter of physical memory, between 256 MB and 8 GB."""
    return max(256, min(machine_memory_bytes() // 4 // MB, 8192))


@dataclass(frozen=True)
class StateBudget:
    """How the state memory budget is split (see the module docstring)."""

    total_bytes: int

    @classmethod
    def from_mb(cls, mb: int | None) -> StateBudget:
        return cls(max(mb if mb is not None else default_mb(), MIN_MB) * MB)

    @property
    def block_cache_bytes(self) -> int:
        return self.total_bytes // 2

    @property
    def memtable_bytes(self) -> int:
        return self.total_bytes // 4

    @property
    def operator_cache_bytes(self) -> int:
        return self.total_bytes - self.block_cache_bytes - self.memtable_bytes

    def describe(self) -> str:
        return (
            f"{self.total_bytes // MB} MB (block cache {self.block_cache_bytes // MB} MB, "
            f"memtables {self.memtable_bytes // MB} MB, "
            f"operator caches {self.operator_cache_bytes // MB} MB)"
        )
