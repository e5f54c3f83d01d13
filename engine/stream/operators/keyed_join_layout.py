"""The piece layout of a keyed join side: size tiers, merge planning, head encodings.

Why: `KeyedJoinSide` (keyed_join_side.py) keeps a join key's rows as a tail in its head
and fragments grouped by size tier; the arithmetic of that layout (which fragments merge,
how a head lists its fragments) is pure and small,
so it lives here, apart from the side's step logic, and is unit tested on its own.

Layout (the planner declares the join key as the table's distribution key, so a key's
entries share one vnode, the hash of the join key, as in RisingWave):

* head `(*join key,)` -> `(tot, fragments, tail)`: `tot` is the live row count under the
  key with multiplicity (without a residual condition: the degree of every row of the
  other side under that key), `fragments` the int64 pairs `(fid, rows)` of the key's
  fragments as bytes, `tail` a `RowBlobs` blob (engine/stream/operators/row_blob.py) of
  the key's first rows (most keys have only a tail);
* fragment `(*join key, fid)` -> `(blob,)`: a group of later rows.

Every row carries two ints in its blob: the count (multiplicity: identical rows of a side
without a stream key; default 1) and the degree (only for a preserved side of a join
with a residual condition). A key with no rows has no entries.

Lifecycle: stateless functions and constants, imported by `KeyedJoinSide`.
"""

from __future__ import annotations

from array import array

import numpy as np
import pyarrow as pa

TAIL_ROWS = 64
"""A key's first rows live in its head (new rows join them there while they fit);
beyond this many, new rows become fragments."""
TAIL_BYTES = 4096
"""Nor does a tail grow beyond this many encoded bytes (it is rewritten with its head)."""
FANOUT = 4
"""This many fragments of one size tier are merged into one."""
TAIL_FID = 0  # the fid of a key's tail (fragments are numbered from 1)
EMPTY = np.empty(0, np.int64)


def tier(rows: int) -> int:
    """Size tier of a fragment: 0 below `TAIL_ROWS` rows, 1 up to `FANOUT` times that,
    then one more per factor `FANOUT` (a spilled tail starts in tier 1)."""
    return int((max(rows, 1) // TAIL_ROWS).bit_length() + 1) // 2


def plan_merges(sizes: dict[int, int], next_fid: int) -> tuple[list[list[int]], int]:
    """The merges a key's fragments (`fid -> rows`) need: lists of fids merged into one
    new fragment each (in order; a merge can feed the next tier), and the next free fid.
    `sizes` is updated to the result."""
    merges: list[list[int]] = []
    while True:
        tiers: dict[int, list[int]] = {}
        for fid, n in sizes.items():
            tiers.setdefault(tier(n), []).append(fid)
        group = next((sorted(g)[:FANOUT] for g in tiers.values() if len(g) >= FANOUT), None)
        if group is None:
            return merges, next_fid
        total = sum(sizes.pop(f) for f in group)
        merges.append([*group, next_fid])
        sizes[next_fid] = total
        next_fid += 1


def frag_bytes(frags: dict[int, int]) -> bytes:
    """A head's fragment list: int64 pairs `(fid, rows)` in fid order."""
    return array("q", [x for f in sorted(frags) for x in (f, frags[f])]).tobytes()


class Seg:
    """One batch of the step's working set with its per-row arrays."""

    __slots__ = ("batch", "count", "degree", "dirty", "jk")

    def __init__(
        self, batch: pa.RecordBatch, count: np.ndarray, degree: np.ndarray, jk: np.ndarray
    ) -> None:
        self.batch = batch
        self.count = count
        self.degree = degree
        self.jk = jk
        self.dirty = np.zeros(len(count), bool)  # degree changed since written


Piece = tuple[int, int, int, int]
"""(fid, working-set segment, first row, rows) of one loaded piece of a key."""
