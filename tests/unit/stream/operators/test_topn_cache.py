"""GroupCache: per-group ranges in one polars frame, replaced by appending, compacted when
garbage or chunks pile up; and TopNOp against its reference with compaction every step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from unit.stream.operators.test_top_n_store import run_against_reference

from engine.stream.operators import topn_cache
from engine.stream.operators.topn_cache import GroupCache


def frame(g: list[int], v: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {"__g": g, "v": v, "__loc": v},
        schema={"__g": pl.Int64, "v": pl.Int64, "__loc": pl.Int64},
    )


def rows(cache: GroupCache, gids: list[int]) -> list[tuple[int, int]]:
    part = cache.part(np.array(gids, np.int64))
    return list(zip(part["__g"].to_list(), part["v"].to_list(), strict=True))


@pytest.mark.parametrize("max_chunks", [64, 1])
def test_put_part_ends_and_compaction(monkeypatch: pytest.MonkeyPatch, max_chunks: int) -> None:
    monkeypatch.setattr(topn_cache, "_MAX_CHUNKS", max_chunks)
    cache = GroupCache(frame([], []))
    cache.grow(40)  # grows past the initial 16 slots
    p = frame([0, 0, 1, 3], [5, 6, 7, 8])
    cache.put(np.array([0, 1, 3]), p, p["__g"].to_numpy())
    assert rows(cache, [0, 1, 2, 3]) == [(0, 5), (0, 6), (1, 7), (3, 8)]
    q = frame([1, 1, 39], [9, 10, 11])  # group 3 loses its rows, 39 is new
    cache.put(np.array([1, 3, 39]), q, q["__g"].to_numpy())
    assert rows(cache, [0, 1, 3, 39]) == [(0, 5), (0, 6), (1, 9), (1, 10), (39, 11)]
    ends = cache.ends(np.array([0, 1, 3, 39]))
    assert ends["v"].to_list() == [6, 10, 11]
    assert cache.part(np.array([0, 39]))["__loc"].to_list() == [5, 6, 11]
    if max_chunks == 1:
        assert cache.frame.height == 5 and cache.frame.n_chunks() == 1


def test_top_n_with_compaction_every_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topn_cache, "_MAX_CHUNKS", 1)
    for seed in range(3):
        run_against_reference(tmp_path, 200 + seed, epochs=20)
