"""Stored stream plans: JSON encoding of `engine.plan.stream_plan` (format version 1).

Layout: `{"version": 1, "nodes": [{"node": "StreamHashAgg", <field>: <value>, ...}],
"scans": [[relation id, name, [columns]]], "sink": false}`. Node fields are encoded by
name (`_CODECS`: expressions, fields, aggregate calls, sort keys, window calls, time
bounds, state tables); every other field is a plain JSON value (ints, strings, lists of
ints). Expressions and types use `engine.expr.codec`. A plan of an unknown version or
node kind fails to decode with `PlanDecodeError` rather than building something else.

Lifecycle: `encode_plan` at CREATE (the result goes into the relation's catalog entry,
`extra["stream_plan"]`), `decode_plan` at recovery. A new field added to a node needs a
default, so plans stored before it still decode; a change of meaning needs a new version.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from engine.expr.codec import (
    FuncSource,
    PlanDecodeError,
    expr_from_json,
    expr_to_json,
    type_from_json,
    type_to_json,
    value_from_json,
    value_to_json,
)
from engine.expr.core import Case, Func
from engine.plan.logical import AggSpec, SortKey
from engine.plan.logical_window import WindowCall, WindowFrame
from engine.plan.stream_plan import NODE_TYPES, StreamNode, StreamPlan, TableDesc
from engine.plan.time_nodes import TimeBound
from engine.types import Field

FORMAT_VERSION = 1


def _fields_enc(fs: list[Field]) -> list[Any]:
    return [[f.name, type_to_json(f.type), f.hidden] for f in fs]


def _fields_dec(v: list[Any]) -> list[Field]:
    return [Field(n, type_from_json(t), bool(h)) for n, t, h in v]


def _agg_enc(a: AggSpec) -> dict[str, Any]:
    out = {
        "kind": a.kind,
        "arg": a.arg,
        "type": type_to_json(a.type),
        "distinct": a.distinct,
        "filter": a.filter,
        "separator": a.separator,
        "order": [list(o) for o in a.order],
    }
    if a.udf is not None:
        out["udf"] = expr_to_json(a.udf)
    if a.arg2 is not None:
        out["arg2"] = a.arg2
    if a.direct is not None:
        out["direct"] = list(a.direct) if isinstance(a.direct, tuple) else a.direct
    if a.float_specials:
        out["fsp"] = True
    return out


def _agg_dec(d: dict[str, Any], source: FuncSource | None = None) -> AggSpec:
    udf = d.get("udf")
    return AggSpec(
        d["kind"],
        d["arg"],
        type_from_json(d["type"]),
        bool(d["distinct"]),
        d["filter"],
        d.get("separator"),
        tuple((int(c), bool(x), bool(n)) for c, x, n in d.get("order", [])),
        expr_from_json(udf, source) if udf is not None else None,
        d.get("arg2"),
        tuple(direct) if isinstance(direct := d.get("direct"), list) else direct,
        bool(d.get("fsp", False)),  # plans stored before: float sums without the counts
    )


def _bound_enc(b: tuple[str, Any]) -> list[Any]:
    return [b[0], value_to_json(b[1])]


def _call_enc(c: WindowCall) -> dict[str, Any]:
    f = c.frame
    return {
        "kind": c.kind,
        "args": list(c.args),
        "type": type_to_json(c.type),
        "frame": [f.mode, _bound_enc(f.start), _bound_enc(f.end)],
        "offset": c.offset,
    }


def _call_dec(d: dict[str, Any]) -> WindowCall:
    mode, start, end = d["frame"]
    frame = WindowFrame(
        mode, (start[0], value_from_json(start[1])), (end[0], value_from_json(end[1]))
    )
    return WindowCall(
        d["kind"], tuple(d["args"]), type_from_json(d["type"]), frame, d.get("offset", 1)
    )


def _table_enc(t: TableDesc) -> dict[str, Any]:
    return {"name": t.name, "id": t.id, "columns": t.columns, "key": t.key, "dist_key": t.dist_key}


def _table_dec(d: dict[str, Any]) -> TableDesc:
    return TableDesc(
        d["name"], int(d["id"]), list(d["columns"]), list(d["key"]), list(d["dist_key"])
    )


Enc = Callable[[Any], Any]
Dec = Callable[[Any, FuncSource | None], Any]


def _opt_expr_enc(e: Any) -> Any:
    return None if e is None else expr_to_json(e)


def _opt_expr_dec(v: Any, src: FuncSource | None) -> Any:
    return None if v is None else expr_from_json(v, src)


_CODECS: dict[str, tuple[Enc, Dec]] = {
    "inputs": (lambda v: [[k, i] for k, i in v], lambda v, s: [(str(k), int(i)) for k, i in v]),
    "input_schemas": (
        lambda v: [_fields_enc(x) for x in v],
        lambda v, s: [_fields_dec(x) for x in v],
    ),
    "schema": (_fields_enc, lambda v, s: _fields_dec(v)),
    "tables": (lambda v: [_table_enc(t) for t in v], lambda v, s: [_table_dec(t) for t in v]),
    "predicate": (_opt_expr_enc, _opt_expr_dec),
    "condition": (_opt_expr_enc, _opt_expr_dec),
    "left_expr": (_opt_expr_enc, _opt_expr_dec),
    "exprs": (
        lambda v: [expr_to_json(e) for e in v],
        lambda v, s: [expr_from_json(e, s) for e in v],
    ),
    "aggs": (lambda v: [_agg_enc(a) for a in v], lambda v, s: [_agg_dec(a, s) for a in v]),
    "order_by": (
        lambda v: [[k.index, k.desc, k.nulls_first] for k in v],
        lambda v, s: [SortKey(int(i), bool(d), n) for i, d, n in v],
    ),
    "calls": (lambda v: [_call_enc(c) for c in v], lambda v, s: [_call_dec(c) for c in v]),
    "srfs": (
        lambda v: [[n, [expr_to_json(a) for a in args]] for n, args in v],
        lambda v, s: [(str(n), [expr_from_json(a, s) for a in args]) for n, args in v],
    ),
    "rows": (
        lambda v: [[expr_to_json(e) for e in r] for r in v],
        lambda v, s: [[expr_from_json(e, s) for e in r] for r in v],
    ),
    "func_args": (
        lambda v: [expr_to_json(e) for e in v],
        lambda v, s: [expr_from_json(e, s) for e in v],
    ),
    "udtfs": (
        lambda v: [None if c is None else expr_to_json(c) for c in v],
        lambda v, s: [None if c is None else expr_from_json(c, s) for c in v],
    ),
    "bounds": (
        lambda v: [
            {"expr": expr_to_json(b.expr), "cmp": b.cmp, "offset_us": b.offset_us} for b in v
        ],
        lambda v, s: [TimeBound(expr_from_json(b["expr"], s), b["cmp"], b["offset_us"]) for b in v],
    ),
}


def encode_node(n: StreamNode) -> dict[str, Any]:
    out: dict[str, Any] = {"node": type(n).__name__}
    for f in dataclasses.fields(n):
        v = getattr(n, f.name)
        codec = _CODECS.get(f.name)
        out[f.name] = codec[0](v) if codec is not None else v
    return out


def decode_node(d: dict[str, Any], source: FuncSource | None = None) -> StreamNode:
    cls = NODE_TYPES.get(d.get("node", ""))
    if cls is None:
        raise PlanDecodeError(f"unknown stream plan node {d.get('node')!r}")
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            continue  # a field added after the plan was stored: its default
        v = d[f.name]
        codec = _CODECS.get(f.name)
        kw[f.name] = codec[1](v, source) if codec is not None else v
    return cls(**kw)


def encode_plan(plan: StreamPlan) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "nodes": [encode_node(n) for n in plan.nodes],
        "scans": [[rid, name, cols] for rid, (name, cols) in sorted(plan.scans.items())],
        "sink": plan.sink,
    }


def decode_plan(d: dict[str, Any], source: FuncSource | None = None) -> StreamPlan:
    """The stored plan; `source` supplies the calls whose kernels cannot be looked up by
    name (see `engine.expr.codec.restore_func`)."""
    v = d.get("version")
    if v != FORMAT_VERSION:
        raise PlanDecodeError(
            f"stored stream plan has format version {v}; this Swell reads version {FORMAT_VERSION}"
        )
    nodes = [decode_node(n, source) for n in d["nodes"]]
    scans = {int(rid): (name, list(cols)) for rid, name, cols in d.get("scans", [])}
    return StreamPlan(nodes, scans, bool(d.get("sink", False)))


def funcs_of(plan: StreamPlan) -> Callable[[Any], Any]:
    """A `FuncSource` over the calls of another plan of the same job (the job's SQL bound
    again): a stored call is taken from there when it is structurally the same call, by
    its stored form (a NaN constant inside, `n <> 'NaN'`, equals nothing as a value), else
    by structural equality (user-defined scalar, aggregate and table functions, whose
    decoded call does not store the same form as the call bound from the SQL).

    The plan's calls are indexed on the first lookup only (most decodes restore every
    call themselves and never ask), and each call's stored form is built from its
    arguments' (`_StoredForms`), so a deep expression (`a + a + ... + a`) costs linear,
    not quadratic, time: serializing every sub-call's whole subtree took minutes at 2,000."""
    known: dict[Any, Any] = {}
    same: dict[Any, Any] = {}
    forms = _StoredForms()
    indexed: list[bool] = []

    def walk(e: Any) -> None:
        if e is None:
            return
        stack = [e]
        while stack:
            x = stack.pop()
            if isinstance(x, Func):
                known.setdefault(forms.key(x), x)
                same.setdefault(x, x)
            stack.extend(x.children())

    def index() -> None:
        for n in plan.nodes:
            for name in ("predicate", "condition", "left_expr"):
                walk(getattr(n, name, None))
            for e in getattr(n, "exprs", []) or []:
                walk(e)
            for b in getattr(n, "bounds", []) or []:
                walk(b.expr)
            for a in getattr(n, "aggs", []) or []:
                walk(getattr(a, "udf", None))
            for _name, args in getattr(n, "srfs", []) or []:
                for e in args:
                    walk(e)
            for e in getattr(n, "udtfs", []) or []:
                walk(e)
            for e in [
                *getattr(n, "func_args", []),
                *(x for r in getattr(n, "rows", []) for x in r),
            ]:
                walk(e)
        indexed.append(True)

    def find(f: Any) -> Any:
        if not indexed:
            index()
        found = known.get(forms.key(f))
        return found if found is not None else same.get(f)

    return find


class _StoredForms:
    """A number per distinct stored form of an expression (`expr_to_json`): the form of a
    call is its own fields and its arguments' numbers (hash-consing), memoized per node,
    so each node of a tree is serialized once and a key stays small however deep the
    tree. A node that cannot be stored is its own key (the lookup then finds it only by
    identity or structural equality)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, int | None]] = {}  # id(node) -> (node kept, number)
        self._numbers: dict[tuple[Any, ...], int] = {}

    def key(self, e: Any) -> Any:
        number = self._number(e)
        return e if number is None else number

    def _number(self, root: Any) -> int | None:
        memo = self._memo
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in memo:
                continue
            kids = _stored_children(e)
            if not ready and kids:
                stack.append((e, True))
                stack.extend((k, False) for k in kids if id(k) not in memo)
                continue
            form = self._form(e, kids)
            number = None if form is None else self._numbers.setdefault(form, len(self._numbers))
            memo[id(e)] = (e, number)
        return memo[id(root)][1]

    def _form(self, e: Any, kids: list[Any]) -> tuple[Any, ...] | None:
        numbers = tuple(self._memo[id(k)][1] for k in kids)
        if None in numbers:
            return None
        try:
            if isinstance(e, Func):
                udf = getattr(e, "routine", None) is not None
                head = (e.name, e.op, json.dumps(type_to_json(e.type), sort_keys=True))
                return ("func", *head, e.volatile, e.uses_now, udf, numbers)
            if isinstance(e, Case):
                return ("case", json.dumps(type_to_json(e.type), sort_keys=True), numbers)
            return ("leaf", json.dumps(expr_to_json(e), sort_keys=True))
        except Exception:  # not storable
            return None


def _stored_children(e: Any) -> list[Any]:
    """The sub-expressions `expr_to_json` stores for `e`, in its order."""
    if isinstance(e, Func):
        return list(e.args)
    if isinstance(e, Case):
        return [x for c, t in e.whens for x in (c, t)] + [e.default]
    return []
