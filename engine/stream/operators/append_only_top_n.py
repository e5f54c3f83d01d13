"""AppendOnlyTopNOp: `ORDER BY ... LIMIT n OFFSET m`, overall or per group, over an input
that never retracts; its state is the first `offset + limit` rows of each group, in RocksDB.

Why a separate operator: when the input only inserts (the planner's append-only
analysis, `engine.plan.append_only`, recorded as `StreamTopN.append_only`), a row that
falls out of a group's first `offset + limit` rows can never come back, so the state of
a group is just those rows: no other rows, no retraction bookkeeping, no refills. This
is RisingWave's append-only top-N; with `limit 1` per group it is its append-only
deduplication (`row_number() OVER (PARTITION BY k ORDER BY ...) = 1`).

State: the table `top` (a disk table: RocksDB is the source of truth, the table's hot
cache holds recently touched groups within the state budget), one value per group:

    group key (vnode-partitioned by it) -> (format, the group's rows in window order)

(format 2: packed fixed-width records, `FixedRecords`, when every column has a fixed
width; else 1: a `RowBlobs` blob)

so a chunk costs one multi-get of its distinct groups and one batched put of the groups
whose rows changed; nothing is held in Python memory between chunks and nothing is
rebuilt on restart. Ungrouped top-N keeps its one group under the key `(0,)`.

Order is the one `TopNOp` defines (ORDER BY columns, ties by stream key ascending NULLS
LAST; rows identical in every column keep arrival order), and the output changelog is the
same: `+` for a row entering the window, `-` for one leaving it, and with the rank
column a `U-`/`U+` pair for a row whose rank changed.

Per chunk, vectorised (polars/numpy/Arrow): the chunk's rows get group ids; the stored
rows of those groups are fetched (one `get_many`) and decoded; stored and new rows are
sorted together per group; each row's new position `q` is compared with its stored
position `p` (new rows have none) to emit the changes; the groups that got a new row
among their first `offset + limit` are encoded and put back.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.row_blob import RowBlobs, group_starts
from engine.stream.operators.segments import conform, key_fn, row_keys
from engine.stream.operators.top_n import OrderSpec, explain_top_n, sortable, sortable_width
from engine.types import BIGINT, Field, arrow_schema

_G, _O, _P, _I = "__g", "__o", "__p", "__i"
_ALL = (0,)
"""The state key of the single group of an ungrouped top-N."""


_RECORDS, _ROWBLOBS = 2, 1
"""Value formats of `top`: `(2, fixed-width records)` when every column has a fixed
width, else `(1, RowBlobs blob)`."""


def _fixed_storage(t: pa.DataType) -> pa.DataType | None:
    """The fixed-width storage type a column is packed as (None: not fixed width)."""
    if pa.types.is_boolean(t):
        return pa.uint8()
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return t
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_temporal(t) and not pa.types.is_interval(t):
        return pa.int64()
    return None


class FixedRecords:
    """Rows of an all-fixed-width schema as packed records (a validity byte and the
    value's storage bytes per column): a group's rows are one bytes slice of a chunk's
    packed buffer, and many groups decode with one `frombuffer`; no per-row Python."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.storage = [_fixed_storage(f.type) for f in schema]
        parts: list[tuple[str, np.dtype]] = []
        for i, st in enumerate(self.storage):
            assert st is not None
            parts += [(f"m{i}", np.dtype(np.uint8)), (f"v{i}", np.dtype(st.to_pandas_dtype()))]
        self.dtype = np.dtype(parts)

    @staticmethod
    def fits(schema: pa.Schema) -> bool:
        return all(_fixed_storage(f.type) is not None for f in schema)

    def encode(self, batch: pa.RecordBatch, starts: np.ndarray) -> list[bytes]:
        n = batch.num_rows
        rec = np.zeros(n, self.dtype)
        for i, (col, st) in enumerate(zip(batch.columns, self.storage, strict=True)):
            assert st is not None
            a = col.cast(pa.uint8()) if pa.types.is_boolean(col.type) else col.view(st)
            rec[f"m{i}"] = col.is_valid().to_numpy(zero_copy_only=False)
            rec[f"v{i}"] = a.fill_null(0).to_numpy(zero_copy_only=False)
        buf = rec.tobytes()
        w = self.dtype.itemsize
        bounds = (np.r_[starts, n] * w).tolist()
        return [buf[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def decode(self, blobs: list[bytes]) -> tuple[pa.RecordBatch, np.ndarray]:
        w = self.dtype.itemsize
        sizes = np.fromiter(map(len, blobs), np.int64, len(blobs)) // w
        rec = np.frombuffer(b"".join(blobs), self.dtype)
        cols: list[pa.Array] = []
        for i, (f, st) in enumerate(zip(self.schema, self.storage, strict=True)):
            mask = rec[f"m{i}"] == 0
            vals = rec[f"v{i}"]
            if pa.types.is_boolean(f.type):
                cols.append(pa.array(vals.astype(bool), pa.bool_(), mask=mask))
            else:
                cols.append(pa.array(vals, st, mask=mask).view(f.type))
        return pa.RecordBatch.from_arrays(cols, schema=self.schema), sizes


class AppendOnlyTopNOp(Operator):
    """Top-N over an append-only input, state per group in RocksDB; see the module doc.

    Output schema and stream key are `TopNOp`'s: the input fields (plus a bigint rank
    column when `with_rank_column`), keyed by the input stream key or every column.
    """

    def __init__(
        self,
        input_schema: list[Field],
        order_by: list[OrderSpec],
        limit: int,
        offset: int,
        group_keys: list[int],
        alloc: StateAllocator,
        stream_key: list[int],
        with_rank_column: bool = False,
        rank_name: str = "rn",
    ) -> None:
        if limit < 0 or offset < 0:
            raise ValueError("AppendOnlyTopNOp needs a non-negative limit and offset")
        self.input_schema = list(input_schema)
        self.order_by = [(int(c), bool(d), bool(nf)) for c, d, nf in order_by]
        self.limit = limit
        self.offset = offset
        self.group_keys = list(group_keys)
        self.with_rank_column = with_rank_column
        self._ident = list(stream_key) or list(range(len(input_schema)))
        self.schema = list(input_schema)
        if with_rank_column:
            self.schema.append(Field(rank_name, BIGINT))
        self.stream_key = list(stream_key) or list(range(len(self.schema)))
        self._hi = offset + limit
        self._in_schema = arrow_schema(self.input_schema)
        self._out_schema = arrow_schema(self.schema)
        self._blobs = RowBlobs(self._in_schema, 0)
        self._fixed = FixedRecords(self._in_schema) if FixedRecords.fits(self._in_schema) else None
        self._gkey_fns = [key_fn(self._in_schema.field(c).type) for c in self.group_keys]
        self._top = alloc.table("top", disk=True)
        order = [c for c, _, _ in self.order_by]
        self._kcols = self._names("k", order)
        self._icols = self._names("i", self._ident)
        w = sortable_width
        self._sort_by = [_G, *self._kcols, *self._icols, _O, _P]
        self._desc = [False]
        self._desc += [d for c, d, _ in self.order_by for _ in range(w(input_schema[c].type))]
        self._desc += [False] * (len(self._icols) + 2)
        self._nulls_last = [False]
        self._nulls_last += [
            not nf for c, _, nf in self.order_by for _ in range(w(input_schema[c].type))
        ]
        self._nulls_last += [True] * len(self._icols) + [False, False]

    def _names(self, prefix: str, cols: list[int]) -> list[str]:
        return [
            f"{prefix}{j}_{p}"
            for j, c in enumerate(cols)
            for p in range(sortable_width(self.input_schema[c].type))
        ]

    def state_tables(self) -> list[StateTable]:
        return [self._top]

    def explain(self) -> str:
        grouped = "StreamAppendOnlyGroupTopN" if self.group_keys else "StreamAppendOnlyTopN"
        return explain_top_n(self, grouped)

    # -- step ---------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0 or not self._hi:
            return None
        if (chunk.weights() < 0).any():
            raise InternalError(
                "append-only top-n received a delete",
                detail=f"{self.explain()} was planned over an input that never retracts.",
            )
        batch = conform(chunk.data, self._in_schema)
        keys = row_keys(batch, self.group_keys, self._gkey_fns) if self.group_keys else None
        if keys is None:
            uniq: list[tuple[object, ...]] = [_ALL]
            codes = np.zeros(batch.num_rows, np.int64)
        else:
            first = dict.fromkeys(keys)
            pos = dict(zip(first, range(len(first))))
            codes = np.fromiter(map(pos.__getitem__, keys), np.int64, batch.num_rows)
            one = len(self.group_keys) == 1
            uniq = [(k,) for k in first] if one else list(first)
        new = self._frame(batch, codes, None, 0)
        # only a chunk's first `hi` rows per group can reach the window
        new = self._first(
            new.sort(self._sort_by, descending=self._desc, nulls_last=self._nulls_last)
        )
        new = new.filter(pl.col("__q") < self._hi).drop("__q")
        if not new.height:
            return None
        stored = self._top.get_many(uniq)
        have = [i for i, v in enumerate(stored) if v is not None]
        if have:
            old_rows, sizes = self._decode([stored[i] for i in have])  # type: ignore[misc]
            old_codes = np.repeat(np.asarray(have, np.int64), sizes)
            starts = np.cumsum(sizes) - sizes
            old_pos = np.arange(len(old_codes), dtype=np.int64) - np.repeat(starts, sizes)
            old = self._frame(old_rows, old_codes, old_pos, batch.num_rows)
            rows = pa.concat_batches([batch, conform(old_rows, self._in_schema)])
            both = pl.concat([new, old])
        else:
            rows, both = batch, new
        both = self._first(
            both.sort(self._sort_by, descending=self._desc, nulls_last=self._nulls_last)
        )
        return self._emit(both, rows, uniq)

    def _decode(self, values: list[tuple[int, bytes]]) -> tuple[pa.RecordBatch, np.ndarray]:
        """The stored rows of some groups, concatenated, and each group's row count."""
        if self._fixed is not None and all(v[0] == _RECORDS for v in values):
            return self._fixed.decode([v[1] for v in values])
        if any(v[0] != _ROWBLOBS for v in values):
            raise InternalError(f"{self.explain()}: unknown state value format")
        rows, sizes, _ = self._blobs.decode([v[1] for v in values], [])
        return rows, sizes

    def _frame(
        self, rows: pa.RecordBatch, codes: np.ndarray, old_pos: np.ndarray | None, base: int
    ) -> pl.DataFrame:
        """Sortable frame of `rows`: group id, order and ident columns, `__o` (0 stored,
        1 new: stored rows sort first among identical rows), stored position `__p` (-1
        for new rows) and the row's index `__i` into the step's rows."""
        order = [c for c, _, _ in self.order_by]
        arrays: list[pa.Array] = []
        for cols, what in ((order, "order"), (self._ident, "ident")):
            for c in cols:
                arrays += sortable(rows.column(c), self.input_schema[c].type, what)
        df = pl.from_arrow(pa.Table.from_arrays(arrays, names=[*self._kcols, *self._icols]))
        assert isinstance(df, pl.DataFrame)
        n = rows.num_rows
        stored = old_pos is not None
        return df.with_columns(
            pl.Series(_G, codes, pl.Int64),
            pl.lit(0 if stored else 1, pl.Int8).alias(_O),
            pl.Series(_P, old_pos if stored else np.full(n, -1, np.int64), pl.Int64),
            pl.Series(_I, np.arange(base, base + n, dtype=np.int64), pl.Int64),
        )

    @staticmethod
    def _first(df: pl.DataFrame) -> pl.DataFrame:
        """A sorted frame with each row's position `__q` within its group."""
        g = df.get_column(_G).to_numpy()
        starts = group_starts(g)
        lens = np.diff(np.r_[starts, len(g)])
        q = np.arange(len(g), dtype=np.int64) - np.repeat(starts, lens)
        return df.with_columns(pl.Series("__q", q, pl.Int64))

    def _emit(
        self, both: pl.DataFrame, rows: pa.RecordBatch, uniq: list[tuple[object, ...]]
    ) -> StreamChunk | None:
        """Store the changed groups' new first rows and emit the window's changes."""
        q = both.get_column("__q").to_numpy()
        p = both.get_column(_P).to_numpy()
        idx = both.get_column(_I).to_numpy()
        g = both.get_column(_G).to_numpy()
        is_new = p < 0
        kept = q < self._hi
        lo = self.offset
        mark = np.zeros(len(uniq), bool)
        mark[g[is_new & kept]] = True
        changed = np.flatnonzero(mark)
        if len(changed):
            sel = kept & mark[g]
            keep_rows = rows.take(pa.array(idx[sel]))
            starts = group_starts(g[sel])
            if self._fixed is not None:
                vals = [(_RECORDS, b) for b in self._fixed.encode(keep_rows, starts)]
            else:
                blobs = self._blobs.encode(keep_rows, starts.tolist(), [])
                vals = [(_ROWBLOBS, b) for b in blobs]
            self._top.put_many([uniq[i] for i in changed.tolist()], vals)
        was_in = ~is_new & (p >= lo)  # stored rows have p < hi
        now_in = (q >= lo) & kept
        dels = np.flatnonzero(was_in & ~now_in)
        inss = np.flatnonzero(now_in & ~was_in)
        if self.with_rank_column:
            ups = np.flatnonzero(was_in & now_in & (p != q))
        else:
            ups = np.empty(0, np.int64)
        if not len(dels) and not len(inss) and not len(ups):
            return None
        at = np.concatenate([idx[dels], np.repeat(idx[ups], 2), idx[inss]])
        ranks = np.concatenate([p[dels], np.stack([p[ups], q[ups]], 1).ravel(), q[inss]]) + 1
        ops = np.concatenate(
            [
                np.full(len(dels), Op.DELETE, np.int8),
                np.tile(np.array([Op.UPDATE_DELETE, Op.UPDATE_INSERT], np.int8), len(ups)),
                np.full(len(inss), Op.INSERT, np.int8),
            ]
        )
        out = rows.take(pa.array(at))
        cols = list(out.columns)
        if self.with_rank_column:
            cols.append(pa.array(ranks, pa.int64()))
        return StreamChunk(pa.array(ops), pa.RecordBatch.from_arrays(cols, schema=self._out_schema))
