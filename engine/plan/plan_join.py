"""Join conditions for streaming hash joins: keys from expressions, WHERE pushdown, USING.

A streaming join needs equality keys (a hash join); a join without one would be a nested
loop and is refused. This module widens what counts as a key, so that everyday SQL plans:

* `ON t.v + 1 = u.v`, `ON t.a = u.b` with different types: each side's key expression is
  computed by a Project below the join (hidden `_jk_l0`/`_jk_r0` columns, cast to the common
  type) and a Project above it drops them again;
* `ON a IS NOT DISTINCT FROM b`: two keys, `a IS NULL` and `CASE WHEN a IS NULL THEN <zero>
  ELSE a END`, which match exactly when the values are not distinct (NULL keys never match in
  a hash join, so NULLs need the rewrite);
* `FROM t, u WHERE t.k = u.k`: WHERE conjuncts that reference both sides of a comma/CROSS
  join move into its ON (only when no RIGHT/FULL join follows, which could null-extend the
  moved columns);
* `JOIN u USING (k)` / `NATURAL JOIN u`: a merged column `k` (left copy for inner/left joins,
  right copy for right joins, COALESCE for full joins) comes first in `SELECT *` and answers
  unqualified references, as in PostgreSQL; `t.k` and `u.k` still name each side.

Used by `FromPlannerMixin._plan_join` (plan_from.py), per JOIN, while planning FROM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.catalog import RelationKind
from engine.errors import EngineError
from engine.plan.helpers import _append, _Col, _conjuncts
from engine.plan.logical import Filter, PlanNode, Project, Scan
from engine.types import BOOLEAN, Field, TypeKind

# a value per type for the NULL branch of null-safe keys (paired with an `IS NULL` key, so
# the value never makes NULL equal to a real one)
_ZERO: dict[TypeKind, Any] = {
    TypeKind.SMALLINT: 0,
    TypeKind.INT: 0,
    TypeKind.BIGINT: 0,
    TypeKind.REAL: 0.0,
    TypeKind.DOUBLE: 0.0,
    TypeKind.NUMERIC: Decimal(0),
    TypeKind.VARCHAR: "",
    TypeKind.BOOLEAN: False,
    TypeKind.DATE: date(1970, 1, 1),
    TypeKind.TIMESTAMP: datetime(1970, 1, 1),
}


@dataclass
class JoinKeys:
    """Equality keys split from a join condition (right side indexed from 0)."""

    lkeys: list[int] = field(default_factory=list)
    rkeys: list[int] = field(default_factory=list)
    lexprs: list[ex.Expr] = field(default_factory=list)  # computed keys, left side
    rexprs: list[ex.Expr] = field(default_factory=list)  # computed keys, right side
    residual: list[ex.Expr] = field(default_factory=list)  # over left ++ right columns

    def __bool__(self) -> bool:
        return bool(self.lkeys or self.lexprs)


def split_join_condition(
    planner: Any, conjs: list[exp.Expression], scope: ex.Scope, nl: int, streaming: bool
) -> JoinKeys:
    """Bind ON conjuncts; equalities between the two sides become keys. In batch mode only
    column = column pairs of one type are keys (the rest is compared after the join)."""
    out = JoinKeys()
    for conj in conjs:
        nullsafe = isinstance(conj, exp.NullSafeEQ)
        if streaming and nullsafe:
            a = planner._bind(conj.this, scope)
            b = planner._bind(conj.expression, scope)
            sides = _sides(a, b, nl)
            if sides is not None and _add_nullsafe(out, sides[0], sides[1], nl):
                continue
            out.residual.append(planner._bind(conj, scope))
            continue
        is_eq = isinstance(conj, exp.EQ) and not isinstance(conj.expression, (exp.Any, exp.All))
        b = planner._bind(conj, scope)
        if is_eq and isinstance(b, ex.Func) and len(b.args) == 2:
            # bind the sides separately: the bound `=` may have cast them already
            x = planner._bind(conj.this, scope)
            y = planner._bind(conj.expression, scope)
            sides = _sides(x, y, nl)
            if sides is not None:
                lx, ry = sides
                plain = isinstance(lx, ex.InputRef) and isinstance(ry, ex.InputRef)
                if plain and (lx.type == ry.type or not streaming):
                    out.lkeys.append(lx.index)
                    out.rkeys.append(ry.index - nl)
                    continue
                if streaming:
                    t = ex.operator_type([lx.type, ry.type], "JOIN")
                    out.lexprs.append(lx if lx.type == t else ex.cast(lx, t))
                    ry = ry.remap({i: i - nl for i in ry.input_refs()})
                    out.rexprs.append(ry if ry.type == t else ex.cast(ry, t))
                    continue
        out.residual.append(b)
    return out


def _sides(a: ex.Expr, b: ex.Expr, nl: int) -> tuple[ex.Expr, ex.Expr] | None:
    """(left-side expression, right-side expression) when each side reads only one input."""
    ra, rb = a.input_refs(), b.input_refs()
    if ra and rb and max(ra) < nl <= min(rb):
        return a, b
    if ra and rb and max(rb) < nl <= min(ra):
        return b, a
    return None


def _add_nullsafe(out: JoinKeys, a: ex.Expr, b: ex.Expr, nl: int) -> bool:
    from engine.expr.ops import bind_is_null

    t = ex.operator_type([a.type, b.type], "IS NOT DISTINCT FROM")
    if t.kind not in _ZERO:
        return False
    a = a if a.type == t else ex.cast(a, t)
    b = b if b.type == t else ex.cast(b, t)
    b = b.remap({i: i - nl for i in b.input_refs()})
    zero = ex.Literal(value=_ZERO[t.kind], type=t)
    for e, dst in ((a, out.lexprs), (b, out.rexprs)):
        isnull = bind_is_null(e, False)
        dst.append(isnull)
        dst.append(ex.Case(((isnull, zero),), e, t))
    return True


def project_keys(
    left: PlanNode, right: PlanNode, keys: JoinKeys
) -> tuple[PlanNode, PlanNode, int, int]:
    """Inputs with the computed keys appended (hidden) and the keys' indices added to
    `keys.lkeys`/`keys.rkeys`; returns (left, right, extra left columns, extra right)."""
    if not keys.lexprs:
        return left, right, 0, 0
    nl, nr = len(left.schema), len(right.schema)
    k = len(keys.lexprs)
    left = _append(left, keys.lexprs, "_jk_l")
    right = _append(right, keys.rexprs, "_jk_r")
    keys.lkeys += list(range(nl, nl + k))
    keys.rkeys += list(range(nr, nr + k))
    # residual conditions were bound over left ++ right: right columns move by k
    shift = {i: i + k for i in range(nl, nl + nr)}
    keys.residual = [r.remap({i: shift.get(i, i) for i in r.input_refs()}) for r in keys.residual]
    return left, right, k, k


def drop_keys(join: PlanNode, nl: int, nr: int, extra: int, tail: int = 0) -> PlanNode:
    """A Project over `join` (left ++ left keys ++ right ++ right keys ++ `tail` markers,
    see `mark_full_join`) back to left ++ right ++ markers."""
    if not extra:
        return join
    end = nl + extra + nr + extra
    idx = list(range(nl)) + list(range(nl + extra, nl + extra + nr)) + list(range(end, end + tail))
    fields = [join.schema[i] for i in idx]
    exprs: list[ex.Expr] = [
        ex.InputRef(index=i, type=join.schema[i].type, name=join.schema[i].name) for i in idx
    ]
    key = None
    if join.stream_key is not None:
        back = {old: new for new, old in enumerate(idx)}
        key = [back[i] for i in join.stream_key]
    return Project(fields, key, input=join, exprs=exprs)


# -- FULL JOIN row identity -------------------------------------------------------------------
#: the hidden column `mark_full_join` appends to a FULL JOIN's right side
PRESENT_COLUMN = "_present_r"


def _key_never_null(node: PlanNode) -> bool:
    """Whether a column of `node`'s stream key is never NULL in a real row: a table's
    primary key or row id, carried through projections and filters. A group key, a
    global aggregate's empty key or an outer join's NULL-extended side can be."""
    if not node.stream_key:
        return False
    if isinstance(node, Scan):
        return node.relation.kind is RelationKind.TABLE
    if isinstance(node, Filter):
        return _key_never_null(node.input)
    if isinstance(node, Project):
        inner = node.input.stream_key or []
        refs = [node.exprs[k] for k in node.stream_key]
        return _key_never_null(node.input) and all(
            isinstance(e, ex.InputRef) and e.index in inner for e in refs
        )
    return False


def mark_full_join(planner: Any, left: PlanNode, right: PlanNode, jkind: str) -> PlanNode | None:
    """The right side of a streaming (`planner.streaming`) FULL JOIN with a hidden
    `_present_r` (TRUE) column in its stream key, or None when not needed. The join's stream
    key is the left key ++ the right key; a left row that matches nothing is NULL-extended
    on the right and a right row that matches nothing on the left, so when both sides can
    have a real row whose key is all NULL (two aggregates grouped by a NULL-able key, two
    global aggregates), an unmatched left row and an unmatched right row had the same key
    and the view kept only one of them. The marker is NULL in the first and TRUE in the
    second. (A LEFT or RIGHT join needs none: a row is either matched or NULL-extended,
    never both at once.)"""
    if not planner.streaming or jkind != "full" or right.stream_key is None:
        return None
    if _key_never_null(left) or _key_never_null(right):
        return None
    marked = _append(right, [ex.Literal(value=True, type=BOOLEAN)], PRESENT_COLUMN)
    marked.schema[-1] = Field(PRESENT_COLUMN, BOOLEAN, True)
    marked.stream_key = [*right.stream_key, len(marked.schema) - 1]
    return marked


# -- WHERE conjuncts into comma joins ---------------------------------------------------------
def pushable_where(q: exp.Select, where: exp.Expression | None) -> list[exp.Expression] | None:
    """WHERE's conjuncts, as a list comma/CROSS joins of `q` take ON conditions from, or None
    when nothing may move (no such join, or a RIGHT/FULL join could null-extend)."""
    joins = q.args.get("joins") or []
    if where is None or not any(_is_cross(j) for j in joins):
        return None
    if any((j.args.get("side") or "").lower() in ("right", "full") for j in joins):
        return None
    return _conjuncts(where)


def _movable(c: exp.Expression) -> bool:
    return c.find(exp.Subquery, exp.Select, exp.Exists, exp.AggFunc, exp.Window) is None


def _is_cross(j: exp.Join) -> bool:
    if j.args.get("on") is not None or j.args.get("using") or j.args.get("method"):
        return False
    return (j.args.get("side") or "") == "" and (j.args.get("kind") or "").upper() in ("", "CROSS")


def take_where(
    planner: Any, pending: list[exp.Expression], scope: ex.Scope, nl: int
) -> list[exp.Expression]:
    """Remove from `pending` and return the conjuncts that bind over this join's columns and
    read both sides."""
    taken = []
    for c in list(pending):
        if not _movable(c):
            continue
        try:
            b = planner._bind(c, scope)
        except EngineError:
            continue
        refs = b.input_refs()
        if refs and min(refs) < nl <= max(refs) and not b.has_now():
            taken.append(c)
            pending.remove(c)
    return taken


def rebuild_where(pending: list[exp.Expression]) -> exp.Expression | None:
    if not pending:
        return None
    out = pending[0]
    for c in pending[1:]:
        out = exp.And(this=out, expression=c)
    return out


# -- USING / NATURAL ------------------------------------------------------------------------
def natural_columns(lcols: list[_Col], rcols: list[_Col]) -> list[str]:
    rnames = {c.name for c in rcols if not c.hidden}
    out = []
    for c in lcols:
        if not c.hidden and c.name in rnames and c.name not in out:
            out.append(c.name)
    return out


def merge_using(
    node: PlanNode,
    cols: list[_Col],
    pairs: list[tuple[int, int]],
    jkind: str,
) -> tuple[PlanNode, list[_Col]]:
    """Put the merged USING columns first (PostgreSQL's `SELECT *` order); both sides' copies
    stay reachable qualified only. `pairs` are (left index, right index) in `cols`."""
    from engine.expr.binder import _coalesce_kernel

    exprs: list[ex.Expr] = []
    fields: list[Field] = []
    merged: list[_Col] = []
    for li, ri in pairs:
        lf, rf = node.schema[li], node.schema[ri]
        lref = ex.InputRef(index=li, type=lf.type, name=lf.name)
        rref = ex.InputRef(index=ri, type=rf.type, name=rf.name)
        if jkind == "full":
            t = ex.common_type([lf.type, rf.type], "JOIN/USING")
            a = lref if lf.type == t else ex.cast(lref, t)
            b = rref if rf.type == t else ex.cast(rref, t)
            e = ex.Func("coalesce", (a, b), t, lambda v, n, c, t=t: _coalesce_kernel(v, n, t))
        else:
            e = rref if jkind == "right" else lref
        exprs.append(e)
        src = rf if jkind == "right" else lf
        fields.append(Field(cols[li].name, e.type, False, origin=src.origin))
        merged.append(_Col(cols[li].name, e.type, None))
    n = len(pairs)
    exprs += [ex.InputRef(index=i, type=f.type, name=f.name) for i, f in enumerate(node.schema)]
    fields += list(node.schema)
    key = [k + n for k in node.stream_key] if node.stream_key is not None else None
    out = Project(fields, key, input=node, exprs=exprs)
    copies = {i for p in pairs for i in p}
    rest = [
        _Col(c.name, c.type, c.table, c.hidden, qualified_only=i in copies)
        for i, c in enumerate(cols)
    ]
    return out, merged + rest
