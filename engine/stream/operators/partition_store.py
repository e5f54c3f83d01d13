"""PartitionStore: rows grouped by key columns, kept as Arrow tables in hash buckets.

Why: operators that recompute whole partitions (`OverWindowOp`: window partitions;
`CollectAggOp`: aggregation groups) need, per epoch, "every stored row of the partitions
the delta touched", and afterwards to replace those rows. Holding one Python tuple and one
store key per row made both the lookup and the checkpoint per-row Python. Here rows stay
columnar:

* every row lives in exactly one bucket, `hash(key columns) & (buckets - 1)`; a bucket is
  one Arrow table (all its partitions' rows, in no particular order);
* `take(probe)` hashes the probe keys, concatenates the touched buckets, marks the rows
  whose key occurs in the probe (one polars window expression over stored + probe keys,
  so NULLs equal NULLs and NaN equals NaN, like PARTITION BY / GROUP BY), removes and
  returns them; the rest of those buckets waits in `_pending`;
* `put(rows)` (the recomputed rows of the taken partitions) splits them by bucket,
  appends them to the pending remainders and persists each touched bucket;
* persistence is few large values in ONE state table: `(bucket,)` ->
  `(Arrow IPC stream bytes,)`, rewritten only for buckets an epoch touched, and
  `("meta",)` -> `(format, bucket count, rows, hash fingerprint)`. Nothing is held in
  memory between steps: `take` reads the touched buckets with one multi-get (a disk
  table keeps them in RocksDB; the block cache holds the hot ones) and decodes them
  zero-copy from those bytes;
* the bucket count doubles (all rows re-split and rewritten) whenever the average bucket
  exceeds `BUCKET_ROWS`, so a small epoch costs one bucket's rows, amortised.

Columns polars cannot hash stably (intervals) are left out of the bucket hash: rows that
differ only there share a bucket, which costs spread, not correctness. The hash is only
trusted where it was computed: the meta row keeps the hash of a fixed probe value, and a
store whose fingerprint differs (a polars upgrade) is re-split when loaded. Format 1 (the
meta row without rows and fingerprint, from when every bucket was held in memory) is read
once at load to count and check its rows, then stamped as format 2.

Lifecycle: built by the operator's constructor over its already-loaded state table;
per step exactly one `take` followed by one `put`.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operators.frames import col_name, polars_frame

FORMAT_VERSION = 2
BUCKET_ROWS = 4096
"""Average rows per bucket before the bucket count doubles."""
MAX_BUCKETS = 1 << 16
_SEED = 0x5357454C4C
_META = ("meta",)
_SRC = "__src"


class PartitionStore:
    """Rows of `schema` grouped by `key_cols`; see the module docstring."""

    def __init__(self, table: StateTable, schema: pa.Schema, key_cols: Sequence[int]) -> None:
        self.table = table
        table.prefer_keyed()  # few large values rewritten in place
        self.schema = schema
        self.key_cols = list(key_cols)
        self._hash_pos = [
            j for j, c in enumerate(self.key_cols) if not pa.types.is_interval(schema.field(c).type)
        ]
        self._nbuckets = 1
        self._rows = 0
        self._pending: dict[int, pa.Table | None] | None = None
        self._load()

    def __len__(self) -> int:
        return self._rows

    @property
    def bucket_count(self) -> int:
        return self._nbuckets

    def all_rows(self) -> pa.Table:
        """Every stored row (tests, re-splits)."""
        return _concat([t for _, t in self._stored()], self.schema)

    def _stored(self) -> list[tuple[int, pa.Table]]:
        """(bucket, rows) of every stored bucket (reads the whole table)."""
        return [(int(k[0]), _read(v[0])) for k, v in self.table.items() if k != _META]

    # -- per step: take, then put ------------------------------------------------------
    def take(self, probe: pa.Table) -> pa.Table:
        """Remove and return every stored row whose key occurs in `probe` (the key
        columns, in `key_cols` order)."""
        if self._pending is not None:
            raise InternalError("partition store: take without put")
        nprobe = probe.num_rows
        probe = self._cast_probe(probe)
        touched = np.unique(self._bucket_ids(probe, nprobe)).tolist()
        got = self.table.get_many([(b,) for b in touched])
        present = [b for b, v in zip(touched, got, strict=True) if v is not None]
        parts = [_read(v[0]) for v in got if v is not None]
        self._pending = {b: None for b in touched}
        if not present:
            return self.schema.empty_table()
        stored = _concat(parts, self.schema)
        n = stored.num_rows
        hit = self._hits(stored, probe)
        of_row = np.repeat(np.asarray(present, np.int64), [p.num_rows for p in parts])
        keep = ~hit
        kept = stored.filter(pa.array(keep))
        for b, t in _split(kept, of_row[keep]):
            self._pending[b] = t
        taken = stored.filter(pa.array(hit)) if hit.any() else self.schema.empty_table()
        self._rows -= n - kept.num_rows
        return taken

    def put(self, rows: pa.Table) -> None:
        """Store `rows` (whose keys all were in the last `take`'s probe) and persist every
        bucket that `take` touched."""
        pending = self._pending
        if pending is None:
            raise InternalError("partition store: put without take")
        self._pending = None
        rows = rows.cast(self.schema) if rows.schema != self.schema else rows
        adds = dict(_split(rows, self._bucket_ids(rows.select(self.key_cols), rows.num_rows)))
        for b in set(pending) | set(adds):
            self._write(b, [t for t in (pending.get(b), adds.get(b)) if t is not None])
        self._rows += rows.num_rows
        if self._rows > self._nbuckets * BUCKET_ROWS and self._nbuckets < MAX_BUCKETS:
            nb = self._nbuckets
            while self._rows > nb * BUCKET_ROWS and nb < MAX_BUCKETS:
                nb *= 2
            self._resplit(nb)
        else:
            self._put_meta()

    def _put_meta(self) -> None:
        self.table.put(_META, (FORMAT_VERSION, self._nbuckets, self._rows, _fingerprint()))

    # -- internals ---------------------------------------------------------------------
    def _cast_probe(self, probe: pa.Table) -> pa.Table:
        want = [self.schema.field(c) for c in self.key_cols]
        arrays = []
        for j, f in enumerate(want):
            a = probe.column(j)
            arrays.append(a if a.type == f.type else a.cast(f.type))
        return pa.Table.from_arrays(arrays, names=[col_name(j) for j in range(len(want))])

    def _bucket_ids(self, keys: pa.Table, n: int | None = None) -> np.ndarray:
        n = keys.num_rows if n is None else n
        if self._nbuckets == 1 or not self._hash_pos or n == 0:
            return np.zeros(n, np.int64)
        cols = [keys.column(j) for j in self._hash_pos]
        df = pl.from_arrow(pa.Table.from_arrays(cols, names=[f"h{j}" for j in self._hash_pos]))
        assert isinstance(df, pl.DataFrame)
        h = df.hash_rows(seed=_SEED).to_numpy()
        return (h & np.uint64(self._nbuckets - 1)).astype(np.int64)

    def _hits(self, stored: pa.Table, probe: pa.Table) -> np.ndarray:
        """Per stored row: its key occurs in `probe`."""
        nk = len(self.key_cols)
        n = stored.num_rows
        if nk == 0:
            return np.ones(n, dtype=bool)
        arrays = [
            pa.chunked_array(
                stored.column(c).chunks + probe.column(j).chunks, self.schema.field(c).type
            ).combine_chunks()
            for j, c in enumerate(self.key_cols)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, names=[col_name(j) for j in range(nk)])
        frame = polars_frame(batch, range(nk))
        src = np.r_[np.zeros(n, np.int8), np.ones(probe.num_rows, np.int8)]
        df = frame.df.with_columns(pl.Series(_SRC, src))
        hit = df.select(pl.col(_SRC).max().over([col_name(j) for j in range(nk)])).to_series()
        return hit.head(n).to_numpy().astype(bool)

    def _write(self, b: int, tables: list[pa.Table]) -> None:
        t = _concat(tables, self.schema) if tables else self.schema.empty_table()
        if t.num_rows == 0:
            self.table.delete((b,))
            return
        t = t.combine_chunks()
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, self.schema) as w:
            w.write_table(t)
        self.table.put((b,), (sink.getvalue(),))

    def _resplit(self, nb: int, stored: list[tuple[int, pa.Table]] | None = None) -> None:
        stored = self._stored() if stored is None else stored
        everything = _concat([t for _, t in stored], self.schema)
        old = {b for b, _ in stored}
        self._nbuckets = nb
        self._rows = everything.num_rows
        self._put_meta()
        ids = self._bucket_ids(everything.select(self.key_cols), everything.num_rows)
        split = dict(_split(everything, ids))
        for b in old - set(split):
            self.table.delete((b,))
        for b, t in split.items():
            self._write(b, [t])

    def _load(self) -> None:
        meta = self.table.get(_META)
        if meta is None:
            self._put_meta()
            return
        version = meta[0]
        if version not in (1, FORMAT_VERSION):
            raise InternalError(f"partition store format {version} is not supported")
        self._nbuckets = int(meta[1])
        if version == FORMAT_VERSION and meta[3] == _fingerprint():
            self._rows = int(meta[2])
            return
        # format 1 (no row count) or another hash function: check every row's bucket
        stored = self._stored()
        self._rows = sum(t.num_rows for _, t in stored)
        moved = any(
            bool((self._bucket_ids(t.select(self.key_cols), t.num_rows) != b).any())
            for b, t in stored
        )
        if moved:
            self._resplit(self._nbuckets, stored)
        else:
            self._put_meta()


def _fingerprint() -> int:
    """The bucket hash of a fixed probe: differs when the hash function changed."""
    return _fingerprint_of(_SEED)


@functools.cache
def _fingerprint_of(seed: int) -> int:
    probe = pl.DataFrame({"h": [20_260_101], "s": ["swell"]})
    return int(probe.hash_rows(seed=seed).to_numpy()[0] & 0x7FFF_FFFF_FFFF_FFFF)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables)


def _split(t: pa.Table, ids: np.ndarray) -> list[tuple[int, pa.Table]]:
    """`t`'s rows grouped by `ids` (one table per distinct id)."""
    if t.num_rows == 0:
        return []
    first = int(ids[0])
    if (ids == first).all():
        return [(first, t)]
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    cuts = np.flatnonzero(s[1:] != s[:-1]) + 1
    starts = np.r_[0, cuts]
    ends = np.r_[cuts, len(s)]
    sorted_t = t.take(pa.array(order))
    return [
        (int(s[a]), sorted_t.slice(a, e - a))
        for a, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]


def _read(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
