"""ColumnarMaterializeOp: a relation's stored rows as Arrow segments, keyed by primary key.

Why: `MaterializeOp` keeps one Python tuple per row and one store key per row, so a table
fed a million rows pays per-row tuple building, dict updates and key/value encoding at
the checkpoint. This operator has the same public behaviour (see `MaterializeOp` for the
change semantics it reproduces) but keeps rows columnar:

* rows live in a `KeyedSegments` store (engine/stream/operators/keyed_segments.py):
  immutable Arrow record batches ("segments") with a numpy live-mask each, a pk index
  mapping each stored pk to its location `segment_id << 32 | row`, persistence as few
  large values in ONE `StateTable` ("segments"; a checkpoint writes O(segments touched)
  keys) and amortised compaction of sparse and small segments;
* a step consolidates the epoch's delta, looks its keys up in bulk (`map` over the
  index at C speed), marks deleted rows dead in their masks, replaces the changed rows
  of stored pks in place (`KeyedSegments.overwrite`: their segments are rewritten, the
  index does not move) and appends the rows of new pks as one new segment. Pks not yet
  stored with no duplicates in the delta (append-only streams, hidden `_row_id` tables)
  take a fast path: one bulk disjointness check, then the input batch itself becomes the
  segment.

Pk index keys are Python values of the pk column (`segments.key_fn`: temporal columns by
their integer storage, decimals and intervals by their 16 storage bytes, which are
equality-preserving and much cheaper to produce than `datetime` or `Decimal` objects);
`get` converts its argument the same way.

Lifecycle: constructed with an allocator (on recovery the allocator has already loaded
the state table, and the constructor rebuilds segments, masks and the index from it);
`step` per epoch (a table may be stepped once per queued DML chunk); the runtime commits
the state table; `pin()` gives the stored rows as an immutable `SegmentSnapshot` (the
runtime pins every relation at each committed epoch, and readers turn pins into Arrow
tables without a lock); `snapshot()` is the pinned rows as a table (ad-hoc SELECT,
backfill); `apply_preview` shows the rows the table would hold after not-yet-stepped
chunks (DELETE/UPDATE evaluation).
"""

from __future__ import annotations

import logging
from itertools import compress, repeat
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import INDEX, WEIGHT, col_name, polars_frame
from engine.stream.operators.key_index import argsort_ints, search
from engine.stream.operators.keyed_segments import KeyedSegments, SegmentSnapshot
from engine.stream.operators.segments import SHIFT, conform, gather, rows_equal
from engine.types import Field, arrow_schema

log = logging.getLogger(__name__)

Row = tuple[Any, ...]

FORMAT_VERSION = 1


class ColumnarMaterializeOp(Operator):
    """Stores rows by pk in Arrow segments; see the module docstring."""

    def __init__(
        self,
        input_schema: list[Field],
        pk: list[int],
        alloc: StateAllocator,
        strict: bool = False,
    ) -> None:
        self.schema = list(input_schema)
        self.stream_key = list(pk)
        self.pk = list(pk)
        self.strict = strict
        # segment blobs live in RocksDB (one vnode: keyed by segment id), not twice in memory
        self._table = alloc.table("segments", disk=True, dist=False)
        self._arrow_schema = arrow_schema(self.schema)
        self._all = list(range(len(input_schema)))
        self._store = KeyedSegments(
            self._table, self._arrow_schema, self.pk, FORMAT_VERSION, "materialize"
        )

    # -- protocol -----------------------------------------------------------------------
    def state_tables(self) -> list[StateTable]:
        return [self._table]

    def explain(self) -> str:
        cols = ", ".join(f.name for f in self.schema)
        pk = ", ".join(self.schema[i].name for i in self.pk)
        return f"StreamMaterialize {{ columns: [{cols}], pk_columns: [{pk}] }}"

    def __len__(self) -> int:
        return len(self._store)

    @property
    def segment_count(self) -> int:
        return self._store.segment_count

    # -- reads --------------------------------------------------------------------------
    def pin(self) -> SegmentSnapshot:
        """The stored rows now, immutable: O(segments), the same object until a change."""
        return self._store.pin()

    def snapshot(self) -> pa.Table:
        """All stored rows as a table of the input schema (row order unspecified)."""
        return self._store.pin().table()

    def get(self, pk: Row) -> Row | None:
        return self._store.row(self._store.key_of(pk))

    def apply_preview(self, chunks: list[StreamChunk]) -> pa.Table:
        """The rows stored after stepping `chunks` in order, without changing any state."""
        overlay: dict[Any, int] = {}  # pk -> (chunk no << 32 | row) or -1 for deleted
        batches: list[pa.RecordBatch] = []
        for chunk in chunks:
            if chunk is None or len(chunk) == 0:
                continue
            batch = conform(chunk.data, self._arrow_schema)
            del_keys, ins_pos, ins_keys = self._consolidate(batch, chunk.weights())
            base = len(batches) << SHIFT
            batches.append(batch)
            if del_keys:
                overlay.update(zip(set(del_keys).difference(ins_keys), repeat(-1)))
            if ins_pos is None:
                overlay.update(zip(ins_keys, range(base, base + len(batch))))
            else:
                overlay.update(zip(ins_keys, (ins_pos + base).tolist()))
        if not overlay:
            return self.snapshot()
        n = len(overlay)
        stored = self._store.lookup(list(overlay))
        parts = self._store.pin_without(stored[stored >= 0]).batches()
        pending = np.fromiter(overlay.values(), np.int64, n)
        pending = pending[pending >= 0]
        if len(pending):
            parts.append(gather(pending, lambda b: batches[b]))
        return pa.Table.from_batches(parts, self._arrow_schema)

    # -- step ---------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        batch = conform(chunk.data, self._arrow_schema)
        w = chunk.weights()
        if not (w > 0).all():
            arr = self._store.int_keys(batch)
            paired = None if arr is None else _paired_int_changes(batch, arr, w)
            if paired is not None:
                return self._apply_int(batch, *paired)
            return self._apply(batch, *self._consolidate(batch, w))
        arr = self._store.int_keys(batch)
        if arr is not None and _distinct(arr) and not self._store.has_any(arr):
            # the fast path below with numpy calls only (int keys, e.g. `_row_id`)
            self._store.append(batch, arr)
            self._store.finish(set())
            return StreamChunk.inserts(batch)
        keys = self._store.keys(batch)
        last = dict(zip(keys, range(len(keys))))
        if len(last) == len(keys) and not self._store.has_any(last):
            # fast path: fresh pks, no duplicates; the input batch becomes a segment
            self._store.append(batch, keys)
            self._store.finish(set())
            return StreamChunk.inserts(batch)
        ins_pos, ins_keys = _last_rows(keys, last)
        return self._apply(batch, [], ins_pos, ins_keys)

    def _consolidate(
        self, batch: pa.RecordBatch, w: np.ndarray
    ) -> tuple[list[Any], np.ndarray | None, list[Any]]:
        """Keys to delete, positions (None = all rows) and keys of rows to insert.

        Rows are consolidated by full value (net Z-set weight, last position kept); every
        pk with a negative net row is a delete, and among positive net rows the last one
        in input order of each pk is the insert.
        """
        if (w > 0).all():
            keys = self._store.keys(batch)
            return [], *_last_rows(keys, dict(zip(keys, range(len(keys)))))
        quick = _paired_changes(batch, self._store.keys(batch), w)
        if quick is not None:
            return quick
        frame = polars_frame(batch, self._all, weights=w, index=True)
        net = (
            frame.df.group_by([col_name(i) for i in self._all])
            .agg(pl.col(WEIGHT).sum(), pl.col(INDEX).max())
            .filter(pl.col(WEIGHT) != 0)
        )
        weight = net.get_column(WEIGHT).to_numpy()
        index = net.get_column(INDEX).to_numpy()
        del_pos = np.sort(index[weight < 0])
        pos = np.sort(index[weight > 0])
        del_keys = self._store.keys(batch.take(pa.array(del_pos))) if len(del_pos) else []
        pos_keys = self._store.keys(batch.take(pa.array(pos))) if len(pos) else []
        sel, ins_keys = _last_rows(pos_keys, dict(zip(pos_keys, range(len(pos_keys)))))
        return del_keys, (pos if sel is None else pos[sel]), ins_keys

    def _apply(
        self,
        batch: pa.RecordBatch,
        del_keys: list[Any],
        ins_pos: np.ndarray | None,
        ins_keys: list[Any],
    ) -> StreamChunk | None:
        # deletes: stored pks not re-inserted this step
        del_locs = np.empty(0, np.int64)
        gone: list[Any] = []
        if del_keys:
            udel = list(dict.fromkeys(del_keys))
            dlocs = self._store.lookup(udel)
            missing = dlocs < 0
            if missing.any():
                self._missing(list(compress(udel, missing)))
            inserting = set(ins_keys)
            reins = np.fromiter(map(inserting.__contains__, udel), bool, len(udel))
            keep = ~missing & ~reins
            del_locs = dlocs[keep]
            gone = list(compress(udel, keep))
        # inserts: new pks, and stored pks whose row changes
        ins_batch = batch if ins_pos is None else batch.take(pa.array(ins_pos))
        ilocs = self._store.lookup(ins_keys)
        exists = ilocs >= 0
        old_rows: pa.RecordBatch | None = None
        old_locs = np.empty(0, np.int64)
        kept = ~exists
        if exists.any():
            ex_locs = ilocs[exists]
            ex_old = self._store.gather(ex_locs)
            same = rows_equal(ex_old, ins_batch.filter(pa.array(exists)))
            changed = ~same
            kept[exists] = changed
            old_locs = ex_locs[changed]
            old_rows = ex_old.filter(pa.array(changed)) if not changed.all() else ex_old
        n_del, n_upd = len(del_locs), len(old_locs)
        if not n_del and not kept.any():
            return None
        # build the output before killing rows (gathering reads the stored rows)
        parts: list[pa.RecordBatch] = []
        if n_del:
            parts.append(self._store.gather(del_locs))
        if n_upd:
            assert old_rows is not None
            parts.append(old_rows)
        new_rows = ins_batch if kept.all() else ins_batch.filter(pa.array(kept))
        new_keys = ins_keys if kept.all() else list(compress(ins_keys, kept))
        parts.append(new_rows)
        is_upd = exists[kept]
        out, ops = _interleave(parts, n_del, n_upd, is_upd)
        # state: kill deleted rows and drop their keys, replace changed rows in place,
        # append the rows of new keys
        touched = self._store.kill(del_locs, gone)
        if n_upd:
            self._store.overwrite(old_locs, new_rows.filter(pa.array(is_upd)))
            fresh = ~is_upd
            new_keys = list(compress(new_keys, fresh))
            if new_keys:
                new_rows = new_rows.filter(pa.array(fresh))
        if new_keys:
            self._store.append(new_rows, new_keys)
        self._store.finish(touched)
        return StreamChunk(ops, out)

    def _apply_int(
        self,
        batch: pa.RecordBatch,
        del_keys: np.ndarray,
        ins_pos: np.ndarray,
        ins_keys: np.ndarray,
        pair: np.ndarray,
    ) -> StreamChunk | None:
        """`_apply` for int64 pks given as arrays (`_paired_int_changes`): the same rows,
        order and state, with numpy calls per chunk instead of Python lists of keys.
        `pair[i]` is the position in `ins_keys` of the insert re-adding `del_keys[i]`, or
        -1; a re-inserted key is looked up once, through its insert."""
        store = self._store
        ilocs = store.lookup(ins_keys)
        reins = pair >= 0
        dlocs = np.empty(len(del_keys), np.int64)
        dlocs[reins] = ilocs[pair[reins]]
        if not reins.all():
            dlocs[~reins] = store.lookup(del_keys[~reins])
        missing = dlocs < 0
        if missing.any():
            self._missing(del_keys[missing].tolist())
        keep = ~missing & ~reins
        del_locs = dlocs[keep]
        gone: list[Any] = del_keys[keep].tolist()
        exists = ilocs >= 0
        kept = ~exists
        old_rows: pa.RecordBatch | None = None
        old_locs = np.empty(0, np.int64)
        ins_batch = batch.take(pa.array(ins_pos)) if len(ins_pos) < batch.num_rows else batch
        if exists.any():
            ex_locs = ilocs[exists]
            ex_old = store.gather(ex_locs)
            changed = ~rows_equal(ex_old, ins_batch.filter(pa.array(exists)))
            kept[exists] = changed
            old_locs = ex_locs[changed]
            old_rows = ex_old.filter(pa.array(changed)) if not changed.all() else ex_old
        n_del, n_upd = len(del_locs), len(old_locs)
        if not n_del and not kept.any():
            return None
        parts: list[pa.RecordBatch] = []
        if n_del:
            parts.append(store.gather(del_locs))
        if n_upd:
            assert old_rows is not None
            parts.append(old_rows)
        every = bool(kept.all())
        new_rows = ins_batch if every else ins_batch.filter(pa.array(kept))
        parts.append(new_rows)
        is_upd = exists[kept]
        out, ops = _interleave(parts, n_del, n_upd, is_upd)
        touched = store.kill(del_locs, gone)
        new_keys = ins_keys if every else ins_keys[kept]
        if n_upd:  # changed rows of stored keys: in place (`KeyedSegments.overwrite`)
            store.overwrite(old_locs, new_rows.filter(pa.array(is_upd)))
            fresh = ~is_upd
            new_keys = new_keys[fresh]
            if len(new_keys):
                new_rows = new_rows.filter(pa.array(fresh))
        if len(new_keys):
            store.append(new_rows, new_keys)
        store.finish(touched)
        return StreamChunk(ops, out)

    def _missing(self, pks: list[Any]) -> None:
        if self.strict:
            raise InternalError(
                "materialize: deleting a row that does not exist",
                detail=f"Primary key {pks[0]!r} of {self.explain()}.",
            )
        log.debug(
            "%s: ignoring %d deletes of missing pks, e.g. %r", self.explain(), len(pks), pks[:5]
        )

    # -- segments -----------------------------------------------------------------------


# -- module helpers -----------------------------------------------------------------------
def _paired_changes(
    batch: pa.RecordBatch, keys: list[Any], w: np.ndarray
) -> tuple[list[Any], np.ndarray, list[Any]] | None:
    """`_consolidate`'s answer without the full-row group-by, for the usual shape of a
    change chunk (updates as U-/U+ pairs, deletes, inserts): every pk has at most one
    negative and at most one positive row, and a pk with both has the negative first.
    Then a full-row consolidation only cancels `-r, +r` pairs of equal rows, found here
    by comparing each pair's two rows. None when the chunk has another shape (or nested
    columns, whose equality the group-by defines)."""
    neg = w < 0
    neg_at = np.flatnonzero(neg)
    pos_at = np.flatnonzero(~neg)
    del_keys = list(map(keys.__getitem__, neg_at.tolist()))
    ins_keys = list(map(keys.__getitem__, pos_at.tolist()))
    first_neg = dict(zip(del_keys, neg_at.tolist()))
    if len(first_neg) != len(del_keys) or len(set(ins_keys)) != len(ins_keys):
        return None
    before = np.fromiter(map(first_neg.get, ins_keys, repeat(-1)), np.int64, len(ins_keys))
    if (before > pos_at).any():
        return None  # an insert followed by a delete of the same pk: consolidate
    paired = np.flatnonzero(before >= 0)
    if not len(paired):
        return del_keys, pos_at, ins_keys
    if any(pa.types.is_nested(t) for t in batch.schema.types):
        return None
    old_at, new_at = before[paired], pos_at[paired]
    # equal as a group-by sees them: NULL equal to NULL and NaN to NaN
    same = rows_equal(batch.take(pa.array(old_at)), batch.take(pa.array(new_at)), nan_equal=True)
    if not same.any():
        return del_keys, pos_at, ins_keys
    keep_neg = ~np.isin(neg_at, old_at[same])
    keep_pos = np.ones(len(pos_at), bool)
    keep_pos[paired[same]] = False
    return (
        list(compress(del_keys, keep_neg)),
        pos_at[keep_pos],
        list(compress(ins_keys, keep_pos)),
    )


def _paired_int_changes(
    batch: pa.RecordBatch, keys: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """`_paired_changes` for int64 pks given as an array: (delete keys, insert positions,
    insert keys, and per delete key the position in the insert keys of the insert that
    re-adds it, or -1). Sorts and searches instead of Python lists and dicts; None when
    the chunk has another shape (the general path then consolidates it)."""
    neg = w < 0
    neg_at = np.flatnonzero(neg)
    pos_at = np.flatnonzero(~neg)
    dk, ik = keys[neg_at], keys[pos_at]
    pair = np.full(len(dk), -1, np.int64)
    nxt = neg_at + 1
    if len(dk) and nxt[-1] < len(w) and not neg[nxt].any() and (keys[nxt] == dk).all():
        # every delete is followed by an insert of its pk (an aggregation's U-/U+ pairs):
        # distinct inserts make the deletes distinct, and the pairs need no search
        if not _distinct(ik):
            return None
        paired = np.cumsum(~neg)[nxt] - 1  # positions in ik (and pos_at)
        dpos = np.arange(len(dk))
    else:
        if not _distinct(dk) or not _distinct(ik):
            return None
        if not len(dk) or not len(ik):
            return dk, pos_at, ik, pair
        order = argsort_ints(dk)
        sdk = dk[order]
        at = np.minimum(search(sdk, ik), len(sdk) - 1)
        hit = sdk[at] == ik
        paired = np.flatnonzero(hit)  # positions in ik (and pos_at)
        dpos = order[at[paired]]  # their delete's position in dk (and neg_at)
        if (neg_at[dpos] > pos_at[paired]).any():
            return None  # an insert followed by a delete of the same pk: consolidate
    if len(paired) and any(pa.types.is_nested(t) for t in batch.schema.types):
        return None
    keep_neg = np.ones(len(dk), bool)
    keep_pos = np.ones(len(ik), bool)
    if len(paired):
        # equal as a group-by sees them: NULL equal to NULL and NaN to NaN
        old, new = batch.take(pa.array(neg_at[dpos])), batch.take(pa.array(pos_at[paired]))
        same = rows_equal(old, new, nan_equal=True)
        keep_neg[dpos[same]] = False
        keep_pos[paired[same]] = False
        live = ~same
        pair[dpos[live]] = paired[live]
    if not keep_pos.all():
        remap = np.cumsum(keep_pos) - 1  # old insert position -> position among the kept
        pair = np.where(pair >= 0, remap[np.maximum(pair, 0)], -1)
    return dk[keep_neg], pos_at[keep_pos], ik[keep_pos], pair[keep_neg]


def _distinct(arr: np.ndarray) -> bool:
    """No value of `arr` twice (a sort, which numpy runs without the GIL)."""
    if len(arr) < 2 or (arr[1:] > arr[:-1]).all():  # ascending ids: no sort
        return True
    s = arr[argsort_ints(arr)]
    return not bool((s[1:] == s[:-1]).any())


def _last_rows(keys: list[Any], last: dict[Any, int]) -> tuple[np.ndarray | None, list[Any]]:
    """Positions (ascending; None = all) and keys of the last row of each key.

    `last` is `dict(zip(keys, range(len(keys))))`: its values are each key's last position.
    """
    if len(last) == len(keys):
        return None, keys
    pos = np.sort(np.fromiter(last.values(), np.int64, len(last)))
    return pos, list(map(keys.__getitem__, pos.tolist()))


def _interleave(
    parts: list[pa.RecordBatch], n_del: int, n_upd: int, is_upd: np.ndarray
) -> tuple[pa.RecordBatch, pa.Array]:
    """Output rows: deletes, then each kept insert in input order (U-/U+ when replacing).

    `parts` are [deleted rows]? + [replaced stored rows]? + [kept new rows], and `is_upd`
    says for each kept new row whether it replaces a stored row (those come in order).
    """
    cat = pa.concat_batches(parts) if len(parts) > 1 else parts[0]
    k = len(is_upd)
    if not n_upd:
        ops = np.full(n_del + k, Op.INSERT, np.int8)
        ops[:n_del] = Op.DELETE
        return cat, pa.array(ops)
    counts = 1 + is_upd.astype(np.int64)
    start = n_del + np.cumsum(counts) - counts
    total = n_del + k + n_upd
    take = np.empty(total, np.int64)
    ops = np.empty(total, np.int8)
    take[:n_del] = np.arange(n_del)
    ops[:n_del] = Op.DELETE
    upd_at = start[is_upd]
    take[upd_at] = n_del + np.arange(n_upd)
    ops[upd_at] = Op.UPDATE_DELETE
    new_at = start + is_upd
    take[new_at] = n_del + n_upd + np.arange(k)
    ops[new_at] = np.where(is_upd, Op.UPDATE_INSERT, Op.INSERT)
    return cat.take(pa.array(take)), pa.array(ops)
