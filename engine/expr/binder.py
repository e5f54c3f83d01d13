"""ExprBinder: sqlglot expression trees -> typed `Expr` trees.

Lifecycle: the planner creates one binder per query level (scope + statement parameters +
a hook) and calls `bind` for each scalar expression. The hook sees every node first so the
planner can substitute aggregates, window functions, subqueries and GROUP BY expressions.
Errors raised while binding a node get that node's 1-based character position.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from engine.errors import (
    EngineError,
    IndeterminateDatatype,
    InvalidParameterValue,
    SqlSyntaxError,
    not_supported,
)
from engine.expr import (  # noqa: F401  (register)
    fn_array,
    fn_crypto,
    fn_json,
    fn_jsonb_edit,
    fn_make_time,
    fn_math,
    fn_parse_time,
    fn_pgtext,
    fn_regex,
    fn_session,
    fn_string,
    fn_system,
    fn_time,
    ops,
    subscript,
)
from engine.expr.coerce import (
    UntypedLiteral,
    WideNumericLiteral,
    cast,
    common_type,
    implicit_cast,
    is_untyped,
    parse_data_type,
    resolve_unknown,
)
from engine.expr.core import Case, Datum, EvalContext, Expr, Func, Literal, Param, as_array
from engine.expr.nul import check_text
from engine.expr.registry import FUNCTIONS, NODE_BINDERS, call, no_function
from engine.expr.scope import ParamContext, Scope
from engine.expr.temporal import parse_interval
from engine.expr.typmod import literal_scale, numeric_with_scale
from engine.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    INT,
    INTERVAL,
    NUMERIC,
    UNKNOWN,
    VARCHAR,
    SqlType,
    TypeKind,
    list_of,
)

K = TypeKind
_NUMERIC_LIMIT = Decimal(10) ** 28
Hook = Callable[[exp.Expression], Expr | None]

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}

# typed sqlglot function nodes -> (function name, argument keys); lists expand
_CALL_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")
_FUNCS: dict[type, tuple[str, tuple[str, ...]]] = {
    # calls sqlglot parses into nodes of their own, bound by their PostgreSQL names
    exp.Chr: ("chr", ("expressions",)),
    exp.Ascii: ("ascii", ("this",)),
    exp.Hex: ("to_hex", ("this",)),
    exp.Cbrt: ("cbrt", ("this",)),
    exp.Pi: ("pi", ()),
    exp.Upper: ("upper", ("this",)),
    exp.Lower: ("lower", ("this",)),
    exp.Length: ("length", ("this",)),
    exp.Substring: ("substr", ("this", "start", "length")),
    exp.Concat: ("concat", ("expressions",)),
    exp.ConcatWs: ("concat_ws", ("expressions",)),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
    exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")),
    exp.StrPosition: ("strpos", ("this", "substr")),
    exp.Left: ("left", ("this", "expression")),
    exp.Right: ("right", ("this", "expression")),
    exp.Reverse: ("reverse", ("this",)),
    exp.StartsWith: ("starts_with", ("this", "expression")),
    exp.MD5: ("md5", ("this",)),
    exp.Repeat: ("repeat", ("this", "times")),
    exp.Initcap: ("initcap", ("this",)),
    exp.Abs: ("abs", ("this",)),
    exp.Round: ("round", ("this", "decimals")),
    exp.Ceil: ("ceil", ("this", "decimals")),
    exp.Floor: ("floor", ("this", "decimals")),
    exp.Trunc: ("trunc", ("this", "decimals")),
    exp.Sqrt: ("sqrt", ("this",)),
    exp.Pow: ("power", ("this", "expression")),
    exp.Exp: ("exp", ("this",)),
    exp.Ln: ("ln", ("this",)),
    exp.Sign: ("sign", ("this",)),
    exp.Rand: ("random", ()),
    exp.CurrentTimestamp: ("now", ()),
    exp.CurrentDate: ("current_date", ()),
    exp.Localtimestamp: ("localtimestamp", ("this",)),
    exp.Localtime: ("localtime", ("this",)),
    exp.UnixToTime: ("to_timestamp", ("this",)),
}


def node_position(node: exp.Expression) -> int | None:
    """1-based character offset of the leftmost token of `node` known to sqlglot."""
    best: int | None = None
    for n in node.walk():
        meta = getattr(n, "_meta", None) or {}
        start = meta.get("start")
        if start is not None and (best is None or start < best):
            best = start
    return None if best is None else best + 1


class ExprBinder:
    """Binds scalar sqlglot expressions against a scope (see module docstring)."""

    def __init__(self, scope: Scope, params: ParamContext | None = None, hook: Hook | None = None):
        self.scope = scope
        self.params = params
        self.hook = hook

    # -- entry ------------------------------------------------------------------------------
    def bind(self, node: exp.Expression) -> Expr:
        out = self._bind(node)
        self._record_params(out)
        return out

    def _bind(self, node: exp.Expression) -> Expr:
        if self.hook is not None:
            hooked = self.hook(node)
            if hooked is not None:
                return hooked
        try:
            return self._dispatch(node)
        except EngineError as e:
            if e.position is None:
                e.position = node_position(node)
            raise

    def _record_params(self, e: Expr) -> None:
        if self.params is None:
            return
        stack = [e]
        while stack:
            x = stack.pop()
            if isinstance(x, Param) and x.type.kind is not K.UNKNOWN:
                self.params.infer(x.index, x.type)
            stack.extend(x.children())

    # -- dispatch ---------------------------------------------------------------------------
    def _dispatch(self, node: exp.Expression) -> Expr:
        b = self._bind
        t = type(node)
        extra = NODE_BINDERS.get(t)
        if extra is not None:
            got = extra(self, node)
            if got is not None:
                return got
        if t is exp.Paren or t is exp.Alias:
            return b(node.this)
        if t is exp.Column:
            return self._column(node)
        if t is exp.Literal:
            return self._literal(node)
        if t is exp.Boolean:
            return Literal(bool(node.this), BOOLEAN)
        if t is exp.Null:
            return Literal(None, UNKNOWN)
        if t in (exp.Parameter, exp.Placeholder):
            return self._param(node)
        if t in (exp.Cast, exp.TryCast):
            return self._cast(node)
        if t is exp.Interval:
            return self._interval(node)
        if t in _ARITH:
            return ops.bind_arith(_ARITH[t], b(node.this), b(node.expression))
        if t in _CMP:
            return ops.bind_compare(_CMP[t], b(node.this), b(node.expression))
        if t is exp.And or t is exp.Or:
            return ops.bind_and_or(
                "AND" if t is exp.And else "OR", b(node.this), b(node.expression)
            )
        if t is exp.Not:
            return ops.bind_not(b(node.this))
        if t is exp.Neg:
            inner = node.this
            if isinstance(inner, exp.Literal) and not inner.is_string:
                return self._number("-" + inner.this)
            return ops.bind_neg(b(inner))
        if t in fn_crypto.CRYPTO_NODES:
            bound = fn_crypto.bind_node(self, node)
            if bound is not None:
                return bound
        if t in (exp.NullSafeEQ, exp.NullSafeNEQ):
            return ops.bind_distinct(b(node.this), b(node.expression), t is exp.NullSafeEQ)
        if t is exp.Is:
            return self._is(node)
        if t is exp.Between:
            return self._between(node)
        if t is exp.In:
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise not_supported("subquery in IN without planner support")
            return ops.bind_in(b(node.this), [b(x) for x in node.expressions], False)
        if t in (exp.Like, exp.ILike):
            return self._like(node, None)
        if t is exp.Escape:
            esc = node.expression
            return self._like(node.this, esc.this if isinstance(esc, exp.Literal) else None)
        if t is exp.Case:
            return self._case(node)
        if t is exp.If:
            return self._case(exp.Case(ifs=[node.copy()], default=None))
        if t is exp.Coalesce:
            return self._coalesce([node.this, *node.expressions])
        if t is exp.Nullif:
            return self._nullif(b(node.this), b(node.expression))
        if t in (exp.Greatest, exp.Least):
            return self._greatest([b(x) for x in [node.this, *node.expressions]], t is exp.Greatest)
        if t is exp.Array:
            return self._array([b(x) for x in node.expressions])
        if t in (exp.JSONExtract, exp.JSONExtractScalar):
            return self._json_extract(node, t is exp.JSONExtractScalar)
        if t in (exp.JSONBExtract, exp.JSONBExtractScalar):
            return fn_json.bind_path(b(node.this), b(node.expression), t is exp.JSONBExtractScalar)
        if t is exp.ArrayContainsAll:
            return fn_json.bind_contains(b(node.this), b(node.expression))
        if t is exp.ArrayContainedBy:
            return fn_json.bind_contains(b(node.this), b(node.expression), reverse=True)
        if t is exp.JSONBContainsTopKey:
            return fn_json.bind_exists(b(node.this), b(node.expression))
        if t is exp.Trim:
            return self._trim(node)
        if t is exp.Pad:
            args = [node.this, node.expression, node.args.get("fill_pattern")]
            return call(
                "lpad" if node.args.get("is_left") else "rpad",
                [b(a) for a in args if a is not None],
            )
        if t is exp.Extract:
            field = (
                node.this.name
                if isinstance(node.this, (exp.Var, exp.Column))
                else str(node.this.this)
            )
            # the parser marks date_part(f, x) (parsed as an Extract) with its written name
            written = (getattr(node, "_meta", None) or {}).get("written_name")
            return fn_time.bind_extract(field, b(node.expression), written == "date_part")
        if t in (exp.TimestampTrunc, exp.DateTrunc, exp.TimeTrunc):
            unit = node.args.get("unit")
            name = unit.name if isinstance(unit, (exp.Var, exp.Literal)) else str(unit)
            return call("date_trunc", [UntypedLiteral(name.lower(), VARCHAR), b(node.this)])
        if t is exp.Log:
            if node.expression is None:
                return call("log10", [b(node.this)])
            return call("log", [b(node.this), b(node.expression)])
        if t is exp.DateBin:  # sqlglot keeps the origin in `unit` (a bare column as a Var)
            origin = node.args.get("unit")
            if isinstance(origin, exp.Var):
                origin = exp.column(origin.name.lower())
            parts = [node.this, node.expression, origin]
            return call("date_bin", [b(x) for x in parts if x is not None])
        if t is exp.Lambda:
            return self._lambda_as_json(node)
        if t is exp.Anonymous:
            return call(str(node.this).lower(), [b(x) for x in node.expressions])
        if t in _FUNCS:
            name, keys = _FUNCS[t]
            if t is exp.Substring and node.meta.get("written_name") != "substr":
                name = "substring"  # substring(s FROM pattern) is a regular expression
            args: list[Expr] = []
            for k in keys:
                v = node.args.get(k)
                if v is None:
                    continue
                if isinstance(v, list):
                    args.extend(b(x) for x in v)
                else:
                    args.append(b(v))
            return call(name, args)
        if isinstance(node, exp.Func):
            # a call sqlglot parses into a node of its own (Sin, RegexpCount, ...): bound
            # by the name PostgreSQL spells it with, arguments in the node's order
            m = _CALL_NAME.match(node.sql(dialect="postgres"))
            name = m.group(1).lower() if m else node.sql_name().lower()
            args = []
            for k in node.arg_types:
                v = node.args.get(k)
                for x in v if isinstance(v, list) else [v]:
                    if isinstance(x, exp.Expression):
                        args.append(b(x))
            if name in FUNCTIONS:
                return call(name, args)
            raise no_function(name, args)
        raise not_supported(f"expression {node.sql(dialect='postgres')}")

    # -- leaves -----------------------------------------------------------------------------
    def _column(self, node: exp.Column) -> Expr:
        ident = node.args["this"]
        if isinstance(ident, exp.Star):
            raise not_supported("* in this position")
        name = ident.this if ident.args.get("quoted") else ident.this.lower()
        tid = node.args.get("table")
        table = None
        if tid is not None:
            table = tid.this if tid.args.get("quoted") else tid.this.lower()
        col = self.scope.resolve(name, table, node_position(node))
        return _input_ref(col.index, col.type, col.name)

    def _literal(self, node: exp.Literal) -> Expr:
        if node.is_string:
            return UntypedLiteral(check_text(node.this), VARCHAR)
        return self._number(node.this)

    def _number(self, text: str) -> Expr:
        """integer, bigint or numeric as PostgreSQL; numeric holds 28 digits before the
        point, a literal beyond is a WideNumericLiteral (a double precision when cast to
        one, else 22003 numeric field overflow: never silently another type)."""
        if any(c in text for c in ".eE"):
            try:
                d = Decimal(text)
            except ArithmeticError as e:
                raise SqlSyntaxError(
                    f'trailing junk after numeric literal at or near "{text}"'
                ) from e
            if not d.is_finite() or d.copy_abs() >= _NUMERIC_LIMIT:
                return WideNumericLiteral(d, NUMERIC)
            return Literal(
                d.quantize(Decimal(1).scaleb(-10)) if d.as_tuple().exponent < -10 else d,
                numeric_with_scale(literal_scale(d)),
            )
        v = int(text)
        if -(2**31) <= v < 2**31:
            return Literal(v, INT)
        if -(2**63) <= v < 2**63:
            return Literal(v, BIGINT)
        if abs(v) >= _NUMERIC_LIMIT:
            return WideNumericLiteral(Decimal(v), NUMERIC)
        return Literal(Decimal(v), NUMERIC)

    def _param(self, node: exp.Expression) -> Expr:
        raw = node.this
        text = raw.this if isinstance(raw, (exp.Literal, exp.Var, exp.Identifier)) else raw
        try:
            n = int(str(text))
        except ValueError as e:
            raise not_supported(f"parameter {node.sql()}") from e
        if self.params is None:
            self.params = ParamContext([])
        self.params.ensure(n)
        t = self.params.types[n - 1]
        if self.params.values is None:
            return Param(n, t or UNKNOWN)
        if n > len(self.params.values):
            from engine.errors import ProtocolViolation

            raise ProtocolViolation(f"no value found for parameter {n}")
        value = self.params.values[n - 1]
        if isinstance(value, str):
            check_text(value)
        if t is None:
            if value is None:
                return Literal(None, UNKNOWN)
            if isinstance(value, str):
                return UntypedLiteral(value, VARCHAR)
            return _literal_for_python(value)
        if isinstance(value, str) and t.kind not in (K.VARCHAR, K.JSONB):
            return cast(UntypedLiteral(value, VARCHAR), t)
        if t.kind is K.JSONB and isinstance(value, str):
            return cast(UntypedLiteral(value, VARCHAR), t)
        return Literal(value, t)

    def _cast(self, node: exp.Cast) -> Expr:
        target = parse_data_type(node.args["to"])
        return cast(self._bind(node.this), target)

    def _interval(self, node: exp.Interval) -> Expr:
        this = node.this
        unit = node.args.get("unit")
        unit_name = unit.name.lower() if unit is not None else None
        if isinstance(this, exp.Literal):
            months, days, nanos = parse_interval(this.this, unit_name)
            return Literal(pa.MonthDayNano([months, days, nanos]), INTERVAL)
        inner = self._bind(this)
        if unit_name is None:
            return cast(inner, INTERVAL)
        one = Literal(pa.MonthDayNano(list(parse_interval("1", unit_name))), INTERVAL)
        return ops.bind_arith("*", one, inner)

    # -- composite --------------------------------------------------------------------------
    def _is(self, node: exp.Is) -> Expr:
        rhs = node.expression
        if isinstance(rhs, exp.Null):
            return ops.bind_is_null(self._bind(node.this), negate=False)
        if isinstance(rhs, exp.Boolean):
            return ops.bind_is_bool(self._bind(node.this), bool(rhs.this), negate=False)
        raise not_supported(f"IS {rhs.sql()}")

    def _between(self, node: exp.Between) -> Expr:
        x = self._bind(node.this)
        lo, hi = self._bind(node.args["low"]), self._bind(node.args["high"])
        return ops.bind_and_or("AND", ops.bind_compare(">=", x, lo), ops.bind_compare("<=", x, hi))

    def _like(self, node: exp.Expression, escape: str | None) -> Expr:
        if not isinstance(node, (exp.Like, exp.ILike)):
            raise not_supported(f"ESCAPE on {node.sql()}")
        return ops.bind_like(
            self._bind(node.this),
            self._bind(node.expression),
            escape,
            ilike=isinstance(node, exp.ILike),
            negate=bool(node.args.get("negate")),
        )

    def _case(self, node: exp.Case) -> Expr:
        subject = node.this
        subj = self._bind(subject) if subject is not None else None
        if subj is not None and is_untyped(subj):
            # PostgreSQL resolves an unknown CASE operand as text before the WHEN
            # comparisons (`CASE NULL WHEN 1` is text = integer, refused)
            subj = resolve_unknown(subj)
        conds: list[Expr] = []
        results: list[Expr] = []
        for w in node.args.get("ifs") or []:
            c = self._bind(w.this)
            if subj is not None:
                c = ops.bind_compare("=", subj, c)
            elif c.type != BOOLEAN:
                c = ops._as_bool(c, "CASE")
            conds.append(c)
            results.append(self._bind(w.args["true"]))
        default_node = node.args.get("default")
        default = self._bind(default_node) if default_node is not None else Literal(None, UNKNOWN)
        rtype = common_type([_utype(r) for r in [*results, default]], "CASE")
        results = [_to(r, rtype, "CASE") for r in results]
        default = _to(default, rtype, "CASE")
        return Case(tuple(zip(conds, results, strict=True)), default, rtype)

    def _coalesce(self, nodes: list[exp.Expression]) -> Expr:
        args = [self._bind(x) for x in nodes]
        t = common_type([_utype(a) for a in args], "COALESCE")
        cast_args = tuple(_to(a, t, "COALESCE") for a in args)
        return Func("coalesce", cast_args, t, lambda a, n, c: _coalesce_kernel(a, n, t))

    def _nullif(self, a: Expr, b: Expr) -> Expr:
        eq = ops.unfolded_compare("=", a, b)
        assert isinstance(eq, Func)
        left = eq.args[0]
        rt = left.type
        cmp_kernel = eq.kernel

        def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
            same = cmp_kernel(x, n, c)
            import pyarrow.compute as pc

            return pc.if_else(pc.fill_null(same, False), pa.scalar(None, rt.arrow), x[0])

        return Func("nullif", eq.args, rt, kernel)

    def _greatest(self, args: list[Expr], greatest: bool) -> Expr:
        name = "greatest" if greatest else "least"
        t = common_type([_utype(a) for a in args], name.upper())
        cast_args = tuple(_to(a, t, name.upper()) for a in args)

        def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
            import pyarrow.compute as pc

            fn = pc.max_element_wise if greatest else pc.min_element_wise
            try:
                r = fn(*x, skip_nulls=True)
            except pa.ArrowNotImplementedError:
                cols = [as_array(v, n).to_pylist() for v in x]
                pick = max if greatest else min
                out = []
                for row in zip(*cols, strict=True):
                    vals = [v for v in row if v is not None]
                    out.append(pick(vals) if vals else None)
                return pa.array(out, t.arrow)
            if greatest and t.is_float:  # NaN is above every float; Arrow skips it
                any_nan = pc.fill_null(pc.is_nan(x[0]), False)
                for v in x[1:]:
                    any_nan = pc.or_(any_nan, pc.fill_null(pc.is_nan(v), False))
                r = pc.if_else(any_nan, pa.scalar(float("nan"), r.type), r)
            return r

        return Func(name, cast_args, t, kernel)

    def _array(self, items: list[Expr]) -> Expr:
        if not items:
            raise IndeterminateDatatype(
                "cannot determine type of empty array",
                hint="Explicitly cast to the desired type, for example ARRAY[]::integer[].",
            )
        et = common_type([_utype(i) for i in items], "ARRAY")
        cast_items = tuple(_to(i, et, "ARRAY") for i in items)
        lt = list_of(et)
        k = len(items)

        def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
            cols = [as_array(v, n, et) for v in x]
            flat = pa.concat_arrays(cols)
            idx = (np.arange(k)[None, :] * n + np.arange(n)[:, None]).reshape(-1)
            values = flat.take(pa.array(idx))
            offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
            return pa.ListArray.from_arrays(offsets, values, type=lt.arrow)

        return Func("array", cast_items, lt, kernel)

    def _json_extract(self, node: exp.Expression, as_text: bool) -> Expr:
        left = self._bind(node.this)
        key_node = node.expression
        if isinstance(key_node, exp.JSONPath):
            parts = [p for p in key_node.expressions if not isinstance(p, exp.JSONPathRoot)]
            out = left
            for i, p in enumerate(parts):
                last = i == len(parts) - 1
                key: Expr
                if isinstance(p, exp.JSONPathKey):
                    key = UntypedLiteral(str(p.this), VARCHAR)
                elif isinstance(p, exp.JSONPathSubscript):
                    key = Literal(int(p.this), INT)
                else:
                    raise not_supported(f"JSON path {key_node.sql()}")
                out = fn_json.bind_access(out, key, as_text and last)
            return out
        return fn_json.bind_access(left, self._bind(key_node), as_text)

    def _lambda_as_json(self, node: exp.Lambda) -> Expr:
        """sqlglot reads `f(j -> 'k')` as a lambda `j -> 'k'`; SQL here has no lambdas, so
        re-read the text as the jsonb operator chain it is."""
        params = node.expressions
        if len(params) != 1 or not isinstance(params[0], exp.Identifier):
            raise not_supported(f"lambda expression {node.sql(dialect='risingwave')}")
        text = node.sql(dialect="risingwave")
        reparsed = sqlglot.parse_one(f"SELECT ({text})", read="risingwave")
        return self._bind(reparsed.expressions[0])

    def _trim(self, node: exp.Trim) -> Expr:
        pos = (node.args.get("position") or "BOTH").upper()
        name = {"BOTH": "btrim", "LEADING": "ltrim", "TRAILING": "rtrim"}[pos]
        args = [self._bind(node.this)]
        chars = node.expression
        if chars is not None:
            args.append(self._bind(chars))
        return call(name, args)


def _input_ref(index: int, t: SqlType, name: str) -> Expr:
    from engine.expr.core import InputRef

    return InputRef(index, t, name)


def _utype(e: Expr) -> SqlType:
    return UNKNOWN if is_untyped(e) else e.type


def _to(e: Expr, t: SqlType, context: str) -> Expr:
    c = implicit_cast(e, t)
    if c is None:
        from engine.errors import DatatypeMismatch

        raise DatatypeMismatch(f"{context} could not convert type {e.type.display} to {t.display}")
    return c


def _coalesce_kernel(a: list[Datum], n: int, t: SqlType) -> Datum:
    import pyarrow.compute as pc

    if len(a) == 1:
        return a[0]
    if t.kind in (K.INTERVAL, K.LIST):
        cols = [as_array(v, n, t) for v in a]
        out = cols[0]
        for col in cols[1:]:
            out = pc.if_else(pc.is_null(out), col, out)
        return out
    return pc.coalesce(*a)


def _literal_for_python(v: Any) -> Literal:
    if isinstance(v, bool):
        return Literal(v, BOOLEAN)
    if isinstance(v, int):
        return Literal(v, INT if -(2**31) <= v < 2**31 else BIGINT)
    if isinstance(v, Decimal):
        return Literal(v, NUMERIC)
    if isinstance(v, float):
        return Literal(v, DOUBLE)
    raise InvalidParameterValue(f"unsupported parameter value {v!r}")
