"""Key indexes of `KeyedSegments`: the compact integer index answers as the dict does."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from engine.stream.operators import key_index
from engine.stream.operators.key_index import DictIndex, IntIndex, make_index


@pytest.mark.parametrize("seed", range(40))
def test_int_index_matches_a_dict(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random small and chunk-sized updates, deletes and NULL keys, through merges (the
    delta converted to arrays in pieces of a few keys, for odd seeds)."""
    monkeypatch.setattr(key_index, "MERGE_MIN", 50)
    monkeypatch.setattr(key_index, "DIRECT_MIN", 20)
    if seed % 2:
        monkeypatch.setattr(key_index, "PIECE", 7)
    if seed % 4 < 2:  # lookups of unordered keys sorted before the search
        monkeypatch.setattr(key_index, "SORTED_SEARCH_MIN", 8)
    rnd = random.Random(seed)
    a, b = IntIndex(), DictIndex()
    model: dict[object, int] = {}
    probe: list[object] = [*range(-60, 510), None]
    for _ in range(30):
        if rnd.random() < 0.5:
            n = rnd.choice([1, 5, 30, 100])
            ks = list(
                dict.fromkeys(
                    None if rnd.random() < 0.05 else rnd.randint(-50, 500) for _ in range(n)
                )
            )
            locs = [rnd.randint(0, 10**6) for _ in ks]
            a.update(ks, locs)
            b.update(ks, locs)
            model.update(zip(ks, locs, strict=True))
        elif model:
            gone = rnd.sample(sorted(model, key=str), min(len(model), rnd.randint(1, 40)))
            a.pop_many(gone)
            b.pop_many(gone)
            for k in gone:
                del model[k]
        want = [model.get(k, -1) for k in probe]
        assert len(a) == len(b) == len(model)
        assert a.lookup(probe).tolist() == want == b.lookup(probe).tolist()
        ints = [k for k in probe if k is not None]
        assert a.lookup(ints).tolist() == [model.get(k, -1) for k in ints]
        arr = np.array(ints, np.int64)  # the array form (`KeyedSegments.int_keys`)
        assert a.lookup(arr).tolist() == [model.get(k, -1) for k in ints]
        assert a.has_any(arr) == any(model.get(k, -1) >= 0 for k in ints)
        fresh = [k for k in rnd.sample(range(-50, 500), rnd.choice([3, 40])) if k not in model]
        if rnd.random() < 0.3:  # distinct unstored keys as an array, as the fast path does
            a.update(np.array(fresh, np.int64), range(7, 7 + len(fresh)))
            b.update(fresh, range(7, 7 + len(fresh)))
            model.update(zip(fresh, range(7, 7 + len(fresh)), strict=True))
            assert a.lookup(fresh).tolist() == b.lookup(fresh).tolist()
        k = rnd.choice(probe)
        assert a.get(k) == model.get(k) == b.get(k)
        assert a.has_any(probe) == bool(model) == b.has_any(probe)


@pytest.mark.parametrize("seed", range(6))
def test_search_matches_searchsorted(seed: int) -> None:
    """Unordered, ordered and duplicate queries, past both ends of the base."""
    rng = np.random.default_rng(seed)
    base = np.sort(rng.integers(-1000, 1000, 5000))
    for q in (
        rng.integers(-1200, 1200, 4000),
        np.sort(rng.integers(-1200, 1200, 3000)),
        np.repeat(rng.integers(-5, 5, 500), 9),
        rng.integers(-1200, 1200, 10),
    ):
        assert np.array_equal(key_index.search(base, q), np.searchsorted(base, q))


def test_index_kind_follows_the_key_columns() -> None:
    assert isinstance(make_index([pa.int64()]), IntIndex)
    assert isinstance(make_index([pa.timestamp("us")]), IntIndex)
    assert isinstance(make_index([pa.string()]), DictIndex)
    assert isinstance(make_index([pa.int64(), pa.int64()]), DictIndex)
    assert isinstance(make_index([pa.float64()]), DictIndex)


def test_ascending_chunks_append_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of keys above every stored key (ascending ids) take the in-place append;
    updates of earlier keys, deletes and merges in between answer as the dict does."""
    monkeypatch.setattr(key_index, "MERGE_MIN", 50)
    monkeypatch.setattr(key_index, "DIRECT_MIN", 20)
    rnd = random.Random(7)
    a, model = IntIndex(), {}
    top = 0
    for _ in range(60):
        r = rnd.random()
        if r < 0.6:  # a chunk of new ascending ids, as an array or a list
            ks = list(range(top + 1, top + 1 + rnd.choice([25, 100, 3000])))
            top = ks[-1]
            locs = [rnd.randint(0, 10**6) for _ in ks]
            a.update(np.array(ks, np.int64) if r < 0.3 else ks, locs)
            model.update(zip(ks, locs, strict=True))
        elif r < 0.8 and model:  # moves of stored keys (in place in the arrays)
            ks = rnd.sample(sorted(model), min(len(model), 30))
            locs = [rnd.randint(0, 10**6) for _ in ks]
            a.update(ks, locs)
            model.update(zip(ks, locs, strict=True))
        elif model:
            gone = rnd.sample(sorted(model), min(len(model), rnd.randint(1, 40)))
            a.pop_many(gone)
            for k in gone:
                del model[k]
        probe = list(range(0, top + 5))
        assert len(a) == len(model)
        assert a.lookup(probe).tolist() == [model.get(k, -1) for k in probe]


def test_ascending_chunk_past_the_delta_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk of ids above every stored key appends without folding the delta (small
    moves, deletes, a NULL key stay there and keep answering); one that is not above a
    key of the delta folds it first."""
    monkeypatch.setattr(key_index, "DIRECT_MIN", 20)
    a = IntIndex()
    a.update(np.arange(0, 100, dtype=np.int64), range(100))
    a.update([3, 4, None], [1003, 1004, 7])  # small: into the delta
    a.pop_many([5, 6])
    a.update(np.arange(100, 150, dtype=np.int64), range(100, 150))
    assert 3 in a._delta  # not folded
    a.update([200], [2200])  # a small update above the base: in the delta
    want = {k: k for k in range(150) if k not in (5, 6)} | {3: 1003, 4: 1004, 200: 2200}
    probe = [*range(-2, 210), None]
    model = want | {None: 7}
    assert len(a) == len(model)
    assert a.lookup(probe).tolist() == [model.get(k, -1) for k in probe]
    a.update(np.arange(150, 180, dtype=np.int64), range(150, 180))  # 200 in the delta: fold
    model |= {k: k for k in range(150, 180)}
    assert len(a) == len(model)
    assert a.lookup(probe).tolist() == [model.get(k, -1) for k in probe]
    arr = np.arange(-2, 210, dtype=np.int64)
    assert a.lookup(arr).tolist() == [model.get(k, -1) for k in range(-2, 210)]


@pytest.mark.parametrize("span", [1, 300, 1 << 16, 100_000, (1 << 32) - 1, 1 << 40, 1 << 63])
def test_argsort_ints_is_a_stable_argsort(span: int) -> None:
    """The same order as numpy's stable sort, for spans that fit 16 bits, 32 bits and
    neither (negative values and the int64 extremes included)."""
    rng = np.random.default_rng(span % 1000)
    lo = -(1 << 63) if span == 1 << 63 else -span // 3
    arr = (lo + rng.integers(0, span, 20_000, dtype=np.uint64).astype(np.int64)).astype(np.int64)
    arr[:5] = arr[5:10]  # equal values: their order must be kept
    assert (key_index.argsort_ints(arr) == np.argsort(arr, kind="stable")).all()
    assert key_index.argsort_ints(arr[:1]).tolist() == [0]
    assert key_index.argsort_ints(arr[:0]).tolist() == []
