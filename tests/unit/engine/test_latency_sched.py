"""The CPU scheduling hints of engine.latency: a short slice for the threads that answer
clients, SCHED_BATCH for bulk work, restored after a barrier run by a session's thread."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from engine import latency

linux = pytest.mark.skipif(
    sys.platform != "linux" or latency._sched_calls() is None,
    reason="the scheduling hints use Linux's sched_setattr; elsewhere they are not applied",
)


def in_thread(fn: Callable[[], Any]) -> Any:
    """`fn()` run in a fresh thread (the hints change the calling thread only)."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def policy_and_slice() -> tuple[int, int]:
    a = latency._get_attr()
    assert a is not None
    return int(a.sched_policy), int(a.sched_runtime)


@linux
def test_an_answer_thread_asks_for_a_short_slice_and_keeps_its_nice() -> None:
    def run() -> tuple[bool, int, tuple[int, int], bool]:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + 1)
        before = os.getpriority(os.PRIO_PROCESS, tid)
        old_slice = policy_and_slice()[1]
        ok = latency.answer_thread()
        return ok, old_slice, policy_and_slice(), os.getpriority(os.PRIO_PROCESS, tid) == before

    ok, old_slice, (policy, slice_ns), nice_kept = in_thread(run)
    assert policy == latency._SCHED_OTHER
    assert nice_kept
    # kernels before EEVDF (6.6) refuse a custom slice: the thread is then left as it was
    assert slice_ns == (latency.ANSWER_SLICE_NS if ok else old_slice)


@linux
def test_bulk_work_is_batch_inside_and_restores_the_thread_after() -> None:
    def run() -> list[tuple[int, int]]:
        latency.answer_thread()
        seen = [policy_and_slice()]
        with latency.bulk_work():
            seen.append(policy_and_slice())
            with latency.bulk_work():  # nested (a DDL's barrier): unchanged inside
                seen.append(policy_and_slice())
            seen.append(policy_and_slice())
        seen.append(policy_and_slice())
        return seen

    outer, inside, nested, after_nested, after = in_thread(run)
    assert inside[0] == latency._SCHED_BATCH
    assert nested == inside == after_nested
    assert after == outer  # the short slice is back for the session's next answer


@linux
def test_bulk_work_restores_the_thread_when_its_body_raises() -> None:
    def run() -> tuple[tuple[int, int], tuple[int, int]]:
        before = policy_and_slice()
        with pytest.raises(ValueError), latency.bulk_work():
            raise ValueError("the epoch failed")
        return before, policy_and_slice()

    before, after = in_thread(run)
    assert before == after


@linux
def test_a_bulk_thread_stays_batch() -> None:
    def run() -> tuple[bool, int]:
        ok = latency.bulk_thread()
        return ok, policy_and_slice()[0]

    ok, policy = in_thread(run)
    assert ok and policy == latency._SCHED_BATCH


def test_the_hints_do_nothing_where_the_system_calls_are_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(latency, "_SCHED", None)
    assert latency.answer_thread() is False
    assert latency.bulk_thread() is False
    with latency.bulk_work():
        pass
