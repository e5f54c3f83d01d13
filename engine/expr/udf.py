"""Embedded Python user-defined functions: compiling a body and calling it per chunk.

Why in-process: RisingWave's embedded Python UDFs run inside the server; so do Swell's.
A function runs in the server process with the server's rights (it can import modules,
read files, open sockets), which is why only superusers may create one
(`engine.handlers.function_ddl`).

Calling conventions (what the body defines, as RisingWave's):

* scalar `CREATE FUNCTION f(a INT, ...) RETURNS T LANGUAGE python AS $$ def f(a, ...) $$`:
  by default `f` is called once per row with Python values (None for NULL) and returns
  one value; with `WITH (batch = true)` it is called once per chunk with one
  `pyarrow.Array` per argument (constants repeated to the chunk's length) and returns an
  array-like of the same length (a pyarrow array, numpy array or list);
* table `RETURNS TABLE (x INT, ...)`: `f` is a generator called once per input row,
  yielding a value (one column) or a tuple (several) per output row;
* aggregate `CREATE AGGREGATE`: `create_state()`, `accumulate(state, *args)`, optional
  `retract(state, *args)` and `finish(state)`.

Values: integers, floats, `Decimal`, `str`, `bytes`, `bool`, `datetime.date/time/datetime`,
lists for arrays, parsed JSON (dicts, lists, ...) for jsonb.

Errors: an exception raised by the body becomes `ExternalRoutineException` (SQLSTATE
38000, message `TypeName: text`, CONTEXT naming the function; never a traceback). In
ad-hoc queries it is raised; in streaming jobs (`EvalContext.errors` set) the row's value
is NULL and the failure is reported to the job's event log, like any data error
(`engine.expr.nonstrict`). A returned value that does not fit the declared type is an
error of the same kind.

Lifecycle: `routine(fn)` compiles `fn.body` on first use and caches the result on the
catalog entry (`UserFunction.compiled`); `UdfCall` is the bound call the planner puts in
expressions; stored stream plans keep only its name and types, and recovery binds it
again from the catalog (`engine.expr.codec`).
"""

from __future__ import annotations

import builtins
import hashlib
import itertools
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa

from engine.errors import EngineError, ExternalRoutineException, InvalidFunctionDefinition
from engine.expr import jsonb
from engine.expr.core import Datum, EvalContext, Func, as_array
from engine.expr.nonstrict import ErrorSink, recover
from engine.numeric import array_of, py_values
from engine.types import NUMERIC_SCALE, Field, SqlType, TypeKind

_AGG_REQUIRED = ("create_state", "accumulate")


class PythonRoutine:
    """A compiled function body: its namespace and entry points (see module docstring)."""

    def __init__(self, fn: Any) -> None:
        self.name: str = fn.name
        self.kind: str = fn.kind
        self.batch: bool = fn.batch
        self.strict: bool = fn.strict
        self.arg_types: list[SqlType] = list(fn.arg_types)
        self.return_type: SqlType = fn.return_type
        self.columns: list[Field] = list(fn.return_columns)
        if self.kind == "aggregate":  # a module of its own: its classes' states pickle
            digest = hashlib.sha1(fn.body.encode(), usedforsecurity=False).hexdigest()[:16]
            ns = compile_body(fn.name, fn.body, f"swell_udaf_{fn.name}_{digest}")
        else:
            ns = compile_body(fn.name, fn.body)
        if self.kind == "aggregate":
            missing = [n for n in _AGG_REQUIRED if not callable(ns.get(n))]
            if missing:
                raise InvalidFunctionDefinition(
                    f'aggregate "{fn.name}" must define {" and ".join(missing)}()',
                    hint="An aggregate defines create_state() and accumulate(state, ...), "
                    "optionally retract(state, ...) and finish(state).",
                )
            self.create_state = ns["create_state"]
            self.accumulate = ns["accumulate"]
            self.retract = ns.get("retract") if callable(ns.get("retract")) else None
            self.finish = ns.get("finish") if callable(ns.get("finish")) else None
            self.func: Callable[..., Any] = self.accumulate
        else:
            f = ns.get(fn.name)
            if not callable(f):
                raise InvalidFunctionDefinition(
                    f'the Python code must define a function named "{fn.name}"'
                )
            self.func = f
        self.context = f'Python function "{fn.name}"'

    # -- scalar ------------------------------------------------------------------------------
    def call_rows(self, vals: list[Datum], n: int, sink: ErrorSink | None, expr: str) -> Datum:
        """Row at a time: one Python call per row; failing rows raise (strict) or are NULL
        and reported (streaming)."""
        cols = [_py_values(v, n, t) for v, t in zip(vals, self.arg_types, strict=True)]
        out: list[Any] = [None] * n
        f = self.func
        failed: dict[tuple[str, str], list[Any]] = {}
        for i, row in enumerate(zip(*cols, strict=True) if cols else [()] * n):
            if self.strict and any(v is None for v in row):
                continue
            try:
                out[i] = f(*row)
            except Exception as e:  # the user's code: any exception is the function's
                err = self.error(e)
                if sink is None:
                    raise err from None
                _note(failed, err, row)
        result = self.to_arrow(out, self.return_type, sink, expr, failed)
        _flush_failures(failed, sink, expr)
        return result

    def call_batch(self, vals: list[Datum], n: int) -> Datum:
        """Once per chunk with Arrow arrays; the result must have one value per row."""
        arrays = [_arrow_arg(v, n, t) for v, t in zip(vals, self.arg_types, strict=True)]
        try:
            got = self.func(*arrays)
        except Exception as e:
            raise self.error(e) from None
        try:
            if isinstance(got, pa.ChunkedArray):
                got = got.combine_chunks()
            arr = got if isinstance(got, pa.Array) else pa.array(_listish(got))
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise self.error(e, "returned a value that is not an array") from None
        if len(arr) != n:
            raise ExternalRoutineException(
                f'Python function "{self.name}" returned {len(arr)} values for {n} rows',
                hint="A function WITH (batch = true) returns one value per input row.",
            )
        return self.cast_result(arr, self.return_type)

    # -- table functions ------------------------------------------------------------------------
    def table_rows(
        self, vals: list[Datum], n: int, sink: ErrorSink | None = None
    ) -> tuple[np.ndarray, list[list[Any]]]:
        """Call the generator once per input row: (input row of each output row, columns).
        With a `sink` (streaming) a row whose call fails yields no rows and is reported."""
        cols = [_py_values(v, n, t) for v, t in zip(vals, self.arg_types, strict=True)]
        width = len(self.columns)
        src: list[int] = []
        out: list[list[Any]] = [[] for _ in range(width)]
        failed: dict[tuple[str, str], list[Any]] = {}
        for i, row in enumerate(zip(*cols, strict=True) if cols else [()] * n):
            if self.strict and any(v is None for v in row):
                continue
            start = len(src)
            try:
                for item in self.func(*row):
                    values = item if width > 1 else (item,)
                    if width > 1 and (not isinstance(item, (tuple, list)) or len(item) != width):
                        raise ExternalRoutineException(
                            f'Python function "{self.name}" yielded {item!r}; '
                            f"expected a tuple of {width} values"
                        )
                    src.append(i)
                    for c in range(width):
                        out[c].append(values[c])
            except Exception as e:
                err = e if isinstance(e, ExternalRoutineException) else self.error(e)
                if sink is None:
                    raise err from None
                del src[start:]  # the row's rows so far go too
                for c in range(width):
                    del out[c][start:]
                _note(failed, err, row)
        _flush_failures(failed, sink, f"{self.name}(...)")
        return np.asarray(src, dtype=np.int64), out

    # -- aggregates -------------------------------------------------------------------------
    def aggregate(
        self,
        groups: list[list[int] | None],
        args: list[pa.Array],
        sink: ErrorSink | None,
        expr: str,
    ) -> pa.Array:
        """One result per group: `groups[g]` lists the input rows (in order) of group g
        (ad-hoc queries, and views over an aggregate without `retract`). A batch aggregate
        gets each group's rows in one `accumulate` call (Arrow arrays)."""
        cols = [_py_values(a, len(a), t) for a, t in zip(args, self.arg_types, strict=True)]
        ok = self._counted_mask(args, np.ones(len(args[0]) if args else 0), None)
        batch = self.batch and bool(args)
        out: list[Any] = []
        failed: dict[tuple[str, str], list[Any]] = {}
        for rows in groups:
            state: Any = None
            try:
                state = self.create_state()
                if batch:
                    idx = np.asarray(rows or [], dtype=np.int64)
                    idx = idx[ok[idx]]
                    if idx.size:
                        taken = pa.array(idx)
                        state = self.accumulate(state, *[a.take(taken) for a in args])
                for r in () if batch else rows or ():
                    vals = [c[r] for c in cols]
                    if self.strict and any(v is None for v in vals):
                        continue
                    state = self.accumulate(state, *vals)
                out.append(self.finish(state) if self.finish is not None else state)
            except Exception as e:
                err = self.error(e)
                if sink is None:
                    raise err from None
                _note(failed, err, ())
                out.append(None)
        result = self.to_arrow(out, self.return_type, sink, expr, failed)
        _flush_failures(failed, sink, expr)
        assert isinstance(result, pa.Array)
        return result

    def fold(
        self,
        states: list[Any],
        groups: list[Sequence[int]],
        args: list[pa.Array],
        weights: np.ndarray,
        counted: np.ndarray | None,
        sink: ErrorSink | None,
        expr: str,
    ) -> tuple[list[Any], list[int]]:
        """Incremental maintenance (a view's GROUP BY): fold the rows `groups[g]` of one
        chunk into group g's state `states[g]` (None: a fresh `create_state()`), calling
        `accumulate` for rows of weight +1 and `retract` for -1, in chunk order; rows
        where `counted` is False (FILTER) are skipped, and rows with a NULL argument too
        when the aggregate is STRICT. Returns the new states and, per group, the net number
        of rows whose call raised (+1 per failed accumulate, -1 per failed retract): such a
        row is not in the state, and the caller shows NULL while any is in the group.

        With `WITH (batch = true)` each group's accumulated rows go to one `accumulate`
        call and its retracted rows to one `retract` call, as Arrow arrays (accumulated
        first, so a retracted row is always in the state); a failing batch is replayed
        row by row (one-element arrays) to find the failing rows."""
        assert len(states) == len(groups)
        assert self.retract is not None or bool((weights > 0).all())
        ok = self._counted_mask(args, weights, counted)
        if self.batch:
            return self._fold_batches(states, groups, args, weights, ok, sink, expr)
        cols = [_py_values(a, len(a), t) for a, t in zip(args, self.arg_types, strict=True)]
        acc, ret = self.accumulate, self.retract
        out: list[Any] = []
        fails: list[int] = []
        failed: dict[tuple[str, str], list[Any]] = {}
        for st, rows in zip(states, groups, strict=True):
            bad = 0
            state = self.create_state() if st is None else st
            for r in rows:
                if not ok[r]:
                    continue
                vals = [c[r] for c in cols]
                add = weights[r] > 0
                try:
                    state = acc(state, *vals) if add else ret(state, *vals)  # type: ignore[misc]
                except Exception as e:  # the user's code: any exception is the function's
                    err = self.error(e)
                    if sink is None:
                        raise err from None
                    bad += 1 if add else -1
                    _note(failed, err, tuple(vals))
            out.append(state)
            fails.append(bad)
        _flush_failures(failed, sink, expr)
        return out, fails

    def _counted_mask(
        self, args: list[pa.Array], weights: np.ndarray, counted: np.ndarray | None
    ) -> np.ndarray:
        ok = np.ones(len(weights), dtype=bool) if counted is None else counted.copy()
        if self.strict:
            for a in args:
                if a.null_count:
                    ok &= a.is_valid().to_numpy(zero_copy_only=False)
        return ok

    def _fold_batches(
        self,
        states: list[Any],
        groups: list[Sequence[int]],
        args: list[pa.Array],
        weights: np.ndarray,
        ok: np.ndarray,
        sink: ErrorSink | None,
        expr: str,
    ) -> tuple[list[Any], list[int]]:
        out = [self.create_state() if st is None else st for st in states]
        fails = [0] * len(states)
        failed: dict[tuple[str, str], list[Any]] = {}
        lens = np.fromiter((len(r) for r in groups), dtype=np.int64, count=len(groups))
        flat = np.fromiter(itertools.chain.from_iterable(groups), np.int64, int(lens.sum()))
        gid = np.repeat(np.arange(len(groups), dtype=np.int64), lens)
        keep = ok[flat]
        flat, gid = flat[keep], gid[keep]
        add = weights[flat] > 0
        order = np.lexsort((~add, gid))  # by group, its accumulated rows first
        flat, gid, add = flat[order], gid[order], add[order]
        taken = pa.array(flat)
        arrays = [a.take(taken) for a in args]  # one take per argument, sliced per group
        seg = gid * 2 + (~add)
        starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]]) if len(seg) else seg
        ends = np.r_[starts[1:], len(seg)] if len(seg) else seg
        for a0, b0 in zip(starts.tolist(), ends.tolist(), strict=True):
            g, is_add = int(gid[a0]), bool(add[a0])
            fn = self.accumulate if is_add else self.retract
            assert fn is not None
            part = [arr.slice(a0, b0 - a0) for arr in arrays]
            try:
                out[g] = fn(out[g], *part)
                continue
            except Exception as e:
                if sink is None:
                    raise self.error(e) from None
            for j in range(b0 - a0):  # replay row by row: which rows fail
                one = [arr.slice(j, 1) for arr in part]
                try:
                    out[g] = fn(out[g], *one)
                except Exception as e:
                    fails[g] += 1 if is_add else -1
                    _note(failed, self.error(e), tuple(arr[0].as_py() for arr in one))
        _flush_failures(failed, sink, expr)
        return out, fails

    def results(self, states: list[Any], sink: ErrorSink | None, expr: str) -> list[Any]:
        """`finish` of each state (None: a fresh state), as values of the return type
        ready for Arrow (what a view's aggregation keeps and emits); a failing `finish` or a
        result that does not fit is NULL and reported under `sink`, else raised."""
        out: list[Any] = []
        failed: dict[tuple[str, str], list[Any]] = {}
        for st in states:
            state = self.create_state() if st is None else st
            try:
                out.append(self.finish(state) if self.finish is not None else state)
            except Exception as e:
                err = self.error(e)
                if sink is None:
                    raise err from None
                _note(failed, err, ())
                out.append(None)
        result = self.to_arrow(out, self.return_type, sink, expr, failed)
        _flush_failures(failed, sink, expr)
        values: list[Any] = result.to_pylist()
        return values

    # -- values ----------------------------------------------------------------------------
    def error(self, e: BaseException, what: str | None = None) -> ExternalRoutineException:
        if isinstance(e, ExternalRoutineException):
            return e
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        err = ExternalRoutineException(text if what is None else f"{what}: {text}")
        err.context = self.context
        return err

    def to_arrow(
        self,
        values: list[Any],
        t: SqlType,
        sink: ErrorSink | None,
        expr: str,
        failed: dict[tuple[str, str], list[Any]],
    ) -> pa.Array:
        """Python results as an array of `t`: each value that does not fit is an error
        (raised, or NULL and reported under `sink`)."""
        prepared = [_prepare(v, t) for v in values] if _needs_prep(t) else values
        try:
            return array_of(prepared, t.arrow)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
        fixed: list[Any] = []
        for v in prepared:
            try:
                array_of([v], t.arrow)
                fixed.append(v)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                err = ExternalRoutineException(
                    f'Python function "{self.name}" returned {_short(v)}, which is not a '
                    f"valid {t.display}",
                    detail=str(e),
                )
                err.context = self.context
                if sink is None:
                    raise err from None
                _note(failed, err, (v,))
                fixed.append(None)
        return array_of(fixed, t.arrow)

    def cast_result(self, arr: pa.Array, t: SqlType) -> pa.Array:
        if arr.type == t.arrow:
            return arr
        if t.kind is TypeKind.JSONB or pa.types.is_null(arr.type):
            return self.to_arrow(arr.to_pylist(), t, None, "", {})
        try:
            return arr.cast(t.arrow)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise self.error(
                e, f"returned {arr.type}, which does not cast to {t.display}"
            ) from None


def compile_body(name: str, body: str, module: str | None = None) -> dict[str, Any]:
    """Run the body's module code in a fresh namespace (its imports and definitions).
    With `module`, the namespace is a module registered under that name in `sys.modules`,
    so objects of classes the body defines can be pickled (an aggregate's state is kept
    pickled in the view's state store) and unpickled after a restart, once the body is
    compiled again; the name depends on the body, so a changed body never reads states
    of the old one's classes by mistake."""
    try:
        code = compile(body, f"<function {name}>", "exec")
    except SyntaxError as e:
        raise InvalidFunctionDefinition(
            f'could not compile Python function "{name}"',
            detail=f"{e.msg} (line {e.lineno})",
        ) from None
    mod = types.ModuleType(module or f"swell_udf_{name}")
    ns: dict[str, Any] = mod.__dict__
    ns["__builtins__"] = builtins
    try:
        exec(code, ns)  # noqa: S102 - the function's own code, created by a superuser
    except Exception as e:
        raise InvalidFunctionDefinition(
            f'could not load Python function "{name}"', detail=f"{type(e).__name__}: {e}"
        ) from None
    if module is not None:
        sys.modules[module] = mod
    return ns


def routine(fn: Any) -> PythonRoutine:
    """The compiled body of catalog entry `fn` (compiled once per entry)."""
    r = fn.compiled
    if isinstance(r, PythonRoutine):
        return r
    made = PythonRoutine(fn)
    fn.compiled = made
    return made


@dataclass(frozen=True, eq=False, repr=False)
class UdfCall(Func):
    """A call of a Python scalar function. Equal to a plain `Func` with the same name,
    arguments and type (the stored plan's form); never folded as a constant."""

    routine: PythonRoutine | None = field(default=None, compare=False)

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        r = self.routine
        assert r is not None
        vals = [a._eval(batch, ctx) for a in self.args]
        n = batch.num_rows
        sink: ErrorSink | None = getattr(ctx, "errors", None)
        if not r.batch:
            return r.call_rows(vals, n, sink, str(self))
        try:
            return r.call_batch(vals, n)
        except EngineError as e:
            if sink is None:
                raise
            return recover(str(self), self.type.arrow, r.call_batch, None, vals, n, e, sink)

    def with_children(self, children: list[Any]) -> Any:
        return UdfCall(
            self.name,
            tuple(children),
            self.type,
            self.kernel,
            self.op,
            self.volatile,
            self.uses_now,
            self.row_errors,
            routine=self.routine,
        )

    def is_constant(self) -> bool:
        return False


def udf_call(fn: Any, args: list[Any]) -> UdfCall:
    """The bound call of Python scalar function `fn` over coerced `args`."""
    r = routine(fn)

    def kernel(vals: list[Datum], n: int, ctx: EvalContext) -> Datum:
        return r.call_batch(vals, n) if r.batch else r.call_rows(vals, n, None, fn.name)

    return UdfCall(fn.name, tuple(args), fn.return_type, kernel, routine=r)


# -- helpers -------------------------------------------------------------------------------------
def _py_values(v: Datum, n: int, t: SqlType) -> list[Any]:
    arr = as_array(v, n, t)
    vals: list[Any] = py_values(arr)  # numeric NaN / Infinity as Decimal('NaN') etc.
    if t.kind is TypeKind.JSONB:
        return [None if x is None else jsonb.loads(x) for x in vals]
    return vals


def _arrow_arg(v: Datum, n: int, t: SqlType) -> pa.Array:
    return as_array(v, n, t)


def _listish(got: Any) -> Any:
    if isinstance(got, np.ndarray):
        return got
    if isinstance(got, Iterable) and not isinstance(got, (str, bytes)):
        return list(got)
    raise TypeError(f"{type(got).__name__} is not a sequence")


def _needs_prep(t: SqlType) -> bool:
    return t.kind in (TypeKind.JSONB, TypeKind.NUMERIC)


def _prepare(v: Any, t: SqlType) -> Any:
    if v is None:
        return None
    if t.kind is TypeKind.JSONB:
        try:
            return jsonb.dumps(v)
        except (TypeError, ValueError):
            return v  # reported by the conversion
    if t.kind is TypeKind.NUMERIC and isinstance(v, (int, float, Decimal)):
        try:
            d = v if isinstance(v, Decimal) else Decimal(repr(v) if isinstance(v, float) else v)
            return d.quantize(Decimal(1).scaleb(-NUMERIC_SCALE)) if d.is_finite() else v
        except InvalidOperation:
            return v
    return v


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _note(failed: dict[tuple[str, str], list[Any]], err: EngineError, row: tuple[Any, ...]) -> None:
    key = (err.sqlstate, str(err))
    seen = failed.get(key)
    if seen is None:
        failed[key] = [err, 1, row]
    else:
        seen[1] += 1


def _flush_failures(
    failed: dict[tuple[str, str], list[Any]], sink: ErrorSink | None, expr: str
) -> None:
    if sink is None:
        return
    for err, count, row in failed.values():
        sample = ", ".join("NULL" if v is None else repr(v) for v in row)
        sink.report(expr, err, count, sample[:200])
