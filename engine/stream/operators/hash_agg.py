"""HashAggOp: incremental GROUP BY (and global aggregation when there are no group keys).

Per step the operator consolidates the epoch's whole delta in polars, then touches state
once per changed group; it never loops over input rows in Python:

1. one polars group-by over the delta gives, per group, the row-count delta (sum of
   weights) and each additive aggregate's slot deltas (see `agg_calls`);
2. for min/max and DISTINCT aggregates a second group-by per aggregate over
   (group key, value) gives the net weight change of each value; a Python pass over
   those (group, value) changes updates the value multiset (min/max) or dedup table
   (DISTINCT). Min/max recompute a group's extreme from its multiset only when the
   current extreme was removed;
3. old group states are fetched, merged column-wise with the deltas, and compared: a
   group whose row count goes 0 -> >0 emits `+`, >0 -> 0 emits `-` (and its state is
   deleted), and otherwise an adjacent `U-`/`U+` pair when any output value changed.

Without group keys (simple aggregation) exactly one output row always exists: the first
step ever emits `+` of the current row (the initial row `count 0, others NULL` if the
step has no input) and later steps emit `U-`/`U+`. The group-state row for key `()` is
never deleted, so its presence records that the initial row was emitted; after a
restart the operator does not emit it again.

Lifecycle: constructed with a `StateAllocator` (tables are created/looked up by name);
the runtime loads the tables on recovery; the per-run in-memory multiset index of
min/max values is rebuilt from the loaded tables on the first step.

Memory: the `groups` table is a disk table (`engine.state.disk_table`) in a running
server: the group rows live in RocksDB and each step reads the chunk's groups with one
multi-get and writes them back in the epoch's overlay, so memory per group is the
bounded cache's, not a Python row per group. The min/max multisets and DISTINCT tables
are still resident `StateTable`s.
"""

from __future__ import annotations

import decimal
import logging
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from itertools import compress
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from engine import civil
from engine.chunk import Op, StreamChunk
from engine.errors import EngineError, InternalError, NumericValueOutOfRange
from engine.expr.nonstrict import ErrorSink, is_data_error
from engine.numeric import array_of, finite_only, special_code
from engine.state import codec
from engine.state.disk_table import DiskStateTable
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.agg_calls import (
    ACC_CONTEXT,
    VARIANCE_KINDS,
    AggCall,
    AggImpl,
    AppendOnlyExtremeImpl,
    CountImpl,
    ExtremeImpl,
    _SumLike,
    emission,
    make_impl,
)
from engine.stream.operators.agg_columnar import ColumnarAgg, columnar_layout, key_kinds
from engine.stream.operators.agg_columns import ColumnarGroups
from engine.stream.operators.agg_udaf import UdafImpl
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import (
    INDEX,
    WEIGHT,
    Frame,
    arrow_values,
    build_batch,
    col_name,
    key_tuples,
    ops_array,
    polars_frame,
    py_values,
)
from engine.types import Field, TypeKind, arrow_schema

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _ValueDelta:
    """Net weight changes of one aggregate's (group, value) pairs in one epoch."""

    frame: Frame
    xname: str
    vdf: pl.DataFrame  # group key columns, the value column, `__dw`
    gkeys: list[tuple[Any, ...]]
    vals: list[Any]
    dws: list[int]
    mkeys: list[tuple[Any, ...]]  # (*group key, value): keys of the value table


def _objects(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


Key = tuple[Any, ...]
_SAFE_SUM = 1.5e28
"""A chunk whose numeric magnitudes add up below this cannot overflow a delta sum (the
vectorised sums hold 38 digits: up to about 1.7e28 with numeric's 10 decimals)."""
_PART_SUM = 6e27
"""Magnitude per part of a split chunk: with single values below 1e28, a part sums below
1.6e28."""
_COUNT = "__cnt"
_ROWS = "__rows"


def _same(v: Any) -> Any:
    return v


def _float_order(v: float) -> tuple[bool, float]:
    """A float's place in PostgreSQL's order: NaN above +Infinity (Python's comparisons
    with NaN are all false, so min/max of a set with NaN would depend on its order)."""
    return (True, 0.0) if v != v else (False, v)


def _extreme(values: Collection[Any], is_min: bool, key: Callable[[Any], Any] | None) -> Any:
    if not values:
        return None
    if key is None:
        return min(values) if is_min else max(values)
    return min(values, key=key) if is_min else max(values, key=key)


class HashAggOp(Operator):
    """Incremental `SELECT keys, aggs FROM input GROUP BY keys`.

    Output schema: the group key columns, then one column per `AggCall`; stream key:
    the group key positions (empty for a global aggregation).

    State tables (names passed to the allocator):

    * `groups`: group key tuple -> `(row_count, *slots)`, where the slots are each
      aggregate's accumulator slots in call order (count: `(n,)`; sum/avg:
      `(sum, non_null_count)`; bool_and/or: `(true_count, non_null_count)`; min/max:
      `(current_extreme,)`; a user-defined aggregate: `(pickled_state, value, failing)`,
      see `agg_udaf`). Sums are exact Python ints / Decimals (floats for float
      arguments).
    * `minmax_<i>` for the first min/max call i over each (argument, FILTER) pair (not for
      `append_only_extremes`, whose slot alone is their state):
      `(*group_key, value) -> (count,)`, the multiset of counted (FILTER true, non-NULL)
      values of each group, shared by every min/max call over the same pair (so
      `min(v), max(v)` keep one multiset).
    * `distinct_<i>` for a DISTINCT additive call i: `(*group_key, value) -> (count,)`;
      a value enters the aggregate when its count goes 0 -> >0 and leaves at >0 -> 0.
    """

    def __init__(
        self,
        input_schema: list[Field],
        group_keys: list[int],
        aggs: list[AggCall],
        alloc: StateAllocator,
        output_names: list[str],
        errors: ErrorSink | None = None,
        append_only_extremes: Collection[int] = (),
    ) -> None:
        """`errors` set (streaming jobs): an aggregate whose value is out of its type's
        range outputs NULL for that group and is reported there; unset (ad hoc) raises.
        `append_only_extremes`: min/max calls whose input never retracts (the planner's
        choice): they keep only the current value, no multiset table."""
        if len(output_names) != len(group_keys) + len(aggs):
            raise ValueError("HashAggOp needs one output name per group key and aggregate")
        self.input_schema = input_schema
        self.group_keys = list(group_keys)
        self.aggs = list(aggs)
        self.errors = errors
        nk = len(group_keys)
        self.schema = [
            Field(output_names[j], input_schema[g].type) for j, g in enumerate(group_keys)
        ] + [Field(output_names[nk + i], a.type) for i, a in enumerate(aggs)]
        self.stream_key = list(range(nk))
        self._global = nk == 0
        self._impls: list[AggImpl] = [
            UdafImpl(a, errors)
            if a.kind == "udaf"
            else make_impl(a, None if a.arg is None else input_schema[a.arg].type)
            for a in aggs
        ]
        # user-defined aggregates: their states fold the chunk's rows per group (agg_udaf)
        self._udafs = [i for i, impl in enumerate(self._impls) if isinstance(impl, UdafImpl)]
        self._plain = sorted(set(append_only_extremes))
        for i in self._plain:
            arg = aggs[i].arg
            floats = arg is not None and input_schema[arg].type.is_float
            self._impls[i] = AppendOnlyExtremeImpl(aggs[i].kind == "min", floats)
        # one row per group: RocksDB-first (bounded memory) when the runtime has a store
        self._groups = alloc.table("groups", disk=True)
        # slot layout of the group state row
        self._start: list[int] = []
        pos = 1
        init: list[Any] = [0]
        for impl in self._impls:
            self._start.append(pos)
            pos += impl.n_slots
            init.extend(impl.init)
        self._init_state: tuple[Any, ...] = tuple(init)
        self._legacy = _legacy_widths(self._impls)
        # value tables: min/max multisets and DISTINCT dedup tables
        self._value_tables: dict[int, StateTable] = {}
        # min/max calls over the same (argument, FILTER) share one multiset: the first
        # such call owns table `minmax_<i>` and its index; `_shared` maps each to its owner
        self._shared: dict[int, int] = {}
        owners: dict[tuple[int | None, int | None], int] = {}
        for i, (a, impl) in enumerate(zip(aggs, self._impls, strict=True)):
            if impl.uses_values:
                owner = owners.setdefault((a.arg, a.filter), i)
                self._shared[i] = owner
                if owner == i:
                    self._value_tables[i] = alloc.table(f"minmax_{i}")
            elif a.distinct and a.arg is not None:
                self._value_tables[i] = alloc.table(f"distinct_{i}")
        self._indexes: dict[int, dict[Key, dict[Any, int]]] | None = None
        # polars plan pieces
        cols = list(group_keys)
        for a in aggs:
            cols += [c for c in (a.arg, a.arg2, a.filter) if c is not None]
            cols += [r.index for r in a.udf.args] if a.udf is not None else []
        self._cols = cols
        self._key_names = [col_name(g) for g in group_keys]
        self._uniq_key_names = list(dict.fromkeys(self._key_names))
        w = pl.col(WEIGHT)
        exprs: list[pl.Expr] = [w.sum().alias(_COUNT)]
        if self._udafs and not self._global:  # each group's chunk rows, in chunk order
            exprs.append(pl.col(INDEX).alias(_ROWS))
        for i, (a, impl) in enumerate(zip(aggs, self._impls, strict=True)):
            if i in self._value_tables or i in self._shared or i in self._udafs:
                continue
            x = None if a.arg is None else pl.col(col_name(a.arg))
            for j, e in enumerate(impl.delta_exprs(self._ok(a), x, w)):
                exprs.append(e.alias(f"a{i}_{j}"))
        self._delta_exprs = exprs
        # the columnar step when every aggregate keeps fixed-width slots
        self._columnar: ColumnarAgg | None = None
        layout = (
            None
            if self._value_tables
            else columnar_layout(input_schema, self.group_keys, self.aggs, self._impls)
        )
        kinds = key_kinds(input_schema, self.group_keys, getattr(self._groups, "dist_len", 0))
        if layout is not None and kinds is not None:
            self._columnar = ColumnarAgg(
                ColumnarGroups(self._groups, layout, kinds),
                self._impls,
                self.aggs,
                self.schema,
                self._key_names,
                self._output_one,
                self.explain,
            )
        elif isinstance(self._groups, DiskStateTable):
            # written only through puts and deletes: a new view's first lookups of its
            # new groups skip RocksDB (`engine.state.written_keys`)
            self._groups.track_absent()

    # -- planning helpers -------------------------------------------------------------
    @staticmethod
    def _ok(a: AggCall) -> pl.Expr:
        """Rows aggregate `a` counts: FILTER true and its arguments not NULL."""
        ok = pl.lit(True)
        if a.filter is not None:
            ok = pl.col(col_name(a.filter)).fill_null(False)
        if a.arg is not None and a.kind != "count_star":
            ok = ok & pl.col(col_name(a.arg)).is_not_null()
        if a.arg2 is not None:
            ok = ok & pl.col(col_name(a.arg2)).is_not_null()
        return ok

    def state_tables(self) -> list[StateTable]:
        return [self._groups, *self._value_tables.values()]

    def explain(self) -> str:
        aggs = ", ".join(str(a) for a in self.aggs)
        if self._global:
            return f"StreamSimpleAgg {{ aggs: [{aggs}] }}"
        keys = ", ".join(f"${g}" for g in self.group_keys)
        return f"StreamHashAgg {{ group_key: [{keys}], aggs: [{aggs}] }}"

    def _get_groups(self, keys: list[Key]) -> list[tuple[Any, ...] | None]:
        """The stored states of `keys`, rows of the older slot layout widened to this one."""
        olds = self._groups.get_many(keys)
        if self._legacy is None:
            return olds
        n = len(self._init_state)
        return [o if o is None or len(o) == n else _widen(o, self._legacy) for o in olds]

    # -- step -------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        with decimal.localcontext(ACC_CONTEXT):
            if chunk is None or len(chunk) == 0:
                if self._global and () not in self._groups:
                    return self._emit_initial()
                return None
            cuts = self._decimal_cuts(chunk)
            if cuts is None:
                return self._apply(chunk)
            return self._apply_in_parts(chunk, cuts)

    def _decimal_cuts(self, chunk: StreamChunk) -> list[int] | None:
        """Row offsets splitting `chunk` so that no numeric sum of one part can pass the
        128-bit range the vectorised delta sums in (polars wraps silently past it), or
        None when the whole chunk is safe (the common case: one float sum per column)."""
        risky = [
            a.arg
            for a in self.aggs
            if a.arg is not None
            and a.kind in ("sum", "avg", *VARIANCE_KINDS)
            and self.input_schema[a.arg].type.kind is TypeKind.NUMERIC
        ]
        if not risky:
            return None
        change = np.zeros(len(chunk), dtype=bool)
        split = False
        for arg in dict.fromkeys(risky):
            mag = pc.abs(finite_only(chunk.data.column(arg)).cast(pa.float64()))
            mag = pc.fill_null(mag, 0.0).to_numpy(zero_copy_only=False)
            if float(mag.sum()) < _SAFE_SUM:
                continue
            split = True
            part = np.floor(np.cumsum(mag) / _PART_SUM)
            change[1:] |= part[1:] != part[:-1]
        if not split:
            return None
        return [0, *np.flatnonzero(change).tolist(), len(chunk)]

    def _apply_in_parts(self, chunk: StreamChunk, cuts: list[int]) -> StreamChunk | None:
        """`_apply` part after part (the state stays exact between them), the outputs merged
        into one change per group: its value before the chunk and after it."""
        outs = [
            self._apply(StreamChunk(chunk.ops.slice(a, b - a), chunk.data.slice(a, b - a)))
            for a, b in zip(cuts, cuts[1:], strict=False)
            if b > a
        ]
        out = StreamChunk.concat([o for o in outs if o is not None])
        if out is None:
            return None
        nk = len(self.group_keys)
        keys = list(zip(*[out.data.column(i).to_pylist() for i in range(nk)], strict=True))
        if nk == 0:
            keys = [()] * len(out)
        ops = out.ops.to_pylist()
        first_old: dict[Any, int] = {}
        last: dict[Any, tuple[int, int]] = {}
        for i, (k, op) in enumerate(zip(keys, ops, strict=True)):
            if op in (Op.DELETE, Op.UPDATE_DELETE):
                first_old.setdefault(k, i)
            last[k] = (i, op)
        take: list[int] = []
        new_ops: list[int] = []
        for k, (i, op) in last.items():
            old = first_old.get(k)
            if op in (Op.INSERT, Op.UPDATE_INSERT):
                if old is None:
                    take.append(i)
                    new_ops.append(Op.INSERT)
                else:
                    take.extend((old, i))
                    new_ops.extend((Op.UPDATE_DELETE, Op.UPDATE_INSERT))
            elif old is not None:
                take.append(old)
                new_ops.append(Op.DELETE)
        idx = pa.array(take, pa.int64())
        return StreamChunk(pa.array(new_ops, pa.int8()), out.data.take(idx))

    def _emit_initial(self) -> StreamChunk:
        init = self._init_state
        self._groups.put((), init)
        cols = self._outputs([[s] for s in init])
        return StreamChunk(ops_array([Op.INSERT]), build_batch(self.schema, cols))

    def _outputs(self, slot_cols: list[Any], report: bool = True) -> list[list[Any]]:
        """Each aggregate's output per group; `report=False` for the old outputs of an
        update (their failures were reported when they were new)."""
        return [
            self._output_one(i, impl, slot_cols[s : s + impl.n_slots], report)
            for i, (impl, s) in enumerate(zip(self._impls, self._start, strict=True))
        ]

    def _output_one(self, i: int, impl: AggImpl, slots: list[Any], report: bool) -> list[Any]:
        """Aggregate i's output per group from its slot columns (Python lists)."""
        try:
            return impl.output(slots)
        except EngineError as e:
            if self.errors is None or not is_data_error(e):
                raise
            return self._outputs_nonstrict(i, impl, slots, report)

    def _outputs_nonstrict(
        self, i: int, impl: AggImpl, slots: list[Any], report: bool
    ) -> list[Any]:
        """Per group (only after the vectorised output failed): NULL where out of range."""
        vals: list[Any] = []
        failed: list[tuple[int, EngineError]] = []
        for g in range(len(slots[0])):
            try:
                vals.append(impl.output([[col[g]] for col in slots])[0])
            except EngineError as e:
                if not is_data_error(e):
                    raise
                vals.append(None)
                failed.append((g, e))
        if report and failed and self.errors is not None:
            a = self.aggs[i]
            arg = "*" if a.arg is None else self.input_schema[a.arg].name
            # a planner-made input column (`_g1`): the call as EXPLAIN shows it (`sum($1)`)
            text = str(a) if arg.startswith("_") else f"{a.kind}({arg})"
            g, err = failed[0]
            state = ", ".join(str(col[g]) for col in slots)
            self.errors.report(text, err, len(failed), f"state: {state}")
        return vals

    def _apply(self, chunk: StreamChunk) -> StreamChunk | None:
        if self._indexes is None:
            self._build_indexes()
        weights = chunk.weights()
        if self._plain and bool((weights < 0).any()):
            raise InternalError(
                "an append-only aggregation input retracted a row",
                detail=f"{self.explain()} keeps min/max without a multiset.",
            )
        frame = polars_frame(
            chunk.data, self._cols, weights=weights, index=bool(self._udafs), specials=True
        )
        df = frame.df
        try:
            if self._global:
                part = df.select(self._delta_exprs)
            else:
                part = df.group_by(self._uniq_key_names).agg(self._delta_exprs)
        except pl.exceptions.ComputeError as e:  # a decimal sum past numeric's 38 digits
            if "overflow" not in str(e):
                raise
            raise NumericValueOutOfRange(
                "numeric field overflow",
                detail="Swell's numeric holds up to 28 digits before the decimal point and "
                "10 after it.",
            ) from None
        if self._columnar is not None:
            return self._columnar.apply(frame, part)
        n = part.height
        by_name = {kn: py_values(frame, part, kn) for kn in self._uniq_key_names}
        for kn in self._uniq_key_names:
            # NaN equals nothing and hashes by identity: each NaN polars hands out would
            # be a group of its own in the state's overlay and cache (a deleted NaN row
            # then misses the group it was counted in)
            if part.schema[kn].is_float() and bool(part.get_column(kn).is_nan().any()):
                by_name[kn] = [_one_nan(v) for v in by_name[kn]]
        keys = key_tuples([by_name[kn] for kn in self._key_names], n)
        dcnt = part.get_column(_COUNT).to_list()

        # per-(group, value) processing: min/max multisets, DISTINCT dedup
        replaced: dict[int, dict[Key, Any]] = {}
        deltas: dict[int, list[list[Any]]] = {}
        for i in self._value_tables:
            vd = self._value_deltas(frame, i)
            impl = self._impls[i]
            if isinstance(impl, ExtremeImpl):
                self._update_multiset(i, vd)
                for j, owner in self._shared.items():
                    if owner == i:
                        impl_j = self._impls[j]
                        assert isinstance(impl_j, ExtremeImpl)
                        replaced[j] = self._extremes(j, impl_j, vd)
            else:
                deltas[i] = self._apply_distinct(i, impl, keys, vd)
        for i, impl in enumerate(self._impls):
            if isinstance(impl, AppendOnlyExtremeImpl):
                deltas[i] = [py_values(frame, part, f"a{i}_0")]
            elif i not in self._value_tables and i not in self._shared and i not in self._udafs:
                deltas[i] = [part.get_column(f"a{i}_{j}").to_list() for j in range(impl.n_slots)]

        # merge old states with the deltas, column-wise
        olds = self._get_groups(keys)
        init = self._init_state
        old_cols = list(zip(*[init if o is None else o for o in olds], strict=True))
        new_cols: list[Any] = [[a + b for a, b in zip(old_cols[0], dcnt, strict=True)]]
        rows: list[Any] = []
        if self._udafs:
            rows = [range(len(chunk))] if self._global else part.get_column(_ROWS).to_list()
        for i, impl in enumerate(self._impls):
            s = self._start[i]
            if isinstance(impl, UdafImpl):
                new_cols.extend(impl.step(old_cols[s : s + 3], rows, chunk.data, weights))
            elif i in replaced:
                ext = replaced[i]
                new_cols.append([ext.get(k, o) for k, o in zip(keys, old_cols[s], strict=True)])
            else:
                new_cols.extend(impl.merge(old_cols[s : s + impl.n_slots], deltas[i]))
        return self._emit(frame, part, keys, olds, old_cols, new_cols)

    def _emit(
        self,
        frame: Frame,
        part: pl.DataFrame,
        keys: list[Key],
        olds: list[tuple[Any, ...] | None],
        old_cols: list[Any],
        new_cols: list[Any],
    ) -> StreamChunk | None:
        """Write changed group states; build the output chunk with vectorised takes."""
        n = len(keys)
        existed = np.fromiter((o is not None for o in olds), dtype=bool, count=n)
        counts = np.asarray(new_cols[0], dtype=np.int64)
        if (counts < 0).any():
            bad = keys[int(np.flatnonzero(counts < 0)[0])]
            raise InternalError(
                "aggregation group row count became negative",
                detail=f"Group {bad!r} of {self.explain()} received more deletes than inserts.",
            )
        if self._global:
            ins = ~existed
            dele = np.zeros(n, dtype=bool)
        else:
            ins = ~existed & (counts > 0)
            dele = existed & (counts == 0)
        both = existed & ~dele

        # state writes: new groups, changed groups, emptied groups
        new_states = list(zip(*new_cols, strict=True))
        put_idx = np.flatnonzero(ins).tolist()
        put_idx += [i for i in np.flatnonzero(both).tolist() if new_states[i] != olds[i]]
        self._groups.put_many([keys[i] for i in put_idx], [new_states[i] for i in put_idx])
        del_i = np.flatnonzero(dele)
        if del_i.size:
            self._groups.delete_many([keys[i] for i in del_i.tolist()])

        # outputs: an index into concat(old_rows, new_rows) per emitted row
        old_out = self._outputs(old_cols, report=False)
        new_out = self._outputs(new_cols)
        changed = np.zeros(n, dtype=bool)
        for o, nw in zip(old_out, new_out, strict=True):
            changed |= (_objects(o) != _objects(nw)).astype(bool)
        ins_i = np.flatnonzero(ins)
        upd_i = np.flatnonzero(both & changed)
        if not (ins_i.size or del_i.size or upd_i.size):
            return None
        idx, ops = emission(ins_i, del_i, upd_i, n)
        arrow = arrow_schema(self.schema)
        nk = len(self.group_keys)
        take_idx = pa.array(idx)
        key_idx = pa.array(idx % n)
        arrays = [
            arrow_values(frame, part, kn).cast(arrow.field(j).type).take(key_idx)
            for j, kn in enumerate(self._key_names)
        ]
        for j, (o, nw) in enumerate(zip(old_out, new_out, strict=True)):
            arrays.append(array_of([*o, *nw], arrow.field(nk + j).type).take(take_idx))
        return StreamChunk(pa.array(ops), pa.RecordBatch.from_arrays(arrays, schema=arrow))

    # -- value tables ------------------------------------------------------------------
    def _value_deltas(self, frame: Frame, i: int) -> _ValueDelta:
        """Net weight change per (group, value) of call i's counted values."""
        a = self.aggs[i]
        assert a.arg is not None
        xname = col_name(a.arg)
        names = list(dict.fromkeys([*self._uniq_key_names, xname]))
        vdf = (
            frame.df.filter(self._ok(a))
            .group_by(names)
            .agg(pl.col(WEIGHT).sum().alias("__dw"))
            .filter(pl.col("__dw") != 0)
        )
        by_name = {nm: py_values(frame, vdf, nm) for nm in names}
        for nm in names:  # one NaN object, as `_apply` does for the groups' keys
            if vdf.schema[nm].is_float() and bool(vdf.get_column(nm).is_nan().any()):
                by_name[nm] = [_one_nan(v) for v in by_name[nm]]
        kcols = [by_name[kn] for kn in self._key_names]
        vals = by_name[xname]
        return _ValueDelta(
            frame,
            xname,
            vdf,
            key_tuples(kcols, vdf.height),
            vals,
            vdf.get_column("__dw").to_list(),
            key_tuples([*kcols, vals], vdf.height),
        )

    def _update_counts(self, i: int, vd: _ValueDelta) -> list[int]:
        """Apply the value deltas to call i's (group, value) count table; new counts."""
        table = self._value_tables[i]
        olds = table.get_many(vd.mkeys)
        news = [dw if o is None else o[0] + dw for o, dw in zip(olds, vd.dws, strict=True)]
        if news and min(news) < 0:
            raise InternalError(
                "aggregation value count became negative",
                detail=f"A value of {self.aggs[i]} in {self.explain()} was deleted too often.",
            )
        table.put_many(compress(vd.mkeys, news), [(c,) for c in news if c])
        table.delete_many([k for k, c in zip(vd.mkeys, news, strict=True) if not c])
        return news

    def _update_multiset(self, i: int, vd: _ValueDelta) -> None:
        """Apply the value deltas to min/max multiset i (table and per-group index)."""
        assert self._indexes is not None
        news = self._update_counts(i, vd)
        idx = self._indexes[i]
        for g, v, c in zip(vd.gkeys, vd.vals, news, strict=True):
            d = idx.get(g)
            if d is None:
                d = idx[g] = {}
            if c:
                d[v] = c
            else:
                del d[v]

    def _extremes(self, i: int, impl: ExtremeImpl, vd: _ValueDelta) -> dict[Key, Any]:
        """The new extreme of call i in every touched group (multiset already updated)."""
        assert self._indexes is not None
        idx = self._indexes[self._shared[i]]
        # best newly added value per group, vectorised
        x = pl.col(vd.xname)
        floats = vd.vdf.schema[vd.xname].is_float()
        # PostgreSQL orders NaN above every float; polars' max skips it (nan_max does not)
        pick = x.min() if impl.is_min else x.nan_max() if floats else x.max()
        adds = vd.vdf.filter(pl.col("__dw") > 0)
        added: dict[Key, Any] = {}
        if adds.schema[vd.xname] == pl.Decimal:
            # by row index: polars panics making a decimal scalar or column of a numeric
            # NaN / Infinity (beyond 38 digits), so only the positions come out of polars
            at = pl.col("__i").sort_by(x, descending=not impl.is_min).first().alias("__at")
            indexed = adds.with_row_index("__i")
            if self._global:
                best = indexed.select(at)
            else:
                best = indexed.group_by(self._uniq_key_names).agg(at)
            if best.height and adds.height:
                values = adds.get_column(vd.xname).to_arrow()
                picked = values.take(best.get_column("__at").to_arrow()).to_pylist()
                kcols = [py_values(vd.frame, best, kn) for kn in self._key_names]
                added = dict(zip(key_tuples(kcols, best.height), picked, strict=True))
        else:
            if self._global:
                best = adds.select(pick.alias("__best"))
            else:
                best = adds.group_by(self._uniq_key_names).agg(pick.alias("__best"))
            if best.height:
                by_name = {nm: py_values(vd.frame, best, nm) for nm in best.columns}
                bkeys = key_tuples([by_name[kn] for kn in self._key_names], best.height)
                added = dict(zip(bkeys, by_name["__best"], strict=True))

        slot = self._start[i]
        is_min = impl.is_min
        # dates beyond year 9999 / BC come as numpy datetime64 among datetime objects
        temporal = adds.schema[vd.xname] == pl.Date or isinstance(
            adds.schema[vd.xname], pl.Datetime
        )
        order: Callable[[Any], Any] = (
            civil.order_key if temporal else _float_order if floats else _same
        )
        result: dict[Key, Any] = {}
        last = max(j for j, o in self._shared.items() if o == self._shared[i]) == i
        groups = list(dict.fromkeys(vd.gkeys))
        for g, st in zip(groups, self._get_groups(groups), strict=True):
            d = idx[g]
            cur = None if st is None else st[slot]
            if cur is None or cur not in d:
                new = _extreme(d, is_min, order if temporal or floats else None)
            else:
                new = cur
                a = added.get(g)
                if a is not None and (
                    (order(a) < order(new)) if is_min else (order(a) > order(new))
                ):
                    new = a
            if not d and last:  # the last call sharing the multiset drops empty groups
                del idx[g]
            result[g] = new
        return result

    def _apply_distinct(
        self, i: int, impl: AggImpl, keys: list[Key], vd: _ValueDelta
    ) -> list[list[Any]]:
        """Update call i's dedup table; return its slot deltas aligned with `keys`."""
        news = self._update_counts(i, vd)
        with_sum = not isinstance(impl, CountImpl)
        zero = impl.init[0]
        specials = isinstance(impl, _SumLike) and impl.special_slots
        # a compensated float sum: each group's changed values, summed exactly below
        exact: dict[Key, list[float]] | None = (
            {} if isinstance(impl, _SumLike) and impl.compensated else None
        )
        dcount: dict[Key, int] = {}
        dsum: dict[Key, Any] = {}
        dspecial: dict[tuple[Key, int], int] = {}
        for g, v, c, dw in zip(vd.gkeys, vd.vals, news, vd.dws, strict=True):
            if c == dw:  # 0 -> >0: the value enters the distinct set
                t = 1
            elif c == 0:  # >0 -> 0: it leaves
                t = -1
            else:
                continue
            dcount[g] = dcount.get(g, 0) + t
            if specials and (code := special_code(v)):  # counted apart from the sum
                dspecial[g, code] = dspecial.get((g, code), 0) + t
            elif exact is not None:
                exact.setdefault(g, []).append(v if t > 0 else -v)
            elif with_sum:
                dsum[g] = dsum.get(g, zero) + (v if t > 0 else -v)
        dc = [dcount.get(k, 0) for k in keys]
        ds = [dsum.get(k, zero) for k in keys] if with_sum else dc
        if specials:
            assert isinstance(impl, _SumLike)
            per_code = [[dspecial.get((k, code), 0) for k in keys] for code in (1, 2, 3)]
            if exact is not None:  # the rounded sum and what its rounding left out
                hi = {g: math.fsum(vs) for g, vs in exact.items()}
                lo = [math.fsum([*exact[k], -hi[k]]) if k in hi else 0.0 for k in keys]
                ds = [hi.get(k, 0.0) for k in keys]
                return impl.distinct_special_deltas(ds, dc, per_code, lo)
            return impl.distinct_special_deltas(ds, dc, per_code)
        return impl.distinct_deltas(ds, dc)

    def _build_indexes(self) -> None:
        """Per-run index group -> {value: count} of each min/max multiset table."""
        nk = len(self.group_keys)
        self._indexes = {}
        for i, table in self._value_tables.items():
            if not self._impls[i].uses_values:
                continue
            idx: dict[Key, dict[Any, int]] = {}
            for k, (c,) in table.items():
                g = k[:nk]
                d = idx.get(g)
                if d is None:
                    d = idx[g] = {}
                d[_one_nan(k[nk])] = c
            self._indexes[i] = idx
        if self._indexes:
            log.debug("%s: rebuilt min/max indexes", self.explain())


#: the one float NaN of value keys (`codec.NAN`, also the one of loaded state keys):
#: NaN equals nothing, so each NaN polars hands out would be a key of its own in a dict
#: of values (a deleted NaN not finding the counted one, also after a restart); dicts
#: and tuples compare by identity first, so one object finds itself
_NAN = codec.NAN


def _one_nan(v: Any) -> Any:
    return _NAN if isinstance(v, float) and v != v else v


_SPECIAL_SLOTS = 3
"""Slots a numeric sum/avg keeps beyond its sum and count: the NaN, Infinity and
-Infinity counts. Group rows written before they existed have only the two."""


def _legacy_widths(impls: list[AggImpl]) -> list[tuple[int, int]] | None:
    """(old width, new width) per aggregate when some aggregate's slots grew since an
    older version (numeric sum/avg), else None: rows of that layout are still stored
    and are widened as they are read (`_widen`), then written back in this layout."""
    widths = []
    grew = False
    for impl in impls:
        n = impl.n_slots
        if isinstance(impl, _SumLike) and impl.special_slots and impl.numeric:
            widths.append((n - _SPECIAL_SLOTS, n))
            grew = True
        else:
            widths.append((n, n))
    return widths if grew else None


def _widen(row: tuple[Any, ...], widths: list[tuple[int, int]]) -> tuple[Any, ...]:
    """A group row of the older layout in this one: the new slots count nothing yet."""
    if len(row) != 1 + sum(old for old, _ in widths):
        raise InternalError(
            "aggregation state row of an unknown layout",
            detail=f"{len(row)} slots stored, {1 + sum(new for _, new in widths)} expected",
        )
    out: list[Any] = [row[0]]
    pos = 1
    for old, new in widths:
        out.extend(row[pos : pos + old])
        out.extend([0] * (new - old))
        pos += old
    return tuple(out)
