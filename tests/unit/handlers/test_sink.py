"""The sink framework: CREATE/DROP SINK, sink types, snapshot, commit order, recovery, retries.

A recording writer registered under the connector name `recording` (a real registry entry,
used through SQL like any connector) keeps what the framework hands it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.chunk import Op, StreamChunk
from engine.connector_registry import register_sink
from engine.database import Config, SwellDatabase
from engine.errors import EngineError
from engine.sql.parser import parse_one
from engine.stream.sink import BaseSinkWriter, SinkSpec

LOG: dict[str, list[tuple[Any, ...]]] = {}
FAIL: dict[str, int] = {}  # sink name -> how many more write/pre_commit calls fail


class RecordingWriter(BaseSinkWriter):
    def __init__(self, spec: SinkSpec) -> None:
        super().__init__(spec)
        self.log = LOG.setdefault(spec.name, [])

    def _maybe_fail(self) -> None:
        if FAIL.get(self.spec.name, 0) > 0:
            FAIL[self.spec.name] -= 1
            raise ConnectionError("downstream unavailable")

    def validate(self) -> None:
        if self.spec.options.get("bad") == "true":
            raise EngineError("option bad is bad")
        self.log.append(("validate",))

    def open(self) -> None:
        self.log.append(("open",))

    def recover(self, last_checkpoint_epoch: int, state: bytes | None) -> None:
        self.log.append(("recover", last_checkpoint_epoch, state))

    def write(self, chunk: StreamChunk, epoch: int) -> None:
        self._maybe_fail()
        self.log.append(("write", epoch, [(Op(o).name, r) for o, r in chunk.to_rows()]))

    def pre_commit(self, epoch: int) -> bytes | None:
        self._maybe_fail()
        self.log.append(("pre_commit", epoch))
        return f"state@{epoch}".encode()

    def post_commit(self, epoch: int) -> None:
        self.log.append(("post_commit", epoch))

    def close(self) -> None:
        self.log.append(("close",))


register_sink("recording", RecordingWriter)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SwellDatabase]:
    LOG.clear()
    FAIL.clear()
    d = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    try:
        yield d
    finally:
        d.close()


def run(db: SwellDatabase, sql: str) -> list[Any]:
    return db.connect("root", "dev").execute_simple(sql)


def err(db: SwellDatabase, sql: str) -> EngineError:
    with pytest.raises(EngineError) as e:
        run(db, sql)
    return e.value


def writes(name: str) -> list[tuple[str, tuple[Any, ...]]]:
    return [row for e in LOG.get(name, []) if e[0] == "write" for row in e[2]]


def test_parse_create_sink_forms() -> None:
    st = parse_one(
        "CREATE SINK IF NOT EXISTS s INTO t (a, b) AS SELECT 1 AS a WITH (connector = 'x', "
        "topic = 'y') FORMAT PLAIN ENCODE JSON (force_append_only = 'true')"
    )
    d = st.args["sink"]
    assert st.kind == "create_sink"
    assert (d.name, d.if_not_exists, d.into, d.into_columns) == ("s", True, "t", ["a", "b"])
    assert d.query == "SELECT 1 AS a"
    assert d.clauses.options == {"connector": "x", "topic": "y"}
    assert (d.clauses.format, d.clauses.encode) == ("PLAIN", "JSON")
    assert d.clauses.format_options == {"force_append_only": "true"}
    d2 = parse_one("CREATE SINK kafka_sink from public.kafka_src WITH (connector = 'k')").args[
        "sink"
    ]
    assert (d2.from_name, d2.from_schema, d2.query) == ("kafka_src", "public", None)


def test_parse_errors() -> None:
    with pytest.raises(EngineError, match="syntax error"):
        parse_one("CREATE SINK s WITH (connector = 'blackhole')")
    with pytest.raises(EngineError, match="syntax error"):
        parse_one("CREATE SINK s FROM a b WITH (connector = 'blackhole')")


def test_plain_sink_over_retracting_input_is_refused(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT)")
    e = err(db, "CREATE SINK s FROM t WITH (connector = 'recording') FORMAT PLAIN ENCODE JSON")
    assert "force_append_only='true'" in str(e) and "FORMAT ENCODE options" in str(e)
    e = err(db, "CREATE SINK s FROM t WITH (connector = 'recording', type = 'append-only')")
    assert "in WITH options" in str(e)
    e = err(
        db,
        "CREATE SINK s FROM t WITH (connector = 'recording') FORMAT UPSERT ENCODE JSON "
        "(force_append_only = 'true')",
    )
    assert 'without "FORMAT PLAIN"' in str(e)
    assert run(db, "SHOW SINKS")[0].rows == []


def test_force_append_only_drops_deletes_and_updates_emit_new_rows(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR)")
    run(db, "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    run(
        db,
        "CREATE SINK s FROM t WITH (connector = 'recording') "
        "FORMAT PLAIN ENCODE JSON (force_append_only = 'true')",
    )
    assert sorted(writes("s")) == [("INSERT", (1, "a")), ("INSERT", (2, "b"))]
    LOG["s"].clear()
    run(db, "UPDATE t SET v = 'z' WHERE k = 1")
    run(db, "DELETE FROM t WHERE k = 2")
    run(db, "INSERT INTO t VALUES (3, 'c')")
    run(db, "FLUSH")
    assert writes("s") == [("INSERT", (1, "z")), ("INSERT", (3, "c"))]


def test_upsert_sink_sees_every_op_and_only_visible_columns(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (k INT, v INT)")  # hidden _row_id stream key
    run(
        db,
        "CREATE SINK s AS SELECT k, sum(v) AS total FROM t GROUP BY k WITH ("
        "connector = 'recording', primary_key = 'k') FORMAT UPSERT ENCODE JSON",
    )
    run(db, "INSERT INTO t VALUES (1, 10)")
    run(db, "FLUSH")
    run(db, "INSERT INTO t VALUES (1, 5)")
    run(db, "FLUSH")
    run(db, "DELETE FROM t")
    run(db, "FLUSH")
    assert writes("s") == [
        ("INSERT", (1, 10)),
        ("UPDATE_DELETE", (1, 10)),
        ("UPDATE_INSERT", (1, 15)),
        ("DELETE", (1, 15)),
    ]
    spec = db.runtime.sinks[next(iter(db.runtime.sinks))].spec
    assert [f.name for f in spec.fields] == ["k", "total"] and spec.pk == [0]
    e = err(db, "CREATE SINK s2 FROM t WITH (connector = 'recording', primary_key = 'nope')")
    assert "Sink primary key column not found: nope" in str(e)


def test_snapshot_false_skips_existing_rows(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT) APPEND ONLY")
    run(db, "INSERT INTO t VALUES (1), (2)")
    run(db, "CREATE SINK s1 FROM t WITH (connector = 'recording')")
    run(db, "CREATE SINK s2 FROM t WITH (connector = 'recording', snapshot = 'false')")
    run(db, "INSERT INTO t VALUES (3)")
    run(db, "FLUSH")
    assert sorted(writes("s1")) == [("INSERT", (1,)), ("INSERT", (2,)), ("INSERT", (3,))]
    assert writes("s2") == [("INSERT", (3,))]


def test_snapshot_false_aggregate_still_counts_existing_rows(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT)")
    run(db, "INSERT INTO t VALUES (1), (1)")
    run(
        db,
        "CREATE SINK s AS SELECT a, count(*) AS n FROM t GROUP BY a WITH ("
        "connector = 'recording', snapshot = 'false', primary_key = 'a') "
        "FORMAT UPSERT ENCODE JSON",
    )
    assert writes("s") == []
    run(db, "INSERT INTO t VALUES (1)")
    run(db, "FLUSH")
    assert writes("s") == [("UPDATE_DELETE", (1, 2)), ("UPDATE_INSERT", (1, 3))]


def test_commit_order_and_validation_at_create(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT) APPEND ONLY")
    e = err(db, "CREATE SINK s FROM t WITH (connector = 'recording', bad = 'true')")
    assert "option bad is bad" in str(e)
    assert run(db, "SHOW SINKS")[0].rows == []
    LOG.clear()
    run(db, "CREATE SINK s FROM t WITH (connector = 'recording')")
    run(db, "INSERT INTO t VALUES (1)")
    run(db, "FLUSH")
    kinds = [e[0] for e in LOG["s"]]
    assert kinds[:2] == ["validate", "open"]
    i = kinds.index("write")
    assert kinds[i : i + 3] == ["write", "pre_commit", "post_commit"]
    w, p, c = LOG["s"][i : i + 3]
    assert w[1] == p[1] == c[1]  # all for the same epoch
    run(db, "DROP SINK s")
    assert LOG["s"][-1] == ("close",)
    notices = run(db, "DROP SINK IF EXISTS s")[0].notices
    assert [n.message for n in notices] == ['sink "s" does not exist, skipping']


def test_recovery_passes_checkpointed_state_and_replays(tmp_path: Path) -> None:
    LOG.clear()
    data = tmp_path / "data"
    d = SwellDatabase(Config(data_dir=data, barrier_interval_ms=60_000))
    run(d, "CREATE TABLE t (a INT) APPEND ONLY")
    run(d, "CREATE SINK s FROM t WITH (connector = 'recording')")
    run(d, "INSERT INTO t VALUES (1)")
    run(d, "FLUSH")
    epoch = d.runtime.epoch
    run(d, "INSERT INTO t VALUES (2)")  # acknowledged (WAL), not checkpointed
    d.runtime._stop.set()  # simulate a crash: no final barrier
    d.wal.close()
    d.store.close()
    LOG.clear()
    d2 = SwellDatabase(Config(data_dir=data, barrier_interval_ms=60_000))
    try:
        assert LOG["s"][:2] == [("open",), ("recover", epoch, f"state@{epoch}".encode())]
        run(d2, "FLUSH")
        assert writes("s") == [("INSERT", (2,))]
        assert [r[0] for r in run(d2, "SHOW SINKS")[0].rows] == ["s"]
    finally:
        d2.close()


def test_failing_writer_retries_and_loses_nothing(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT) APPEND ONLY")
    run(db, "CREATE SINK s FROM t WITH (connector = 'recording')")
    FAIL["s"] = 3  # write fails once, then pre_commit retries fail twice more
    run(db, "INSERT INTO t VALUES (1)")
    run(db, "FLUSH")
    assert writes("s") == [("INSERT", (1,))]
    st = db.runtime.sinks[next(iter(db.runtime.sinks))].status
    assert st.errors == 3 and st.retries >= 2 and st.state == "running"
    assert "downstream unavailable" in (st.last_error or "")
    assert st.rows == 1 and st.last_commit_epoch == db.runtime.epoch


def test_drop_source_relation_with_sink_needs_cascade(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT) APPEND ONLY")
    run(db, "CREATE SINK s FROM t WITH (connector = 'blackhole')")
    e = err(db, "DROP TABLE t")
    assert "sink s depends on table t" in (e.detail or "")
    run(db, "DROP TABLE t CASCADE")
    assert run(db, "SHOW SINKS")[0].rows == []
    assert db.runtime.sinks == {}


def test_timer_barrier_holds_the_epoch_until_the_sink_flushes(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT) APPEND ONLY")
    run(db, "CREATE SINK s FROM t WITH (connector = 'recording')")
    rt = db.runtime
    epoch = rt.epoch
    FAIL["s"] = 2  # the write, then one pre-commit attempt
    run(db, "INSERT INTO t VALUES (1)")
    rt.barrier()  # write fails, one flush attempt fails: nothing committed
    assert rt.epoch == epoch and rt.checkpointer.last_epoch == epoch
    st = rt.sinks[next(iter(rt.sinks))].status
    assert st.state == "retrying" and st.errors == 2
    run(db, "INSERT INTO t VALUES (2)")  # DML still works while the sink is held back
    rt.barrier()  # commits the held epoch, then steps and commits the next one
    assert rt.epoch == epoch + 2 and rt.checkpointer.last_epoch == epoch + 2
    assert writes("s") == [("INSERT", (1,)), ("INSERT", (2,))] and st.state == "running"


def test_sink_status_system_table(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT) APPEND ONLY")
    run(db, "CREATE SINK s FROM t WITH (connector = 'blackhole')")
    run(db, "INSERT INTO t VALUES (1), (2)")
    run(db, "FLUSH")
    r = run(
        db,
        "SELECT sink_name, connector, sink_type, state, rows_written, errors, "
        "last_commit_epoch IS NOT NULL, detail->>'discarded' FROM rw_sink_status",
    )[0]
    assert r.rows == [("s", "blackhole", "append-only", "running", 2, 0, True, "2")]


def test_append_only_view_over_append_only_input_needs_no_force(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT, b VARCHAR) APPEND ONLY")
    run(db, "CREATE MATERIALIZED VIEW v AS SELECT a, upper(b) AS b FROM t WHERE a > 0")
    run(db, "CREATE MATERIALIZED VIEW agg AS SELECT a, count(*) AS n FROM t GROUP BY a")
    run(db, "CREATE SINK s FROM v WITH (connector = 'recording') FORMAT PLAIN ENCODE JSON")
    e = err(db, "CREATE SINK s2 FROM agg WITH (connector = 'recording') FORMAT PLAIN ENCODE JSON")
    assert "force_append_only" in str(e)
    run(db, "INSERT INTO t VALUES (1, 'x'), (-1, 'y')")
    run(db, "FLUSH")
    assert writes("s") == [("INSERT", (1, "X"))]


def test_rw_sinks_shows_connector_and_type(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE t (a INT)")
    run(
        db,
        "CREATE SINK s FROM t WITH (connector = 'blackhole') "
        "FORMAT PLAIN ENCODE JSON (force_append_only = 'true')",
    )
    rows = run(db, "SELECT name, connector, sink_type FROM rw_catalog.rw_sinks")[0].rows
    assert rows == [("s", "blackhole", "force-append-only")]


def test_sink_into_table_upserts_and_survives_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    d = SwellDatabase(Config(data_dir=data, barrier_interval_ms=60_000))
    run(d, "CREATE TABLE src (k INT, v INT)")
    run(d, "CREATE TABLE totals (k INT PRIMARY KEY, total BIGINT, note VARCHAR)")
    run(d, "CREATE TABLE log (v INT)")
    run(d, "INSERT INTO src VALUES (1, 10), (2, 5)")
    run(d, "CREATE SINK s INTO totals (k, total) AS SELECT k, sum(v) FROM src GROUP BY k")
    e = err(d, "CREATE SINK bad INTO log AS SELECT sum(v) FROM src")
    assert "Only append-only sinks can sink to a table without primary keys" in str(e)
    run(
        d,
        "CREATE SINK s2 INTO log AS SELECT v FROM src WITH (type = 'append-only', "
        "force_append_only = 'true')",
    )
    run(d, "FLUSH")
    q = "SELECT k, total, note FROM totals ORDER BY k"
    assert run(d, q)[0].rows == [(1, 10, None), (2, 5, None)]
    run(d, "INSERT INTO src VALUES (1, 1)")
    run(d, "DELETE FROM src WHERE k = 2")
    run(d, "FLUSH")
    assert run(d, q)[0].rows == [(1, 11, None)]
    assert sorted(run(d, "SELECT v FROM log")[0].rows) == [(1,), (5,), (10,)]
    run(d, "INSERT INTO src VALUES (1, 100)")
    d.runtime.barrier()  # the sink's rows are in this checkpoint, not yet in the table
    d.runtime._stop.set()  # crash
    d.wal.close()
    d.store.close()
    d2 = SwellDatabase(Config(data_dir=data, barrier_interval_ms=60_000))
    try:
        run(d2, "FLUSH")
        assert run(d2, q)[0].rows == [(1, 111, None)]
        assert sorted(run(d2, "SELECT v FROM log")[0].rows) == [(1,), (5,), (10,), (100,)]
        e = err(d2, "DROP TABLE totals")
        assert "sink s depends on table totals" in (e.detail or "")
    finally:
        d2.close()
