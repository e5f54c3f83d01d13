"""Fixture `pg` (module scope): a pgwire server over the fake engine of `fake_engine`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from unit.pgwire.fake_engine import FakeDatabase, RunningServer


@pytest.fixture(scope="module")
def pg() -> Iterator[RunningServer]:
    srv = RunningServer(FakeDatabase())
    try:
        yield srv
    finally:
        srv.stop()
