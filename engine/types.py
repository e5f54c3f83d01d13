"""SQL types: the catalog's view of a column type, its Arrow storage and its PostgreSQL identity.

Every column in the engine has a `SqlType`. The Arrow type says how values are stored in
chunks; the `oid`/`typlen`/`pg_name` say how pgwire and the system catalogs present them.

Python values (rows, parameters, constants) use one representation per type:

| SqlType     | Arrow                         | Python value                       |
|-------------|-------------------------------|------------------------------------|
| boolean     | bool                          | bool                               |
| smallint    | int16                         | int                                |
| integer     | int32                         | int                                |
| bigint      | int64                         | int                                |
| real        | float32                       | float                              |
| double      | float64                       | float                              |
| numeric     | decimal128(38, 10)            | decimal.Decimal                    |
| varchar     | string                        | str                                |
| bytea       | binary                        | bytes                              |
| date        | date32                        | datetime.date                      |
| time        | time64[us]                    | datetime.time                      |
| timestamp   | timestamp[us]                 | datetime.datetime (naive)          |
| timestamptz | timestamp[us, tz=UTC]         | datetime.datetime (aware, UTC)     |
| interval    | month_day_nano_interval       | pyarrow.MonthDayNano               |
| jsonb       | string (canonical JSON text)  | str (canonical JSON text)          |
| T[]         | list<T>                       | list                               |

numeric NaN / Infinity / -Infinity live in the decimal128 column as int128 values beyond
any finite numeric (engine.numeric); their Python values are Decimal('NaN') etc.

jsonb is stored as canonical text (see `engine.expr` for the canonical form) so equality,
grouping and hashing on jsonb work on the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import pyarrow as pa

NUMERIC_PRECISION = 38
NUMERIC_SCALE = 10


class TypeKind(Enum):
    BOOLEAN = "boolean"
    SMALLINT = "smallint"
    INT = "integer"
    BIGINT = "bigint"
    REAL = "real"
    DOUBLE = "double precision"
    NUMERIC = "numeric"
    VARCHAR = "character varying"
    BYTEA = "bytea"
    DATE = "date"
    TIME = "time without time zone"
    TIMESTAMP = "timestamp without time zone"
    TIMESTAMPTZ = "timestamp with time zone"
    INTERVAL = "interval"
    JSONB = "jsonb"
    LIST = "list"
    UNKNOWN = "unknown"  # untyped NULL literal or parameter not yet inferred


# kind -> (oid, array oid, typlen, pg typname, RisingWave display name)
_PG: dict[TypeKind, tuple[int, int, int, str, str]] = {
    TypeKind.BOOLEAN: (16, 1000, 1, "bool", "boolean"),
    TypeKind.SMALLINT: (21, 1005, 2, "int2", "smallint"),
    TypeKind.INT: (23, 1007, 4, "int4", "integer"),
    TypeKind.BIGINT: (20, 1016, 8, "int8", "bigint"),
    TypeKind.REAL: (700, 1021, 4, "float4", "real"),
    TypeKind.DOUBLE: (701, 1022, 8, "float8", "double precision"),
    TypeKind.NUMERIC: (1700, 1231, -1, "numeric", "numeric"),
    TypeKind.VARCHAR: (1043, 1015, -1, "varchar", "character varying"),
    TypeKind.BYTEA: (17, 1001, -1, "bytea", "bytea"),
    TypeKind.DATE: (1082, 1182, 4, "date", "date"),
    TypeKind.TIME: (1083, 1183, 8, "time", "time without time zone"),
    TypeKind.TIMESTAMP: (1114, 1115, 8, "timestamp", "timestamp without time zone"),
    TypeKind.TIMESTAMPTZ: (1184, 1185, 8, "timestamptz", "timestamp with time zone"),
    TypeKind.INTERVAL: (1186, 1187, 16, "interval", "interval"),
    TypeKind.JSONB: (3802, 3807, -1, "jsonb", "jsonb"),
    TypeKind.UNKNOWN: (705, 0, -2, "unknown", "unknown"),
}


@dataclass(frozen=True, slots=True)
class SqlType:
    """A SQL column type. `elem` is set only for LIST (SQL arrays).

    `pg` names a PostgreSQL catalog type stored like `kind` (`oid` as integer, `name` and
    `"char"` as varchar, `int2vector` as smallint[]; see `PG_ALIASES`). It changes only the
    identity clients see (OID, typname); it takes no part in equality, so the engine
    treats an `oid` column exactly like an integer one.
    """

    kind: TypeKind
    elem: SqlType | None = None
    pg: str | None = field(default=None, compare=False, repr=False)
    # type modifier: varchar(n) -> (n,); numeric(p, s) -> (p, s); a numeric whose
    # display scale is known but not its precision (round(x, 2), 1.50) -> (None, s).
    # Like `pg`, it takes no part in equality: the engine computes with the base type,
    # casts/assignments enforce the modifier (engine/expr/typmod.py), output honours it.
    mod: tuple[int | None, ...] | None = field(default=None, compare=False, repr=False)

    # -- identity ------------------------------------------------------------------
    @property
    def oid(self) -> int:
        if self.pg is not None:
            return PG_ALIASES[self.pg][0]
        if self.kind is TypeKind.LIST:
            assert self.elem is not None
            return self.elem.array_oid
        return _PG[self.kind][0]

    @property
    def innermost(self) -> SqlType:
        """The element type of an array of arrays (of arrays...), else the type itself:
        PostgreSQL has one array type per element type, whatever the dimensions."""
        t = self
        while t.kind is TypeKind.LIST:
            assert t.elem is not None
            t = t.elem
        return t

    @property
    def array_oid(self) -> int:
        """The OID of the array type whose elements are this type (0 if none)."""
        if self.pg is not None:
            return PG_ALIASES[self.pg][1]
        if self.kind is TypeKind.LIST:  # PostgreSQL's arrays of arrays are the same type
            return self.innermost.array_oid
        return _PG[self.kind][1]

    @property
    def typlen(self) -> int:
        if self.pg is not None:
            return PG_ALIASES[self.pg][2]
        if self.kind is TypeKind.LIST:
            return -1
        return _PG[self.kind][2]

    @property
    def pg_name(self) -> str:
        """pg_type.typname (`int4`, `_int4` for arrays)."""
        if self.pg is not None:
            return PG_ALIASES[self.pg][3]
        if self.kind is TypeKind.LIST:
            assert self.elem is not None
            return "_" + self.elem.pg_name
        return _PG[self.kind][3]

    @property
    def display(self) -> str:
        """The name users see in DESCRIBE and format_type (`integer`, `integer[]`)."""
        if self.pg is not None:
            return PG_ALIASES[self.pg][4]
        if self.kind is TypeKind.LIST:
            assert self.elem is not None
            return self.elem.display + "[]"
        return _PG[self.kind][4]

    def __str__(self) -> str:
        return self.display

    # -- modifiers -----------------------------------------------------------------
    @property
    def scale(self) -> int | None:
        """Digits a numeric prints after the point (None: as computed, trailing zeros cut)."""
        if self.kind is TypeKind.NUMERIC and self.mod is not None:
            return self.mod[1]
        return None

    @property
    def max_length(self) -> int | None:
        """The n of varchar(n) (None: unbounded)."""
        if self.kind is TypeKind.VARCHAR and self.mod is not None:
            return self.mod[0]
        return None

    def with_mod(self, mod: tuple[int | None, ...] | None) -> SqlType:
        return SqlType(self.kind, self.elem, self.pg, mod)

    @property
    def display_mod(self) -> str:
        """The name with its modifier, as PostgreSQL's format_type prints it in errors."""
        if self.max_length is not None:
            return f"{self.display}({self.max_length})"
        if self.mod is not None and self.kind is TypeKind.NUMERIC and self.mod[0] is not None:
            return f"numeric({self.mod[0]},{self.mod[1]})"
        return self.display

    # -- storage -------------------------------------------------------------------
    @property
    def arrow(self) -> pa.DataType:
        k = self.kind
        if k is TypeKind.LIST:
            assert self.elem is not None
            return pa.list_(self.elem.arrow)
        return _ARROW[k]

    # -- classification ------------------------------------------------------------
    @property
    def is_integer(self) -> bool:
        return self.kind in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)

    @property
    def is_float(self) -> bool:
        return self.kind in (TypeKind.REAL, TypeKind.DOUBLE)

    @property
    def is_numeric(self) -> bool:
        """Any number type (integer, float, numeric)."""
        return self.is_integer or self.is_float or self.kind is TypeKind.NUMERIC

    @property
    def is_temporal(self) -> bool:
        return self.kind in (
            TypeKind.DATE,
            TypeKind.TIME,
            TypeKind.TIMESTAMP,
            TypeKind.TIMESTAMPTZ,
            TypeKind.INTERVAL,
        )

    @property
    def is_string(self) -> bool:
        return self.kind is TypeKind.VARCHAR


_ARROW: dict[TypeKind, pa.DataType] = {
    TypeKind.BOOLEAN: pa.bool_(),
    TypeKind.SMALLINT: pa.int16(),
    TypeKind.INT: pa.int32(),
    TypeKind.BIGINT: pa.int64(),
    TypeKind.REAL: pa.float32(),
    TypeKind.DOUBLE: pa.float64(),
    TypeKind.NUMERIC: pa.decimal128(NUMERIC_PRECISION, NUMERIC_SCALE),
    TypeKind.VARCHAR: pa.string(),
    TypeKind.BYTEA: pa.binary(),
    TypeKind.DATE: pa.date32(),
    TypeKind.TIME: pa.time64("us"),
    TypeKind.TIMESTAMP: pa.timestamp("us"),
    TypeKind.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    TypeKind.INTERVAL: pa.month_day_nano_interval(),
    TypeKind.JSONB: pa.string(),
    TypeKind.UNKNOWN: pa.null(),
}

# PostgreSQL catalog types stored as an engine kind:
# name -> (oid, array oid, typlen, typname, format_type name)
PG_ALIASES: dict[str, tuple[int, int, int, str, str]] = {
    "oid": (26, 1028, 4, "oid", "oid"),
    "regproc": (24, 1008, 4, "regproc", "regproc"),
    "regclass": (2205, 2210, 4, "regclass", "regclass"),
    "regtype": (2206, 2211, 4, "regtype", "regtype"),
    "regnamespace": (4089, 4090, 4, "regnamespace", "regnamespace"),
    "regrole": (4096, 4097, 4, "regrole", "regrole"),
    "xid": (28, 1011, 4, "xid", "xid"),
    "name": (19, 1003, 64, "name", "name"),
    "char": (18, 1002, 1, "char", '"char"'),
    "text": (25, 1009, -1, "text", "text"),
    "pg_node_tree": (194, 0, -1, "pg_node_tree", "pg_node_tree"),
    "aclitem": (1033, 1034, 12, "aclitem", "aclitem"),
    "int2vector": (22, 1006, -1, "int2vector", "int2vector"),
    "oidvector": (30, 1013, -1, "oidvector", "oidvector"),
    "_oid": (1028, 0, -1, "_oid", "oid[]"),
    "_text": (1009, 0, -1, "_text", "text[]"),
    "_name": (1003, 0, -1, "_name", "name[]"),
    "_char": (1002, 0, -1, "_char", '"char"[]'),
    "_aclitem": (1034, 0, -1, "_aclitem", "aclitem[]"),
    "_int2": (1005, 0, -1, "_int2", "smallint[]"),
}

BOOLEAN = SqlType(TypeKind.BOOLEAN)
SMALLINT = SqlType(TypeKind.SMALLINT)
INT = SqlType(TypeKind.INT)
BIGINT = SqlType(TypeKind.BIGINT)
REAL = SqlType(TypeKind.REAL)
DOUBLE = SqlType(TypeKind.DOUBLE)
NUMERIC = SqlType(TypeKind.NUMERIC)
VARCHAR = SqlType(TypeKind.VARCHAR)
BYTEA = SqlType(TypeKind.BYTEA)
DATE = SqlType(TypeKind.DATE)
TIME = SqlType(TypeKind.TIME)
TIMESTAMP = SqlType(TypeKind.TIMESTAMP)
TIMESTAMPTZ = SqlType(TypeKind.TIMESTAMPTZ)
INTERVAL = SqlType(TypeKind.INTERVAL)
JSONB = SqlType(TypeKind.JSONB)
UNKNOWN = SqlType(TypeKind.UNKNOWN)


def list_of(elem: SqlType) -> SqlType:
    return SqlType(TypeKind.LIST, elem)


def pg_alias(base: SqlType, name: str) -> SqlType:
    """`base` presented to clients as PostgreSQL type `name` (a key of `PG_ALIASES`)."""
    return SqlType(base.kind, base.elem, name)


# Names accepted in DDL and casts (lower-case, whitespace-normalised).
TYPE_NAMES: dict[str, SqlType] = {
    "boolean": BOOLEAN,
    "bool": BOOLEAN,
    "smallint": SMALLINT,
    "int2": SMALLINT,
    "integer": INT,
    "int": INT,
    "int4": INT,
    "bigint": BIGINT,
    "int8": BIGINT,
    "serial": INT,
    "bigserial": BIGINT,
    "real": REAL,
    "float4": REAL,
    "double precision": DOUBLE,
    "double": DOUBLE,
    "float8": DOUBLE,
    "float": DOUBLE,
    "numeric": NUMERIC,
    "decimal": NUMERIC,
    "varchar": VARCHAR,
    "character varying": VARCHAR,
    "text": VARCHAR,
    "string": VARCHAR,
    "char": VARCHAR,
    "character": VARCHAR,
    "bpchar": VARCHAR,
    "name": VARCHAR,
    "bytea": BYTEA,
    "date": DATE,
    "time": TIME,
    "time without time zone": TIME,
    "timestamp": TIMESTAMP,
    "timestamp without time zone": TIMESTAMP,
    "timestamptz": TIMESTAMPTZ,
    "timestamp with time zone": TIMESTAMPTZ,
    "interval": INTERVAL,
    "jsonb": JSONB,
    "json": JSONB,
}

OID_TO_TYPE: dict[int, SqlType] = {}
for _t in (
    BOOLEAN,
    SMALLINT,
    INT,
    BIGINT,
    REAL,
    DOUBLE,
    NUMERIC,
    VARCHAR,
    BYTEA,
    DATE,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    INTERVAL,
    JSONB,
):
    OID_TO_TYPE[_t.oid] = _t
    OID_TO_TYPE[list_of(_t).oid] = list_of(_t)
OID_TO_TYPE[25] = VARCHAR  # text
OID_TO_TYPE[1042] = VARCHAR  # bpchar
OID_TO_TYPE[19] = VARCHAR  # name
OID_TO_TYPE[114] = JSONB  # json
OID_TO_TYPE[26] = SqlType(TypeKind.INT, None, "oid")
OID_TO_TYPE[1028] = SqlType(TypeKind.LIST, SqlType(TypeKind.INT, None, "oid"), "_oid")
OID_TO_TYPE[1009] = list_of(VARCHAR)  # text[]


def type_from_oid(oid: int) -> SqlType | None:
    """The SqlType for a client-declared parameter OID; None for 0 (infer) or unknown OIDs."""
    if oid == 0:
        return None
    return OID_TO_TYPE.get(oid)


@dataclass(frozen=True, slots=True)
class Field:
    """A named, typed column of a relation or a result."""

    name: str
    type: SqlType
    hidden: bool = False  # hidden columns (e.g. `_row_id`) are left out of `SELECT *`
    # (table OID, attnum) of the relation column a result column reads unchanged, for
    # pgwire's RowDescription; not part of equality
    origin: tuple[int, int] | None = field(default=None, compare=False)


Schema = list[Field]


def arrow_schema(fields: list[Field]) -> pa.Schema:
    return pa.schema([pa.field(f.name, f.type.arrow) for f in fields])
