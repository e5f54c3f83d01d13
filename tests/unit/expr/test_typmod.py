"""Type modifiers: parsing, enforcement in casts, display scales, catalog persistence."""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.catalog.catalog import _type_from_json, _type_to_json
from engine.errors import NumericValueOutOfRange, SqlSyntaxError
from engine.types import NUMERIC, VARCHAR, TypeKind
from pgwire.codecs import format_numeric, numeric_send


def test_modifiers_of_casts(bind) -> None:
    assert bind("'abc'::varchar(2)").type.max_length == 2
    t = bind("1::numeric(10, 2)").type
    assert (t.kind, t.mod, t.scale) == (TypeKind.NUMERIC, (10, 2), 2)
    assert bind("1.50").type.scale == 2
    assert bind("round(1.5, 3)").type.scale == 3
    assert bind("1.5 * 2.25").type.scale == 3
    assert bind("1.5 / 2").type.scale is None
    # equality ignores the modifier: the engine computes with the base type
    assert bind("'a'::varchar(2)").type == VARCHAR


def test_enforcement(ev1) -> None:
    assert ev1("'abcdef'::varchar(2)") == "ab"
    assert ev1("12.345::numeric(4,2)") == Decimal("12.35")
    with pytest.raises(NumericValueOutOfRange):
        ev1("123.4::numeric(3,1)")
    with pytest.raises(SqlSyntaxError):
        ev1("1::numeric(3,4)")


def test_numeric_text_keeps_the_scale() -> None:
    assert format_numeric(Decimal("5727.6000000000"), 2) == "5727.60"
    assert format_numeric(Decimal("5727.6000000000")) == "5727.6"
    assert format_numeric(Decimal("-0.0010000000"), 2) == "0.00"
    assert format_numeric(Decimal("12"), 0) == "12"
    assert numeric_send(Decimal("1.5"), 2)[6:8] == b"\x00\x02"  # dscale 2


def test_catalog_keeps_modifiers() -> None:
    for t in (VARCHAR.with_mod((3,)), NUMERIC.with_mod((10, 2)), NUMERIC):
        back = _type_from_json(_type_to_json(t))
        assert back == t and back.mod == t.mod
