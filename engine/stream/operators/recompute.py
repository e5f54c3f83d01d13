"""Z-set steps shared by operators that recompute the partitions an epoch touched.

`OverWindowOp` and `CollectAggOp` take the stored rows of the touched partitions out of a
`PartitionStore`, apply the epoch's delta to them (`apply_delta`), recompute, and emit the
difference between the previous output (kept in their store, never recomputed) and the
new one (`changes`). Both steps are vectorised:

* with an identity key (the input's stream key: unique per live row), deletes remove
  stored rows by a polars semi-join on that key, and the output difference is a full join
  of old and new output on it, comparing the other columns NULL-safely (NaN equals NaN);
* without one (every column is the identity, duplicates allowed) both fall back to Z-set
  consolidation by full row (`frames.net_rows`).

Deleting a row that was never inserted raises `InternalError` (the input broke its
stream-key contract); `what` names the operator in that message.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.stream.operators.frames import col_name, net_rows, polars_frame

_ROW = "__row"


def table_batch(t: pa.Table) -> pa.RecordBatch:
    """`t` as one record batch (copying only when it has several chunks)."""
    t = t.combine_chunks()
    batches = t.to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=t.schema)
    return batches[0]


def conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """`t`'s columns under `schema` (names from `schema`, types cast where they differ)."""
    if t.schema == schema:
        return t
    cols = [
        c if c.type == f.type else c.cast(f.type) for c, f in zip(t.columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def apply_delta(
    old: pa.Table, delta: pa.RecordBatch, w: np.ndarray, ident: Sequence[int], what: str
) -> pa.Table:
    """The rows `old` (each copy weight 1) plus `delta` (consolidated, weights `w`), one
    row per copy, in the schema of `old`."""
    delta_t = conform(pa.Table.from_batches([delta]), old.schema)
    if ident and (np.abs(w) == 1).all():
        ins = delta_t.filter(pa.array(w > 0))
        dels = w < 0
        if not dels.any():
            return pa.concat_tables([old, ins])
        removed = _matched(old, delta_t.filter(pa.array(dels)), ident)
        if int(removed.sum()) != int(dels.sum()):
            raise _never_inserted(what)
        return pa.concat_tables([old.filter(pa.array(~removed)), ins])
    both = table_batch(pa.concat_tables([old, delta_t]))
    weights = np.r_[np.ones(old.num_rows, np.int64), w.astype(np.int64)]
    net, nw = net_rows(both, weights)
    if (nw < 0).any():
        raise _never_inserted(what)
    return pa.Table.from_batches([net.take(pa.array(np.repeat(np.arange(len(nw)), nw)))])


def _matched(old: pa.Table, probe: pa.Table, ident: Sequence[int]) -> np.ndarray:
    """Per row of `old`: its identity columns equal those of some `probe` row."""
    no = old.num_rows
    if no == 0:
        return np.zeros(0, dtype=bool)
    both = table_batch(pa.concat_tables([old.select(ident), probe.select(ident)]))
    frame = polars_frame(both, range(len(ident)), raw_decimals=True)
    names = [col_name(i) for i in range(len(ident))]
    df = frame.df.with_row_index(_ROW)
    hit = df.slice(0, no).join(df.slice(no), on=names, how="semi", nulls_equal=True)
    mask = np.zeros(no, dtype=bool)
    mask[hit.get_column(_ROW).to_numpy()] = True
    return mask


def changes(
    old: pa.Table, new: pa.Table, ident: Sequence[int], schema: pa.Schema
) -> StreamChunk | None:
    """Deletes of the `old` output rows and inserts of the `new` ones that differ, deletes
    first; `ident` (may be empty) identifies a row in both."""
    old, new = conform(old, schema), conform(new, schema)
    if old.num_rows + new.num_rows == 0:
        return None
    if not ident:
        return _net_changes(old, new, schema)
    no = old.num_rows
    both = table_batch(pa.concat_tables([old, new]))
    frame = polars_frame(both, range(len(schema)), raw_decimals=True)
    df = frame.df.with_row_index(_ROW)
    keys = [col_name(i) for i in ident]
    rest = [col_name(i) for i in range(len(schema)) if i not in set(ident)]
    j = df.slice(0, no).join(
        df.slice(no), on=keys, how="full", nulls_equal=True, coalesce=False, suffix="_n"
    )
    o, n = pl.col(_ROW), pl.col(_ROW + "_n")
    changed = pl.lit(False)
    for c in rest:
        changed = changed | pl.col(c).ne_missing(pl.col(c + "_n"))
    j = j.select(
        pl.when(o.is_not_null() & (n.is_null() | changed)).then(o).alias("d"),
        pl.when(n.is_not_null() & (o.is_null() | changed)).then(n).alias("i"),
    )
    d = j.get_column("d").drop_nulls().sort().to_numpy()
    i = j.get_column("i").drop_nulls().sort().to_numpy()
    if len(d) + len(i) == 0:
        return None
    rows = both.take(pa.array(np.r_[d, i].astype(np.int64)))
    ops = np.r_[np.full(len(d), Op.DELETE, np.int8), np.full(len(i), Op.INSERT, np.int8)]
    return StreamChunk(pa.array(ops), rows)


def _net_changes(old: pa.Table, new: pa.Table, schema: pa.Schema) -> StreamChunk | None:
    both = table_batch(pa.concat_tables([old, new]))
    w = np.r_[np.full(old.num_rows, -1, np.int64), np.full(new.num_rows, 1, np.int64)]
    batch, w = net_rows(both, w)
    if batch.num_rows == 0:
        return None
    order = np.argsort(w > 0, kind="stable")  # deletes first
    reps = np.abs(w[order])
    take = np.repeat(order, reps)
    ops = np.where(np.repeat(w[order], reps) > 0, Op.INSERT, Op.DELETE).astype(np.int8)
    return StreamChunk(pa.array(ops), batch.take(pa.array(take)))


def _never_inserted(what: str) -> InternalError:
    return InternalError(
        f"{what} state row count became negative",
        detail=f"A row of {what} was deleted but never inserted.",
    )
