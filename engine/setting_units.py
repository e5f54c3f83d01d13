"""Settings with units, parsed and shown the way PostgreSQL's GUC code does.

Time settings (`statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`)
have the base unit ms: a bare integer is milliseconds, a unit may follow the number with or
without a space (`us`, `ms`, `s`, `min`, `h`, `d`), fractions are rounded to the base unit,
0 turns the limit off. SHOW prints the largest unit that divides the value (`2s`, `1500ms`,
`1min`, `0`). Memory settings take a byte count or `kB`, `MB`, `GB`, `TB` (1024-based, as
PostgreSQL) and show the same way. Bad values are 22023 with PostgreSQL's messages.
"""

from __future__ import annotations

import re

from engine.errors import InvalidParameterValue

_NUMBER = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*$")

_TIME_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0}
_TIME_UNITS["d"] = 86_400_000.0
_TIME_SHOW = [("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1)]
_TIME_HINT = 'Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".'

_MEM_UNITS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4}
_MEM_SHOW = [("TB", 1024**4), ("GB", 1024**3), ("MB", 1024**2), ("kB", 1024), ("B", 1)]
_MEM_HINT = 'Valid units for this parameter are "B", "kB", "MB", "GB", and "TB".'

INT_MAX = 2**31 - 1
TIME_SETTINGS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")


def parse_time_ms(name: str, value: str) -> int:
    """`value` of time setting `name` in milliseconds (0 .. INT_MAX), or 22023."""
    m = _NUMBER.match(value)
    if m is None:
        raise InvalidParameterValue(f'invalid value for parameter "{name}": "{value}"')
    num, unit = float(m.group(1)), m.group(2)
    if unit:
        factor = _TIME_UNITS.get(unit)
        if factor is None:
            raise InvalidParameterValue(
                f'invalid value for parameter "{name}": "{value}"', hint=_TIME_HINT
            )
        num *= factor
    ms = round(num)
    if not 0 <= ms <= INT_MAX:
        raise InvalidParameterValue(
            f'{ms} ms is outside the valid range for parameter "{name}" (0 .. {INT_MAX})'
        )
    return ms


def show_time_ms(ms: int) -> str:
    """PostgreSQL's display of a millisecond setting: `0`, `250ms`, `2s`, `1min`..."""
    if ms == 0:
        return "0"
    for unit, size in _TIME_SHOW:
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def parse_bytes(name: str, value: str) -> int:
    """`value` of memory setting `name` in bytes (a bare number is bytes), or 22023."""
    m = _NUMBER.match(value)
    if m is None:
        raise InvalidParameterValue(f'invalid value for parameter "{name}": "{value}"')
    num, unit = float(m.group(1)), m.group(2)
    if unit:
        factor = _MEM_UNITS.get(unit.lower())
        if factor is None or unit not in ("B", "kB", "MB", "GB", "TB"):
            raise InvalidParameterValue(
                f'invalid value for parameter "{name}": "{value}"', hint=_MEM_HINT
            )
        num *= factor
    n = round(num)
    if n < 0:
        raise InvalidParameterValue(
            f'{n} B is outside the valid range for parameter "{name}" (0 .. {2**63 - 1})'
        )
    return n


def show_bytes(n: int) -> str:
    """`0`, `512kB`, `4GB`...: the largest unit dividing the value."""
    if n == 0:
        return "0"
    for unit, size in _MEM_SHOW:
        if n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"
