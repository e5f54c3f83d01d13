"""window_kernel against DuckDB on random data, and OverWindowOp's changelog on updates.

The kernel is shared by ad-hoc queries and views; DuckDB is the independent reference.
OverWindowOp must emit exactly the rows whose window values changed (deletes first) and
touch only partitions in the delta.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from engine.chunk import StreamChunk
from engine.plan.logical_window import WindowCall, WindowFrame
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.over_window import OverWindowOp
from engine.stream.operators.window_kernel import compute_windows
from engine.types import BIGINT, DOUBLE, INT, NUMERIC, Field

F = [Field("id", INT), Field("p", INT), Field("v", INT)]
ROWS = WindowFrame("rows", ("preceding", 2), ("following", 1))
SLIDE = WindowFrame("rows", ("preceding", 1), ("current_row", 0))
WHOLE = WindowFrame("rows", ("unbounded_preceding", 0), ("unbounded_following", 0))
CALLS = [
    (WindowCall("row_number", (), BIGINT), "row_number()"),
    (WindowCall("rank", (), BIGINT), "rank()"),
    (WindowCall("dense_rank", (), BIGINT), "dense_rank()"),
    (WindowCall("lag", (2,), INT, offset=2), "lag(v, 2)"),
    (WindowCall("lead", (2,), INT), "lead(v)"),
    (WindowCall("sum", (2,), BIGINT), "sum(v)"),
    (WindowCall("avg", (2,), NUMERIC, ROWS), "avg(v) {ROWS}"),
    (WindowCall("min", (2,), INT, SLIDE), "min(v) {SLIDE}"),
    (WindowCall("max", (2,), INT, WHOLE), "max(v) {WHOLE}"),
    (WindowCall("count", (2,), BIGINT, ROWS), "count(v) {ROWS}"),
    (WindowCall("first_value", (2,), INT, SLIDE), "first_value(v) {SLIDE}"),
    (WindowCall("ntile", (), BIGINT, offset=3), "ntile(3)"),
    (WindowCall("cume_dist", (), DOUBLE), "cume_dist()"),
]
FRAMES = {
    "{ROWS}": "ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING",
    "{SLIDE}": "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
    "{WHOLE}": "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
}


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 5, n).tolist()
    p = rng.integers(0, 4, n).tolist()
    v = [None if x == 4 else x for x in v]
    p = [None if x == 3 else x for x in p]
    return pa.table(
        {
            "id": pa.array(range(n), pa.int32()),
            "p": pa.array(p, pa.int32()),
            "v": pa.array(v, pa.int32()),
        }
    )


def _norm(v: object) -> object:
    return None if v is None else round(float(v), 6)  # type: ignore[arg-type]


def test_kernel_matches_duckdb() -> None:
    for seed in range(5):
        t = _table(60, seed)
        # ORDER BY v, with ties broken by the tie-break column (id) like the kernel does
        out = compute_windows(t, F, [1], [(2, False, False)], [0], [c for c, _ in CALLS])
        got = {
            r[0]: tuple(_norm(x) for x in r[3:])
            for r in zip(*[out.column(i).to_pylist() for i in range(out.num_columns)], strict=True)
        }
        # peer-based results (rank, default RANGE frame, cume_dist) see ORDER BY v only;
        # row-order based ones also the tie-break (id)
        peer = ("rank()", "dense_rank()", "sum(v)", "cume_dist()")
        exprs = ", ".join(
            sql.split(" {")[0]
            + " OVER (PARTITION BY p ORDER BY v NULLS LAST"
            + ("" if sql in peer else ", id")
            + (" " + FRAMES["{" + sql.split("{")[1]] if "{" in sql else "")
            + ")"
            for _, sql in CALLS
        )
        con = duckdb.connect()
        con.register("t", t)
        want = {
            r[0]: tuple(_norm(x) for x in r[1:])
            for r in con.execute(f"SELECT id, {exprs} FROM t").fetchall()
        }
        assert got == want, seed


def _rows(chunk: StreamChunk | None) -> list[tuple[object, ...]]:
    assert chunk is not None
    ops = chunk.ops.to_pylist()
    cols = [c.to_pylist() for c in chunk.data.columns]
    return [("+" if o in (1, 4) else "-", *r) for o, r in zip(ops, zip(*cols), strict=True)]


def test_over_window_emits_only_changed_rows_deletes_first() -> None:
    calls = [WindowCall("row_number", (), BIGINT)]
    op = OverWindowOp(
        F, [Field("rn", BIGINT)], [1], [(2, True, False)], calls, [0], LocalStateAllocator(), [0]
    )
    ins = pa.record_batch(
        [
            pa.array([1, 2, 3, 4], pa.int32()),
            pa.array([1, 1, 1, 2], pa.int32()),
            pa.array([10, 20, 30, 5], pa.int32()),
        ],
        names=["id", "p", "v"],
    )
    first = _rows(op.step([StreamChunk.inserts(ins)]))
    assert sorted(first) == [
        ("+", 1, 1, 10, 3),
        ("+", 2, 1, 20, 2),
        ("+", 3, 1, 30, 1),
        ("+", 4, 2, 5, 1),
    ]
    # delete the top row of partition 1: the others move up, partition 2 is untouched
    dele = pa.record_batch(
        [pa.array([3], pa.int32()), pa.array([1], pa.int32()), pa.array([30], pa.int32())],
        names=["id", "p", "v"],
    )
    out = _rows(op.step([StreamChunk.deletes(dele)]))
    signs = [r[0] for r in out]
    assert signs == sorted(signs, key=lambda s: s == "+")  # deletes first
    assert sorted(out) == [
        ("+", 1, 1, 10, 2),
        ("+", 2, 1, 20, 1),
        ("-", 1, 1, 10, 3),
        ("-", 2, 1, 20, 2),
        ("-", 3, 1, 30, 1),
    ]
