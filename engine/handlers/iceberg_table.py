"""`CREATE TABLE ... ENGINE = iceberg`, reading Iceberg-backed relations, and time travel.

An Iceberg engine table is three things, as in RisingWave:

1. a normal Swell table (rows in RocksDB), so INSERT / UPDATE / DELETE evaluate against
   the latest rows with the usual semantics;
2. a hidden upsert sink `__iceberg_sink_<t>` from that table into the Iceberg table (key:
   the primary key, or the hidden `_row_id` kept as an Iceberg column), exactly once,
   committing every `commit_checkpoint_interval` checkpoints (default 60, WITH option);
3. the Iceberg table itself (created here if missing), in the catalog of the connection
   named by `WITH (connection = ...)` or `SET iceberg_engine_connection = 'schema.conn'`;
   without either, a built-in SQLite SQL catalog and warehouse under the data directory.

`CREATE SINK s INTO t ...` writes straight into the Iceberg table (the table's options are
merged into the sink's by `sink_into_options`). SELECT reads the committed Iceberg snapshot
(`iceberg_snapshots`), with column projection and `col op literal` predicates pushed down;
`FOR SYSTEM_VERSION AS OF <snapshot id>` and `FOR SYSTEM_TIME AS OF '<timestamp>'` pick an
older snapshot (`strip_time_travel` takes them out of the SQL before sqlglot sees it).
`CREATE SOURCE s WITH (connector = 'iceberg', ...)` (`source_fields`) reads the same way.

The connector is reached only through `engine.connector_registry`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pyarrow as pa

from engine.connector_registry import sink_connector
from engine.errors import InvalidParameterValue, not_supported

HIDDEN_SINK_PREFIX = "__iceberg_sink_"
READS_LOCAL = "reads_local"
_ENGINE_OPTION_KEYS = ("commit_checkpoint_interval", "partition_by", "connection")


def _connector() -> Any:
    return sink_connector("iceberg")


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_str(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def engine_options(session: Any, name: str, schema: str, options: dict[str, str]) -> dict[str, str]:
    """The Iceberg options of a new engine table (connection, or the built-in catalog)."""
    from engine.handlers.connection import lookup

    ref = options.get("connection") or session.vars.get("iceberg_engine_connection") or ""
    out: dict[str, str] = {}
    if ref:
        conn = lookup(session.db.catalog, ref)
        if (conn["options"].get("type") or "").lower() != "iceberg":
            raise InvalidParameterValue(f'connection "{ref}" is not an iceberg connection')
        out.update({k: v for k, v in conn["options"].items() if k != "type"})
        out["connection"] = ref.split(".")[-1]
    else:
        base = session.db.runtime.data_dir
        if base is None:
            raise not_supported(
                "ENGINE = iceberg without a connection in an in-memory database",
                hint="SET iceberg_engine_connection = 'public.<connection>' first.",
            )
        d = os.path.join(os.path.abspath(base), "iceberg")
        os.makedirs(os.path.join(d, "warehouse"), exist_ok=True)
        out.update(
            {
                "catalog.type": "sql",
                "catalog.name": "swell",
                "catalog.uri": f"sqlite:///{d}/catalog.db",
                "warehouse.path": f"file://{d}/warehouse",
            }
        )
    for k in _ENGINE_OPTION_KEYS:
        if k in options and k != "connection":
            out[k] = options[k]
    out.setdefault("database.name", schema)
    out.setdefault("table.name", name)
    return out


def prepare_engine_table(session: Any, rel: Any) -> None:
    """Before the Swell table exists: create/check the Iceberg table, record its options."""
    opts = engine_options(session, rel.name, rel.schema_name, rel.options)
    fields = [f for f in rel.fields]
    has_pk = rel.row_id_index is None
    # the hidden _row_id is an ordinary optional Iceberg column (rows from CREATE SINK INTO
    # have none); a real primary key becomes the Iceberg identifier fields
    from engine.types import Field

    ice_fields = [Field(f.name, f.type) for f in fields]
    empty = _connector().ensure_table(opts, ice_fields, list(rel.pk) if has_pk else [])
    key = [fields[i].name for i in rel.pk]
    rel.extra["iceberg"] = {
        "options": opts,
        "connection": opts.get("connection"),
        "sink": HIDDEN_SINK_PREFIX + rel.name,
        "key": key,
        # the Swell table holds every row of the Iceberg table (it started empty and only
        # DML writes it): reads take its committed rows, so FLUSH is read-after-write
        READS_LOCAL: bool(empty),
    }
    rel.extra["sink_into_connector"] = "iceberg"
    # user-visible options of the Swell table stay as written (no connector: DML allowed)


def create_hidden_sink(session: Any, rel: Any, create_sink: Callable[[Any, Any], Any]) -> None:
    """After the Swell table exists: the upsert sink that mirrors it into Iceberg.

    `create_sink(session, statement)` is CREATE SINK's handler, passed in by the caller
    (`engine.handlers.ddl`): the sink handler reads Iceberg tables through this module."""
    from engine.sql.parser import parse_one

    ice = rel.extra["iceberg"]
    opts = dict(ice["options"])
    opts.pop("connection", None)
    opts.setdefault("commit_checkpoint_interval", "60")
    opts.update({"connector": "iceberg", "type": "upsert", "primary_key": ",".join(ice["key"])})
    cols = ", ".join(_quote_ident(f.name) for f in rel.fields)
    with_sql = ", ".join(f"{k} = {_quote_str(v)}" for k, v in opts.items())
    sql = (
        f"CREATE SINK {_quote_ident(ice['sink'])} AS SELECT {cols} FROM "
        f"{_quote_ident(rel.schema_name)}.{_quote_ident(rel.name)} WITH ({with_sql})"
    )
    st = parse_one(sql)
    create_sink(session, st)
    sink = session.db.catalog.find(ice["sink"], rel.schema_name)
    if sink is not None:
        sink.extra["hidden_for"] = rel.id


def sink_into_options(into: Any, options: dict[str, str]) -> dict[str, str]:
    """Options of `CREATE SINK ... INTO <engine table>`: the table's, then the sink's own."""
    ice = into.extra.get("iceberg")
    if not ice:
        return options
    out = {k: v for k, v in ice["options"].items() if k != "connection"}
    out.setdefault("commit_checkpoint_interval", "60")
    if into.row_id_index is None:
        out.update({"type": "upsert", "primary_key": ",".join(ice["key"])})
    else:
        out.update({"type": "append-only", "force_append_only": "true"})
    out.update(options)
    return out


def drop_engine_table(rel: Any) -> None:
    ice = rel.extra.get("iceberg")
    if ice:
        _connector().drop_table(ice["options"])


# -- CREATE SOURCE ... WITH (connector = 'iceberg') -----------------------------------------
def create_iceberg_source(session: Any, st: Any, name: str, schema: str | None) -> Any:
    """An external Iceberg table for ad-hoc SELECT; columns come from the table itself."""
    from engine.api import Notice, QueryResult
    from engine.catalog import Relation, RelationKind
    from engine.catalog.privileges import session_owner
    from engine.handlers.connection import expand_connection

    clauses = st.args.get("clauses")
    options = {k.lower(): v for k, v in (clauses.options if clauses is not None else {}).items()}
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        options = expand_connection(cat, options)
        cat.check_schema(name, schema)
        if cat.find(name, schema) is not None:
            if st.ast is not None and st.ast.args.get("exists"):
                return QueryResult(
                    "CREATE_SOURCE", notices=[Notice(f'relation "{name}" already exists, skipping')]
                )
            cat.check_free(name, schema)
        fields = _connector().source_fields(options)
        rel = Relation(
            id=cat.allocate_relation_id(),
            name=name,
            kind=RelationKind.SOURCE,
            fields=fields,
            pk=[],
            definition=st.sql.strip(),
            owner=session_owner(session),
            schema_name=schema or "public",
            append_only=True,
            options=options,
            extra={
                "iceberg_source": {"options": options},
                "source": {"connector": "iceberg", "format": None, "encode": None, "include": []},
            },
        )
        cat.add(rel)
        rt.barrier(force=True)  # persists the catalog
    return QueryResult("CREATE_SOURCE")


# -- reads --------------------------------------------------------------------------------
def is_iceberg_relation(rel: Any) -> bool:
    return bool(rel.extra.get("iceberg")) or bool(rel.extra.get("iceberg_source"))


def _read_options(rel: Any) -> dict[str, str]:
    ice = rel.extra.get("iceberg") or rel.extra.get("iceberg_source")
    return dict(ice["options"])


def _pushdown(plan: Any, rel_id: int) -> tuple[set[int] | None, list[tuple[str, str, Any]]]:
    """Columns needed above the scan of `rel_id` and the `col op literal` conjuncts over it."""
    from engine.expr.core import Func, InputRef, Literal
    from engine.plan.logical import Filter, Project, Scan

    parents: dict[int, Any] = {}
    stack = [plan]
    scans = []
    while stack:
        n = stack.pop()
        for c in n.inputs():
            parents[id(c)] = n
            stack.append(c)
        if isinstance(n, Scan) and n.relation.id == rel_id:
            scans.append(n)
    if len(scans) != 1:
        return None, []
    scan = scans[0]
    fields = scan.relation.fields
    preds: list[tuple[str, str, Any]] = []
    needed: set[int] = set()
    p = parents.get(id(scan))
    if isinstance(p, Filter):
        needed |= p.predicate.input_refs()
        conj = [p.predicate]
        while conj:
            e = conj.pop()
            if isinstance(e, Func) and e.op == "AND":
                conj.extend(e.args)
            elif isinstance(e, Func) and e.op in ("=", "<>", "<", "<=", ">", ">="):
                a, b = e.args
                op = e.op
                if isinstance(b, InputRef) and isinstance(a, Literal):
                    a, b = b, a
                    op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
                if isinstance(a, InputRef) and isinstance(b, Literal) and a.type == b.type:
                    preds.append((fields[a.index].name, op, b.value))
        p = parents.get(id(p))
    if isinstance(p, Project):
        for e in p.exprs:
            needed |= e.input_refs()
        return needed, preds
    return None, preds


def reads_local(rel: Any, time_travel: dict[str, tuple[str, str]] | None) -> bool:
    """True for an engine table whose reads take the Swell table's committed rows: it
    started empty, no sink ever wrote INTO it (sinks write the Iceberg table directly), and
    the query does not travel in time. Those rows are the Iceberg table's rows plus the
    ones still staged for the next Iceberg commit, so a read after FLUSH sees every write
    without committing Iceberg snapshots more often."""
    ice = rel.extra.get("iceberg")
    if not ice or not ice.get(READS_LOCAL) or rel.kind.value != "table":
        return False
    return rel.name not in (time_travel or {})


def no_local_reads(into: Any) -> None:
    """`CREATE SINK ... INTO` an engine table: its rows bypass the Swell table, so reads go
    to Iceberg from now on (forever: the Iceberg table keeps the sunk rows)."""
    ice = into.extra.get("iceberg")
    if ice:
        ice[READS_LOCAL] = False


def iceberg_snapshots(
    plan: Any, rels: list[Any], time_travel: dict[str, tuple[str, str]] | None
) -> dict[int, pa.Table]:
    """Committed Iceberg rows of each Iceberg-backed relation the plan scans (engine tables
    that `reads_local` are read from the runtime instead)."""
    out: dict[int, pa.Table] = {}
    tt = time_travel or {}
    for rel in rels:
        if not is_iceberg_relation(rel) or reads_local(rel, time_travel):
            continue
        needed, preds = _pushdown(plan, rel.id)
        snapshot_id, as_of = _travel(tt.get(rel.name))
        out[rel.id] = _connector().read(
            _read_options(rel), rel.fields, needed, preds, snapshot_id, as_of
        )
    for name in tt:
        if not any(r.name == name and is_iceberg_relation(r) for r in rels):
            raise not_supported(
                f'time travel on "{name}"',
                hint="FOR SYSTEM_VERSION/SYSTEM_TIME AS OF works on Iceberg tables and sources.",
            )
    return out


def _travel(spec: tuple[str, str] | None) -> tuple[int | None, datetime | None]:
    if spec is None:
        return None, None
    kind, value = spec
    if kind == "VERSION":
        return int(value), None
    v = value.strip()
    try:
        ts = datetime.fromisoformat(v.replace(" ", "T", 1) if "T" not in v else v)
    except ValueError as e:
        raise InvalidParameterValue(f'invalid timestamp "{v}" in FOR SYSTEM_TIME AS OF') from e
    if ts.tzinfo is None:
        from datetime import UTC

        ts = ts.replace(tzinfo=UTC)
    return None, ts
