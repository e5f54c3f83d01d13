"""The state memory budget: one number split over RocksDB and the operator caches."""

from __future__ import annotations

from pathlib import Path

from engine.state.budget import MB, StateBudget, default_mb
from engine.state.disk_table import CACHE_MAX_VALUE, DiskStateTable, HotCache
from engine.state.store import StateStore
from pgwire.cli import build_parser


def test_the_budget_is_split_over_block_cache_memtables_and_operator_caches() -> None:
    b = StateBudget.from_mb(256)
    assert b.total_bytes == 256 * MB
    assert (b.block_cache_bytes, b.memtable_bytes, b.operator_cache_bytes) == (
        128 * MB,
        64 * MB,
        64 * MB,
    )
    assert 256 <= default_mb() <= 8192
    assert StateBudget.from_mb(None).total_bytes == default_mb() * MB


def test_the_cli_takes_the_budget() -> None:
    args = build_parser().parse_args(["playground", "--state-cache-mb", "300"])
    assert args.state_cache_mb == 300
    assert build_parser().parse_args(["playground"]).state_cache_mb is None


def test_a_budgeted_store_keeps_rows_beyond_the_operator_cache(tmp_path: Path) -> None:
    """With a cache of a few rows, every row still reads back from RocksDB."""
    with StateStore.open(tmp_path / "state", StateBudget.from_mb(32)) as st:
        assert st.block_cache is not None
        cache = HotCache(0)
        t = DiskStateTable(9, "t", st, dist_len=1, cache=cache)
        n = 5000
        t.put_many([(i,) for i in range(n)], [(i, "x") for i in range(n)])
        batch = st.new_batch()
        t.write_dirty(batch)
        st.write(batch)
        assert len(t._cache) <= cache.per_table()  # noqa: SLF001 - the bound itself
        assert t.get_many([(i,) for i in range(0, n, 7)]) == [(i, "x") for i in range(0, n, 7)]
        assert len(t) == n


def test_a_counted_disk_table_keeps_its_length_through_checkpoints(tmp_path: Path) -> None:
    """After the first `len` the count follows every checkpoint (puts, overwrites,
    deletes of present and absent keys, clear) without recounting."""
    with StateStore.open(tmp_path / "state", StateBudget.from_mb(32)) as st:
        t = DiskStateTable(11, "t", st, dist_len=1, cache=HotCache(0))

        def commit() -> None:
            batch = st.new_batch()
            t.write_dirty(batch)
            st.write(batch)

        t.put_many([(i,) for i in range(100)], [(1,)] * 100)
        assert len(t) == 100
        commit()
        assert len(t) == 100
        t.put_many([(i,) for i in range(50, 150)], [(0,)] * 100)
        t.delete_many([(i,) for i in range(0, 10)] + [(999,)])
        assert len(t) == 140
        commit()
        assert len(t) == 140 == len(list(t.items()))
        t.clear()
        t.put((7,), (7,))
        assert len(t) == 1
        commit()
        assert len(t) == 1 == len(list(t.items()))


def test_a_cached_row_that_outgrows_the_cache_reads_back_new(tmp_path: Path) -> None:
    """A row cached while small and then overwritten with a value too large to cache
    (a join key's rows growing past `CACHE_MAX_VALUE` bytes) reads back as written in
    later epochs, not as the smaller value the cache held before."""
    with StateStore.open(tmp_path / "state", StateBudget.from_mb(32)) as st:
        t = DiskStateTable(12, "t", st, dist_len=1, cache=HotCache(0))

        def commit() -> None:
            batch = st.new_batch()
            t.write_dirty(batch)
            st.write(batch)

        small, big = ("x" * 10,), ("y" * (2 * CACHE_MAX_VALUE),)
        t.put_many([(1,), (2,)], [small, small])
        commit()
        assert t.get_many([(1,), (2,)]) == [small, small]  # cached
        t.put((1,), big)  # grows past the cache's limit in this epoch
        t.put((2,), big)
        t.delete((2,))
        commit()
        assert t.get_many([(1,), (2,)]) == [big, None]
        t.put((1,), small)  # and back: cached again
        commit()
        assert t.get((1,)) == small
