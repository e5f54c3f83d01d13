"""The Nexmark generator: a pure function of the event number (determinism, chunking,
resume), the model's proportions, ids and timestamps, column types, options, and the
source through SQL: exactly-once resume from a checkpointed position after a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from connectors.nexmark.model import (
    AUCTION,
    BID,
    COLUMNS,
    PERSON,
    NexmarkConfig,
    generate,
    kind_counts,
)
from connectors.nexmark.source import NexmarkOptions, NexmarkReader
from engine.catalog import Relation, RelationKind
from engine.database import Config, SwellDatabase
from engine.errors import EngineError, InvalidParameterValue
from engine.stream.source_status import SourceStatus
from engine.types import arrow_schema

CFG = NexmarkConfig()


def concat(batches: list[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(batches).combine_chunks()


@pytest.mark.parametrize("kind", [PERSON, AUCTION, BID])
def test_same_numbers_same_rows_however_chunked(kind: str) -> None:
    whole = concat([generate(CFG, kind, 0, 150_000)])
    # cuts inside string blocks (65,536 numbers) and across them
    pieces = [(0, 7), (7, 65_530), (65_530, 70_001), (70_001, 131_073), (131_073, 150_000)]
    parts = concat([generate(CFG, kind, a, b) for a, b in pieces])
    assert parts.equals(whole)
    assert concat([generate(CFG, kind, 0, 150_000)]).equals(whole)  # and run to run


def test_proportions_ids_and_times() -> None:
    n = 100_000
    counts = kind_counts(CFG, 0, n)
    assert counts == {PERSON: 2000, AUCTION: 6000, BID: 92000, "all": n}  # 1 : 3 : 46
    p = generate(CFG, PERSON, 0, n)
    a = generate(CFG, AUCTION, 0, n)
    b = generate(CFG, BID, 0, n)
    assert p.column("id").to_pylist() == list(range(1000, 3000))
    assert a.column("id").to_pylist() == list(range(1000, 7000))
    # an auction's seller and a bid's bidder are persons that exist by then (or the few
    # "lead" ids just ahead), its auction one that exists or is about to
    assert pa.compute.min(a.column("seller")).as_py() >= 1000
    assert pa.compute.max(a.column("seller")).as_py() < 3000 + 10
    assert pa.compute.min(b.column("auction")).as_py() >= 1000
    assert pa.compute.max(b.column("auction")).as_py() < 7000 + 10
    assert set(a.column("category").to_pylist()) == {10, 11, 12, 13, 14}
    # 10,000 events per second of event time from 2015-07-15
    off = np.asarray(b.column("_rw_nexmark_offset"))
    us = np.asarray(b.column("date_time").cast(pa.int64()))
    assert np.array_equal(us, 1_436_918_400_000_000 + (off // 10) * 1000)
    assert np.all(np.diff(us) >= 0)
    exp = np.asarray(a.column("expires").cast(pa.int64()))
    start = np.asarray(a.column("date_time").cast(pa.int64()))
    assert np.all(exp > start)
    prices = np.asarray(b.column("price"))
    assert prices.min() >= 100 and prices.max() <= 100_000_000
    # hot auctions and bidders: about half the bids go to every 100th auction
    hot = np.asarray(b.column("auction")) % 100 == 0
    assert 0.4 < hot.mean() < 0.7
    states = set(p.column("state").to_pylist())
    assert states <= {"az", "ca", "id", "or", "wa", "wy"} and len(states) == 6


def test_sizes_follow_the_model_averages() -> None:
    b = generate(CFG, BID, 0, 50_000)
    extra = np.asarray(pa.compute.binary_length(b.column("extra")))
    assert 60 <= extra.mean() <= 76  # pads 32 bytes to 100, +-20 %
    a = generate(CFG, AUCTION, 0, 50_000)
    size = sum(
        np.asarray(pa.compute.binary_length(a.column(c))) for c in ("item_name", "description")
    ) + np.asarray(pa.compute.binary_length(a.column("extra")))
    assert 400 < (size + 48).mean() < 600
    ch = b.column("channel").to_pylist()
    assert {"Google", "Facebook", "Baidu", "Apple"} <= set(ch)
    assert any(c.startswith("channel-") for c in ch)


@pytest.mark.parametrize("kind", [PERSON, AUCTION, BID])
def test_column_types_are_the_declared_ones(kind: str) -> None:
    batch = generate(CFG, kind, 0, 1000)
    want = arrow_schema(COLUMNS[kind])
    assert batch.schema.names[:-1] == want.names
    assert [f.type for f in batch.schema][:-1] == [f.type for f in want]
    assert batch.schema.field("_rw_nexmark_offset").type == pa.int64()
    assert all(c.null_count == 0 for c in batch.columns)


def test_options() -> None:
    o = NexmarkOptions(
        {
            "nexmark.table.type": "AUCTION",
            "nexmark.event.num": "500",
            "nexmark.max.chunk.size": "100",
            "nexmark.active.people": "50",
        }
    )
    assert (o.kind, o.event_num, o.chunk, o.config.active_people) == ("auction", 500, 100, 50)
    assert o.gap_ns == 100_000  # RisingWave's default pacing: 10,000 events per second
    real = NexmarkOptions({"nexmark.table.type": "bid", "nexmark.use.real.time": "true"})
    assert real.gap_ns == 100_000
    for bad in (
        {"nexmark.table.type": "bids"},
        {"nexmark.table.type": "bid", "nexmark.event.num": "ten"},
        {"nexmark.table.type": "bid", "nexmark.split.num": "0"},
        {"nexmark.table.type": "bid", "nexmark.no.such": "1"},
        {"nexmark.table.type": "bid", "nexmark.bid.proportion": "0"},
    ):
        with pytest.raises(InvalidParameterValue):
            NexmarkOptions(bad)
    with pytest.raises(EngineError, match="nexmark.table.type"):
        NexmarkOptions({})


def _rel(options: dict[str, str]) -> Relation:
    from connectors.nexmark.source import NexmarkSourceConnector

    conn = NexmarkSourceConnector()
    cols = conn.default_columns(options)
    _inc, hidden, _keys = conn.columns([], "PLAIN", "JSON")
    return Relation(
        id=1,
        name="bid",
        kind=RelationKind.SOURCE,
        fields=[*cols, *hidden],
        pk=[len(cols)],
        definition="",
        options=options,
        extra={"source": {"connector": "nexmark", "format": "PLAIN", "encode": "JSON"}},
    )


def _drain(r: NexmarkReader) -> tuple[list[pa.Table], list[dict[str, Any]]]:
    tables, positions = [], []
    while r.has_data():
        chunks, pos = r.take()
        tables.append(pa.Table.from_batches([c.data for c in chunks]))
        positions.append(pos)
    return tables, positions


def test_reader_bounded_steps_and_resume_from_any_position() -> None:
    opts = {
        "nexmark.table.type": "Bid",
        "nexmark.event.num": "10000",
        "nexmark.min.event.gap.in.ns": "0",
        "nexmark.max.chunk.size": "1000",
    }
    rel = _rel(opts)
    tables, positions = _drain(NexmarkReader(rel, None, SourceStatus("bid")))
    assert [p["offset"] for p in positions] == [4000, 8000, 10000]  # 4 chunks a barrier
    whole = pa.concat_tables(tables).combine_chunks()
    assert whole.num_rows == 9200
    assert whole.equals(pa.Table.from_batches([generate(CFG, BID, 0, 10_000)]).combine_chunks())
    # a reader reopened from the first checkpointed position goes on with the same rows
    rest, _ = _drain(NexmarkReader(rel, positions[0], SourceStatus("bid")))
    assert pa.concat_tables([tables[0], *rest]).combine_chunks().equals(whole)
    status = SourceStatus("bid")
    NexmarkReader(rel, {"offset": 10000}, status)
    assert status.offsets == {0: 10000} and status.high_watermarks == {0: 10000}


def test_pacing_holds_events_back() -> None:
    rel = _rel({"nexmark.table.type": "Person", "nexmark.min.event.gap.in.ns": "10000000000"})
    r = NexmarkReader(rel, None, SourceStatus("p"))
    chunks, pos = r.take()  # 10 s per event: nothing is due yet
    assert chunks == [] and pos == {"offset": 0}


def run(db: SwellDatabase, sql: str) -> Any:
    return db.connect("root", "dev").execute_simple(sql)[-1].rows


def test_crash_between_checkpoints_resumes_exactly_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    d = SwellDatabase(Config(data_dir=data, barrier_interval_ms=60_000))
    run(
        d,
        "CREATE SOURCE bid WITH (connector = 'nexmark', nexmark.table.type = 'Bid',"
        " nexmark.event.num = '100000', nexmark.min.event.gap.in.ns = '0',"
        " nexmark.max.chunk.size = '2000')",
    )
    run(d, "CREATE MATERIALIZED VIEW c AS SELECT count(*) AS n, sum(price) AS s FROM bid")
    run(d, "FLUSH")  # 8000 event numbers a barrier
    first = run(d, "SELECT n FROM c")[0][0]
    assert 0 < first < 92000
    d.runtime._stop.set()  # crash: no final barrier, no clean close
    d.wal.close()
    d.store.close()
    d2 = SwellDatabase(Config(data_dir=data, barrier_interval_ms=60_000))
    try:
        for _ in range(20):
            run(d2, "FLUSH")
            if run(d2, 'SELECT "offset" FROM rw_catalog.rw_source_lag') == [(100000,)]:
                break
        want = run(d2, "SELECT count(*), sum(price) FROM bid")
        assert want[0][0] == 92000
        assert run(d2, "SELECT n, s FROM c") == want
    finally:
        d2.close()
