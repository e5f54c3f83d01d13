"""Time windows and watermarks stay equal to a from-scratch computation, out of order and late.

Hypothesis drives INSERT / UPDATE / DELETE batches into a table with a watermark
(`ts - 10 s`) through the real engine, with event times scattered around a moving frontier
so that rows arrive out of order and some are late. After every FLUSH:

* views without EMIT ON WINDOW CLOSE (TUMBLE and HOP aggregations, a window join) equal
  the same SELECT run ad hoc and the equivalent DuckDB query over the table's rows
  (`time_bucket` for the windows), an independent implementation;
* the EOWC view equals a model of RisingWave's semantics: per epoch, changes whose
  window is already closed are dropped as late, the watermark advances to the largest
  inserted `ts` minus 10 s, and every window whose end passed it appears once with the
  aggregate of its accepted changes.

A restart in the middle checks that views, EOWC buffers and watermarks recover.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.database import Config, open_database

T0 = datetime(2024, 1, 1)
DELAY = 10
WIN = 60

VIEWS = {
    "v_tumble": "SELECT window_start, k, count(*) AS n, sum(v) AS s, min(v) AS mn, max(v) AS mx "
    "FROM TUMBLE(t, ts, INTERVAL '1' MINUTE) GROUP BY window_start, k",
    "v_hop": "SELECT window_start, window_end, count(*) AS n, sum(v) AS s "
    "FROM HOP(t, ts, INTERVAL '30' SECOND, INTERVAL '90' SECOND) GROUP BY window_start, window_end",
    "v_wjoin": "SELECT a.id, b.id AS bid, a.window_start FROM TUMBLE(t, ts, INTERVAL '1' MINUTE) a "
    "JOIN TUMBLE(t, ts, INTERVAL '1' MINUTE) b ON a.window_start = b.window_start AND a.k = b.k",
}
DUCK = {
    "v_tumble": "SELECT time_bucket(INTERVAL '1 minute', ts) AS ws, k, count(*), sum(v), "
    "min(v), max(v) FROM t GROUP BY ALL",
    "v_hop": "SELECT time_bucket(INTERVAL '30 seconds', ts) - j * INTERVAL '30 seconds' AS ws, "
    "time_bucket(INTERVAL '30 seconds', ts) - j * INTERVAL '30 seconds' + INTERVAL '90 seconds', "
    "count(*), sum(v) FROM t, range(3) r(j) WHERE ts IS NOT NULL GROUP BY ALL",
    "v_wjoin": "SELECT a.id, b.id, time_bucket(INTERVAL '1 minute', a.ts) FROM t a JOIN t b "
    "ON time_bucket(INTERVAL '1 minute', a.ts) = time_bucket(INTERVAL '1 minute', b.ts) "
    "AND a.k = b.k",
}
EOWC = (
    "SELECT window_start, count(*) AS n, sum(v) AS s FROM TUMBLE(t, ts, INTERVAL '1' MINUTE) "
    "GROUP BY window_start EMIT ON WINDOW CLOSE"
)

keys = st.sampled_from(["a", "b", None])
vals = st.one_of(st.none(), st.integers(-3, 9))
offs = st.integers(-90, 20)  # seconds around the frontier: out of order, some late
op = st.one_of(
    st.tuples(st.just("ins"), st.integers(0, 12), keys, vals, offs),
    st.tuples(st.just("del"), st.integers(0, 12)),
    st.tuples(st.just("upd"), st.integers(0, 12), vals),
    st.tuples(st.just("mv"), st.integers(0, 12), offs),
)
batches = st.lists(st.lists(op, min_size=1, max_size=8), min_size=2, max_size=7)


def _lit(x: object) -> str:
    return "NULL" if x is None else f"'{x}'" if isinstance(x, str) else str(x)


class Model:
    """The table's rows plus the EOWC semantics, epoch by epoch."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[str | None, int | None, datetime]] = {}
        self.changes: list[tuple[int, int | None, datetime]] = []  # this epoch's (sign, v, ts)
        self.wm: datetime | None = None
        self.closed: datetime | None = None  # windows before this are emitted
        self.acc: dict[datetime, list[int]] = {}  # window -> [count, sum, non-null count]
        self.emitted: dict[datetime, tuple[int, int | None]] = {}

    def apply(self, o: tuple, frontier: datetime) -> str | None:  # type: ignore[type-arg]
        kind, i = o[0], o[1]
        old = self.rows.get(i)
        if kind == "ins":
            if old is not None:
                return None
            ts = frontier + timedelta(seconds=o[4])
            self.rows[i] = (o[2], o[3], ts)
            self.changes.append((1, o[3], ts))
            return f"INSERT INTO t VALUES ({i}, {_lit(o[2])}, {_lit(o[3])}, '{ts}')"
        if old is None:
            return None
        self.changes.append((-1, old[1], old[2]))
        if kind == "del":
            del self.rows[i]
            return f"DELETE FROM t WHERE id = {i}"
        if kind == "upd":
            new = (old[0], o[2], old[2])
            sql = f"UPDATE t SET v = {_lit(o[2])} WHERE id = {i}"
        else:
            new = (old[0], old[1], frontier + timedelta(seconds=o[2]))
            sql = f"UPDATE t SET ts = '{new[2]}' WHERE id = {i}"
        self.rows[i] = new
        self.changes.append((1, new[1], new[2]))
        return sql

    def flush(self) -> None:
        for sign, v, ts in self.changes:
            w = _window(ts)
            if self.closed is not None and w < self.closed:
                continue  # late: the window was already emitted
            a = self.acc.setdefault(w, [0, 0, 0])
            a[0] += sign
            if v is not None:
                a[1] += sign * v
                a[2] += sign
        for sign, _v, ts in self.changes:  # late inserts still move the watermark
            if sign > 0:
                wm = ts - timedelta(seconds=DELAY)
                self.wm = wm if self.wm is None else max(self.wm, wm)
        self.changes = []
        if self.wm is None:
            return
        cut = _window(self.wm)
        if self.closed is not None and cut <= self.closed:
            return
        for w in sorted(k for k in self.acc if k < cut):
            n, s, nn = self.acc.pop(w)
            if n:
                self.emitted[w] = (n, s if nn else None)
        self.closed = cut


def _window(ts: datetime) -> datetime:
    sec = int((ts - T0).total_seconds())
    return T0 + timedelta(seconds=sec - sec % WIN)


def _norm(rows: list[tuple]) -> list[tuple]:  # type: ignore[type-arg]
    return sorted((tuple(r) for r in rows), key=repr)


def _select(s, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    return s.execute_simple(sql)[0].rows


def _check(s, model: Model) -> None:  # type: ignore[no-untyped-def]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, k VARCHAR, v INTEGER, ts TIMESTAMP)")
    table = _select(s, "SELECT id, k, v, ts FROM t")
    assert _norm(table) == _norm([(i, *r) for i, r in model.rows.items()])
    if table:
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", table)
    for name, q in VIEWS.items():
        got = _norm(_select(s, f"SELECT * FROM {name}"))
        assert got == _norm(_select(s, q)), f"{name}: view != ad-hoc query"
        assert got == _norm(con.execute(DUCK[name]).fetchall()), f"{name}: view != duckdb"
    got = _norm(_select(s, "SELECT * FROM v_eowc"))
    want = _norm([(w, n, sm) for w, (n, sm) in model.emitted.items()])
    assert got == want, "v_eowc != closed windows"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches)
def test_windows_and_eowc_equal_recompute(batches: list[list[tuple]]) -> None:  # type: ignore[type-arg]
    model = Model()
    with tempfile.TemporaryDirectory() as d:

        def run(db_batches: list[list[tuple]], start: int, create: bool) -> None:  # type: ignore[type-arg]
            db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
            try:
                s = db.connect("root", "dev")
                if create:
                    s.execute_simple(
                        "CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT, ts TIMESTAMP, "
                        "WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)"
                    )
                    for name, q in VIEWS.items():
                        s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
                    s.execute_simple(f"CREATE MATERIALIZED VIEW v_eowc AS {EOWC}")
                _check(s, model)
                for j, batch in enumerate(db_batches):
                    frontier = T0 + timedelta(seconds=120 + 50 * (start + j))
                    for o in batch:
                        sql = model.apply(o, frontier)
                        if sql is not None:
                            s.execute_simple(sql)
                    s.execute_simple("FLUSH")
                    model.flush()
                    _check(s, model)
            finally:
                db.close()

        half = (len(batches) + 1) // 2
        run(batches[:half], 0, True)
        run(batches[half:], half, False)  # after a restart


DYN = {
    "d_max": "SELECT id, v FROM t WHERE v > (SELECT max(v) FROM t2)",
    "d_avg": "SELECT id, v FROM t WHERE (SELECT avg(v) FROM t2) >= v AND id % 2 = 0",
    "d_cnt": "SELECT id FROM t WHERE v <= (SELECT count(*) FROM t2 WHERE v > 2)",
}
side = st.sampled_from(["t", "t2"])
dyn_op = st.one_of(
    st.tuples(st.just("ins"), side, st.integers(0, 8), vals),
    st.tuples(st.just("del"), side, st.integers(0, 8)),
    st.tuples(st.just("upd"), side, st.integers(0, 8), vals),
)


def _dyn_sql(o: tuple) -> str:  # type: ignore[type-arg]
    if o[0] == "ins":
        return f"INSERT INTO {o[1]} VALUES ({o[2]}, {_lit(o[3])})"
    if o[0] == "del":
        return f"DELETE FROM {o[1]} WHERE id = {o[2]}"
    return f"UPDATE {o[1]} SET v = {_lit(o[3])} WHERE id = {o[2]}"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(dyn_op, min_size=1, max_size=8), min_size=1, max_size=6))
def test_dynamic_filters_equal_recompute(batches: list[list[tuple]]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            s.execute_simple("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            s.execute_simple("CREATE TABLE t2 (id INT PRIMARY KEY, v INT)")
            for name, q in DYN.items():
                s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
            for i, batch in enumerate(batches):
                if i == len(batches) // 2 and i:  # restart in the middle: state reloads
                    db.close()
                    db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
                    s = db.connect("root", "dev")
                for o in batch:
                    s.execute_simple(_dyn_sql(o))
                s.execute_simple("FLUSH")
                con = duckdb.connect()
                for tname in ("t", "t2"):
                    con.execute(f"CREATE TABLE {tname} (id INTEGER, v INTEGER)")
                    rows = _select(s, f"SELECT id, v FROM {tname}")
                    if rows:
                        con.executemany(f"INSERT INTO {tname} VALUES (?, ?)", rows)
                for name, q in DYN.items():
                    got = _norm(_select(s, f"SELECT * FROM {name}"))
                    assert got == _norm(_select(s, q)), f"{name}: view != ad-hoc query"
                    assert got == _norm(con.execute(q).fetchall()), f"{name}: view != duckdb"
        finally:
            db.close()


IJ = {
    "ij": "SELECT a.id AS aid, b.id AS bid FROM a JOIN b ON a.k = b.k "
    "AND a.ts BETWEEN b.ts - INTERVAL '30' SECOND AND b.ts + INTERVAL '10' SECOND",
    "ij_agg": "SELECT a.k, count(*) AS n FROM a JOIN b ON a.k = b.k AND a.ts >= b.ts "
    "AND a.ts < b.ts + INTERVAL '20' SECOND GROUP BY a.k",
}
ij_op = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([1, 2, None]), st.integers(-9, 20))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(ij_op, min_size=1, max_size=8), min_size=1, max_size=8))
def test_interval_joins_with_watermark_cleaning_equal_recompute(
    batches: list[list[tuple]],  # type: ignore[type-arg]
) -> None:
    """Out-of-order but never late inserts: cleaning by watermark must not lose a pair."""
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            for tname in ("a", "b"):
                s.execute_simple(
                    f"CREATE TABLE {tname} (id INT PRIMARY KEY, k INT, ts TIMESTAMP, "
                    "WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)"
                )
            for name, q in IJ.items():
                s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
            n = 0
            for j, batch in enumerate(batches):
                frontier = T0 + timedelta(seconds=30 * j)
                for tname, k, off in batch:
                    n += 1
                    ts = frontier + timedelta(seconds=off)
                    s.execute_simple(f"INSERT INTO {tname} VALUES ({n}, {_lit(k)}, '{ts}')")
                s.execute_simple("FLUSH")
                for name, q in IJ.items():
                    got = _norm(_select(s, f"SELECT * FROM {name}"))
                    assert got == _norm(_select(s, q)), f"{name}: view != ad-hoc query"
        finally:
            db.close()
