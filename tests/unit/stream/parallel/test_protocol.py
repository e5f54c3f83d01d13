"""Messages, chunk bodies and write logs survive the trip between processes unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.chunk import StreamChunk
from engine.state.checkpoint import EpochChanges
from engine.state.store import StateStore
from engine.stream.parallel import protocol
from engine.types import INT, VARCHAR, Field


def test_message_round_trip_with_bodies() -> None:
    msg = protocol.encode({"cmd": "step", "x": [1, 2]}, [b"abc", b"", b"\x00" * 5])
    header, bodies = protocol.decode(msg)
    assert header["cmd"] == "step" and header["x"] == [1, 2]
    assert bodies == [b"abc", b"", b"\x00" * 5]


def test_bodies_are_aligned_views_of_the_message_and_survive_the_timing_header() -> None:
    sizes = [0, 1, 7, 8, 9, 13, 64, 100]
    sent = [bytes([i]) * n for i, n in enumerate(sizes)]
    msg = protocol.encode({"cmd": "step"}, sent)
    for raw in (msg, protocol.with_timing(msg, 1.25, 0.5)):
        base = bytearray(raw)  # what the transport reads (into an aligned buffer)
        header, bodies = protocol.decode(base)
        assert bodies == sent
        at = np.frombuffer(base, np.uint8).ctypes.data
        for b in bodies:
            assert b.obj is base  # a view, not a copy
            assert (np.frombuffer(b, np.uint8).ctypes.data - at) % 8 == 0
    header, _ = protocol.decode(protocol.with_timing(msg, 1.25, 0.5))
    assert header["cpu"] == 1.25 and header["busy"] == 0.5


def test_a_chunk_read_from_a_view_at_an_odd_place_in_a_message_is_the_same() -> None:
    fields = [Field("i", INT), Field("t", VARCHAR)]
    chunk = StreamChunk.from_pretty("+ 1 a\n- 2 .\nU- 3 b\nU+ 3 c", fields)
    msg = protocol.encode({}, [b"xyz", protocol.chunk_body(chunk), b"q"])
    _, bodies = protocol.decode(bytearray(msg))
    back = protocol.chunk_from(bodies[1])
    assert back is not None and back.data.equals(chunk.data) and back.ops.equals(chunk.ops)


def test_chunk_body_round_trip() -> None:
    fields = [Field("i", INT), Field("t", VARCHAR)]
    chunk = StreamChunk.from_pretty("+ 1 a\n- 2 .\nU- 3 b\nU+ 3 c", fields)
    back = protocol.chunk_from(protocol.chunk_body(chunk))
    assert back is not None
    assert back.ops.equals(chunk.ops)
    assert back.data.equals(chunk.data)
    assert protocol.chunk_from(protocol.chunk_body(None)) is None


class _Batch:
    def __init__(self) -> None:
        self.ops: list[tuple[str, bytes, bytes | None]] = []

    def put(self, k: bytes, v: bytes) -> None:
        self.ops.append(("put", k, v))

    def delete(self, k: bytes) -> None:
        self.ops.append(("del", k, None))

    def delete_range(self, a: bytes, b: bytes) -> None:
        self.ops.append(("range", a, b))


def test_recorded_writes_replay_in_order() -> None:
    rec = protocol.RecordingBatch()
    rec.put(b"k1", b"v1")
    rec.delete_range(b"a", b"z")
    rec.put(b"k1", b"v2")
    rec.delete(b"k3")
    direct = _Batch()
    rec.apply(direct)
    shipped = _Batch()
    protocol.replay(*protocol.log_from(rec.body()), shipped)
    assert (
        shipped.ops
        == direct.ops
        == [
            ("put", b"k1", b"v1"),
            ("range", b"a", b"z"),
            ("put", b"k1", b"v2"),
            ("del", b"k3", None),
        ]
    )


def test_kv_and_error_responses() -> None:
    ks, vs = protocol.kv_from(protocol.kv_body([b"a", b"b"], [b"1", b""]))
    assert (ks, vs) == ([b"a", b"b"], [b"1", b""])
    header, _ = protocol.decode(protocol.error_response(ValueError("boom"), "tb"))
    err = protocol.remote_error(header, "worker 3")
    assert not header["ok"] and "worker 3: ValueError: boom" in err.message
    assert err.sqlstate == "XX000" and err.detail == "tb"


def test_a_log_without_range_deletes_is_sorted_by_key_keeping_each_keys_order() -> None:
    rec = protocol.RecordingBatch()
    for k, v in ((b"k3", b"1"), (b"k1", b"2"), (b"k3", b"3"), (b"k2", b"4")):
        rec.put(k, v)
    rec.delete(b"k0")
    rec.sort()
    shipped = _Batch()
    protocol.replay(*protocol.log_from(rec.body()), shipped)
    assert shipped.ops == [
        ("del", b"k0", None),
        ("put", b"k1", b"2"),
        ("put", b"k2", b"4"),
        ("put", b"k3", b"1"),
        ("put", b"k3", b"3"),
    ]
    ranged = protocol.RecordingBatch()
    ranged.put(b"k2", b"x")
    ranged.delete_range(b"a", b"z")
    ranged.put(b"k1", b"y")
    ranged.sort()  # a range delete orders the log: left as recorded
    assert ranged.a == [b"k2", b"a", b"k1"]


def test_a_sorted_log_replays_into_the_checkpoint_in_runs_of_puts() -> None:
    rec = protocol.RecordingBatch()
    rec.put_many([b"k5", b"k4\x00", b"k4"], [b"a", b"b", b"c"])
    rec.delete(b"k2")
    rec.put(b"k10", b"d")
    rec.put(b"k4", b"e")
    rec.sort()
    direct = _Batch()
    rec.apply(direct)
    changes = EpochChanges()
    assert protocol.replay_body(rec.body(), changes) == 6
    shipped = _Batch()
    protocol.replay_body(rec.body(), shipped)
    assert shipped.ops == direct.ops
    # a key's records keep their order; k4 and k4\x00 tie (different keys commute)
    assert [k for _, k, _ in direct.ops if k.startswith(b"k4")] in (
        [b"k4\x00", b"k4", b"k4"],
        [b"k4", b"k4\x00", b"k4"],
        [b"k4", b"k4", b"k4\x00"],
    )
    assert [v for _, k, v in direct.ops if k == b"k4"] == [b"c", b"e"]
    assert sorted({k for _, k, _ in direct.ops}) == sorted({b"k5", b"k4\x00", b"k4", b"k2", b"k10"})
    assert [(k, v) for k, v in zip(changes.keys, changes.values, strict=True)] == [
        (k, v) for _, k, v in direct.ops
    ]


def test_a_sorted_log_becomes_an_sst_file_of_each_keys_last_write(tmp_path: Path) -> None:
    """`write_sst`: a key written twice keeps its last record (a delete after a put is a
    delete, a put after a delete a put), the file ingests into a store as the log would
    replay; a range delete, or keys the sort left in no byte order, give no file."""
    rec = protocol.RecordingBatch()
    rec.put(b"k3", b"old")
    rec.put(b"k1", b"one")
    rec.delete(b"k2")
    rec.put(b"k3", b"new")
    rec.put(b"k4", b"four")
    rec.delete(b"k4")
    rec.sort()
    path = str(tmp_path / "a.sst")
    assert protocol.write_sst(rec, path)
    store = StateStore.open(tmp_path / "db")
    try:
        batch = store.new_batch()
        batch.put(b"k2", b"stale")
        batch.put(b"k4", b"stale")
        store.write(batch)
        store.flush()
        store.ingest([path])
        assert list(store.scan_range(b"k", b"l")) == [(b"k1", b"one"), (b"k3", b"new")]
    finally:
        store.close()
    ranged = protocol.RecordingBatch()
    ranged.put(b"a", b"1")
    ranged.delete_range(b"b", b"c")
    ranged.sort()
    assert not protocol.write_sst(ranged, str(tmp_path / "b.sst"))
    padded = protocol.RecordingBatch()  # b"a\0" sorts as b"a" zero-padded: order kept
    padded.put(b"a\0", b"1")
    padded.put(b"a", b"2")
    padded.sort()
    assert not protocol.write_sst(padded, str(tmp_path / "c.sst"))
    assert not (tmp_path / "b.sst").exists() and not (tmp_path / "c.sst").exists()
