"""GroupCache: `TopNOp`'s in-memory cache of each group's first rows, addressable by group.

Why: a top-N step must touch only the groups its delta changes. Filtering one frame of
every group's cached rows costs O(cache) per step (13 ms for 10,000 groups even for a
ten-row epoch); this structure makes reading and replacing some groups' rows cost
O(their rows), amortised:

* `frame` is a polars frame (possibly many chunks) of cache rows; the rows of group `g`
  are `frame[start[g] : start[g] + length[g]]`, in window order;
* `put` appends the replacement rows of some groups at the end (no copy of the rest)
  and repoints them; the rows they replace become garbage, and once garbage outweighs
  the live rows (or chunks pile up) `frame` is rebuilt from the live ranges;
* `incomplete[g]` says the store may hold rows of `g` beyond its cached ones;
  `loaded[g]` that the group's rows were read from the store at all (an unloaded group
  is read on its first touch); `used[g]` the owner's step that last touched it (the
  eviction order).

Lifecycle: owned by one `TopNOp`, never persisted (groups are read from the store again
after a restart); `grow` as group ids are handed out; replaced by a fresh one when the
owner evicts groups and renumbers the rest.
"""

from __future__ import annotations

import numpy as np
import polars as pl

_MIN_GARBAGE = 1 << 16
_MAX_CHUNKS = 64


class GroupCache:
    """Cached rows of every group, contiguous and ordered per group; see the module doc."""

    def __init__(self, empty: pl.DataFrame) -> None:
        self.frame = empty
        self.start = np.zeros(16, np.int64)
        self.length = np.zeros(16, np.int64)
        self.incomplete = np.zeros(16, bool)
        self.loaded = np.zeros(16, bool)
        self.used = np.zeros(16, np.int64)
        self.garbage = 0

    def grow(self, groups: int) -> None:
        """Make room for group ids below `groups`."""
        have = len(self.start)
        if groups <= have:
            return
        size = max(groups, 2 * have)
        for name in ("start", "length", "incomplete", "loaded", "used"):
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[:have] = old
            setattr(self, name, new)

    def _index(self, gids: np.ndarray) -> np.ndarray:
        lens = self.length[gids]
        total = int(lens.sum())
        if not total:
            return np.empty(0, np.int64)
        offs = np.cumsum(lens) - lens
        return np.repeat(self.start[gids] - offs, lens) + np.arange(total, dtype=np.int64)

    def part(self, gids: np.ndarray) -> pl.DataFrame:
        """The cached rows of groups `gids` (ascending), group after group."""
        return self.frame[self._index(gids)]

    def ends(self, gids: np.ndarray) -> pl.DataFrame:
        """The last cached row of each group of `gids` that has one."""
        has = gids[self.length[gids] > 0]
        return self.frame[self.start[has] + self.length[has] - 1]

    def put(self, gids: np.ndarray, part: pl.DataFrame, g: np.ndarray) -> None:
        """Replace the rows of groups `gids` by `part` (ordered, group column values `g`)."""
        self.garbage += int(self.length[gids].sum())
        self.length[gids] = 0
        base = self.frame.height
        if len(g):
            starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
            runs = g[starts]
            self.start[runs] = base + starts
            self.length[runs] = np.diff(np.r_[starts, len(g)])
            self.frame = pl.concat([self.frame, part], rechunk=False)
        live = self.frame.height - self.garbage
        if self.garbage > max(live, _MIN_GARBAGE) or self.frame.n_chunks() > _MAX_CHUNKS:
            self.compact()

    def compact(self) -> None:
        gids = np.flatnonzero(self.length)
        self.frame = self.part(gids).rechunk()
        lens = self.length[gids]
        self.start[gids] = np.cumsum(lens) - lens
        self.garbage = 0
