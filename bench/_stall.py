"""Run the server with a stall monitor: how long a thread that wants the interpreter waits.

Why: on a shared machine a client's wall-clock p99 mixes the server's own stalls with the
operating system's scheduling. What the server controls is how long one thread keeps the
interpreter lock (a C call that does not release it, or Python code between two switch
points). The monitor is a thread that sleeps `TICK_S` again and again: each wake-up's
lateness is what an event loop or a session thread feels at that moment. Less the time the
monitor itself sat in the kernel's run queue (`/proc/thread-self/schedstat`: the machine's
load), what remains is its wait for the interpreter lock. A wake-up that waited `LATE_MS`
or more also records the CPU time each server thread ran meanwhile
(`time.pthread_getcpuclockid`) and the stack of the one that ran the most, at the line
where it let go: the holder, unless it ran outside the lock. Numpy and Arrow compute
kernels, copies, sorts and `os.fsync` release the lock; a thread busy in them shows up as
the "holder" of a wait that another thread caused (one holding the lock while the machine's
load kept it off the CPU). Read the stacks as suspects and confirm a call holds the lock in
isolation (a second thread's wake-ups while it runs) before cutting it; rocksdict's
`db.write`, `marshal` and conversions of Python objects (`np.fromiter`, `pa.array` of a
list, `to_pylist`) do hold it.

Lifecycle: `python bench/_stall.py TRACE -m pgwire.cli ...` starts the monitor, then runs
the module as `python -m` would; the monitor appends one JSON line per second of wake-up
counts and one per late wake-up (`LATE_MS` or more) to TRACE. `summarise(TRACE, spans)`
turns them into per-phase figures for the benchmark's report.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

TICK_S = 0.001
LATE_MS = 4.0
STACK_DEPTH = 6


def _frames(ident: int) -> list[str]:
    frame = sys._current_frames().get(ident)
    out: list[str] = []
    for fs in traceback.extract_stack(frame, limit=None)[::-1][:STACK_DEPTH] if frame else ():
        name = fs.filename.rsplit("/", 2)
        out.append(f"{'/'.join(name[-2:])}:{fs.lineno} {fs.name}")
    return out


class StallMonitor(threading.Thread):
    def __init__(self, trace: str) -> None:
        super().__init__(name="stall-monitor", daemon=True)
        self.out = open(trace, "a", buffering=1)  # noqa: SIM115 - lives with the process

    def run(self) -> None:
        sched = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        queued = int(os.pread(sched, 100, 0).split()[1])
        me = threading.get_ident()
        clocks: dict[int, tuple[str, int]] = {}
        last_cpu: dict[int, float] = {}
        refresh = 0.0
        second = int(time.time())
        n = 0
        hist = [0] * 8  # wake-ups late by <1, <2, <4, <8, <16, <32, <64, >=64 ms
        while True:
            now = time.monotonic()
            if now >= refresh:
                refresh = now + 0.2
                clocks = {}
                for t in threading.enumerate():
                    if t.ident is None or t.ident == me:
                        continue
                    try:
                        clocks[t.ident] = (t.name, time.pthread_getcpuclockid(t.ident))
                    except (OSError, ProcessLookupError):
                        continue
            t0 = time.perf_counter()
            time.sleep(TICK_S)
            late = (time.perf_counter() - t0 - TICK_S) * 1000
            q = int(os.pread(sched, 100, 0).split()[1])
            wait = max(0.0, late - (q - queued) / 1e6)  # less the run-queue time
            queued = q
            cpu: dict[int, float] = {}
            for ident, (_, clk) in clocks.items():
                try:
                    cpu[ident] = time.clock_gettime(clk)
                except OSError:
                    continue
            n += 1
            b = 0
            while b < 7 and wait >= (1 << b):
                b += 1
            hist[b] += 1
            if wait >= LATE_MS:
                ran = {i: (c - last_cpu.get(i, c)) * 1000 for i, c in cpu.items()}
                top = max(ran, key=lambda i: ran[i]) if ran else None
                total = sum(ran.values())
                self.out.write(
                    json.dumps(
                        {
                            "t": time.time(),
                            "late_ms": round(late, 2),
                            "wait_ms": round(wait, 2),
                            "ran_ms": round(total, 2),
                            "holder": clocks[top][0] if top else "",
                            "holder_ms": round(ran[top], 2) if top else 0.0,
                            "stack": _frames(top) if top else [],
                        }
                    )
                    + "\n"
                )
            last_cpu = cpu
            s = int(time.time())
            if s != second:
                self.out.write(json.dumps({"sec": second, "n": n, "hist": hist}) + "\n")
                second, n, hist = s, 0, [0] * 8


def summarise(trace: Path, spans: dict[str, tuple[float, float]], top: int = 5) -> dict[str, Any]:
    """Per phase (name -> (start, end) wall times): wake-ups, the share that waited for
    the lock 4/16 ms or more, the longest waits and holds (CPU ms the busiest thread ran
    meanwhile, at most the wait) and where the longest ones let go."""
    lines = [json.loads(x) for x in trace.read_text().splitlines() if x.strip()]
    out: dict[str, Any] = {}
    for name, (a, b) in spans.items():
        secs = [x for x in lines if "sec" in x and a <= x["sec"] + 0.5 <= b]
        late = [x for x in lines if "late_ms" in x and a <= x["t"] <= b]
        wakes = sum(x["n"] for x in secs)
        hist = [sum(x["hist"][i] for x in secs) for i in range(8)]
        for x in late:
            x["hold_ms"] = min(x["holder_ms"], x["wait_ms"] + TICK_S * 1000)
        holds = sorted(late, key=lambda x: -x["hold_ms"])
        out[name] = {
            "wakes": wakes,
            "p99_below_ms": _bound(hist, 0.99),
            "p999_below_ms": _bound(hist, 0.999),
            "wait_ge_4ms": sum(hist[3:]) / wakes if wakes else 0.0,
            "wait_ge_16ms": sum(hist[5:]) / wakes if wakes else 0.0,
            "max_wait_ms": max((x["wait_ms"] for x in late), default=0.0),
            "max_hold_ms": holds[0]["hold_ms"] if holds else 0.0,
            "holds_ge_10ms": sum(1 for x in late if x["hold_ms"] >= 10),
            "top": holds[:top],
        }
    return out


def _bound(hist: list[int], q: float) -> float:
    """The bucket bound (1, 2, 4 ... 64 ms; inf above) that a share `q` of wake-ups
    waited less than."""
    total, run = sum(hist), 0
    for i, n in enumerate(hist):
        run += n
        if total and run >= q * total:
            return float(1 << i) if i < 7 else float("inf")
    return 0.0


def main() -> None:
    trace = sys.argv[1]
    if sys.argv[2] != "-m":
        raise SystemExit("usage: _stall.py TRACE -m MODULE [ARGS...]")
    module = sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    sys.path.pop(0)  # this script's directory: the server imports as `python -m` would
    StallMonitor(trace).start()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
