"""The state API contract, run over every backend alike.

Operators reach state only through `StateTable`'s interface: per-chunk reads and writes
(`get_many`, `put_many`, `delete_many`), ordered range scans (`scan` by prefix and key
range, in `engine.state.order`'s key order) and read-only snapshots. Every test here runs
over each backend of the `backend` fixture:

* `memory`: a table that is never persisted;
* `rocksdb-log` / `rocksdb-keyed`: a table whose `commit()` writes its changes to a real
  RocksDB store (in the log and the keyed layout) and then reloads a fresh table from
  the store, so every read after a commit is answered by what RocksDB held;
* `rocksdb-first` / `rocksdb-first-single`: the RocksDB-first `DiskStateTable` (rows in
  RocksDB, the epoch's writes in an overlay, a tiny cache so reads go to RocksDB),
  vnode-partitioned by the first key column and in a single vnode;
* `rocksdb-first-tracked`: a `DiskStateTable` that skips the reads of keys it certainly
  does not hold (`track_absent`): it lives on through its commits (no reload), so its
  filter of written keys answers every miss after the first.

A new backend joins by adding a fixture param; its tests are these.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.state.disk_table import DiskStateTable, HotCache
from engine.state.order import key_order
from engine.state.store import StateStore
from engine.state.table import StateTable

TABLE_ID = 4242


class Backend:
    """One state table under test plus how to commit it (see the module docstring)."""

    def __init__(self, kind: str, store: StateStore | None) -> None:
        self.kind = kind
        self.store = store
        self.table = self._new()
        self.epoch = 0

    def _new(self) -> StateTable | DiskStateTable:
        if self.kind.startswith("rocksdb-first"):
            assert self.store is not None
            dist = 0 if self.kind.endswith("single") else 1
            t = DiskStateTable(TABLE_ID, "contract", self.store, dist_len=dist, cache=TINY)
            if self.kind.endswith("tracked"):
                t.track_absent()
            return t
        t = StateTable(TABLE_ID, "contract")
        if self.kind == "rocksdb-keyed":
            t.prefer_keyed()
        return t

    def commit(self) -> None:
        """Checkpoint the table; persistent backends continue from a reloaded table."""
        self.epoch += 1
        if self.store is None:
            return
        batch = self.store.new_batch()
        self.table.write_dirty(batch)
        self.store.write(batch)
        if self.kind.endswith("tracked"):
            return
        fresh = self._new()
        fresh.load(self.store)
        self.table = fresh


TINY = HotCache(0)
KINDS = [
    "memory",
    "rocksdb-log",
    "rocksdb-keyed",
    "rocksdb-first",
    "rocksdb-first-single",
    "rocksdb-first-tracked",
]


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    store = None if request.param == "memory" else StateStore.open(tmp_path / "state")
    yield Backend(request.param, store)
    if store is not None:
        store.close()


def check(t: Any, model: dict[tuple[Any, ...], tuple[Any, ...]]) -> None:
    """`t` (a table or a snapshot) answers every read as `model` does."""
    assert len(t) == len(model)
    assert dict(t.items()) == model
    keys = list(model)
    assert t.get_many(keys) == [model[k] for k in keys]
    assert [k for k, _ in t.scan()] == sorted(model, key=key_order)
    assert t.get_many([("absent", 1)]) == [None]


# -- per-chunk reads and writes --------------------------------------------------------
def test_point_and_batched_reads_and_writes(backend: Backend) -> None:
    t = backend.table
    t.put((1,), ("a",))
    t.put_many([(2,), (3,), (2,)], [("b",), ("c",), ("b2",)])  # a later duplicate wins
    assert t.get((2,)) == ("b2",) and (3,) in t and (4,) not in t
    assert t.get_many([(3,), (9,), (1,)]) == [("c",), None, ("a",)]
    backend.commit()
    t = backend.table
    check(t, {(1,): ("a",), (2,): ("b2",), (3,): ("c",)})
    t.delete_many([(1,), (1,), (99,)])  # duplicates and absent keys are fine
    t.delete((98,))
    t.put((3,), ("c2",))
    check(t, {(2,): ("b2",), (3,): ("c2",)})
    backend.commit()
    check(backend.table, {(2,): ("b2",), (3,): ("c2",)})


def test_values_of_every_engine_type_round_trip(backend: Backend) -> None:
    row = (
        None,
        True,
        -7,
        2.5,
        Decimal("1.50"),
        "naïve ✓",
        b"\x00\xff",
        date(2024, 2, 29),
        datetime(2024, 1, 1, 12, 30),
        datetime(2024, 1, 1, 12, 30, tzinfo=UTC),
        (1, (2, None)),
    )
    backend.table.put_many([(1, "k"), (2, "k")], [row, row[:3]])
    backend.commit()
    check(backend.table, {(1, "k"): row, (2, "k"): row[:3]})


def test_clear_empties_the_table(backend: Backend) -> None:
    backend.table.put_many([(i,) for i in range(50)], [(i,) for i in range(50)])
    backend.commit()
    backend.table.clear()
    check(backend.table, {})
    backend.commit()
    check(backend.table, {})


# -- ordered range scans ---------------------------------------------------------------
MIXED_IN_ORDER: list[tuple[Any, ...]] = [
    (None,),
    (-10,),
    (-2.5,),
    (0,),
    (Decimal("0.5"),),
    (1,),
    (1, None),
    (1, 0),
    (1, "a"),
    (2.25,),
    (10**20,),
    (float("nan"),),
    ("",),
    ("A",),
    ("a",),
    ("é",),
    ("😀",),
    (b"",),
    (b"\x00",),
    (date(1999, 12, 31),),
    (date(2000, 1, 1),),
    (datetime(1999, 1, 1),),
    (datetime(2000, 1, 1, tzinfo=UTC),),
    ((1, 2),),
    ((1, 2, 0),),
    ((2,),),
]


def test_scan_is_in_key_order_across_kinds(backend: Backend) -> None:
    keys = MIXED_IN_ORDER[::-1]
    backend.table.put_many(keys, [(i,) for i in range(len(keys))])
    for _ in range(2):
        got = [k for k, _ in backend.table.scan()]
        assert [key_order(k) for k in got] == [key_order(k) for k in MIXED_IN_ORDER]
        backend.commit()


def test_booleans_sort_false_first(backend: Backend) -> None:
    # a column never mixes booleans with numbers (True == 1 would be one dict key)
    backend.table.put_many([(True,), (None,), (False,)], [(1,), (2,), (3,)])
    backend.commit()
    assert [k for k, _ in backend.table.scan()] == [(None,), (False,), (True,)]


def test_scan_by_prefix_and_range(backend: Backend) -> None:
    t = backend.table
    keys = [(w, s) for w in (3, 1, 2, 5) for s in (2, 0, 1)] + [(4,), ("x", 0)]
    t.put_many(keys, [(i,) for i in range(len(keys))])
    backend.commit()
    t = backend.table

    def ks(**kw: Any) -> list[tuple[Any, ...]]:
        return [k for k, _ in t.scan(**kw)]

    assert ks(prefix=(2,)) == [(2, 0), (2, 1), (2, 2)]
    assert ks(prefix=(4,)) == [(4,)]
    assert ks(prefix=(9,)) == []
    # end=(t,) stops before every key starting with t (a key sorts after its prefixes)
    assert ks(end=(3,)) == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert ks(start=(3, 1), end=(4, 0)) == [(3, 1), (3, 2), (4,)]
    assert ks(start=(5,)) == [(5, 0), (5, 1), (5, 2), ("x", 0)]
    assert ks(prefix=(2,), start=(2, 1)) == [(2, 1), (2, 2)]
    assert ks(prefix=(2,), end=(2, 2)) == [(2, 0), (2, 1)]
    assert ks(prefix=(2,), start=(1,), end=(9,)) == [(2, 0), (2, 1), (2, 2)]
    assert ks(start=(3,), end=(2,)) == []
    assert [v for _, v in t.scan(prefix=(1,))] == [t.get((1, s)) for s in range(3)]
    # descending and limited: a group's extreme is one bisect away
    assert ks(prefix=(2,), reverse=True) == [(2, 2), (2, 1), (2, 0)]
    assert ks(prefix=(2,), limit=1) == [(2, 0)]
    assert ks(prefix=(2,), reverse=True, limit=1) == [(2, 2)]
    assert ks(start=(3, 1), end=(5,), reverse=True, limit=2) == [(4,), (3, 2)]
    assert ks(prefix=(9,), reverse=True, limit=1) == []
    assert ks(limit=0) == []


def test_scan_prefixes_reads_many_groups_first_rows(backend: Backend) -> None:
    """The batched per-group range read (top-N refills): committed rows and the epoch's
    writes (new rows, overwrites, deletes) merged, per prefix in key order, limited."""
    t = backend.table
    keys = [(g, s) for g in (3, 1, 2) for s in (b"\x02", b"\x00", b"\x01\x00", b"\x01")]
    t.put_many(keys, [(i,) for i in range(len(keys))])
    backend.commit()
    t = backend.table
    t.put((1, b"\x00\x00"), ("new",))
    t.delete((2, b"\x00"))
    t.put((3, b"\x01"), ("changed",))
    got = t.scan_prefixes([(1,), (2,), (9,), (3,)], 3)
    assert [[k for k, _ in rows] for rows in got] == [
        [(1, b"\x00"), (1, b"\x00\x00"), (1, b"\x01")],
        [(2, b"\x01"), (2, b"\x01\x00"), (2, b"\x02")],
        [],
        [(3, b"\x00"), (3, b"\x01"), (3, b"\x01\x00")],
    ]
    assert got[3][1] == ((3, b"\x01"), ("changed",))
    assert t.scan_prefixes([(1,)], None)[0] == list(t.scan((1,)))
    assert t.scan_prefixes([(1,)], 0) == [[]]
    assert t.scan_prefixes([()], 2) == [list(t.scan(limit=2))]
    # descending: each group's last entries (the aggregation's maximum), the overlay's
    # deletes skipped and its new rows merged in
    t.put((2, b"\x03"), ("top",))
    t.delete((1, b"\x02"))
    down = t.scan_prefixes([(1,), (2,), (9,), (3,)], 2, reverse=True)
    assert [[k for k, _ in rows] for rows in down] == [
        [(1, b"\x01\x00"), (1, b"\x01")],
        [(2, b"\x03"), (2, b"\x02")],
        [],
        [(3, b"\x02"), (3, b"\x01\x00")],
    ]
    assert down[1][0] == ((2, b"\x03"), ("top",))
    assert t.scan_prefixes([(2,)], None, reverse=True)[0] == list(t.scan((2,), reverse=True))
    assert t.scan_prefixes([(4,)], 1, reverse=True) == [[]]


def test_scan_follows_later_writes(backend: Backend) -> None:
    t = backend.table
    t.put_many([(i,) for i in (5, 1, 3)], [("v",)] * 3)
    assert [k for k, _ in t.scan()] == [(1,), (3,), (5,)]  # builds the order index
    t.put((2,), ("w",))
    t.put((3,), ("overwritten",))
    t.delete((5,))
    t.put_many([(0,), (9,), (0,)], [("a",), ("b",), ("c",)])
    t.delete_many([(9,), (9,), (42,)])
    t.put((5,), ("back",))
    want = {(0,): ("c",), (1,): ("v",), (2,): ("w",), (3,): ("overwritten",), (5,): ("back",)}
    assert list(t.scan()) == sorted(want.items(), key=lambda kv: key_order(kv[0]))
    backend.commit()
    check(backend.table, want)


def test_writes_while_consuming_a_scan(backend: Backend) -> None:
    """A scan yields the entries of the call; the caller may change the table meanwhile
    (buffers cut below a watermark delete and re-put what they read)."""
    t = backend.table
    t.put_many([(i, 0) for i in range(10)], [(i,) for i in range(10)])
    seen = []
    for k, v in t.scan(end=(5,)):
        seen.append(v[0])
        t.delete(k)
        t.put((k[0] + 100, 1), v)
    assert seen == [0, 1, 2, 3, 4]
    assert [k for k, _ in t.scan(end=(100,))] == [(i, 0) for i in range(5, 10)]
    backend.commit()
    assert len(backend.table) == 10


KEY_ELEMS = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.sampled_from([0.5, -1.5, float("inf")]),
    st.sampled_from(["", "a", "b", "é"]),
)
KEYS = st.tuples(st.integers(0, 3), KEY_ELEMS) | st.tuples(st.integers(0, 3))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(KEYS, max_size=6)),
        st.tuples(st.just("delete"), st.lists(KEYS, max_size=4)),
        st.tuples(st.just("commit"), st.just([])),
        st.tuples(
            st.just("scan"),
            st.tuples(KEYS | st.just(()), KEYS, KEYS, st.booleans(), st.none() | st.integers(0, 3)),
        ),
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_random_operations_match_a_model(tmp_path: Path, ops: list[Any]) -> None:
    """Random batched writes, commits and scans agree with a dict model on every backend."""
    for kind in KINDS:
        path = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh store for every example
        store = None if kind == "memory" else StateStore.open(path / "state")
        try:
            b = Backend(kind, store)
            model: dict[tuple[Any, ...], tuple[Any, ...]] = {}
            for n, (op, arg) in enumerate(ops):
                if op == "put":
                    b.table.put_many(arg, [(n, i) for i in range(len(arg))])
                    model.update({k: (n, i) for i, k in enumerate(arg)})
                elif op == "delete":
                    b.table.delete_many(arg)
                    for k in arg:
                        model.pop(k, None)
                elif op == "commit":
                    b.commit()
                else:
                    prefix, lo, hi, rev, limit = arg
                    want = [
                        k
                        for k in sorted(model, key=key_order)
                        if k[: len(prefix)] == prefix
                        and key_order(lo) <= key_order(k) < key_order(hi)
                    ]
                    if rev:
                        want.reverse()
                    want = want if limit is None else want[:limit]
                    kw = {"start": lo, "end": hi, "reverse": rev, "limit": limit}
                    got = [k for k, _ in b.table.scan(prefix, **kw)]
                    assert got == want
                    snap = b.table.snapshot(b.epoch)
                    assert [k for k, _ in snap.scan(prefix, **kw)] == want
                    snap.release()
            check(b.table, model)
            b.commit()
            check(b.table, model)
        finally:
            if store is not None:
                store.close()


# -- read-only snapshots of a committed epoch ------------------------------------------
def test_snapshot_keeps_the_committed_image(backend: Backend) -> None:
    t = backend.table
    t.put_many([(i,) for i in range(6)], [(i, "v0") for i in range(6)])
    backend.commit()
    t = backend.table
    image = t.to_dict()
    snap = t.snapshot(backend.epoch)
    assert snap.epoch == backend.epoch
    # the next epoch: every kind of write
    t.put((0,), (0, "v1"))
    t.put((100,), (100, "new"))
    t.delete((1,))
    t.put_many([(2,), (101,)], [(2, "v1"), (101, "new")])
    t.delete_many([(3,), (4,)])
    t.put((1,), (1, "back"))
    check(snap, image)
    assert snap.get((100,)) is None and (1,) in snap and snap.get((1,)) == (1, "v0")
    assert [k for k, _ in snap.scan(start=(2,), end=(5,))] == [(2,), (3,), (4,)]
    assert [k for k, _ in snap.scan(reverse=True, limit=2)] == [(5,), (4,)]
    backend.commit()
    check(snap, image)  # still the old epoch's image after the next commit
    backend.table.clear()
    check(snap, image)


def test_snapshot_survives_clear_load_and_drop(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "state") as store:
        t = StateTable(7, "t")
        t.put_many([(1,), (2,)], [("a",), ("b",)])
        batch = store.new_batch()
        t.write_dirty(batch)
        store.write(batch)
        s1 = t.snapshot(1)
        t.clear()
        s2 = t.snapshot(2)
        t.load(store)  # replaces the mapping wholesale
        s3 = t.snapshot(3)
        t.put((3,), ("c",))
        t.drop(store.new_batch())
        check(s1, {(1,): ("a",), (2,): ("b",)})
        check(s2, {})
        check(s3, {(1,): ("a",), (2,): ("b",)})
        check(t, {})


def test_released_snapshots_stop_costing_writes() -> None:
    t = StateTable(1)
    t.put((1,), ("a",))
    snap = t.snapshot(1)
    snap.release()
    del snap
    t.put((1,), ("b",))
    t.put((2,), ("c",))
    assert not list(t._pins)  # noqa: SLF001 - the copy-on-write hook is gone
    check(t, {(1,): ("b",), (2,): ("c",)})


def test_snapshot_reads_from_another_thread_while_the_table_changes(backend: Backend) -> None:
    """A reader thread without any lock sees exactly the pinned image while the writer
    runs the next epochs (the runtime's ad-hoc reads will do this)."""
    n = 2000
    backend.table.put_many([(i,) for i in range(n)], [(i, 0) for i in range(n)])
    backend.commit()
    t = backend.table
    image = t.to_dict()
    snap = t.snapshot(backend.epoch)
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        keys = list(image)
        while not stop.is_set():
            if snap.get_many(keys[::97]) != [image[k] for k in keys[::97]]:
                errors.append("get_many")
            if len(dict(snap.items())) != n:
                errors.append("items")

    th = threading.Thread(target=reader)
    th.start()
    try:
        for epoch in range(1, 30):
            t.put_many([(i,) for i in range(0, n, 7)], [(i, epoch) for i in range(0, n, 7)])
            t.delete_many([(i,) for i in range(epoch, n, 11)])
            t.put_many([(n + epoch * 10 + j,) for j in range(10)], [(epoch,)] * 10)
    finally:
        stop.set()
        th.join()
    assert errors == []
    check(snap, image)


def test_aware_datetime_keys_scan_by_instant(backend: Backend) -> None:
    base = datetime(2024, 1, 1, tzinfo=UTC)
    keys = [(base + timedelta(hours=h), "x") for h in (5, -3, 0, 2)]
    backend.table.put_many(keys, [(1,)] * 4)
    backend.commit()
    got = [k[0] for k, _ in backend.table.scan(end=(base + timedelta(hours=2),))]
    assert got == [base - timedelta(hours=3), base]
