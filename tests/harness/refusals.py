"""One check for "refused with 0A000, this message and this hint" over psycopg.

Shared by the e2e refusal tests so every refusal is asserted the same way: SQLSTATE 0A000,
the exact primary message (RisingWave's wording), and a hint containing the expected text.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest


def assert_refused(cur: psycopg.Cursor[Any], sql: str, message: str, hint: str) -> None:
    """Run `sql` and assert it fails as an unsupported streaming pattern."""
    with pytest.raises(psycopg.Error) as ei:
        cur.execute(sql)
    diag = ei.value.diag
    assert diag.sqlstate == "0A000", sql
    assert diag.message_primary == message, sql
    assert hint in (diag.message_hint or ""), sql
