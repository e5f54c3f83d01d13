"""PartitionStore: take/put by key, NULL and NaN keys, bucket growth, reload and re-split."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine.state.table import StateTable
from engine.stream.operators import partition_store
from engine.stream.operators.partition_store import PartitionStore

SCHEMA = pa.schema([("k", pa.float64()), ("s", pa.string()), ("v", pa.int64())])


def _rows(k: list[float | None], s: list[str | None], v: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(k, pa.float64()), "s": s, "v": pa.array(v, pa.int64())})


def _sorted(t: pa.Table) -> list[tuple[object, ...]]:
    return sorted(
        (tuple(r.values()) for r in t.to_pylist()),
        key=lambda r: tuple((x is None, str(x)) for x in r),
    )


def test_take_returns_whole_partitions_with_null_and_nan_keys() -> None:
    st = PartitionStore(StateTable(1), SCHEMA, [0, 1])
    st.take(_rows([], [], []).select([0, 1]))
    nan = float("nan")
    st.put(_rows([1.0, 1.0, None, nan, 0.0], ["a", "a", None, "x", "a"], [1, 2, 3, 4, 5]))
    assert len(st) == 5
    probe = _rows([1.0, None, nan, 2.0], ["a", None, "x", "a"], [0, 0, 0, 0]).select([0, 1])
    got = st.take(probe)
    assert sorted(got.column("v").to_pylist()) == [1, 2, 3, 4]
    assert len(st) == 1
    st.put(got.filter(pa.array([True, False, True, True])))
    assert len(st) == 4
    assert st.take(_rows([-0.0], ["a"], [0]).select([0, 1])).column("v").to_pylist() == [5]
    st.put(_rows([], [], []))
    assert sorted(st.all_rows().column("v").to_pylist()) in ([1, 3, 4], [2, 3, 4])


def test_buckets_grow_and_state_reloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition_store, "BUCKET_ROWS", 8)
    table = StateTable(7)
    st = PartitionStore(table, SCHEMA, [1])
    n = 200
    keys = [f"p{i % 37}" for i in range(n)]
    rows = _rows([float(i) for i in range(n)], keys, list(range(n)))
    st.take(rows.select([1]))
    st.put(rows)
    assert st.bucket_count >= 16
    stored = {k for k in table.to_dict() if k != ("meta",)}
    assert len(stored) > 1 and all(isinstance(k[0], int) for k in stored)
    again = PartitionStore(table, SCHEMA, [1])  # a restart: same table, new store
    assert _sorted(again.all_rows()) == _sorted(rows)
    got = again.take(_rows([0.0], ["p3"], [0]).select([1]))
    assert sorted(got.column("v").to_pylist()) == [i for i in range(n) if i % 37 == 3]
    again.put(got)
    assert len(again) == n


def test_reload_resplits_when_the_hash_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition_store, "BUCKET_ROWS", 4)
    table = StateTable(3)
    st = PartitionStore(table, SCHEMA, [1])
    rows = _rows([0.0] * 64, [f"g{i}" for i in range(64)], list(range(64)))
    st.take(rows.select([1]))
    st.put(rows)
    monkeypatch.setattr(partition_store, "_SEED", 12345)
    again = PartitionStore(table, SCHEMA, [1])
    for i in range(64):
        got = again.take(_rows([0.0], [f"g{i}"], [0]).select([1]))
        assert got.column("v").to_pylist() == [i]
        again.put(got)
    assert len(again) == 64


def test_no_key_columns_is_one_partition() -> None:
    st = PartitionStore(StateTable(2), SCHEMA, [])
    rows = _rows([1.0, 2.0], ["a", "b"], [1, 2])
    st.take(rows.select([]))
    st.put(rows)
    got = st.take(_rows([9.0], ["z"], [0]).select([]))
    assert got.num_rows == 2
    st.put(got.slice(0, 1))
    assert len(st) == 1 and np.asarray(st.all_rows().column("v")).tolist() == [1]
