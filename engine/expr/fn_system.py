"""PostgreSQL syntax and functions that client catalog queries use.

Node binders (registered in `engine.expr.registry.NODE_BINDERS`, tried by the binder before
its own rules):
- `OPERATOR(pg_catalog.~)` and the regex operators `~ ~* !~ !~*`;
- `x COLLATE "C"` (collations do not change comparisons here: binds `x`);
- `pg_catalog.f(...)` (schema-qualified function names);
- `x op ANY (array)` / `x op ALL (array)`, `arr[i]`;
- casts to `oid`, `name`, `"char"` and the reg* types (`'pg_class'::regclass`,
  `t.oid::regtype::text`), resolved against the catalog (`engine.expr.fn_catalog`);
- typed sqlglot nodes for array_to_string, string_to_array, array_length (and
  current_schemas, in `engine.expr.fn_session`).

Functions: array_to_string, string_to_array, array_upper/lower/length, cardinality,
array_ndims.
Session, privilege and server-information functions live in `engine.expr.fn_session`.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.errors import (
    SqlSyntaxError,
    not_supported,
)
from engine.expr import fn_catalog as cat
from engine.expr.coerce import (
    cast,
    common_type,
    implicit_cast,
    is_untyped,
    operator_type,
    parse_data_type,
)
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array, is_scalar
from engine.expr.fn_catalog import NAME, OID, REG_TYPES, TEXT
from engine.expr.fn_regex import regex_error
from engine.expr.nul import check_text
from engine.expr.registry import NODE_BINDERS, call, no_function
from engine.types import (
    BOOLEAN,
    INT,
    SMALLINT,
    VARCHAR,
    SqlType,
    TypeKind,
    list_of,
    pg_alias,
)

K = TypeKind

# -- type names only the catalog knows --
_ALIAS_TYPES: dict[str, SqlType] = {
    "oid": OID,
    "name": NAME,
    '"char"': pg_alias(VARCHAR, "char"),
    "regclass": pg_alias(INT, "regclass"),
    "regtype": pg_alias(INT, "regtype"),
    "regproc": pg_alias(INT, "regproc"),
    "regprocedure": pg_alias(INT, "regproc"),
    "regnamespace": pg_alias(INT, "regnamespace"),
    "regrole": pg_alias(INT, "regrole"),
    "xid": pg_alias(INT, "xid"),
    "int2vector": SqlType(K.LIST, SMALLINT, "int2vector"),
    "oidvector": SqlType(K.LIST, OID, "oidvector"),
}
_ARRAYS = {"oid": "_oid", "name": "_name", '"char"': "_char"}


def target_type(to: exp.Expression) -> SqlType:
    """The type of a cast target, knowing the catalog types (`oid`, `pg_catalog.regclass`)."""
    name: str | None = None
    if isinstance(to, exp.ObjectIdentifier):
        name = str(to.this).lower()
    elif isinstance(to, exp.DataType):
        if to.this == exp.DataType.Type.ARRAY and to.expressions:
            inner = to.expressions[0]
            if isinstance(inner, (exp.DataType, exp.ObjectIdentifier)):
                et = target_type(inner)
                if et.pg in _ARRAYS:
                    return SqlType(K.LIST, et, _ARRAYS[et.pg])
                return list_of(et)
        if to.this == exp.DataType.Type.USERDEFINED:
            kind = to.args.get("kind")
            if isinstance(kind, exp.Dot):
                name = kind.expression.name
            elif kind is not None:
                name = kind.name if isinstance(kind, exp.Expression) else str(kind)
            else:
                name = to.sql("postgres")
            name = name.lower()
            if name.startswith("pg_catalog."):
                name = name[len("pg_catalog.") :]
            if name == "char":
                name = '"char"'
        elif getattr(to.this, "name", None) == "NAME":
            name = "name"
        elif to.this == exp.DataType.Type.TEXT:
            name = "text"
    if name is not None:
        if name in _ALIAS_TYPES:
            return _ALIAS_TYPES[name]
        if name.endswith("[]") and name[:-2] in _ALIAS_TYPES:
            et = _ALIAS_TYPES[name[:-2]]
            return SqlType(K.LIST, et, _ARRAYS.get(name[:-2]))
        if name == "text":
            return TEXT
    if isinstance(to, exp.DataType):
        return parse_data_type(to)
    raise not_supported(f"type {to.sql('postgres')}")


def _bind_cast(b: Any, node: exp.Cast) -> Expr | None:
    target = target_type(node.args["to"])
    if isinstance(node.this, exp.Array) and not node.this.expressions and target.kind is K.LIST:
        return Literal([], target)  # ARRAY[]::int[]: the cast gives the empty array its type
    inner = b._bind(node.this)
    src = inner.type
    if target.pg in REG_TYPES:
        return _to_reg(inner, target)
    if src.pg in REG_TYPES and target.kind is K.VARCHAR:
        return _reg_to_text(inner, src.pg)
    out = cast(inner, SqlType(target.kind, target.elem, mod=target.mod))
    if target.pg != out.type.pg or (
        target.elem is not None and out.type.elem is not None and target.elem.pg != out.type.elem.pg
    ):
        # same storage, different PostgreSQL identity (name::text, x::oid): retype
        return Func("cast", (out,), target, lambda a, n, c: a[0])
    return out


def _to_reg(inner: Expr, target: SqlType) -> Expr:
    kind = target.pg
    if inner.type.kind in (K.INT, K.BIGINT, K.SMALLINT) and not is_untyped(inner):
        base = cast(inner, INT) if inner.type.kind is not K.INT else inner
        return Func("cast", (base,), target, lambda a, n, c: a[0])
    text = implicit_cast(inner, VARCHAR)
    if text is None:
        raise no_function(f"{kind}in", [inner])

    def resolve(ctx: EvalContext, s: str) -> int | None:
        if s.strip().isdigit():
            return int(s)
        if kind == "regclass":
            return cat.relation_oid_of(ctx, s, False)
        if kind == "regtype":
            oid = cat.type_oid(s)
            if oid is None:
                from engine.errors import UndefinedObject

                raise UndefinedObject(f'type "{s}" does not exist')
            return oid
        if kind == "regproc":
            oid = cat.proc_oid(s)
            if oid is None:
                from engine.errors import UndefinedFunction

                raise UndefinedFunction(f'function "{s}" does not exist')
            return oid
        if kind == "regnamespace":
            from engine.catalog.system import NAMESPACE_OIDS

            return NAMESPACE_OIDS.get(s.strip().strip('"'))
        return 10 if s.strip().strip('"') == "root" else None

    return Func("cast", (text,), target, cat.rowwise(resolve, target, ctx_arg=True), volatile=True)


def _reg_to_text(inner: Expr, kind: str | None) -> Expr:
    def show(ctx: EvalContext, oid: int) -> str | None:
        if kind == "regclass":
            return cat.relation_name(ctx, oid)
        if kind == "regtype":
            return cat.format_type(oid) if oid != 0 else "-"
        if kind == "regproc":
            p = cat._PROC_BY_OID.get(oid)
            return p[1] if p is not None else ("-" if oid == 0 else str(oid))
        if kind == "regnamespace":
            from engine.catalog.system import NAMESPACE_OIDS

            names = {v: k for k, v in NAMESPACE_OIDS.items()}
            return names.get(oid, str(oid))
        return "root" if oid == 10 else str(oid)

    return Func("text", (inner,), VARCHAR, cat.rowwise(show, VARCHAR, ctx_arg=True), volatile=True)


# -- regex operators --
def _pg_regex(p: str) -> str:
    # PostgreSQL ARE and Python re agree on what catalog queries use (^ $ ( ) | . * [ ])
    return p


def bind_regex(left: Expr, right: Expr, *, icase: bool, negate: bool) -> Expr:
    left = implicit_cast(left, VARCHAR) if is_untyped(left) else left
    right = implicit_cast(right, VARCHAR) if is_untyped(right) else right
    assert left is not None and right is not None
    if left.type.kind is not K.VARCHAR or right.type.kind is not K.VARCHAR:
        from engine.expr.ops import no_operator

        raise no_operator("~", left.type, right.type)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        try:
            return match(a, n)
        except re.error as e:
            raise regex_error(e) from None

    def match(a: list[Datum], n: int) -> Datum:
        s, p = a
        if is_scalar(p):
            if not p.is_valid:
                return pa.nulls(n, pa.bool_())
            re.compile(_pg_regex(p.as_py()))  # Python's message for a bad pattern
            r = pc.match_substring_regex(as_array(s, n), _pg_regex(p.as_py()), ignore_case=icase)
        else:
            flags = re.I if icase else 0
            sv, pv = as_array(s, n).to_pylist(), p.to_pylist()
            r = pa.array(
                [
                    None if x is None or y is None else re.search(y, x, flags) is not None
                    for x, y in zip(sv, pv, strict=True)
                ],
                pa.bool_(),
            )
        return pc.invert(r) if negate else r

    op = ("!" if negate else "") + "~" + ("*" if icase else "")
    return Func("regex", (left, right), BOOLEAN, kernel, op=op)


_CMP_OPS = {"=", "<>", "!=", "<", "<=", ">", ">="}


def _bind_operator(b: Any, node: exp.Operator) -> Expr | None:
    op = str(node.args.get("operator") or "").split(".")[-1].strip()
    left, right = b._bind(node.this), b._bind(node.expression)
    if op in ("~", "~*", "!~", "!~*"):
        return bind_regex(left, right, icase="*" in op, negate=op.startswith("!"))
    if op in _CMP_OPS:
        from engine.expr.ops import bind_compare

        return bind_compare(op, left, right)
    if op in ("~~", "!~~", "~~*", "!~~*"):
        from engine.expr.ops import bind_like

        return bind_like(left, right, None, ilike="*" in op, negate=op.startswith("!"))
    raise not_supported(f"OPERATOR({node.args.get('operator')})")


def _bind_regexp_like(b: Any, node: exp.Expression) -> Expr | None:
    return bind_regex(
        b._bind(node.this),
        b._bind(node.expression),
        icase=isinstance(node, exp.RegexpILike),
        negate=False,
    )


def _bind_collate(b: Any, node: exp.Collate) -> Expr | None:
    return b._bind(node.this)  # type: ignore[no-any-return]


def _bind_dot(b: Any, node: exp.Dot) -> Expr | None:
    this, inner = node.this, node.expression
    if isinstance(this, exp.Paren):
        return _bind_field_access(b, node)
    schemas = ("pg_catalog", "information_schema", "rw_catalog", "public")
    if (
        isinstance(this, exp.Identifier)
        and isinstance(inner, exp.Func)
        and this.name.lower() in schemas
    ):
        return b._bind(inner)  # type: ignore[no-any-return]
    return None


def _bind_field_access(b: Any, node: exp.Dot) -> Expr | None:
    """`(composite).field`: a composite expanded into `<name>.<field>` columns
    (engine.plan.plan_srf)."""
    this, field = node.this, node.expression
    if not isinstance(this, exp.Paren) or not isinstance(this.this, exp.Column):
        return None
    col = this.this
    table = col.table or None
    name = col.name if col.this.args.get("quoted") else col.name.lower()
    fname = field.name.lower() if isinstance(field, exp.Identifier) else str(field).lower()
    ref = exp.column(
        exp.to_identifier(f"{name}.{fname}", quoted=True),
        table=exp.to_identifier(table.lower()) if table else None,
    )
    return b._bind(ref)  # type: ignore[no-any-return]


def _bind_user_keyword(b: Any, node: exp.Column) -> Expr | None:
    """`user` (no table, unquoted) is current_user unless a column of that name exists."""
    ident = node.this
    if node.table or not isinstance(ident, exp.Identifier) or ident.args.get("quoted"):
        return None
    if ident.name.lower() not in ("user", "current_role"):
        return None
    if any(c.name == ident.name.lower() for c in b.scope.columns):
        return None
    return Func("current_user", (), NAME,
                lambda a, n, c: pa.array([c.session.user if c.session else "root"] * n),
                volatile=True)  # fmt: skip


def _bind_escape_string(b: Any, node: exp.ByteString) -> Expr | None:
    from engine.expr.coerce import UntypedLiteral

    return UntypedLiteral(check_text(str(node.this)), VARCHAR)


# -- ANY / ALL --
def bind_any_all(op: str, left: Expr, arr: Expr, *, all_: bool) -> Expr:
    if arr.type.kind is not K.LIST:
        if is_untyped(arr):
            lt = left.type if not is_untyped(left) else VARCHAR
            arr = cast(arr, list_of(lt))
        else:
            raise SqlSyntaxError(f"op ANY/ALL (array) requires array on right side, not {arr.type}")
    assert arr.type.elem is not None
    et = operator_type([left.type if not is_untyped(left) else arr.type.elem, arr.type.elem])
    lc = implicit_cast(left, et)
    if lc is None:
        raise no_function(f"operator {op}", [left, arr])
    elem_t = arr.type.elem
    from engine.expr.ops import cmp_kernel

    cmp = cmp_kernel("<>" if op == "!=" else op, et)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        x = as_array(a[0], n, et)
        lists = as_array(a[1], n, arr.type)
        flat = pc.list_flatten(lists)
        parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
        if elem_t != et:
            flat = flat.cast(et.arrow)
        lhs = x.take(pa.array(parents, pa.int64())) if len(parents) else pa.array([], et.arrow)
        hit = cmp([lhs, flat], len(flat), c)
        hit = as_array(hit, len(flat))
        true_ = np.zeros(n, dtype=bool)
        false_ = np.zeros(n, dtype=bool)
        null_ = np.zeros(n, dtype=bool)
        hv = hit.to_numpy(zero_copy_only=False)
        valid = pc.is_valid(hit).to_numpy(zero_copy_only=False)
        hb = np.where(valid, hv, False).astype(bool)
        np.logical_or.at(true_, parents[valid & hb], True)
        np.logical_or.at(false_, parents[valid & ~hb], True)
        np.logical_or.at(null_, parents[~valid], True)
        if all_:
            res = np.where(false_, False, np.where(null_, None, True))
        else:
            res = np.where(true_, True, np.where(null_, None, False))
        out = pa.array(res.tolist(), pa.bool_())
        # NULL array -> NULL
        return pc.if_else(pc.is_null(lists), pa.scalar(None, pa.bool_()), out)

    name = ("all" if all_ else "any") + f"[{op}]"
    return Func(name, (lc, arr), BOOLEAN, kernel)


def _make_cmp_binder(op: str) -> Any:
    def bind(b: Any, node: exp.Expression) -> Expr | None:
        rhs = node.expression
        if (
            isinstance(rhs, exp.Anonymous)
            and str(rhs.this).upper() in ("ALL", "ANY", "SOME")
            and len(rhs.expressions) == 1
        ):
            # sqlglot parses `x <> ALL(ARRAY[...])` (no space) as a call named ALL
            kind = exp.All if str(rhs.this).upper() == "ALL" else exp.Any
            rhs = kind(this=rhs.expressions[0])
        if not isinstance(rhs, (exp.Any, exp.All)):
            return None
        inner = rhs.this
        if isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, (exp.Select, exp.Subquery)):
            return None  # a subquery: the planner's business
        return bind_any_all(op, b._bind(node.this), b._bind(inner), all_=isinstance(rhs, exp.All))

    return bind


# -- arrays --
def _bind_array_concat(b: Any, node: exp.DPipe) -> Expr | None:
    """`array || array`, `array || element`, `element || array` (NULL arrays are empty)."""
    left, right = b._bind(node.this), b._bind(node.expression)
    lt, rt = left.type, right.type
    if lt.kind is not K.LIST and rt.kind is not K.LIST:
        # text, bytea, jsonb: the same rules as the binder's, on the children bound once
        from engine.expr.fn_crypto import bytea_concat
        from engine.expr.fn_string import bind_concat_op

        return bytea_concat(left, right) or bind_concat_op(left, right)
    if lt.kind is K.LIST and rt.kind is K.LIST:
        t = common_type([lt, rt], "||")
        la, ra = implicit_cast(left, t), implicit_cast(right, t)
        shape = "aa"
    elif lt.kind is K.LIST:
        assert lt.elem is not None
        t, la, ra, shape = lt, left, implicit_cast(right, lt.elem), "ae"
    else:
        assert rt.elem is not None
        t, la, ra, shape = rt, implicit_cast(left, rt.elem), right, "ea"
    if la is None or ra is None:
        from engine.expr.ops import no_operator

        raise no_operator("||", lt, rt)

    def cat2(x: Any, y: Any) -> Any:
        if shape == "aa":
            return None if x is None and y is None else (x or []) + (y or [])
        if shape == "ae":
            return (x or []) + [y]
        return [x] + (y or [])

    return Func("array_cat", (la, ra), t, cat.rowwise(cat2, t, strict=False), op="||")


_BITWISE = {
    exp.BitwiseAnd: ("&", "bit_wise_and"),
    exp.BitwiseOr: ("|", "bit_wise_or"),
    exp.BitwiseXor: ("#", "bit_wise_xor"),
    exp.BitwiseLeftShift: ("<<", "shift_left"),
    exp.BitwiseRightShift: (">>", "shift_right"),
}


def _bind_bitwise(b: Any, node: exp.Expression) -> Expr | None:
    op, kernel_name = _BITWISE[type(node)]
    left, right = b._bind(node.this), b._bind(node.expression)
    ints = (K.SMALLINT, K.INT, K.BIGINT)
    lt = INT if is_untyped(left) else left.type
    rt = INT if is_untyped(right) else right.type
    if lt.kind not in ints or rt.kind not in ints:
        from engine.expr.ops import no_operator

        raise no_operator(op, lt, rt)
    t = lt if op in ("<<", ">>") else common_type([lt, rt])
    la = implicit_cast(left, t)
    ra = implicit_cast(right, t if op not in ("<<", ">>") else INT)
    assert la is not None and ra is not None
    fn = getattr(pc, kernel_name)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        x, y = a
        if op in ("<<", ">>"):
            y = pc.cast(y, t.arrow)
        return fn(x, y)

    return Func(kernel_name, (la, ra), SqlType(t.kind), kernel, op=op)


def _ndims(t: SqlType) -> int:
    """How many dimensions an array type has (a multidimensional array is a list of
    lists, rectangular as in PostgreSQL)."""
    d = 0
    while t.kind is K.LIST and t.elem is not None:
        d, t = d + 1, t.elem
    return d


def _first_elements(arr: pa.Array) -> pa.Array:
    """Each list's first element (NULL for an empty or NULL list)."""
    offsets = arr.offsets.to_numpy(zero_copy_only=False)[:-1]
    empty = pc.fill_null(pc.equal(pc.list_value_length(arr), 0), True)
    idx = pa.array(offsets, mask=empty.to_numpy(zero_copy_only=False))
    return arr.values.take(idx)


def _dim_length(arr: pa.Array, d: int, ndims: int) -> pa.Array:
    """The length of each array along dimension `d` (1-based): the first element's, level
    by level (the arrays are rectangular); NULL for an empty array, a NULL one, or a
    dimension it does not have."""
    n = len(arr)
    if d < 1 or d > ndims:
        return pa.nulls(n, pa.int32())
    for _ in range(d - 1):
        arr = _first_elements(arr)
    lengths = pc.list_value_length(arr).cast(pa.int32())
    return pc.if_else(pc.equal(lengths, 0), pa.scalar(None, pa.int32()), lengths)


def _array_dims(name: str, lower: bool) -> Any:
    def resolve(args: list[Expr]) -> Expr:
        if len(args) != 2 or args[0].type.kind is not K.LIST:
            raise no_function(name, args)
        d = implicit_cast(args[1], INT)
        if d is None:
            raise no_function(name, args)
        ndims = _ndims(args[0].type)

        def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
            arr = as_array(a[0], n)
            if is_scalar(a[1]):
                dims = [a[1].as_py()]
                rows = None
            else:
                dims = [v for v in pc.unique(a[1]).to_pylist() if v is not None]
                rows = a[1]
            out = pa.nulls(n, pa.int32())
            for dim in dims:
                if dim is None:
                    continue
                got = _dim_length(arr, dim, ndims)
                if lower:  # the lower bound of a non-empty dimension is always 1 here
                    got = pc.if_else(pc.is_null(got), got, pa.scalar(1, pa.int32()))
                out = got if rows is None else pc.if_else(pc.equal(rows, dim), got, out)
            return out

        return Func(name, (args[0], d), INT, kernel)

    return resolve


from engine.expr.registry import register  # noqa: E402

register("array_upper")(_array_dims("array_upper", False))
register("array_lower")(_array_dims("array_lower", True))
register("array_length")(_array_dims("array_length", False))


def _leaf_counts(arr: pa.Array) -> np.ndarray:
    """Each array's number of elements over all its dimensions."""
    lengths: np.ndarray = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False)
    if not pa.types.is_list(arr.type.value_type) and not pa.types.is_large_list(
        arr.type.value_type
    ):
        return lengths.astype(np.int64)
    inner = pc.list_flatten(arr)
    parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
    counts: np.ndarray = np.bincount(parents, weights=_leaf_counts(inner), minlength=len(arr))
    return counts.astype(np.int64)


@register("cardinality")
def _cardinality(args: list[Expr]) -> Expr:
    """The number of elements over all dimensions (cardinality('{{1,2},{3,4}}') is 4)."""
    if len(args) != 1 or args[0].type.kind is not K.LIST:
        raise no_function("cardinality", args)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        arr = as_array(a[0], n)
        counts = pa.array(_leaf_counts(arr), pa.int32())
        return pc.if_else(pc.is_null(arr), pa.scalar(None, pa.int32()), counts)

    return Func("cardinality", (args[0],), INT, kernel)


@register("array_ndims")
def _array_ndims(args: list[Expr]) -> Expr:
    """The number of dimensions; NULL for an empty or NULL array."""
    if len(args) != 1 or args[0].type.kind is not K.LIST:
        raise no_function("array_ndims", args)
    ndims = _ndims(args[0].type)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        lengths = pc.list_value_length(as_array(a[0], n))
        return pc.if_else(
            pc.greater(lengths, 0), pa.scalar(ndims, pa.int32()), pa.scalar(None, pa.int32())
        )

    return Func("array_ndims", (args[0],), INT, kernel)


def _a2s(arr: list[Any], sep: str, null_str: str | None = None) -> str:
    parts = []
    for v in arr:
        if v is None:
            if null_str is not None:
                parts.append(null_str)
            continue
        parts.append(str(v).lower() if isinstance(v, bool) else str(v))
    return sep.join(parts)


@register("array_to_string")
def _array_to_string(args: list[Expr]) -> Expr:
    if len(args) not in (2, 3) or args[0].type.kind is not K.LIST:
        raise no_function("array_to_string", args)
    rest = [implicit_cast(a, VARCHAR) for a in args[1:]]
    if any(r is None for r in rest):
        raise no_function("array_to_string", args)
    bound = (args[0], *[r for r in rest if r is not None])
    return Func("array_to_string", bound, TEXT, cat.rowwise(_a2s, TEXT))


@register("string_to_array")
def _string_to_array(args: list[Expr]) -> Expr:
    bound = [implicit_cast(a, VARCHAR) for a in args]
    if len(args) not in (2, 3) or any(x is None for x in bound):
        raise no_function("string_to_array", args)

    def split(s: str, sep: str | None, null_str: str | None = None) -> list[str | None]:
        parts = list(s) if sep is None else ([s] if sep == "" else s.split(sep))
        if s == "":
            return []
        return [None if null_str is not None and p == null_str else p for p in parts]

    rt = list_of(VARCHAR)
    return Func(
        "string_to_array",
        tuple(x for x in bound if x is not None),
        rt,
        cat.rowwise(lambda s, sep=None, ns=None: None if s is None else split(s, sep, ns), rt,
                    strict=False),
    )  # fmt: skip


def _typed_func(name: str, keys: tuple[str, ...]) -> Any:
    def bind(b: Any, node: exp.Expression) -> Expr | None:
        args: list[Expr] = []
        for k in keys:
            v = node.args.get(k)
            if v is None:
                continue
            if isinstance(v, list):
                args.extend(b._bind(x) for x in v)
            else:
                args.append(b._bind(v))
        return call(name, args)

    return bind


NODE_BINDERS[exp.Cast] = _bind_cast
NODE_BINDERS[exp.Column] = _bind_user_keyword
for _bw in _BITWISE:
    NODE_BINDERS[_bw] = _bind_bitwise
NODE_BINDERS[exp.DPipe] = _bind_array_concat
NODE_BINDERS[exp.ByteString] = _bind_escape_string
NODE_BINDERS[exp.Operator] = _bind_operator
NODE_BINDERS[exp.RegexpLike] = _bind_regexp_like
NODE_BINDERS[exp.RegexpILike] = _bind_regexp_like
NODE_BINDERS[exp.Collate] = _bind_collate
NODE_BINDERS[exp.Dot] = _bind_dot
NODE_BINDERS[exp.ArrayToString] = _typed_func("array_to_string", ("this", "expression", "null"))
NODE_BINDERS[exp.Format] = _typed_func("format", ("this", "expressions"))
NODE_BINDERS[exp.StringToArray] = _typed_func("string_to_array", ("this", "expression", "null"))
NODE_BINDERS[exp.ArraySize] = _typed_func("array_length", ("this", "expression"))
for _cls, _op in (
    (exp.EQ, "="),
    (exp.NEQ, "<>"),
    (exp.LT, "<"),
    (exp.LTE, "<="),
    (exp.GT, ">"),
    (exp.GTE, ">="),
):
    NODE_BINDERS[_cls] = _make_cmp_binder(_op)

_ = Literal
