"""numeric's special values NaN, Infinity and -Infinity inside Arrow's decimal128 columns.

numeric columns are `decimal128(38, 10)`; a finite value keeps at most 28 digits before
the point, so its unscaled int128 stays below 10**38 in magnitude. The three special values
PostgreSQL's numeric has are stored as int128 values no finite numeric can take:

    NaN        2**127 - 1
    Infinity   2**127 - 2
    -Infinity  -(2**127 - 2)

The choice makes the int128 order PostgreSQL's order (-Infinity < every number <
Infinity < NaN, and NaN = NaN), so comparisons, sorting, grouping, hashing, min/max,
memcomparable state keys and storage treat them right without knowing about them.
Everything that computes with values (arithmetic, functions, casts, sum/avg) masks them
out with `special_masks` first and applies PostgreSQL's rules for them; and everything
that turns a column into Python values goes through `py_values`, where they become
`Decimal('NaN')`, `Decimal('Infinity')` and `Decimal('-Infinity')` (the Python
representation of the three), and back through `numeric_array`.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import civil

NAN_UNSCALED = 2**127 - 1
PINF_UNSCALED = 2**127 - 2
NINF_UNSCALED = -(2**127 - 2)

PY_NAN = Decimal("NaN")
PY_PINF = Decimal("Infinity")
PY_NINF = Decimal("-Infinity")
#: the largest finite real (float4): a real result past it overflows (22003)
FLOAT4_MAX = 3.4028234663852886e38

_HI = 2**63 - 1  # high word of NaN and Infinity
_MASK64 = 2**64 - 1


def _words(v: int) -> tuple[int, int]:
    v %= 2**128
    return v & _MASK64, v >> 64


_NAN_W = _words(NAN_UNSCALED)
_PINF_W = _words(PINF_UNSCALED)
_NINF_W = _words(NINF_UNSCALED)


def _word_view(a: pa.Array) -> np.ndarray:
    """(n, 2) uint64 (low, high) words of a decimal128 array, offset applied."""
    buf = a.buffers()[1]
    assert buf is not None
    w = np.frombuffer(buf, dtype=np.uint64)
    return w[2 * a.offset : 2 * (a.offset + len(a))].reshape(-1, 2)


def special_masks(a: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(nan, +inf, -inf) boolean masks of a decimal128 array, or None when it has none
    (the common case, one vectorized pass). NULL slots are never special."""
    if len(a) == 0 or not pa.types.is_decimal128(a.type):
        return None
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    w = _word_view(a)
    hi = w[:, 1]
    big = (hi == np.uint64(_HI)) | (hi == np.uint64(_NINF_W[1]))
    if not big.any():
        return None
    lo = w[:, 0]
    valid = np.ones(len(a), dtype=bool)
    if a.null_count:
        valid = pc.is_valid(a).to_numpy(zero_copy_only=False)
    nan = big & (hi == np.uint64(_NAN_W[1])) & (lo == np.uint64(_NAN_W[0])) & valid
    pinf = big & (hi == np.uint64(_PINF_W[1])) & (lo == np.uint64(_PINF_W[0])) & valid
    ninf = big & (hi == np.uint64(_NINF_W[1])) & (lo == np.uint64(_NINF_W[0])) & valid
    if not (nan.any() or pinf.any() or ninf.any()):
        return None
    return nan, pinf, ninf


def has_special(a: Any) -> bool:
    """Whether a decimal128 array, chunked array or scalar holds a special value."""
    if isinstance(a, pa.Scalar):
        # pa.repeat keeps the raw int128 (pa.array of the Python value would validate it)
        return bool(a.is_valid) and special_masks(pa.repeat(a, 1)) is not None
    if isinstance(a, pa.ChunkedArray):
        return any(special_masks(c) is not None for c in a.chunks)
    return special_masks(a) is not None


def with_specials(a: pa.Array, nan: np.ndarray, pinf: np.ndarray, ninf: np.ndarray) -> pa.Array:
    """`a` (decimal128(38, 10)) with the masked rows set to NaN / Infinity / -Infinity
    (and valid)."""
    if not (nan.any() or pinf.any() or ninf.any()):
        return a
    a = a.cast(pa.decimal128(38, 10))
    n = len(a)
    w = _word_view(a).copy() if n else np.zeros((0, 2), dtype=np.uint64)
    for m, (lo, hi) in ((nan, _NAN_W), (pinf, _PINF_W), (ninf, _NINF_W)):
        w[m, 0] = np.uint64(lo)
        w[m, 1] = np.uint64(hi)
    valid = pc.is_valid(a).to_numpy(zero_copy_only=False) | nan | pinf | ninf
    bits = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(a.type, n, [bits, pa.py_buffer(w.tobytes())])


def finite_only(a: pa.Array, fill: int = 0) -> pa.Array:
    """`a` with its special rows replaced by `fill` (for computing the finite rows)."""
    m = special_masks(a)
    if m is None:
        return a
    any_special = pa.array(m[0] | m[1] | m[2])
    return pc.if_else(any_special, pa.scalar(Decimal(fill)).cast(a.type), a)


def as_floats(a: pa.Array) -> np.ndarray:
    """float64 surrogates: NaN/±inf for the specials, the value's float elsewhere (NULL ->
    nan; callers keep validity separately). Only for deciding special results."""
    m = special_masks(a)
    f = pc.fill_null(finite_only(a).cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    f = np.array(f, dtype=np.float64)
    if m is not None:
        f[m[0]] = np.nan
        f[m[1]] = np.inf
        f[m[2]] = -np.inf
    return f


def py_value(d: Decimal | None) -> Decimal | None:
    """A Python value pyarrow produced from a decimal128 slot, with the specials mapped."""
    if d is None or not (d.is_finite() and abs(d) >= _PY_BOUND):
        return d
    return _RAW_TO_PY.get(d, d)


_PY_BOUND = Decimal(10) ** 28
_WIDE = Context(prec=60)
#: the Decimals pyarrow makes of the special slots -> the special Decimals
_RAW_TO_PY = {
    Decimal(NAN_UNSCALED).scaleb(-10, _WIDE): PY_NAN,
    Decimal(PINF_UNSCALED).scaleb(-10, _WIDE): PY_PINF,
    Decimal(NINF_UNSCALED).scaleb(-10, _WIDE): PY_NINF,
}


def py_values(a: pa.Array | pa.ChunkedArray) -> list[Any]:
    """`a.to_pylist()`, with numeric specials as Decimal('NaN') / ('Infinity') / ('-Infinity'),
    and dates/timestamps beyond Python's datetime as numpy datetime64 (engine.civil)."""
    t = a.type
    if civil.has_temporal(t):  # dates beyond year 9999 / BC as numpy datetime64
        if isinstance(a, pa.ChunkedArray):
            return [v for c in a.chunks for v in civil.py_temporal(c)]
        return civil.py_temporal(a)
    values: list[Any] = a.to_pylist()
    if pa.types.is_decimal128(t):
        if isinstance(a, pa.ChunkedArray):
            if any(special_masks(c) is not None for c in a.chunks):
                return [py_value(v) for v in values]
        elif special_masks(a) is not None:
            return [py_value(v) for v in values]
    return values


def is_special_value(v: Any) -> bool:
    """Whether a Python value is one of the special Decimals (or pyarrow's raw form)."""
    return isinstance(v, Decimal) and (not v.is_finite() or abs(v) >= _PY_BOUND)


def numeric_array(values: list[Any], t: pa.DataType) -> pa.Array:
    """pa.array(values, t) for a decimal128 type, accepting the three special Decimals."""
    try:
        return pa.array(values, t)  # no special value: pyarrow takes them as they are
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    values = [py_value(v) if isinstance(v, Decimal) else v for v in values]
    nan = np.fromiter(
        (isinstance(v, Decimal) and v.is_nan() for v in values), dtype=bool, count=len(values)
    )
    inf = np.fromiter(
        (isinstance(v, Decimal) and v.is_infinite() for v in values),
        dtype=bool,
        count=len(values),
    )
    if not (nan.any() or inf.any()):
        return pa.array(values, t)
    neg = np.fromiter(
        (isinstance(v, Decimal) and v.is_infinite() and v < 0 for v in values),
        dtype=bool,
        count=len(values),
    )
    clean = [None if (nan[i] or inf[i]) else v for i, v in enumerate(values)]
    return with_specials(pa.array(clean, t), nan, inf & ~neg, inf & neg)


def array_of(values: Any, t: pa.DataType) -> pa.Array:
    """`pa.array(values, t)`, except that a numeric column may hold the special values
    (as Decimal('NaN') etc. or as pyarrow's Decimals of their slots)."""
    if pa.types.is_decimal128(t):
        return numeric_array(list(values), t)
    if pa.types.is_timestamp(t) and t.tz is not None:
        try:
            return pa.array(values, t)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            # a value beyond Python's datetime comes as a (UTC) numpy datetime64, which
            # pyarrow takes only for a naive type; aware datetimes are converted to UTC
            return pa.array(values, pa.timestamp(t.unit)).cast(t)
    return pa.array(values, t)


#: special-value codes of `special_codes` / `special_code`
FINITE, NAN, PINF, NINF = 0, 1, 2, 3


def special_codes(a: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """int8 per row: 0 finite (or NULL), 1 NaN, 2 Infinity, 3 -Infinity."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    out = np.zeros(len(a), dtype=np.int8)
    m = special_masks(a)
    if m is not None:
        out[m[0]] = NAN
        out[m[1]] = PINF
        out[m[2]] = NINF
    return out


def special_code(v: Any) -> int:
    """The code of one Python numeric value (either form of the specials), or of a float
    (NaN, Infinity and -Infinity as the numeric ones)."""
    if isinstance(v, float):
        if v != v:
            return NAN
        if v in (math.inf, -math.inf):
            return PINF if v > 0 else NINF
        return FINITE
    if not is_special_value(v):
        return FINITE
    d = py_value(v)
    assert d is not None
    if d.is_nan():
        return NAN
    if d.is_infinite():
        return PINF if d > 0 else NINF
    return FINITE


def special_sum(finite: Any, nan: int, pinf: int, ninf: int) -> Any:
    """sum/avg over values of which `nan` are NaN, `pinf` Infinity and `ninf` -Infinity:
    NaN if any NaN or both infinities, else the infinity, else `finite` (PostgreSQL)."""
    if nan > 0 or (pinf > 0 and ninf > 0):
        return PY_NAN
    if pinf > 0:
        return PY_PINF
    if ninf > 0:
        return PY_NINF
    return finite


def format_numeric_special(v: Decimal) -> str:
    """PostgreSQL's text of a special numeric: NaN, Infinity, -Infinity."""
    if v.is_nan():
        return "NaN"
    return "-Infinity" if v < 0 else "Infinity"


#: the text Arrow / polars casts of the special slots give -> PostgreSQL's text of them
RAW_TEXT = {str(raw): format_numeric_special(py) for raw, py in _RAW_TO_PY.items()}
