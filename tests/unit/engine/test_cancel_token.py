"""CancelToken and the unit-aware settings behind statement_timeout."""

from __future__ import annotations

import threading

import pytest

from engine import cancel
from engine.errors import InvalidParameterValue, QueryCanceled
from engine.setting_units import parse_bytes, parse_time_ms, show_bytes, show_time_ms


def test_user_cancel_from_another_thread_is_seen_by_check() -> None:
    token = cancel.CancelToken()
    token.check()  # not cancelled: nothing happens
    t = threading.Thread(target=token.cancel)
    t.start()
    t.join()
    with pytest.raises(QueryCanceled, match="canceling statement due to user request") as e:
        token.check()
    assert e.value.sqlstate == "57014"


def test_deadline_reports_statement_timeout() -> None:
    token = cancel.CancelToken(deadline=0.0)  # long past
    assert token.wait(10.0)  # returns at once: the deadline has passed
    with pytest.raises(QueryCanceled, match="canceling statement due to statement timeout"):
        token.check()
    token.cancel(cancel.USER)  # the first reason stays
    with pytest.raises(QueryCanceled, match="statement timeout"):
        token.check()


def test_current_token_is_scoped_and_never_outside() -> None:
    assert cancel.current() is cancel.NEVER
    cancel.NEVER.cancel()
    cancel.check()  # NEVER ignores cancel
    token = cancel.CancelToken()
    with cancel.running(token):
        assert cancel.current() is token
        token.cancel()
        with pytest.raises(QueryCanceled):
            cancel.check()
    assert cancel.current() is cancel.NEVER
    cancel.check()


@pytest.mark.parametrize(
    ("text", "ms", "shown"),
    [
        ("0", 0, "0"),
        ("2000", 2000, "2s"),
        ("2s", 2000, "2s"),
        ("2 s", 2000, "2s"),
        ("1.5s", 1500, "1500ms"),
        ("1min", 60_000, "1min"),
        ("90min", 5_400_000, "90min"),
        ("2h", 7_200_000, "2h"),
        ("1d", 86_400_000, "1d"),
        ("1500us", 2, "2ms"),
    ],
)
def test_time_settings_parse_and_show_like_postgres(text: str, ms: int, shown: str) -> None:
    assert parse_time_ms("statement_timeout", text) == ms
    assert show_time_ms(ms) == shown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", 'invalid value for parameter "statement_timeout": "abc"'),
        ("5x", 'invalid value for parameter "statement_timeout": "5x"'),
        ("-1", '-1 ms is outside the valid range for parameter "statement_timeout"'),
        ("", 'invalid value for parameter "statement_timeout": ""'),
    ],
)
def test_bad_time_values_are_22023(text: str, message: str) -> None:
    with pytest.raises(InvalidParameterValue) as e:
        parse_time_ms("statement_timeout", text)
    assert e.value.sqlstate == "22023"
    assert str(e.value).startswith(message)


def test_memory_settings() -> None:
    assert parse_bytes("query_memory_limit", "4GB") == 4 * 1024**3
    assert parse_bytes("query_memory_limit", "512kB") == 512 * 1024
    assert show_bytes(4 * 1024**3) == "4GB"
    assert show_bytes(1536 * 1024) == "1536kB"
    with pytest.raises(InvalidParameterValue):
        parse_bytes("query_memory_limit", "4 gigs")
