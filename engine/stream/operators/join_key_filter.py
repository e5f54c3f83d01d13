"""JoinKeyFilter: which join keys a keyed join side can hold rows under, without the store.

Why: a join side kept in RocksDB (`KeyedJoinSide`) reads the head of every join key of
both inputs' deltas each step. Most keys of an event stream are new (a price, an order id
no row had before): the read of an absent key costs a store lookup (key encoding, a
RocksDB multi-get probe, the cache bookkeeping) and finds nothing. This filter answers
"certainly absent" for such keys from memory, so those reads are skipped and an insert
under a fresh key is written blind.

What it holds: the 64-bit Python hashes of every join-key value the side has written
rows under since its table was seen empty, as a few sorted numpy runs (a binary counter
of merges: O(log n) runs, each hash copied O(log n) times). It is a superset of the keys
the table holds: keys whose rows were all deleted stay in it, two values with one hash
both answer "maybe", and keys written in an epoch that is later rolled back stay too.
Each of those only costs the read the side would have made anyway; a key the table holds
is never reported absent.

It is only *complete* (usable) while that holds for certain: from a `load` that found the
table with no committed row and nothing pending, as long as every write under a new key
goes through `add`, and while it stays under `MAX_KEYS` (then it is dropped and the side
reads every key again, as without it). A table loaded with rows (a restart, a rescale)
starts incomplete; hashes are per process (`hash` of strings is salted), never stored.

Lifecycle: one per `KeyedJoinSide`; `reset(complete)` at load, `add` after each apply,
`absent` in prefetch.
"""

from __future__ import annotations

import numpy as np

MAX_KEYS = 1 << 22
"""Beyond this many distinct hashes (8 bytes each) the filter is dropped."""


def key_hashes(values: list[object]) -> np.ndarray:
    """The int64 Python hash of each join-key value (equal values hash equal: 1 and 1.0,
    equal decimals of different scale, the one NaN object of `JoinKeyIds`)."""
    return np.fromiter(map(hash, values), np.int64, len(values))


class JoinKeyFilter:
    """A superset of a side's join keys by hash; see the module docstring."""

    __slots__ = ("_runs", "complete", "size")

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []
        self.size = 0
        self.complete = False

    def reset(self, complete: bool) -> None:
        """Forget every hash; `complete`: the table holds no row now."""
        self._runs = []
        self.size = 0
        self.complete = complete

    def add(self, hashes: np.ndarray) -> None:
        """Record keys that may now hold rows."""
        if not self.complete or not len(hashes):
            return
        runs = self._runs
        new = np.unique(hashes)
        if runs:
            new = new[~self._present(new)]
            if not len(new):
                return
        runs.append(new)
        self.size += len(new)
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
            b = runs.pop()
            a = runs.pop()
            merged = np.concatenate([a, b])
            merged.sort(kind="stable")
            runs.append(merged)
        if self.size > MAX_KEYS:
            self.reset(False)

    def absent(self, hashes: np.ndarray) -> np.ndarray:
        """Per hash: True where no row can be stored under the key (all False when the
        filter is not complete)."""
        if not self.complete:
            return np.zeros(len(hashes), bool)
        return ~self._present(hashes)

    def _present(self, hashes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(hashes), bool)
        for run in self._runs:
            i = np.searchsorted(run, hashes)
            np.minimum(i, len(run) - 1, out=i)
            out |= run[i] == hashes
        return out
