"""Iceberg options (RisingWave's names) -> a validated config -> a pyiceberg catalog.

`IcebergConfig.parse(options)` reads the WITH (...) options of a sink, source, connection
or `ENGINE = iceberg` table (a connection's options are merged underneath by the caller)
and checks the mistakes users actually make, at CREATE time, each with a message naming
the option and what to put there:

* `s3.region` missing while the data lives on S3 (the seed's "region is missing");
* `warehouse.path` a physical location where the catalog wants a logical warehouse name
  (`rest`), or a logical name where a location is needed (`storage`, `jdbc`, `sql`);
* an unknown `catalog.type`, a `jdbc`/`sql`/`rest` catalog without `catalog.uri`.

`load_catalog(config)` then builds the catalog: `storage` -> our Hadoop-style
`StorageCatalog`, `rest` -> pyiceberg's REST client (after a bounded probe of
`<uri>/v1/config`, so a URI that does not answer fails in seconds with a clear message),
`jdbc`/`sql` -> pyiceberg's `SqlCatalog` (JDBC URLs translated to SQLAlchemy URLs).
Catalogs are cached per option set: sinks, tables and SELECTs share one client.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

from engine.errors import ConnectorError, InvalidParameterValue

CATALOG_TYPES = ("storage", "rest", "jdbc", "sql")
# options a CONNECTION may hold (everything about where the catalog and files are)
CONNECTION_KEYS = (
    "catalog.type",
    "catalog.uri",
    "catalog.name",
    "catalog.credential",
    "catalog.token",
    "catalog.jdbc.user",
    "catalog.jdbc.password",
    "warehouse.path",
    "s3.endpoint",
    "s3.region",
    "s3.access.key",
    "s3.secret.key",
    "s3.path.style.access",
    "hosted_catalog",
)


def _truthy(v: str | None, default: bool = False) -> bool:
    if v is None:
        return default
    return v.strip().lower() in ("true", "t", "1", "yes", "on")


def _is_location(path: str) -> bool:
    return "://" in path or path.startswith("/")


@dataclass
class IcebergConfig:
    catalog_type: str
    catalog_name: str
    warehouse: str | None
    uri: str | None
    credential: str | None = None
    token: str | None = None
    jdbc_user: str | None = None
    jdbc_password: str | None = None
    s3: dict[str, str] = field(default_factory=dict)  # pyiceberg FileIO property names
    database: str | None = None
    table: str | None = None

    @classmethod
    def parse(cls, options: dict[str, str], *, need_table: bool = True) -> IcebergConfig:
        o = {k.lower(): v for k, v in options.items()}
        ctype = (o.get("catalog.type") or "storage").lower()
        if ctype not in CATALOG_TYPES:
            raise InvalidParameterValue(
                f"unsupported catalog.type '{ctype}'",
                hint="Set catalog.type to 'storage', 'rest', 'jdbc' or 'sql'.",
            )
        wh = o.get("warehouse.path")
        uri = o.get("catalog.uri")
        if ctype in ("rest", "jdbc", "sql") and not uri:
            hint = {
                "rest": "Set catalog.uri to the REST API root, e.g. "
                "'http://lakekeeper:8181/catalog'.",
                "jdbc": "Set catalog.uri to e.g. 'jdbc:postgresql://host:5432/db' "
                "or 'jdbc:sqlite:/path/catalog.db'.",
                "sql": "Set catalog.uri to a SQLAlchemy URL, e.g. 'sqlite:////path/catalog.db'.",
            }[ctype]
            raise InvalidParameterValue(f"catalog.type '{ctype}' requires catalog.uri", hint=hint)
        if ctype == "storage":
            if not wh:
                raise InvalidParameterValue(
                    "catalog.type 'storage' requires warehouse.path",
                    hint="Set warehouse.path to the warehouse location, "
                    "e.g. 's3://bucket/warehouse' or '/data/warehouse'.",
                )
            if not _is_location(wh):
                raise InvalidParameterValue(
                    f"warehouse.path '{wh}' is a name, but catalog.type 'storage' keeps tables "
                    "on the warehouse path itself",
                    hint="Set warehouse.path to a location such as 's3://bucket/warehouse', or "
                    "use catalog.type = 'rest' with catalog.uri for a named warehouse.",
                )
        if ctype == "rest" and wh and _is_location(wh):
            raise InvalidParameterValue(
                f"warehouse.path '{wh}' is a storage location, but a REST catalog expects the "
                "logical name of its warehouse",
                hint="Set warehouse.path to the warehouse name registered in the catalog "
                "(e.g. 'demo'), not its physical path.",
            )
        if ctype in ("jdbc", "sql") and wh and not _is_location(wh):
            raise InvalidParameterValue(
                f"warehouse.path '{wh}' is a name, but catalog.type '{ctype}' needs the "
                "location where table files are written",
                hint="Set warehouse.path to e.g. 's3://bucket/warehouse' or '/data/warehouse'.",
            )
        s3: dict[str, str] = {}
        if o.get("s3.endpoint"):
            s3["s3.endpoint"] = o["s3.endpoint"]
        if o.get("s3.access.key"):
            s3["s3.access-key-id"] = o["s3.access.key"]
        if o.get("s3.secret.key"):
            s3["s3.secret-access-key"] = o["s3.secret.key"]
        if o.get("s3.region"):
            s3["s3.region"] = o["s3.region"]
        # path-style unless the user asks for virtual-hosted addressing
        s3["s3.force-virtual-addressing"] = (
            "false" if _truthy(o.get("s3.path.style.access"), True) else "true"
        )
        on_s3 = bool(o.get("s3.endpoint") or o.get("s3.access.key")) or bool(
            wh and wh.lower().startswith(("s3://", "s3a://", "s3n://"))
        )
        if on_s3 and not o.get("s3.region"):
            raise InvalidParameterValue(
                "s3.region is missing",
                hint="Set s3.region (any value such as 'us-east-1' works for MinIO and other "
                "S3-compatible stores; the S3 client refuses to sign requests without it).",
            )
        cfg = cls(
            catalog_type=ctype,
            catalog_name=o.get("catalog.name") or "swell",
            warehouse=wh,
            uri=uri,
            credential=o.get("catalog.credential"),
            token=o.get("catalog.token"),
            jdbc_user=o.get("catalog.jdbc.user"),
            jdbc_password=o.get("catalog.jdbc.password"),
            s3=s3 if on_s3 else {},
            database=o.get("database.name"),
            table=o.get("table.name"),
        )
        if need_table:
            if not cfg.database:
                raise InvalidParameterValue(
                    "database.name is required",
                    hint="Set database.name to the Iceberg namespace of the table.",
                )
            if not cfg.table:
                raise InvalidParameterValue(
                    "table.name is required", hint="Set table.name to the Iceberg table name."
                )
        return cfg

    def key(self) -> tuple[Any, ...]:
        return (
            self.catalog_type,
            self.catalog_name,
            self.warehouse,
            self.uri,
            self.credential,
            self.token,
            self.jdbc_user,
            self.jdbc_password,
            tuple(sorted(self.s3.items())),
        )

    @property
    def identifier(self) -> tuple[str, ...]:
        assert self.database and self.table
        return (*self.database.split("."), self.table)


def jdbc_to_sqlalchemy(uri: str, user: str | None, password: str | None) -> str:
    """`jdbc:postgresql://h:5432/db?user=u&password=p` -> `postgresql+psycopg://u:p@h:5432/db`."""
    if not uri.startswith("jdbc:"):
        return uri  # already a SQLAlchemy URL
    rest = uri[5:]
    if rest.startswith("sqlite:"):
        path = rest[len("sqlite:") :]
        if path.startswith("//"):
            path = path[2:]
        return f"sqlite:///{path}" if path.startswith("/") else f"sqlite:///{os.path.abspath(path)}"
    if rest.startswith(("postgresql:", "postgres:")):
        u = urlparse(rest)
        q = parse_qs(u.query)
        user = user or (q.get("user") or [None])[0]
        password = password or (q.get("password") or [None])[0]
        auth = ""
        if user:
            auth = quote(user, safe="")
            if password:
                auth += ":" + quote(password, safe="")
            auth += "@"
        return f"postgresql+psycopg://{auth}{u.netloc}{u.path}"
    raise InvalidParameterValue(
        f"unsupported JDBC URL '{uri.split('?')[0]}'",
        hint="Use jdbc:postgresql://host:port/db or jdbc:sqlite:/path/catalog.db.",
    )


_cache: dict[tuple[Any, ...], Any] = {}
_cache_lock = threading.Lock()


def load_catalog(cfg: IcebergConfig) -> Any:
    """The pyiceberg catalog for `cfg` (cached); raises ConnectorError naming the option."""
    k = cfg.key()
    with _cache_lock:
        cat = _cache.get(k)
    if cat is not None:
        return cat
    cat = _build(cfg)
    with _cache_lock:
        _cache[k] = cat
    return cat


def _build(cfg: IcebergConfig) -> Any:
    props: dict[str, str] = dict(cfg.s3)
    if cfg.catalog_type == "storage":
        from connectors.iceberg.storage_catalog import StorageCatalog

        assert cfg.warehouse
        wh = cfg.warehouse
        if wh.startswith("/"):
            os.makedirs(wh, exist_ok=True)
        try:
            return StorageCatalog(cfg.catalog_name, warehouse=wh, **props)
        except Exception as e:
            raise ConnectorError(f"cannot open warehouse.path '{wh}': {e}") from e
    if cfg.catalog_type in ("jdbc", "sql"):
        from pyiceberg.catalog.sql import SqlCatalog

        assert cfg.uri
        url = jdbc_to_sqlalchemy(cfg.uri, cfg.jdbc_user, cfg.jdbc_password)
        if cfg.warehouse:
            props["warehouse"] = cfg.warehouse
        try:
            return SqlCatalog(cfg.catalog_name, uri=url, **props)
        except Exception as e:
            raise ConnectorError(
                f"cannot connect to the catalog at catalog.uri '{cfg.uri.split('?')[0]}': "
                f"{_short(e)}",
                hint="Check catalog.uri (host, port, database) and the catalog credentials.",
            ) from e
    return _build_rest(cfg, props)


def _short(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0][:300] if s else type(e).__name__


def _build_rest(cfg: IcebergConfig, props: dict[str, str]) -> Any:
    import requests
    from pyiceberg.catalog.rest import RestCatalog

    assert cfg.uri
    base = cfg.uri.rstrip("/")
    headers = {"Authorization": f"Bearer {cfg.token}"} if cfg.token else {}
    params = {"warehouse": cfg.warehouse} if cfg.warehouse else {}
    try:
        r = requests.get(f"{base}/v1/config", params=params, headers=headers, timeout=5)
    except requests.RequestException as e:
        raise ConnectorError(
            f"the Iceberg REST catalog at catalog.uri '{cfg.uri}' does not answer: "
            f"{type(e).__name__}",
            hint="Check the host and port of catalog.uri; it must be reachable from Swell.",
        ) from e
    if r.status_code == 404:
        raise ConnectorError(
            f"catalog.uri '{cfg.uri}' is not an Iceberg REST catalog root "
            f"(GET {base}/v1/config answered 404)",
            hint="Point catalog.uri at the REST API root, e.g. 'http://lakekeeper:8181/catalog'.",
        )
    if r.status_code in (401, 403) and not (cfg.token or cfg.credential):
        raise ConnectorError(
            f"the Iceberg REST catalog at catalog.uri '{cfg.uri}' requires authentication",
            hint="Set catalog.token (a bearer token) or catalog.credential ('id:secret').",
        )
    if cfg.token:
        props["token"] = cfg.token
    if cfg.credential:
        props["credential"] = cfg.credential
    if cfg.warehouse:
        props["warehouse"] = cfg.warehouse
        # Servers that map a warehouse name to a URL prefix send it back as an override
        # (Lakekeeper does); for servers that do not, the name is the prefix.
        props["prefix"] = cfg.warehouse
    try:
        return RestCatalog(cfg.catalog_name, uri=base, **props)
    except Exception as e:
        raise ConnectorError(
            f"cannot use the Iceberg REST catalog at catalog.uri '{cfg.uri}': {_short(e)}",
            hint="Check catalog.uri, warehouse.path (the warehouse name) and the credentials.",
        ) from e
