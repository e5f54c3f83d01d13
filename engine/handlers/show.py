"""SHOW TABLES / MATERIALIZED VIEWS / ..., DESCRIBE, SHOW CREATE, SHOW DATABASES/SCHEMAS."""

from __future__ import annotations

import fnmatch
from typing import Any

from engine.api import QueryResult
from engine.catalog import RelationKind
from engine.catalog.databases import database_names
from engine.catalog.privileges import shown_definition
from engine.errors import EngineError
from engine.sql.parser import Statement
from engine.types import BOOLEAN, VARCHAR, Field


def run(session: Any, st: Statement) -> QueryResult:
    cat = session.db.catalog
    k = st.kind
    if k == "show_objects":
        kind = RelationKind(st.args["kind"])
        schema = st.args.get("schema") or "public"
        names = sorted(
            r.name
            for r in cat.visible()
            if r.kind is kind and r.schema_name == schema and not r.extra.get("index")
        )
        like = st.args.get("like")
        if like is not None:
            pat = like.replace("%", "*").replace("_", "?")
            names = [n for n in names if fnmatch.fnmatchcase(n, pat)]
        return QueryResult(f"SHOW {len(names)}", [Field("Name", VARCHAR)], [(n,) for n in names])
    if k == "describe":
        name, schema = _split_name(st.args.get("name") or (st.ast.this.name if st.ast else ""))
        rel = cat.get(name, schema)
        notes = rel.extra.get("column_comments") or {}  # COMMENT ON COLUMN
        rows: list[tuple[Any, ...]] = [
            (f.name, f.type.display, f.hidden, notes.get(f.name)) for f in rel.fields
        ]
        if rel.pk and rel.kind in (RelationKind.TABLE, RelationKind.MATERIALIZED_VIEW):
            rows.append(("primary key", ", ".join(rel.fields[i].name for i in rel.pk), None, None))
            rows.append(
                ("distribution key", ", ".join(rel.fields[i].name for i in rel.pk), None, None)
            )
        rows.append(("table description", rel.extra.get("comment"), None, None))
        return QueryResult(
            f"DESCRIBE {len(rows)}",
            [
                Field("Name", VARCHAR),
                Field("Type", VARCHAR),
                Field("Is Hidden", BOOLEAN),
                Field("Description", VARCHAR),
            ],
            rows,
        )
    if k == "show_create":
        name, schema = _split_name(st.args["name"])
        kind = RelationKind(st.args["kind"])
        rel = cat.get_kind(name, kind, schema)
        return QueryResult(
            "SHOW_CREATE",
            [Field("Name", VARCHAR), Field("Create Sql", VARCHAR)],
            [(f"{rel.schema_name}.{rel.name}", shown_definition(cat, session.user, rel))],
        )
    if k == "show_special":
        what = st.args["what"]
        if what == "databases":
            rows = [(n,) for n in database_names(session.db.catalog)]
            return QueryResult(f"SHOW {len(rows)}", [Field("Name", VARCHAR)], rows)
        if what == "schemas":
            cat = session.db.catalog
            found = {"information_schema", "pg_catalog", "public", "rw_catalog"}
            found |= {r.schema_name for r in cat.visible()}
            found |= set(cat.schemas)  # the current database's
            rows = [(n,) for n in sorted(found)]
            return QueryResult(f"SHOW {len(rows)}", [Field("Name", VARCHAR)], rows)
        if what == "secrets":  # the current database's, names only (RisingWave's SHOW SECRETS)
            rows = [(n,) for n in sorted(session.db.catalog.secrets)]
            return QueryResult(f"SHOW {len(rows)}", [Field("Name", VARCHAR)], rows)
        if what == "parameters":
            rt = session.db.runtime
            rows = [
                ("barrier_interval_ms", str(int(rt.barrier_interval * 1000)), True),
                ("checkpoint_frequency", "1", True),
                ("data_directory", str(session.db.data_dir), False),
                ("max_heartbeat_interval_secs", f"{rt.worker_timeout:g}", False),
            ]
            return QueryResult(
                f"SHOW {len(rows)}",
                [Field("Name", VARCHAR), Field("Value", VARCHAR), Field("Mutable", BOOLEAN)],
                rows,
            )
        if what == "all":
            return session._show("all")
        if what == "jobs":
            from engine.handlers.jobs import show_jobs

            return show_jobs(session)
    raise EngineError(f"unsupported SHOW {st.sql}")


def _split_name(raw: str) -> tuple[str, str | None]:
    raw = raw.strip().rstrip(";").strip()
    parts = [p.strip().strip('"') for p in raw.split(".")]
    if len(parts) == 2:
        return parts[1] if raw.split(".")[1].strip().startswith('"') else parts[1].lower(), parts[0]
    p = parts[0]
    return (p if raw.startswith('"') else p.lower()), None
