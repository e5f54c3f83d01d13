"""tune_process: numpy's huge-page hint is off afterwards and the preloaded modules are in."""

from __future__ import annotations

import sys

from numpy._core import multiarray

from engine.process_tuning import tune_process


def test_huge_page_hint_off_and_modules_loaded() -> None:
    setter = multiarray._set_madvise_hugepage
    before = setter(True)  # returns the previous setting
    try:
        tune_process()
        assert setter(False) is False  # tune_process had turned it off
        assert "numpy.ma" in sys.modules
        assert "engine.sql.session_stmts" in sys.modules
        tune_process()  # a second call changes nothing and does not fail
        assert setter(False) is False
    finally:
        setter(before)
