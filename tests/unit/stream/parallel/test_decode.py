"""A COPY's data decoded in the workers: cut at line ends, decoded by `WorkerHost`'s
`decode` command to the columns pgwire's own parser gives, refused (so pgwire decodes it)
whenever the vectorised path does not vouch for it, and through a real pool of worker
processes, including one that died."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine.catalog.catalog import type_to_json
from engine.stream.parallel import protocol
from engine.stream.parallel.decode import MIN_BYTES, cut, decode_in_workers, suitable
from engine.stream.parallel.host import WorkerHost
from engine.stream.parallel.pool import WorkerPool
from engine.types import BIGINT, BOOLEAN, DATE, DOUBLE, INT, JSONB, TIMESTAMPTZ, VARCHAR, SqlType
from pgwire.copy_columns import CopyColumns, parse_copy

TYPES = [BIGINT, INT, DOUBLE, BOOLEAN, DATE, TIMESTAMPTZ, VARCHAR, JSONB]
ROW = "{i},{s},{f},{b},2024-0{m}-1{d},2024-01-0{d} 10:00:0{d}+00,name {i},{j}\n"


def csv_rows(n: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(
            ROW.format(
                i=i,
                s=rng.randint(-1000, 1000),
                f=rng.random(),
                b=rng.choice(["t", "false", "on"]),
                m=rng.randint(1, 9),
                d=rng.randint(1, 9),
                j=rng.choice(["{}", '"[1, 2]"', "3", ""]),  # '' is NULL in CSV
            )
        )
    return "".join(out).encode()


def reference(data: bytes, opts: dict[str, Any], types: list[SqlType]) -> list[list[Any]]:
    target = CopyColumns("t", [f"c{i}" for i in range(len(types))], types, UTC)
    return [c.to_pylist() for c in parse_copy(data, {"format": "csv", **opts}, target)]


def decode(host: WorkerHost, data: bytes, opts: dict[str, Any], types: list[SqlType]) -> Any:
    head = {"cmd": "decode", "opts": opts, "types": [type_to_json(t) for t in types], "utc": True}
    header, bodies = protocol.decode(host.handle(protocol.encode(head, [data])))
    assert header["ok"], header
    if header.get("refused"):
        return None
    return [c.to_pylist() for c in protocol.columns_from(bodies[0])]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[WorkerHost]:
    h = WorkerHost({"scratch_dir": str(tmp_path), "worker_id": 0})
    yield h
    h.close()


def test_pieces_end_at_line_ends_and_add_up_to_the_data() -> None:
    rng = random.Random(5)
    for _ in range(200):
        lines = [b"x" * rng.randint(0, 30) + b"\n" for _ in range(rng.randint(1, 40))]
        data = b"".join(lines)
        if rng.random() < 0.3:
            data = data[: rng.randint(1, len(data))]  # the last line without its end
        for parts in (1, 2, 3, 7):
            pieces = cut(data, parts)
            assert b"".join(pieces) == data
            assert 1 <= len(pieces) <= parts and all(pieces)
            assert all(bytes(p).endswith(b"\n") for p in pieces[:-1])


def test_only_data_whose_lines_are_its_rows_goes_to_the_workers() -> None:
    big = csv_rows(1) * (MIN_BYTES // len(csv_rows(1)) + 1)
    assert suitable(big, {"format": "csv"})
    assert not suitable(big[: MIN_BYTES // 2], {"format": "csv"})  # small: decoded here
    assert not suitable(big + b'1,"a\nb"\n', {"format": "csv"})  # a quoted line end
    assert not suitable(big + b"\\.\n", {"format": "csv"})  # the end marker
    text = big.replace(b",", b"\t")
    assert suitable(text, {"format": "text"})
    assert not suitable(text + b"a\\\nb\n", {"format": "text"})  # an escaped line end
    nulls = text.replace(b"\tt\t", b"\t\\N\t")  # backslashes everywhere, none before . or \n
    assert b"\\N" in nulls and suitable(nulls, {"format": "text"})
    assert not suitable(nulls + b"\\.\n", {"format": "text"})
    assert not suitable(nulls + b"x\\\\.y\n", {"format": "text"})  # as `in` answers
    assert suitable(nulls + b"x\\", {"format": "text"})  # a backslash last
    assert not suitable(big, {"format": "binary"})


@pytest.mark.parametrize("header", [False, True])
def test_the_decode_command_gives_pgwires_columns(host: WorkerHost, header: bool) -> None:
    data = (b"a,b,c,d,e,f,g,h\n" if header else b"") + csv_rows(500)
    opts = {"format": "csv", "header": header}
    got = decode(host, data, opts, TYPES)
    assert got is not None
    assert got == reference(data, opts, TYPES)
    text = b"1\t2\t\\N\n3\t4\t5\n"  # the NULL marker is no escape
    assert decode(host, text, {"format": "text"}, [BIGINT] * 3) == [[1, 3], [2, 4], [None, 5]]
    assert decode(host, b"1\ta\\tb\n", {"format": "text"}, [BIGINT, VARCHAR]) is None


@pytest.mark.parametrize(
    "data,types",
    [
        (b"1,abc\n", [BIGINT, BIGINT]),  # a bad value: pgwire reports it with its line
        (b"1,0x1F\n", [BIGINT, BIGINT]),  # hexadecimal: read by the exact parser
        (b"1,99999999999\n", [BIGINT, INT]),  # out of range
        (b'1,"a ""b"" c" x\n', [BIGINT, VARCHAR]),  # a quote inside an unquoted value
        (b"1,2\n\n3,4\n", [BIGINT, BIGINT]),  # an empty line
        (b"1,2,3\n", [BIGINT, BIGINT]),  # a wrong number of columns
        (b"1,{bad\n", [BIGINT, JSONB]),
    ],
)
def test_what_the_vectorised_path_cannot_vouch_for_is_refused(
    host: WorkerHost, data: bytes, types: list[SqlType]
) -> None:
    assert decode(host, data, {"format": "csv"}, types) is None


def test_a_decode_leaves_a_failed_scratch_write_for_the_next_actor_request(
    host: WorkerHost,
) -> None:
    host._deferred_error = OSError("disk full")  # the last collect's scratch write failed
    assert decode(host, b"1\n", {"format": "csv"}, [BIGINT]) == [[1]]
    header, _ = protocol.decode(host.handle(protocol.encode({"cmd": "stats"})))
    assert not header["ok"] and "scratch store write failed" in header["error"]


def test_a_pool_decodes_in_pieces_and_a_lost_worker_leaves_it_to_the_caller(
    tmp_path: Path,
) -> None:
    pool = WorkerPool(2, {"scratch_dir": str(tmp_path)})
    try:
        data = b"id,v\n" + b"".join(b"%d,%d\n" % (i, i * 7) for i in range(MIN_BYTES // 8))
        opts = {"format": "csv", "header": True, "freeze": True}  # FREEZE: no effect
        assert decode_in_workers(pool, data, opts, [BIGINT, BIGINT], True) is None  # none runs
        for i in range(2):
            pool.handle(i)  # started, as by a parallel job's actors
        got = decode_in_workers(pool, data, opts, [BIGINT, BIGINT], True)
        assert got is not None and all(isinstance(c, pa.Array) for c in got)
        assert [c.to_pylist() for c in got] == reference(data, {"header": True}, [BIGINT] * 2)
        assert len(got[0]) == MIN_BYTES // 8
        info = pool.workers[1].info()
        os.kill(int(str(info["pid"])), signal.SIGKILL)
        pool.workers[1].proc.wait()  # type: ignore[attr-defined]
        assert decode_in_workers(pool, data, opts, [BIGINT, BIGINT], True) is None
        assert pool.lost == 1
        pool.handle(1)  # replaced
        again = decode_in_workers(pool, data, opts, [BIGINT, BIGINT], True)
        assert again is not None and again[1].to_pylist() == got[1].to_pylist()
    finally:
        pool.close()
