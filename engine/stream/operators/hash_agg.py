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
"""

from __future__ import annotations

import decimal
import logging
from typing import Any

import polars as pl

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.agg_calls import (
    ACC_CONTEXT,
    AggCall,
    AggImpl,
    CountImpl,
    ExtremeImpl,
    make_impl,
)
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import (
    WEIGHT,
    Frame,
    build_batch,
    col_name,
    key_tuples,
    ops_array,
    polars_frame,
    py_values,
)
from engine.types import Field

log = logging.getLogger(__name__)

Key = tuple[Any, ...]
_COUNT = "__cnt"


class HashAggOp(Operator):
    """Incremental `SELECT keys, aggs FROM input GROUP BY keys`.

    Output schema: the group key columns, then one column per `AggCall`; stream key:
    the group key positions (empty for a global aggregation).

    State tables (names passed to the allocator):

    * `groups`: group key tuple -> `(row_count, *slots)`, where the slots are each
      aggregate's accumulator slots in call order (count: `(n,)`; sum/avg:
      `(sum, non_null_count)`; bool_and/or: `(true_count, non_null_count)`; min/max:
      `(current_extreme,)`). Sums are exact Python ints / Decimals (floats for float
      arguments).
    * `minmax_<i>` for a min/max call i: `(*group_key, value) -> (count,)`, the multiset
      of counted (FILTER true, non-NULL) values of each group.
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
    ) -> None:
        if len(output_names) != len(group_keys) + len(aggs):
            raise ValueError("HashAggOp needs one output name per group key and aggregate")
        self.input_schema = input_schema
        self.group_keys = list(group_keys)
        self.aggs = list(aggs)
        nk = len(group_keys)
        self.schema = [
            Field(output_names[j], input_schema[g].type) for j, g in enumerate(group_keys)
        ] + [Field(output_names[nk + i], a.type) for i, a in enumerate(aggs)]
        self.stream_key = list(range(nk))
        self._global = nk == 0
        self._impls: list[AggImpl] = [
            make_impl(a, None if a.arg is None else input_schema[a.arg].type) for a in aggs
        ]
        self._groups = alloc.table("groups")
        # slot layout of the group state row
        self._start: list[int] = []
        pos = 1
        init: list[Any] = [0]
        for impl in self._impls:
            self._start.append(pos)
            pos += impl.n_slots
            init.extend(impl.init)
        self._init_state: tuple[Any, ...] = tuple(init)
        # value tables: min/max multisets and DISTINCT dedup tables
        self._value_tables: dict[int, StateTable] = {}
        for i, (a, impl) in enumerate(zip(aggs, self._impls, strict=True)):
            if impl.uses_values:
                self._value_tables[i] = alloc.table(f"minmax_{i}")
            elif a.distinct and a.arg is not None:
                self._value_tables[i] = alloc.table(f"distinct_{i}")
        self._indexes: dict[int, dict[Key, dict[Any, int]]] | None = None
        # polars plan pieces
        cols = list(group_keys)
        for a in aggs:
            cols += [c for c in (a.arg, a.filter) if c is not None]
        self._cols = cols
        self._key_names = [col_name(g) for g in group_keys]
        self._uniq_key_names = list(dict.fromkeys(self._key_names))
        w = pl.col(WEIGHT)
        exprs: list[pl.Expr] = [w.sum().alias(_COUNT)]
        for i, (a, impl) in enumerate(zip(aggs, self._impls, strict=True)):
            if i in self._value_tables:
                continue
            x = None if a.arg is None else pl.col(col_name(a.arg))
            for j, e in enumerate(impl.delta_exprs(self._ok(a), x, w)):
                exprs.append(e.alias(f"a{i}_{j}"))
        self._delta_exprs = exprs

    # -- planning helpers -------------------------------------------------------------
    @staticmethod
    def _ok(a: AggCall) -> pl.Expr:
        """Rows aggregate `a` counts: FILTER true and argument not NULL."""
        ok = pl.lit(True)
        if a.filter is not None:
            ok = pl.col(col_name(a.filter)).fill_null(False)
        if a.arg is not None and a.kind != "count_star":
            ok = ok & pl.col(col_name(a.arg)).is_not_null()
        return ok

    def state_tables(self) -> list[StateTable]:
        return [self._groups, *self._value_tables.values()]

    def explain(self) -> str:
        aggs = ", ".join(str(a) for a in self.aggs)
        if self._global:
            return f"StreamSimpleAgg {{ aggs: [{aggs}] }}"
        keys = ", ".join(f"${g}" for g in self.group_keys)
        return f"StreamHashAgg {{ group_key: [{keys}], aggs: [{aggs}] }}"

    # -- step -------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        with decimal.localcontext(ACC_CONTEXT):
            if chunk is None or len(chunk) == 0:
                if self._global and () not in self._groups:
                    return self._emit_initial()
                return None
            return self._apply(chunk)

    def _emit_initial(self) -> StreamChunk:
        init = self._init_state
        self._groups.put((), init)
        cols = self._outputs([[s] for s in init])
        return StreamChunk(ops_array([Op.INSERT]), build_batch(self.schema, cols))

    def _outputs(self, slot_cols: list[Any]) -> list[list[Any]]:
        out = []
        for impl, s in zip(self._impls, self._start, strict=True):
            out.append(impl.output(slot_cols[s : s + impl.n_slots]))
        return out

    def _apply(self, chunk: StreamChunk) -> StreamChunk | None:
        if self._indexes is None:
            self._build_indexes()
        frame = polars_frame(chunk.data, self._cols, weights=chunk.weights())
        df = frame.df
        if self._global:
            part = df.select(self._delta_exprs)
        else:
            part = df.group_by(self._uniq_key_names).agg(self._delta_exprs)
        n = part.height
        by_name = {kn: py_values(frame, part, kn) for kn in self._uniq_key_names}
        keys = key_tuples([by_name[kn] for kn in self._key_names], n)
        dcnt = part.get_column(_COUNT).to_list()

        # per-(group, value) processing: min/max multisets, DISTINCT dedup
        replaced: dict[int, dict[Key, Any]] = {}
        deltas: dict[int, list[list[Any]]] = {}
        for i in self._value_tables:
            gkeys, vals, dws = self._value_deltas(frame, i)
            impl = self._impls[i]
            if isinstance(impl, ExtremeImpl):
                replaced[i] = self._apply_extreme(i, impl, gkeys, vals, dws)
            else:
                deltas[i] = self._apply_distinct(i, impl, keys, gkeys, vals, dws)
        for i, impl in enumerate(self._impls):
            if i not in self._value_tables:
                deltas[i] = [part.get_column(f"a{i}_{j}").to_list() for j in range(impl.n_slots)]

        # merge old states with the deltas, column-wise
        get = self._groups.data.get
        olds = [get(k) for k in keys]
        init = self._init_state
        old_cols = list(zip(*[init if o is None else o for o in olds], strict=True))
        new_cols: list[Any] = [[a + b for a, b in zip(old_cols[0], dcnt, strict=True)]]
        for i, impl in enumerate(self._impls):
            s = self._start[i]
            if i in replaced:
                ext = replaced[i]
                new_cols.append([ext.get(k, o) for k, o in zip(keys, old_cols[s], strict=True)])
            else:
                new_cols.extend(impl.merge(old_cols[s : s + impl.n_slots], deltas[i]))
        new_states = list(zip(*new_cols, strict=True))
        old_rows = list(zip(*self._outputs(old_cols), strict=True)) if self.aggs else [()] * n
        new_rows = list(zip(*self._outputs(new_cols), strict=True)) if self.aggs else [()] * n
        return self._emit(keys, olds, new_states, old_rows, new_rows)

    def _emit(
        self,
        keys: list[Key],
        olds: list[tuple[Any, ...] | None],
        new_states: list[tuple[Any, ...]],
        old_rows: list[tuple[Any, ...]],
        new_rows: list[tuple[Any, ...]],
    ) -> StreamChunk | None:
        ops: list[int] = []
        out_keys: list[Key] = []
        out_vals: list[tuple[Any, ...]] = []
        put_k: list[Key] = []
        put_v: list[tuple[Any, ...]] = []
        del_k: list[Key] = []
        keep_empty = self._global
        for i, k in enumerate(keys):
            o = olds[i]
            ns = new_states[i]
            nc = ns[0]
            if nc < 0:
                raise InternalError(
                    "aggregation group row count became negative",
                    detail=f"Group {k!r} of {self.explain()} has count {nc}.",
                )
            if o is None:
                if nc == 0 and not keep_empty:
                    continue
                put_k.append(k)
                put_v.append(ns)
                ops.append(Op.INSERT)
                out_keys.append(k)
                out_vals.append(new_rows[i])
            elif nc == 0 and not keep_empty:
                del_k.append(k)
                ops.append(Op.DELETE)
                out_keys.append(k)
                out_vals.append(old_rows[i])
            else:
                if ns != o:
                    put_k.append(k)
                    put_v.append(ns)
                if old_rows[i] != new_rows[i]:
                    ops.append(Op.UPDATE_DELETE)
                    ops.append(Op.UPDATE_INSERT)
                    out_keys.append(k)
                    out_keys.append(k)
                    out_vals.append(old_rows[i])
                    out_vals.append(new_rows[i])
        self._groups.put_many(put_k, put_v)
        self._groups.delete_many(del_k)
        if not ops:
            return None
        nk = len(self.group_keys)
        kcols = list(zip(*out_keys, strict=True)) if nk else []
        vcols = list(zip(*out_vals, strict=True)) if self.aggs else []
        return StreamChunk(ops_array(ops), build_batch(self.schema, [*kcols, *vcols]))

    # -- value tables ------------------------------------------------------------------
    def _value_deltas(self, frame: Frame, i: int) -> tuple[list[Key], list[Any], list[int]]:
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
        gkeys = key_tuples([by_name[kn] for kn in self._key_names], vdf.height)
        return gkeys, by_name[xname], vdf.get_column("__dw").to_list()

    def _apply_extreme(
        self, i: int, impl: ExtremeImpl, gkeys: list[Key], vals: list[Any], dws: list[int]
    ) -> dict[Key, Any]:
        """Update call i's multiset; return the new extreme of every touched group."""
        assert self._indexes is not None
        idx = self._indexes[i]
        table = self._value_tables[i]
        put_k: list[Key] = []
        put_v: list[tuple[int]] = []
        del_k: list[Key] = []
        added: dict[Key, list[Any]] = {}
        for g, v, dw in zip(gkeys, vals, dws, strict=True):
            d = idx.get(g)
            if d is None:
                d = idx[g] = {}
            c = d.get(v, 0) + dw
            if c > 0:
                d[v] = c
                put_k.append((*g, v))
                put_v.append((c,))
            elif c == 0:
                del d[v]
                del_k.append((*g, v))
            else:
                raise InternalError(
                    "aggregation value count became negative",
                    detail=f"Value {v!r} of group {g!r} in {self.explain()}.",
                )
            lst = added.get(g)
            if lst is None:
                lst = added[g] = []
            if dw > 0:
                lst.append(v)
        table.put_many(put_k, put_v)
        table.delete_many(del_k)

        slot = self._start[i]
        get = self._groups.data.get
        is_min = impl.is_min
        result: dict[Key, Any] = {}
        for g, adds in added.items():
            d = idx[g]
            st = get(g)
            cur = None if st is None else st[slot]
            if cur is None or cur not in d:
                new = (min(d) if is_min else max(d)) if d else None
            else:
                new = cur
                for v in adds:
                    if (v < new) if is_min else (v > new):
                        new = v
            if not d:
                del idx[g]
            result[g] = new
        return result

    def _apply_distinct(
        self,
        i: int,
        impl: AggImpl,
        keys: list[Key],
        gkeys: list[Key],
        vals: list[Any],
        dws: list[int],
    ) -> list[list[Any]]:
        """Update call i's dedup table; return its slot deltas aligned with `keys`."""
        table = self._value_tables[i]
        data = table.data
        with_sum = not isinstance(impl, CountImpl)
        zero = impl.init[0]
        dcount: dict[Key, int] = {}
        dsum: dict[Key, Any] = {}
        put_k: list[Key] = []
        put_v: list[tuple[int]] = []
        del_k: list[Key] = []
        for g, v, dw in zip(gkeys, vals, dws, strict=True):
            k = (*g, v)
            old = data.get(k)
            oc = 0 if old is None else old[0]
            c = oc + dw
            if c > 0:
                put_k.append(k)
                put_v.append((c,))
                if oc > 0:
                    continue
                t = 1
            elif c == 0:
                del_k.append(k)
                t = -1
            else:
                raise InternalError(
                    "aggregation value count became negative",
                    detail=f"Value {v!r} of group {g!r} in {self.explain()}.",
                )
            dcount[g] = dcount.get(g, 0) + t
            if with_sum:
                dsum[g] = dsum.get(g, zero) + (v if t > 0 else -v)
        table.put_many(put_k, put_v)
        table.delete_many(del_k)
        dc = [dcount.get(k, 0) for k in keys]
        ds = [dsum.get(k, zero) for k in keys] if with_sum else dc
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
                d[k[nk]] = c
            self._indexes[i] = idx
        if self._indexes:
            log.debug("%s: rebuilt min/max indexes", self.explain())
