"""WorkerHost: an actor built from its node's JSON steps, ships its dirty writes, and an
actor rebuilt from those writes continues where the first one left off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.chunk import StreamChunk
from engine.database import Config, SwellDatabase
from engine.plan.stream_codec import decode_node
from engine.stream.parallel import host as host_module
from engine.stream.parallel import protocol
from engine.stream.parallel.host import WorkerHost


@pytest.fixture(scope="module")
def agg_node(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The stored JSON of `GROUP BY k` aggregation node (planned by a real database)."""
    db = SwellDatabase(Config(data_dir=tmp_path_factory.mktemp("plan"), barrier_interval_ms=60_000))
    try:
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE t (k VARCHAR, v INT)")
        s.execute_simple("CREATE MATERIALIZED VIEW m AS SELECT k, sum(v) AS s FROM t GROUP BY k")
        rel = db.catalog.find("m")
        assert rel is not None
        nodes = rel.extra["stream_plan"]["nodes"]
        node: dict[str, Any] = next(n for n in nodes if n["node"] == "StreamHashAgg")
        assert len(node["input_schemas"][0]) == 2  # k and the summed value
        return node
    finally:
        db.close()


class Store:
    """The coordinator's side: a dict the write logs are applied to."""

    def __init__(self) -> None:
        self.kv: dict[bytes, bytes] = {}

    def put(self, k: bytes, v: bytes) -> None:
        self.kv[k] = v

    def delete(self, k: bytes) -> None:
        self.kv.pop(k, None)

    def delete_range(self, a: bytes, b: bytes) -> None:
        for k in [k for k in self.kv if a <= k < b]:
            del self.kv[k]


def call(host: WorkerHost, header: dict[str, Any], bodies: list[bytes] | None = None) -> Any:
    h, b = protocol.decode(host.handle(protocol.encode(header, bodies)))
    assert h["ok"], h
    return h, b


def build(host: WorkerHost, node: dict[str, Any], store: Store | None) -> None:
    tables = {t["name"]: 5000 + i for i, t in enumerate(node["tables"])}
    bodies = None
    if store is not None:
        items = sorted(store.kv.items())
        bodies = [
            protocol.kv_body(
                [k for k, _ in items if k[:4] == tid.to_bytes(4, "big")],
                [v for k, v in items if k[:4] == tid.to_bytes(4, "big")],
            )
            for tid in tables.values()
        ]
    call(host, {"cmd": "build", "actor": "a", "node": node, "tables": tables}, bodies)


def step(host: WorkerHost, text: str, node: dict[str, Any]) -> list[tuple[Any, ...]]:
    chunk = StreamChunk.from_pretty(text, decode_node(node).input_schemas[0])
    h, b = call(
        host,
        {"cmd": "step", "steps": [{"actor": "a", "inputs": [0]}], "now": None},
        [protocol.chunk_body(chunk)],
    )
    out = protocol.chunk_from(b[h["steps"][0]["out"]])
    assert out is not None
    return sorted(zip(out.ops.to_pylist(), *out.data.to_pydict().values(), strict=True))


def collect(host: WorkerHost, store: Store) -> None:
    _, bodies = call(host, {"cmd": "collect", "actors": ["a"]})
    protocol.replay(*protocol.log_from(bodies[0]), store)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[WorkerHost]:
    h = WorkerHost({"scratch_dir": str(tmp_path), "worker_id": 0})
    yield h
    h.close()


def test_actor_steps_commits_and_rebuilds_from_shipped_state(
    host: WorkerHost, agg_node: dict[str, Any], tmp_path: Path
) -> None:
    store = Store()
    build(host, agg_node, None)
    first = step(host, "+ a 5\n+ b 1\n+ a 2", agg_node)
    assert [r[1:] for r in first] == [("a", 7), ("b", 1)]
    collect(host, store)
    assert store.kv  # the groups went into the coordinator's batch
    # a new worker (the first one died) gets the committed state and goes on from it
    again = WorkerHost({"scratch_dir": str(tmp_path / "other"), "worker_id": 1})
    try:
        build(again, agg_node, store)
        out = step(again, "+ a 1", agg_node)
        assert [r[1:] for r in out] == [("a", 7), ("a", 8)]  # U- old, U+ new
        assert step(host, "+ a 1", agg_node) == out  # the same as the first actor would say
    finally:
        again.close()


def test_errors_are_responses_and_drop_forgets_the_actor(
    host: WorkerHost, agg_node: dict[str, Any]
) -> None:
    h, _ = protocol.decode(host.handle(protocol.encode({"cmd": "step", "steps": [{"actor": "x"}]})))
    assert not h["ok"] and "KeyError" in h["error"]
    build(host, agg_node, None)
    call(host, {"cmd": "drop", "actors": ["a"]})
    assert "a" not in host.actors
    stats, _ = call(host, {"cmd": "stats"})
    assert stats["actors"] == {}


def held_step(host: WorkerHost, text: str | None, node: dict[str, Any], hold: bool) -> Any:
    """One step with or without hold; no text: only the held output is asked for."""
    bodies = []
    s: dict[str, Any] = {"actor": "a", "inputs": [-1], "run": False}
    if text is not None:
        chunk = StreamChunk.from_pretty(text, decode_node(node).input_schemas[0])
        bodies, s = [protocol.chunk_body(chunk)], {"actor": "a", "inputs": [0]}
    h, b = call(host, {"cmd": "step", "steps": [s], "now": None, "hold": hold}, bodies)
    st = h["steps"][0]
    out = protocol.chunk_from(b[st["out"]]) if st["out"] >= 0 else None
    got = None if out is None else sorted(zip(out.ops.to_pylist(), *out.data.to_pydict().values()))
    return st["held"], got


def test_held_outputs_come_back_as_their_net_change(
    host: WorkerHost, agg_node: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    build(host, agg_node, None)
    assert step(host, "+ a 1", agg_node) == [(1, "a", 1)]
    # backfill slices: nothing comes back while the actor holds its outputs
    assert held_step(host, "+ a 2\n+ b 1", agg_node, True) == (True, None)
    assert held_step(host, "+ a 3\n+ c 4\n- c 4", agg_node, True) == (True, None)
    # the barrier's step: a's first value goes, its last one comes, b once, c not at all
    held, out = held_step(host, None, agg_node, False)
    assert not held and out == [(1, "a", 6), (1, "b", 1), (2, "a", 1)]
    assert held_step(host, None, agg_node, False) == (False, None)  # nothing left
    # past HOLD_ROWS the held rows are consolidated, and returned if still that many
    monkeypatch.setattr(host_module, "HOLD_ROWS", 4)
    assert held_step(host, "+ a 1\n+ d 1", agg_node, True) == (True, None)  # 3 rows held
    held, out = held_step(host, "+ e 1\n+ f 1", agg_node, True)
    assert not held and out == [(1, "a", 7), (1, "d", 1), (1, "e", 1), (1, "f", 1), (2, "a", 6)]
