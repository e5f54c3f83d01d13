"""Arrow <-> polars <-> Python-value plumbing for operators that consolidate a whole epoch.

Stateful operators work in two phases per step: a vectorised phase (polars group-by over
the epoch's delta, producing one partial row per changed key) and a per-key phase in
Python that reads and writes `StateTable`s. This module holds the conversions between
the phases so every operator converts the same way:

* `polars_frame` imports chosen batch columns under stable names (`c<i>`), plus the
  Z-set weight column `__w` and the row position `__i` on request. Columns polars cannot
  import (intervals) are replaced by their dictionary codes, which group identically
  within one epoch; `py_values` decodes them back.
* `py_values` turns a frame column into Python values as documented in `engine.types`
  (through Arrow, so e.g. numerics come back as `Decimal`). SQL arrays come back as
  tuples because state keys must be hashable.
* `build_batch` turns per-column Python lists back into an Arrow batch of a schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from engine import civil
from engine.chunk import StreamChunk
from engine.numeric import array_of, special_codes
from engine.types import Field, arrow_schema

WEIGHT = "__w"
INDEX = "__i"


def col_name(i: int) -> str:
    return f"c{i}"


#: suffix of the special-value code column `polars_frame(..., specials=True)` adds
SPECIAL_SUFFIX = "#special"


@dataclass(slots=True)
class Frame:
    """A polars view of some batch columns; `dictionaries` decodes code-replaced columns."""

    df: pl.DataFrame
    dictionaries: dict[str, pa.Array] = field(default_factory=dict)
    list_columns: set[str] = field(default_factory=set)


def polars_frame(
    batch: pa.RecordBatch,
    cols: Sequence[int],
    *,
    weights: np.ndarray | None = None,
    index: bool = False,
    specials: bool = False,
    raw_decimals: bool = False,
) -> Frame:
    """A polars frame of `batch`'s columns `cols` (named by `col_name`), with the Z-set
    weights and the row index as extra columns when asked; `specials` adds, for each
    numeric column, a companion int8 column `name + SPECIAL_SUFFIX` of the rows'
    `engine.numeric.special_codes` (sums leave NaN and the infinities out by it).
    `raw_decimals` passes numeric columns as polars Int128 of their unscaled values, for
    callers that only compare, join and hash them: polars panics when a join or a scalar
    has to rebuild a decimal column holding NaN / Infinity (beyond 38 digits); those
    columns cannot be read back with `arrow_values`."""
    names: list[str] = []
    arrays: list[pa.Array] = []
    dictionaries: dict[str, pa.Array] = {}
    list_columns: set[str] = set()
    raw_decimal_names: list[str] = []
    for i in dict.fromkeys(cols):
        name = col_name(i)
        arr = batch.column(i)
        if pa.types.is_interval(arr.type):
            enc = pc.dictionary_encode(arr)
            dictionaries[name] = enc.dictionary
            arr = enc.indices
        elif pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
            list_columns.add(name)
        if raw_decimals and pa.types.is_decimal128(arr.type):
            raw_decimal_names.append(name)
            arr = pa.Array.from_buffers(
                pa.decimal128(38, 0), len(arr), arr.buffers(), offset=arr.offset
            )
        names.append(name)
        arrays.append(arr)
        if specials and pa.types.is_decimal128(arr.type):
            names.append(name + SPECIAL_SUFFIX)
            arrays.append(pa.array(special_codes(arr)))
    if weights is not None:
        names.append(WEIGHT)
        arrays.append(pa.array(weights.astype(np.int64, copy=False)))
    if index:
        names.append(INDEX)
        arrays.append(pa.array(np.arange(batch.num_rows, dtype=np.int64)))
    table = pa.Table.from_arrays(arrays, names=names)
    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    if raw_decimal_names:
        df = df.with_columns(pl.col(n).cast(pl.Int128) for n in raw_decimal_names)
    return Frame(df, dictionaries, list_columns)


def arrow_values(frame: Frame, df: pl.DataFrame, name: str) -> pa.Array:
    """Column `name` of `df` as Arrow, with dictionary-coded columns decoded."""
    arr = df.get_column(name).to_arrow()
    dictionary = frame.dictionaries.get(name)
    if dictionary is not None:
        arr = dictionary.take(arr)
    return arr


def py_values(frame: Frame, df: pl.DataFrame, name: str) -> list[Any]:
    """Python values of column `name` of `df` (a frame derived from `frame.df`)."""
    values = civil.py_list(arrow_values(frame, df, name))
    if name in frame.list_columns:
        values = [None if v is None else tuple(v) for v in values]
    return values


def key_tuples(columns: list[list[Any]], n: int) -> list[tuple[Any, ...]]:
    """Row tuples from per-column lists; `n` rows of `()` when there are no columns."""
    if not columns:
        return [()] * n
    if len(columns) == 1:
        return [(v,) for v in columns[0]]
    return list(zip(*columns, strict=True))


def build_batch(fields: list[Field], columns: Sequence[Sequence[Any]]) -> pa.RecordBatch:
    schema = arrow_schema(fields)
    arrays = [array_of(col, schema.field(i).type) for i, col in enumerate(columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def batch_from_rows(fields: list[Field], rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
    if not rows:
        return build_batch(fields, [[] for _ in fields])
    return build_batch(fields, list(zip(*rows, strict=True)))


def ops_array(ops: Sequence[int]) -> pa.Array:
    return pa.array(np.asarray(ops, dtype=np.int8))


def net_index(batch: pa.RecordBatch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Consolidate rows by full value: (first row index, net weight) per distinct row,
    rows whose weights cancel dropped, in first-appearance order."""
    allc = list(range(batch.num_columns))
    frame = polars_frame(batch, allc, weights=w, index=True)
    net = (
        frame.df.group_by([col_name(i) for i in allc])
        .agg(pl.col(WEIGHT).sum(), pl.col(INDEX).first())
        .filter(pl.col(WEIGHT) != 0)
        .sort(INDEX)
    )
    return (
        net.get_column(INDEX).to_numpy().astype(np.int64),
        net.get_column(WEIGHT).to_numpy().astype(np.int64),
    )


def net_rows(batch: pa.RecordBatch, w: np.ndarray) -> tuple[pa.RecordBatch, np.ndarray]:
    """Consolidate rows by their full value: one row per distinct row with its net weight
    (rows that cancel out are gone), in first-appearance order."""
    idx, net = net_index(batch, w)
    return batch.take(pa.array(idx)), net


def consolidate(chunk: StreamChunk) -> tuple[pa.RecordBatch, np.ndarray]:
    """The chunk's rows with net weights; an insert-only chunk is returned as it is."""
    batch = chunk.data
    w = chunk.weights().astype(np.int64)
    if not (w < 0).any():
        return batch, w
    return net_rows(batch, w)
