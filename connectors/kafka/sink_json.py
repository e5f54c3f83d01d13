"""JSON encoding of sink rows the way RisingWave's Kafka sink writes them, a chunk at a time.

Per column type (RisingWave's `datum_to_json_object` defaults):

| type | JSON |
|---|---|
| boolean, smallint, integer, bigint | number / true / false |
| real, double | number (NaN and infinities: null) |
| numeric | string, the value's text without trailing zeros (`"1.1"`) |
| varchar | string |
| bytea | base64 string without padding |
| date | number: days from 0001-01-01 (day 1) |
| time | number: milliseconds since midnight (whole seconds) |
| timestamp | string `2023-11-11 18:30:09.453000` |
| timestamptz | string `2023-11-11T18:30:09.453000Z` (see `timestamptz.handling.mode`) |
| interval | ISO 8601 string `P1Y1M2DT0H0M1S` |
| jsonb | string, the value's text (`jsonb.handling.mode`: `string`, the default, or `dynamic`) |
| T[] | array |

`timestamptz.handling.mode`: `utc_string` (default), `utc_without_suffix`, `micro`,
`milli`.

How: the batch becomes a polars frame of JSON-ready columns (temporal and numeric values
formatted by vectorised kernels), and one `struct.json_encode()` writes every row's object
in column order. jsonb columns are spliced in as raw text with `concat_str` over
per-column fragments. Only intervals (rare) are formatted per value.
Lifecycle: one `JsonRowEncoder` per sink and column subset (value, key), built at open.
"""

from __future__ import annotations

from typing import Any

import orjson
import polars as pl
import pyarrow as pa

from engine.errors import InvalidParameterValue
from engine.numeric import RAW_TEXT
from engine.types import Field, SqlType, TypeKind

DAYS_FROM_CE_1970 = 719163  # chrono's num_days_from_ce() of 1970-01-01

TIMESTAMPTZ_MODES = ("utc_string", "utc_without_suffix", "micro", "milli")
JSONB_MODES = ("dynamic", "string")


def _interval_iso(v: Any) -> str | None:
    if v is None:
        return None
    months, days, nanos = v.months, v.days, v.nanoseconds
    years, months = int(months / 12), months - int(months / 12) * 12
    usecs = nanos // 1000 if nanos >= 0 else -((-nanos) // 1000)
    sign = -1 if usecs < 0 else 1
    usecs = abs(usecs)
    hours, rem = divmod(usecs, 3_600_000_000)
    minutes, rem = divmod(rem, 60_000_000)
    secs, frac = divmod(rem, 1_000_000)
    s = str(secs) if not frac else f"{secs}.{frac:06d}".rstrip("0")
    neg = "-" if sign < 0 else ""
    return f"P{years}Y{months}M{days}DT{neg}{hours}H{neg}{minutes}M{neg}{s}S"


class JsonRowEncoder:
    """Encodes the rows of record batches (columns `cols` of `fields`) as JSON objects."""

    def __init__(
        self,
        fields: list[Field],
        cols: list[int] | None = None,
        *,
        timestamptz_mode: str = "utc_string",
        jsonb_mode: str = "dynamic",
    ) -> None:
        if timestamptz_mode not in TIMESTAMPTZ_MODES:
            raise InvalidParameterValue(
                f"invalid timestamptz.handling.mode '{timestamptz_mode}'",
                hint="Use one of: " + ", ".join(TIMESTAMPTZ_MODES) + ".",
            )
        if jsonb_mode not in JSONB_MODES:
            raise InvalidParameterValue(
                f"invalid jsonb.handling.mode '{jsonb_mode}'",
                hint="Use 'dynamic' (nested JSON) or 'string'.",
            )
        self.cols = list(range(len(fields))) if cols is None else list(cols)
        self.fields = [fields[i] for i in self.cols]
        self.tz_mode = timestamptz_mode
        self.jsonb_raw = [
            f.type.kind is TypeKind.JSONB and jsonb_mode == "dynamic" for f in self.fields
        ]
        # `"name":` prefixes, JSON-escaped once
        self._keys = [orjson.dumps(f.name).decode() + ":" for f in self.fields]

    # -- per-type conversion to JSON-ready polars columns ----------------------------------
    def _column(self, arr: pa.Array, f: Field) -> pl.Series:
        if f.type.kind is TypeKind.INTERVAL:
            return pl.Series(f.name, [_interval_iso(v) for v in arr.to_pylist()], pl.String)
        s = pl.Series(f.name, pl.from_arrow(arr))
        e = self._convert(pl.col(f.name), f.type)
        return s if e is None else s.to_frame().select(e)[f.name]

    def _convert(self, e: pl.Expr, t: SqlType) -> pl.Expr | None:
        """The expression turning values of type `t` into JSON-ready ones (None: as is)."""
        k = t.kind
        if k is TypeKind.NUMERIC:
            text = e.cast(pl.String).replace(RAW_TEXT)  # NaN / Infinity / -Infinity
            return text.str.replace(r"(\.\d*?)0+$", "${1}").str.strip_suffix(".")
        if k is TypeKind.BYTEA:
            return e.bin.encode("base64").str.strip_chars_end("=")
        if k is TypeKind.DATE:
            return e.cast(pl.Int32) + DAYS_FROM_CE_1970
        if k is TypeKind.TIME:
            return e.cast(pl.Int64) // 1_000_000_000 * 1000
        if k is TypeKind.TIMESTAMP:
            return e.dt.strftime("%Y-%m-%d %H:%M:%S%.6f")
        if k is TypeKind.TIMESTAMPTZ:
            e = e.dt.convert_time_zone("UTC")
            if self.tz_mode == "utc_string":
                return e.dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            if self.tz_mode == "utc_without_suffix":
                return e.dt.strftime("%Y-%m-%d %H:%M:%S%.6f")
            us = e.dt.replace_time_zone(None).cast(pl.Datetime("us")).cast(pl.Int64)
            return us if self.tz_mode == "micro" else us // 1000
        if k is TypeKind.LIST and t.elem is not None:
            inner = self._convert(pl.element(), t.elem)
            return None if inner is None else e.list.eval(inner)
        return None

    def frame(self, batch: pa.RecordBatch) -> pl.DataFrame:
        return pl.DataFrame(
            [self._column(batch.column(i), f) for i, f in zip(self.cols, self.fields)]
        )

    def encode(self, batch: pa.RecordBatch) -> pl.Series:
        """One JSON object text per row (a polars String series, never null)."""
        if batch.num_rows == 0:
            return pl.Series("json", [], pl.String)
        df = self.frame(batch)
        if not any(self.jsonb_raw):
            return df.select(pl.struct(pl.all()).struct.json_encode().alias("json"))["json"]
        parts: list[pl.Expr] = []
        for j, f in enumerate(self.fields):
            parts.append(pl.lit(("{" if j == 0 else ",") + self._keys[j]))
            if self.jsonb_raw[j]:
                parts.append(pl.col(f.name).fill_null("null"))
            else:
                frag = pl.struct(pl.col(f.name).alias("v")).struct.json_encode()
                parts.append(frag.str.slice(5).str.strip_suffix("}"))
        parts.append(pl.lit("}"))
        return df.select(pl.concat_str(parts).alias("json"))["json"]
