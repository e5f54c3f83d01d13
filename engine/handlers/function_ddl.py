"""CREATE FUNCTION / CREATE AGGREGATE / DROP FUNCTION / DROP AGGREGATE / SHOW FUNCTIONS.

Who may create what (PostgreSQL's rule for untrusted languages such as plpython3u): a
Python function runs inside the server process with the server's rights, so only
superusers may create one, or a role granted `USAGE ON LANGUAGE python` by one
(`engine.catalog.privileges.require_language`). SQL functions are plain expressions:
anybody who may create objects in the schema may create one.

Lifecycle: every statement runs under the runtime lock and forces a checkpoint, so the
catalog entry (`engine.catalog.functions.UserFunction`) is durable when it returns. The
body is checked at CREATE: Python code is compiled and run once (its imports and
definitions; the entry points must exist), a SQL body is bound with its parameters.
DROP refuses (2BP01) while a view, materialized view or sink calls the function (their
`extra["functions"]`, recorded at their CREATE by `engine.plan.plan_udf.functions_used`).
"""

from __future__ import annotations

from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog.functions import UserFunction, functions_named
from engine.catalog.privileges import (
    is_superuser,
    require_create_in,
    require_language,
    session_owner,
    user_oid,
)
from engine.errors import (
    AmbiguousFunction,
    DependentObjectsStillExist,
    DuplicateFunction,
    InsufficientPrivilege,
    InvalidFunctionDefinition,
    UndefinedFunction,
    WrongObjectType,
    not_supported,
)
from engine.expr.registry import FUNCTIONS
from engine.expr.udf import PythonRoutine
from engine.plan.plan_agg import AGG_CLASSES
from engine.plan.plan_tablefunc import TABLE_FUNCTIONS
from engine.plan.plan_udf import check_sql_function, type_list
from engine.plan.planner import Planner
from engine.sql.parser import Statement
from engine.types import VARCHAR, Field

_BUILTIN_AGGREGATES = {*AGG_CLASSES.values(), "jsonb_agg", "count"} - {"udaf"}
LANGUAGES = ("python", "sql")


def create_function(session: Any, st: Statement) -> QueryResult:
    a = st.args
    aggregate = bool(a["aggregate"])
    name, schema = a["name"], a["schema"] or "public"
    language = a["language"]
    what = "aggregate" if aggregate else "function"
    if language not in LANGUAGES:
        raise not_supported(
            f"LANGUAGE {language}", hint="Swell runs LANGUAGE python and LANGUAGE sql functions."
        )
    kind = "aggregate" if aggregate else ("table" if a["return_columns"] else "scalar")
    if language == "sql" and kind != "scalar":
        raise not_supported(
            f"LANGUAGE sql {'aggregates' if aggregate else 'table functions'}",
            hint="Write it in LANGUAGE python.",
        )
    batch = a["options"].pop("batch", "false") == "true"
    if a["options"]:
        raise not_supported(
            f"option {sorted(a['options'])[0]} of CREATE {what.upper()}",
            hint="The option Swell knows is batch = true.",
        )
    if batch and (kind == "table" or language != "python"):
        raise not_supported(
            "batch = true here", hint="It applies to Python scalar functions and aggregates."
        )
    if name in FUNCTIONS or name in TABLE_FUNCTIONS or name in _BUILTIN_AGGREGATES:
        raise DuplicateFunction(
            f'function "{name}" is a built-in function', hint="Choose another name."
        )
    require_create_in(schema)
    if language == "python":
        require_language(language)
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        same = [
            f for f in functions_named(cat.functions, name, schema) if f.arg_types == a["arg_types"]
        ]
        if same and a["if_not_exists"]:
            return QueryResult(
                f"CREATE_{what.upper()}",
                notices=[Notice(f"{what} {same[0].signature} already exists, skipping")],
            )
        if same and not a["or_replace"]:
            raise DuplicateFunction(
                f"{what} {same[0].signature} already exists with same argument types"
            )
        fn = UserFunction(
            oid=cat.allocate_relation_id(),
            name=name,
            kind=kind,
            language=language,
            arg_names=list(a["arg_names"]),
            arg_types=list(a["arg_types"]),
            return_type=a["return_type"],
            body=a["body"],
            definition=st.sql.strip(),
            schema_name=schema,
            return_columns=list(a["return_columns"]),
            batch=batch,
            strict=bool(a["strict"]),
            owner=session_owner(session),
        )
        if same:  # OR REPLACE: the same signature, nobody using it
            old = same[0]
            _refuse_dependents(cat, old, "replace")
            if old.kind != fn.kind or old.return_type != fn.return_type:
                raise InvalidFunctionDefinition(
                    f"cannot change return type of existing function {old.signature}",
                    hint=f"Use DROP {what.upper()} {old.signature} first.",
                )
            _require_owner(session, cat, old)
            fn.oid = old.oid
        if language == "python":
            fn.compiled = PythonRoutine(fn)  # compile (and run its definitions) now
        else:
            check_sql_function(Planner(cat), fn)
        cat.functions[fn.oid] = fn
        cat.version += 1
        rt.barrier(force=True)  # persists the catalog
    return QueryResult(f"CREATE_{what.upper()}")


def drop_function(session: Any, st: Statement) -> QueryResult:
    a = st.args
    what = "aggregate" if a["aggregate"] else "function"
    notices: list[Notice] = []
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        doomed: list[UserFunction] = []
        for t in a["targets"]:
            cands = functions_named(cat.functions, t["name"], t["schema"])
            if t["types"] is not None:
                cands = [f for f in cands if f.arg_types == t["types"]]
            shown = t["name"] if t["types"] is None else f"{t['name']}({type_list(t['types'])})"
            if not cands:
                if a["if_exists"]:
                    notices.append(Notice(f"{what} {shown} does not exist, skipping"))
                    continue
                raise UndefinedFunction(f"{what} {shown} does not exist")
            if len(cands) > 1:
                raise AmbiguousFunction(
                    f'{what} name "{t["name"]}" is not unique',
                    hint="Specify the argument list to select the function unambiguously.",
                )
            fn = cands[0]
            if a["aggregate"] != fn.is_aggregate:
                raise WrongObjectType(
                    f'"{fn.signature}" is {"an aggregate" if fn.is_aggregate else "a function"}',
                    hint=f"Use DROP {'AGGREGATE' if fn.is_aggregate else 'FUNCTION'} to drop "
                    f"{'aggregates' if fn.is_aggregate else 'functions'}.",
                )
            _require_owner(session, cat, fn)
            if a["cascade"] and _dependents(cat, fn):
                raise not_supported(
                    f"DROP {what.upper()} ... CASCADE of a function in use",
                    hint="Drop the objects that use it first.",
                )
            _refuse_dependents(cat, fn, "drop")
            doomed.append(fn)
        if doomed:
            for fn in doomed:
                cat.functions.pop(fn.oid, None)
            cat.version += 1
            rt.barrier(force=True)
    return QueryResult(f"DROP_{what.upper()}", notices=notices)


def show_functions(session: Any, st: Statement) -> QueryResult:
    """RisingWave's SHOW FUNCTIONS: name, arguments, return type, language, link."""
    cat = session.db.catalog
    rows: list[tuple[Any, ...]] = []
    for fn in sorted(cat.functions.values(), key=lambda f: (f.name, f.oid)):
        ret = fn.return_type.display
        if fn.kind == "table":
            cols = ", ".join(f"{c.name} {c.type.display}" for c in fn.return_columns)
            ret = f"TABLE ({cols})"
        rows.append((fn.name, type_list(fn.arg_types), ret, fn.language, None))
    fields = [Field(n, VARCHAR) for n in ("Name", "Arguments", "Return Type", "Language", "Link")]
    return QueryResult(f"SHOW {len(rows)}", fields, rows)


def _dependents(cat: Any, fn: UserFunction) -> list[Any]:
    return [r for r in cat.visible() if fn.oid in (r.extra.get("functions") or [])]


def _refuse_dependents(cat: Any, fn: UserFunction, action: str) -> None:
    users = _dependents(cat, fn)
    if users:
        what = "aggregate" if fn.is_aggregate else "function"
        raise DependentObjectsStillExist(
            f"cannot {action} {what} {fn.signature} because other objects depend on it",
            detail="\n".join(
                f"{r.kind.value} {r.name} depends on {what} {fn.signature}" for r in users
            ),
            hint=f"Drop the dependent objects first (DROP {users[0].kind.value.upper()} "
            f"{users[0].name}).",
        )


def _require_owner(session: Any, cat: Any, fn: UserFunction) -> None:
    if is_superuser(cat, session.user) or user_oid(cat, session.user) == fn.owner:
        return
    raise InsufficientPrivilege(f"must be owner of function {fn.name}")
