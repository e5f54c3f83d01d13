"""The columnar step of `HashAggOp`: merge an epoch's per-group deltas as column arithmetic.

When it applies (`columnar_layout` and `key_kinds` say, at construction): group keys that
are all integers (smallint, int, bigint) or naive timestamps (window bounds: GROUP BY
auction, window_start) and only aggregates whose slots have a fixed width: count(*),
count(x), sum/avg over integers (an exact int128 sum) or floats, bool_and/bool_or, and
append-only min/max over integers. Everything else (DISTINCT, retractable min/max,
numeric arguments, other key types, global aggregation) keeps the tuple path
of `hash_agg`.

Per step, after `HashAggOp` has grouped the delta in polars (`part`: one row per changed
group with each slot's delta):

1. the group keys as int64 columns (+ NULL masks) go to `ColumnarGroups.fetch`, which
   returns each group's cache row, reading the groups it misses from the store at once;
2. old slots are gathered, new = old + delta column by column (int128 sums in uint64
   pairs, extremes with numpy min/max and validity masks), and the changed rows stored;
3. outputs are computed for old and new states as Arrow arrays (vectorized; only avg of
   integers, whose numeric division is exact in Python Decimals, and values out of their
   type's range go through the tuple path's per-group `output`), compared, and the output
   chunk built with takes, exactly as the tuple path does: `+` for new groups, `-` for
   emptied ones, `U-`/`U+` where any output changed.

Output, errors and state semantics equal the tuple path's (the differential property
tests run both); the stored rows are `engine.state.fixed_rows` rows whose decoded tuples
are the tuple path's `(row_count, *slots)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import StreamChunk
from engine.errors import EngineError, InternalError, NumericValueOutOfRange
from engine.numeric import FLOAT4_MAX, array_of
from engine.state.fixed_rows import (
    FixedLayout,
    int128_add,
    int128_fits_int64,
    int128_from_int64,
)
from engine.stream.operators.agg_calls import (
    AggCall,
    AggImpl,
    AppendOnlyExtremeImpl,
    AvgImpl,
    BoolImpl,
    CountImpl,
    SumImpl,
    emission,
)
from engine.stream.operators.agg_columns import Cols, ColumnarGroups, Valids
from engine.stream.operators.frames import Frame, arrow_values
from engine.types import Field, SqlType, TypeKind, arrow_schema

_INT_KINDS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)
_FLOAT_KINDS = (TypeKind.REAL, TypeKind.DOUBLE)

#: (i, impl, python slot lists, report) -> output values: the tuple path's `output`
OutputOne = Callable[[int, AggImpl, list[Any], bool], list[Any]]


def _impl_codes(impl: AggImpl, call: AggCall, arg: SqlType | None) -> str | None:
    if call.distinct:
        return None
    if isinstance(impl, CountImpl):
        return "q"
    if isinstance(impl, SumImpl | AvgImpl):
        assert arg is not None
        if arg.kind in _INT_KINDS:
            return "oq"
        if arg.kind not in _FLOAT_KINDS:
            return None
        # + the NaN / Infinity / -Infinity counts and the compensation (_SumLike)
        return "dqqqqd" if impl.compensated else "dqqqq" if impl.special_slots else "dq"
    if isinstance(impl, BoolImpl):
        return "qq"
    if isinstance(impl, AppendOnlyExtremeImpl):
        return "Q" if arg is not None and arg.kind in _INT_KINDS else None
    return None


def key_kinds(input_schema: list[Field], group_keys: list[int], dist_len: int) -> str | None:
    """`ColumnarGroups` key kinds ("i" integer, "t" naive timestamp) of the group keys, or
    None (the tuple path): other types, no keys, or a distribution key that is a strict
    prefix of the group key (store keys are hashed over the whole key)."""
    if not group_keys or dist_len not in (0, len(group_keys)):
        return None
    out = ""
    for g in group_keys:
        k = input_schema[g].type.kind
        if k in _INT_KINDS:
            out += "i"
        elif k is TypeKind.TIMESTAMP:
            out += "t"
        else:
            return None
    return out


def columnar_layout(
    input_schema: list[Field], group_keys: list[int], aggs: list[AggCall], impls: list[AggImpl]
) -> FixedLayout | None:
    """The fixed-width layout of the group state row, or None (use the tuple path)."""
    if not group_keys:
        return None
    codes = "q"  # the row count
    for a, impl in zip(aggs, impls, strict=True):
        c = _impl_codes(impl, a, None if a.arg is None else input_schema[a.arg].type)
        if c is None:
            return None
        codes += c
    return FixedLayout(codes)


def _int128_of(s: pl.Series) -> np.ndarray:
    """(n, 2) uint64 pairs of an integer polars column (Int128 through decimal128)."""
    if s.dtype == pl.Int128:
        arr = s.fill_null(0).cast(pl.Decimal(38, 0)).to_arrow()
        buf = np.frombuffer(arr.buffers()[1], np.uint64)
        return buf.reshape(-1, 2)[arr.offset : arr.offset + len(arr)].copy()
    return int128_from_int64(s.fill_null(0).cast(pl.Int64).to_numpy())


def _decimal_of(s: np.ndarray, valid: np.ndarray) -> pa.Array:
    """decimal128(38, 0) Arrow array of (n, 2) pairs, NULL where not `valid`."""
    bits = pa.py_buffer(np.packbits(valid, bitorder="little"))
    data = pa.py_buffer(np.ascontiguousarray(s))
    return pa.Array.from_buffers(pa.decimal128(38, 0), len(s), [bits, data])


def _neumaier(cols: Cols, s: np.ndarray, c: np.ndarray, d: np.ndarray, pos: int) -> None:
    """A compensated float sum's new (sum, compensation) at `cols[pos]` / `cols[pos + 5]`
    from the old sum, the compensations so far (old plus the step's) and the step's
    delta `d`, as `_SumLike.merge` computes them; both
    are exactly 0 where no finite value is counted (count minus the special counts)."""
    with np.errstate(invalid="ignore", over="ignore"):
        t = s + d
        c = c + np.where(np.abs(s) >= np.abs(d), (s - t) + d, (d - t) + s)
        s, t = t, t + c  # renormalized, as there
        c = np.where(np.abs(s) >= np.abs(c), (s - t) + c, (c - t) + s)
    finite = cols[pos + 1] - cols[pos + 2] - cols[pos + 3] - cols[pos + 4]
    cols[pos] = np.where(finite == 0, 0.0, t)
    cols[pos + 5] = np.where(finite == 0, 0.0, c)


class _PerGroup(Exception):
    """This output is computed per group by the tuple path's `output`."""


def _masked(values: np.ndarray, valid: np.ndarray, typ: pa.DataType) -> pa.Array:
    return pa.array(values, mask=~valid).cast(typ)


class ColumnarAgg:
    """The columnar step of one `HashAggOp` (module docstring)."""

    def __init__(
        self,
        groups: ColumnarGroups,
        impls: list[AggImpl],
        aggs: list[AggCall],
        schema: list[Field],
        key_names: list[str],
        output_one: OutputOne,
        explain: Callable[[], str],
    ) -> None:
        self.groups = groups
        self.impls = impls
        self.aggs = aggs
        self.schema = schema
        self.key_names = key_names
        self._output_one = output_one
        self._explain = explain
        self._arrow = arrow_schema(schema)
        # slot columns of each impl within the row (after the row count)
        self._slots: list[tuple[int, str]] = []
        pos = 1
        codes = groups.layout.codes
        for impl in impls:
            self._slots.append((pos, codes[pos : pos + impl.n_slots]))
            pos += impl.n_slots

    # -- deltas and merge -------------------------------------------------------------------
    def _deltas(self, part: pl.DataFrame) -> tuple[Cols, Valids]:
        cols: Cols = [part.get_column("__cnt").cast(pl.Int64).to_numpy()]
        valids: Valids = [None]
        for i, (_, codes) in enumerate(self._slots):
            for j, c in enumerate(codes):
                s = part.get_column(f"a{i}_{j}")
                if c == "o":
                    cols.append(_int128_of(s))
                    valids.append(None)
                elif c == "q":
                    cols.append(s.fill_null(0).cast(pl.Int64).to_numpy())
                    valids.append(None)
                elif c == "d":
                    cols.append(s.fill_null(0.0).cast(pl.Float64).to_numpy())
                    valids.append(None)
                else:  # "Q": the epoch's best value per group, NULL when none
                    valids.append(s.is_not_null().to_numpy())
                    cols.append(s.fill_null(0).cast(pl.Int64).to_numpy())
        return cols, valids

    def _merge(self, old: Cols, ov: Valids, delta: Cols, dv: Valids) -> tuple[Cols, Valids]:
        codes = self.groups.layout.codes
        extreme_min = [False]
        for impl, (_, cs) in zip(self.impls, self._slots, strict=True):
            extreme_min += [isinstance(impl, AppendOnlyExtremeImpl) and impl.is_min] * len(cs)
        cols: Cols = []
        valids: Valids = []
        for c, o, v, d, w, is_min in zip(codes, old, ov, delta, dv, extreme_min, strict=True):
            if c == "o":
                cols.append(int128_add(o, d))
                valids.append(None)
            elif c == "Q":
                assert v is not None and w is not None
                best = np.minimum(o, d) if is_min else np.maximum(o, d)
                cols.append(np.where(v & w, best, np.where(w, d, o)))
                valids.append(v | w)
            else:
                cols.append(o + d)
                valids.append(None)
        for impl, (pos, _) in zip(self.impls, self._slots, strict=True):
            if isinstance(impl, SumImpl | AvgImpl) and impl.compensated:
                _neumaier(cols, old[pos], old[pos + 5] + delta[pos + 5], delta[pos], pos)
        return cols, valids

    # -- outputs ------------------------------------------------------------------------------
    def _outputs(self, cols: Cols, valids: Valids, report: bool) -> list[pa.Array]:
        out = []
        nk = len(self.key_names)
        for i, (impl, (pos, codes)) in enumerate(zip(self.impls, self._slots, strict=True)):
            typ = self._arrow.field(nk + i).type
            slots = cols[pos : pos + len(codes)]
            try:
                out.append(self._output(impl, codes, slots, valids[pos], typ))
            except (EngineError, pa.ArrowInvalid, _PerGroup):
                lay = FixedLayout(codes)
                rows = lay.to_rows(slots, valids[pos : pos + len(codes)])
                py_slots = [list(c) for c in zip(*rows, strict=True)] if rows else [[]] * len(codes)
                out.append(array_of(self._output_one(i, impl, py_slots, report), typ))
        return out

    def _output(
        self, impl: AggImpl, codes: str, slots: Cols, valid: np.ndarray | None, typ: pa.DataType
    ) -> pa.Array:
        if isinstance(impl, CountImpl):
            return pa.array(slots[0]).cast(typ)
        if isinstance(impl, AppendOnlyExtremeImpl):
            assert valid is not None
            return _masked(slots[0], valid, typ)
        if isinstance(impl, BoolImpl):
            t, n = slots
            res = (t == n) if impl.is_and else (t > 0)
            return _masked(res, n != 0, typ)
        assert isinstance(impl, SumImpl | AvgImpl)
        s, n = slots[:2]
        has = n != 0
        if codes[0] == "d":
            if len(codes) == 6:
                s = s + slots[5]  # the compensation
            r = s / np.where(has, n, 1) if isinstance(impl, AvgImpl) else s
            if len(codes) >= 5:  # the NaN / Infinity / -Infinity counts, as float_special_sum
                nan, pinf, ninf = (c > 0 for c in slots[2:5])
                if bool((has & ~np.isfinite(s) & ~(nan | pinf | ninf)).any()):
                    raise _PerGroup  # finite values past the double range: 22003 per group
                r = np.where(pinf, np.inf, np.where(ninf, -np.inf, r))
                r = np.where(nan | (pinf & ninf), np.nan, r)
            big = has & np.isfinite(r) & (np.abs(r) > FLOAT4_MAX)
            if typ == pa.float32() and bool(big.any()):
                raise _PerGroup  # a real sum past the float4 range: 22003 per group
            return _masked(r, has, typ)
        if isinstance(impl, AvgImpl):
            raise _PerGroup  # exact numeric division: the tuple path's Decimals
        if impl.result.kind is TypeKind.NUMERIC:
            return _decimal_of(s, has).cast(typ)
        if not bool((int128_fits_int64(s) | ~has).all()):
            raise NumericValueOutOfRange("bigint out of range")
        return _masked(s[:, 0].view(np.int64), has, typ)

    # -- the step -----------------------------------------------------------------------------
    def apply(self, frame: Frame, part: pl.DataFrame) -> StreamChunk | None:
        key_arrs = [arrow_values(frame, part, kn) for kn in self.key_names]
        knull = np.column_stack([a.is_null().to_numpy(zero_copy_only=False) for a in key_arrs])
        keys = np.column_stack(
            [pc.fill_null(a.cast(pa.int64()), 0).to_numpy(zero_copy_only=False) for a in key_arrs]
        )
        g = self.groups
        pos, existed = g.fetch(keys, knull)
        old, ov = g.gather(pos)
        delta, dv = self._deltas(part)
        new, nv = self._merge(old, ov, delta, dv)
        n = pos.size
        counts = new[0]
        if (counts < 0).any():
            at = int(np.flatnonzero(counts < 0)[0])
            bad = tuple(a[at].as_py() for a in key_arrs)
            raise InternalError(
                "aggregation group row count became negative",
                detail=f"Group {bad!r} of {self._explain()} received more deletes than inserts.",
            )
        ins = ~existed & (counts > 0)
        dele = existed & (counts == 0)
        both = existed & ~dele
        # rows whose state changed (or that appear or go)
        moved = ins | dele
        for o, nw, a, b in zip(old, new, ov, nv, strict=True):
            d = o != nw
            moved |= d.any(axis=1) if d.ndim == 2 else d
            if a is not None and b is not None:
                moved |= a != b
        idx_m = np.flatnonzero(moved)
        g.store(
            pos[idx_m],
            [c[idx_m] for c in new],
            [None if v is None else v[idx_m] for v in nv],
            counts[idx_m] > 0,
        )
        g.end_step()

        old_out = self._outputs(old, ov, report=False)
        new_out = self._outputs(new, nv, report=True)
        changed = np.zeros(n, bool)
        for o, nw in zip(old_out, new_out, strict=True):
            same = pc.fill_null(pc.equal(o, nw), False)
            same = pc.or_(same, pc.and_(o.is_null(), nw.is_null()))
            changed |= ~same.to_numpy(zero_copy_only=False)
        ins_i = np.flatnonzero(ins)
        del_i = np.flatnonzero(dele)
        upd_i = np.flatnonzero(both & changed)
        if not (ins_i.size or del_i.size or upd_i.size):
            return None
        idx, ops = emission(ins_i, del_i, upd_i, n)
        arrow = self._arrow
        take_idx = pa.array(idx)
        key_idx = pa.array(idx % n)
        arrays = [a.cast(arrow.field(j).type).take(key_idx) for j, a in enumerate(key_arrs)]
        for o, nw in zip(old_out, new_out, strict=True):
            arrays.append(pa.concat_arrays([o, nw]).take(take_idx))
        return StreamChunk(pa.array(ops), pa.RecordBatch.from_arrays(arrays, schema=arrow))
