"""`NexmarkSourceConnector`: the Nexmark generator as a source (`connector = 'nexmark'`).

    CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
                       url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
                       WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
    WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = 1000000,
          nexmark.split.num = '8', nexmark.min.event.gap.in.ns = '0');

A source's columns may be left out (they are the table type's, `model.COLUMNS`);
declared, they must be exactly those, in order, as RisingWave checks. A `CREATE TABLE` with
the same options (and its columns) stores the events. Options (RisingWave's names):

- `nexmark.table.type`: `Person`, `Auction` or `Bid` (any case): which events the relation
  gets. Without it RisingWave generates all three into struct columns; Swell has no struct
  type yet and refuses that form.
- `nexmark.event.num`: how many events (of all three kinds) the generator makes; without
  it, it never ends. A `Bid` source of `nexmark.event.num = 1000000` holds the 920,000 bids
  among event numbers 0 .. 999,999.
- `nexmark.min.event.gap.in.ns` (default 100000, i.e. 10,000 events per second): real-time
  pacing; 0 generates as fast as the barriers take them. `nexmark.use.real.time = true`
  paces by the events' own timestamps instead.
- `nexmark.split.num`: accepted; every split's events come through the one reader, so the
  rows are those of all splits together.
- `nexmark.max.chunk.size`: event numbers per generated chunk (default 65536; RisingWave
  counts rows and defaults to 1024, too small for Arrow chunks to pay off); a barrier
  takes at most 4 chunks.
- the generator's parameters (`nexmark.active.people`, `nexmark.in.flight.auctions`,
  `nexmark.first.event.rate`, `nexmark.base.time`, proportions, hot ratios, average sizes...,
  see `NexmarkConfig`).

Every relation has the hidden column `_rw_nexmark_offset BIGINT`, the event's number: its
stream key. The reader's position is the next event number; the runtime commits it with
the state each barrier produced, and a reader reopened from it generates the very same
rows (the model is a pure function of the event number), so recovery is exactly-once.
Each barrier takes at most `BARRIER_CHUNKS` chunks of `nexmark.max.chunk.size` event
numbers; a source that has more to give keeps the barrier loop busy (`has_data`), and
`FLUSH` after `FLUSH` drains it.

`read_now` (ad-hoc SELECT, backfill of a new view) generates the numbers below the given
position, or all `nexmark.event.num` of them for an ad-hoc query; an endless source
refuses ad-hoc reads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa

from connectors.nexmark.model import COLUMNS, KINDS, NexmarkConfig, generate
from engine.catalog import Relation, RelationKind
from engine.chunk import StreamChunk
from engine.errors import InvalidParameterValue, not_supported
from engine.stream.source import SeekBounds
from engine.stream.source_status import SourceStatus
from engine.types import BIGINT, Field, arrow_schema

OFFSET_COL = "_rw_nexmark_offset"
BARRIER_CHUNKS = 4  # chunks one barrier takes at most
DEFAULT_CHUNK = 1 << 16
DEFAULT_GAP_NS = 100_000
_OWN_OPTIONS = {
    "table.type",
    "event.num",
    "split.num",
    "min.event.gap.in.ns",
    "max.chunk.size",
    "use.real.time",
}
_CONFIG_OPTIONS = {
    "person.proportion",
    "auction.proportion",
    "bid.proportion",
    "first.person.id",
    "first.auction.id",
    "first.category.id",
    "num.categories",
    "active.people",
    "in.flight.auctions",
    "auction.id.lead",
    "person.id.lead",
    "hot.seller.ratio",
    "hot.auction.ratio",
    "hot.bidder.ratio",
    "hot.channel.ratio",
    "avg.person.byte.size",
    "avg.auction.byte.size",
    "avg.bid.byte.size",
    "first.event.id",
    "base.time",
    "first.event.rate",
    "events.per.sec",
    "seed",
}


class NexmarkOptions:
    """The options of one nexmark relation, parsed (raises engine errors when invalid)."""

    def __init__(self, options: dict[str, str]) -> None:
        for key in options:
            if key.startswith("nexmark."):
                short = key[len("nexmark.") :]
                if short not in _OWN_OPTIONS | _CONFIG_OPTIONS:
                    raise InvalidParameterValue(
                        f'unknown nexmark option "{key}"',
                        hint="Known: "
                        + ", ".join(f"nexmark.{k}" for k in sorted(_OWN_OPTIONS | _CONFIG_OPTIONS)),
                    )
        raw_type = options.get("nexmark.table.type")
        if raw_type is None:
            raise not_supported(
                "a nexmark source without nexmark.table.type (the combined form needs struct "
                "columns)",
                hint="Create one source per event kind: nexmark.table.type = 'Bid', 'Auction' "
                "or 'Person'.",
            )
        kind = str(raw_type).strip().lower()
        if kind not in KINDS:
            raise InvalidParameterValue(f"unsupported table type for nexmark source: {raw_type}")
        self.kind = kind
        self.event_num: int | None = _int(options, "nexmark.event.num", None)
        self.split_num: int = _int(options, "nexmark.split.num", 1, low=1)
        self.gap_ns: int = _int(options, "nexmark.min.event.gap.in.ns", DEFAULT_GAP_NS)
        self.chunk: int = _int(options, "nexmark.max.chunk.size", DEFAULT_CHUNK, low=1)
        real = str(options.get("nexmark.use.real.time", "false")).strip().lower()
        if real not in ("true", "false"):
            raise InvalidParameterValue(
                f'invalid value for option "nexmark.use.real.time": "{real}"',
                hint="Expected true or false.",
            )
        self.config = NexmarkConfig.from_options(options)
        if real == "true":
            self.gap_ns = round(self.config.delay_us * 1000)


def _int(options: dict[str, str], key: str, default: int | None, low: int = 0) -> Any:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise InvalidParameterValue(
            f'invalid value for option "{key}": "{raw}"', hint="Expected an integer."
        ) from None
    if v < low:
        raise InvalidParameterValue(f'option "{key}" must be at least {low}, not {v}')
    return v


def _batches(
    opts: NexmarkOptions, start: int, stop: int, chunk: int | None = None
) -> list[pa.RecordBatch]:
    out = []
    step = chunk or opts.chunk
    for lo in range(start, stop, step):
        b = generate(opts.config, opts.kind, lo, min(stop, lo + step))
        if b.num_rows:
            out.append(b)
    return out


class NexmarkReader:
    """Generates the next event numbers at each barrier (no thread: generating is the
    reading, done under the epoch lock in bounded steps)."""

    def __init__(
        self, rel: Relation, position: dict[str, Any] | None, status: SourceStatus
    ) -> None:
        self.opts = NexmarkOptions(rel.options)
        # a SOURCE's chunks of one barrier are concatenated into one delta anyway: generate
        # them as one batch (no copy); a TABLE queues its chunks one by one
        self.one_batch = rel.kind is RelationKind.SOURCE
        self.schema = arrow_schema(rel.fields)
        self.next = int(position["offset"]) if position else 0
        self.status = status
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._n0 = self.next
        self.end: int | None = self.opts.event_num
        status.set_state("running")
        self._report()

    def _allowed(self) -> int:
        """The next event number the pacing lets through now (exclusive)."""
        stop = self.next + BARRIER_CHUNKS * self.opts.chunk
        if self.opts.gap_ns > 0:
            paced = self._n0 + int((time.monotonic() - self._t0) * 1e9 / self.opts.gap_ns)
            stop = min(stop, paced)
        if self.end is not None:
            stop = min(stop, self.end)
        return max(stop, self.next)

    def _report(self) -> None:
        with self.status.lock:
            self.status.offsets[0] = self.next
            if self.end is not None:
                self.status.high_watermarks[0] = self.end

    def take(self) -> tuple[list[StreamChunk], dict[str, Any]]:
        with self._lock:
            stop = self._allowed()
            chunks = [
                StreamChunk.inserts(pa.RecordBatch.from_arrays(b.columns, schema=self.schema))
                for b in _batches(
                    self.opts, self.next, stop, max(stop - self.next, 1) if self.one_batch else None
                )
            ]
            with self.status.lock:
                self.status.messages += sum(len(c) for c in chunks)
            self.next = stop
            self._report()
            return chunks, {"offset": self.next}

    def has_data(self) -> bool:
        with self._lock:
            return self._allowed() > self.next

    def close(self) -> None:
        pass


class NexmarkSourceConnector:
    name = "nexmark"

    def default_columns(self, options: dict[str, str]) -> list[Field]:
        """The columns of a source declared without any: those of its table type."""
        return list(COLUMNS[NexmarkOptions(options).kind])

    def columns(
        self, includes: list[Any], fmt: str, enc: str
    ) -> tuple[list[Field], list[Field], list[str]]:
        if includes:
            raise not_supported("INCLUDE for nexmark sources")
        return [], [Field(OFFSET_COL, BIGINT, hidden=True)], [OFFSET_COL]

    def check(self, rel: Relation) -> None:
        opts = NexmarkOptions(rel.options)
        meta = rel.extra["source"]
        if (meta["format"], meta["encode"]) != ("PLAIN", "JSON"):
            raise not_supported(f"FORMAT {meta['format']} ENCODE {meta['encode']} for nexmark")
        declared = [(f.name, f.type.kind) for f in rel.fields if not f.hidden]
        expected = [(f.name, f.type.kind) for f in COLUMNS[opts.kind]]
        if declared != expected:
            want = ", ".join(f"{n} {t.value}" for n, t in expected)
            raise InvalidParameterValue(
                "The schema of the nexmark source must specify all columns in order",
                detail=f"expected ({want})",
            )

    def open_reader(
        self, rel: Relation, position: dict[str, Any] | None, status: SourceStatus
    ) -> NexmarkReader:
        return NexmarkReader(rel, position, status)

    def read_now(
        self, rel: Relation, upto: dict[str, Any] | None, bounds: SeekBounds | None
    ) -> pa.Table:
        opts = NexmarkOptions(rel.options)
        schema = arrow_schema(rel.fields)
        if upto is not None:
            stop = int(upto.get("offset", 0))
        elif opts.event_num is not None:
            stop = opts.event_num
        else:
            raise not_supported(
                "an ad-hoc query on an endless nexmark source",
                hint="Set nexmark.event.num, or query a materialized view on the source.",
            )
        out = []
        for b in _batches(opts, 0, stop):
            b = pa.RecordBatch.from_arrays(b.columns, schema=schema)
            if bounds is not None and bounds.row_filter is not None:
                b = bounds.row_filter(b)
            out.append(b)
        return pa.Table.from_batches(out, schema=schema)
