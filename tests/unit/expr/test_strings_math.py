"""String and math functions: results, NULL propagation and error cases."""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.errors import DataError, NumericValueOutOfRange, SubstringError

D = Decimal


def test_concat_operator_and_functions(ev) -> None:
    assert ev("s || '!'") == ["hello!", "Wörld!", None, "!"]
    assert ev("s || i") == ["hello1", "Wörld-7", None, "2147483647"]
    assert ev("l || s") == ["10hello", "3Wörld", None, None]
    assert ev("concat(s, '-', i)") == ["hello-1", "Wörld--7", "-", "-2147483647"]
    assert ev("concat_ws(',', s, i, NULL)") == ["hello,1", "Wörld,-7", "", ",2147483647"]
    assert ev("concat_ws(NULL, s)") == [None] * 4


def test_case_and_length(ev) -> None:
    assert ev("upper(s)") == ["HELLO", "WÖRLD", None, ""]
    assert ev("lower(s)") == ["hello", "wörld", None, ""]
    assert ev("length(s)") == [5, 5, None, 0]
    assert ev("char_length(s)") == [5, 5, None, 0]
    assert ev("initcap('hello wORLD foo-bar')")[0] == "Hello World Foo-Bar"
    assert ev("reverse(s)") == ["olleh", "dlröW", None, ""]


def test_substring_family(ev) -> None:
    assert ev("substr(s, 2)") == ["ello", "örld", None, ""]
    assert ev("substr(s, 2, 2)") == ["el", "ör", None, ""]
    assert ev("substring(s FROM 0 FOR 3)") == ["he", "Wö", None, ""]
    assert ev("substring(s FROM 2)") == ["ello", "örld", None, ""]
    assert ev("substr(s, l::int, 2)") == ["", "rl", None, None]
    assert ev("left(s, 2)") == ["he", "Wö", None, ""]
    assert ev("left(s, -2)") == ["hel", "Wör", None, ""]
    assert ev("right(s, 2)") == ["lo", "ld", None, ""]
    assert ev("right(s, -2)") == ["llo", "rld", None, ""]
    with pytest.raises(SubstringError, match="negative substring length"):
        ev("substr(s, 1, -1)")


def test_trim_pad_replace(ev) -> None:
    assert ev("trim('  x  ')")[0] == "x"
    assert ev("trim(BOTH 'xy' FROM 'xyaxy')")[0] == "a"
    assert ev("trim(LEADING 'x' FROM 'xxax')")[0] == "ax"
    assert ev("trim(TRAILING 'x' FROM 'xxax')")[0] == "xxa"
    assert ev("ltrim('  a ')")[0] == "a "
    assert ev("rtrim('xa', 'a')")[0] == "x"
    assert ev("lpad(s, 7, '*')") == ["**hello", "**Wörld", None, "*******"]
    assert ev("lpad(s, 3)") == ["hel", "Wör", None, "   "]
    assert ev("rpad(s, 8, 'ab')") == ["helloaba", "Wörldaba", None, "abababab"]
    assert ev("replace(s, 'l', 'L')") == ["heLLo", "WörLd", None, ""]


def test_search_functions(ev) -> None:
    assert ev("position('l' IN s)") == [3, 4, None, 0]
    assert ev("strpos(s, 'rl')") == [0, 3, None, 0]
    assert ev("split_part('a,b,c', ',', 2)")[0] == "b"
    assert ev("split_part('a,b,c', ',', 5)")[0] == ""
    assert ev("split_part(s, 'l', 1)") == ["he", "Wör", None, ""]
    assert ev("split_part('a,b,c', ',', -1)")[0] == "c"
    assert ev("starts_with(s, 'he')") == [True, False, None, False]
    assert ev("md5('abc')")[0] == "900150983cd24fb0d6963f7d28e17f72"
    assert ev("repeat('ab', 3)")[0] == "ababab"
    assert ev("repeat('ab', -1)")[0] == ""


def test_math_functions(ev, bind) -> None:
    assert ev("abs(i)") == [1, 7, None, 2147483647]
    assert bind("abs(i)").type.display == "integer"
    with pytest.raises(NumericValueOutOfRange):
        ev("abs(-2147483647 - 1)")
    assert ev("round(f)") == [2.0, -2.0, None, 0.0]  # float rounds half to even
    assert ev("round(n)") == [D(2), D(-2), None, D(0)]  # numeric half away from zero
    assert ev("round(n, 1)") == [D("1.5"), D("-2.3"), None, D(0)]
    assert ev("round(2.345, 2)")[0] == D("2.35")
    assert ev("ceil(f)") == [2.0, -2.0, None, 0.0]
    assert ev("ceiling(n)") == [D(2), D(-2), None, D(0)]
    assert ev("floor(f)") == [1.0, -3.0, None, 0.0]
    assert ev("trunc(f)") == [1.0, -2.0, None, 0.0]
    assert bind("ceil(1)").type.display == "double precision"
    assert ev("sqrt(16)")[0] == 4.0
    assert ev("power(2, 10)")[0] == 1024.0
    assert ev("pow(2.0, 3)")[0] == D(8)
    assert ev("exp(0)")[0] == 1.0
    assert ev("ln(1)")[0] == 0.0
    assert ev("log10(1000)")[0] == pytest.approx(3.0)
    assert ev("log(100)")[0] == pytest.approx(2.0)
    assert ev("mod(l, 3)") == [1, 0, 2, None]
    assert ev("mod(-7, 3)")[0] == -1
    assert ev("sign(f)") == [1.0, -1.0, None, 0.0]
    with pytest.raises(DataError) as e:
        ev("sqrt(f)")
    assert e.value.sqlstate == "2201F"
    with pytest.raises(DataError) as e2:
        ev("ln(0)")
    assert e2.value.sqlstate == "2201E"


def test_random_is_volatile_and_in_range(ev, bind) -> None:
    vals = ev("random()")
    assert all(0.0 <= v < 1.0 for v in vals)
    assert not bind("random()").is_constant()
