"""Stored stream plans (engine/stream/job_plan.py): a view is built from the plan stored at
CREATE and never planned again at recovery; entries stored without a plan are planned
once with their recorded state-table ids; the encoding round-trips every plan shape."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from engine.database import Config, SwellDatabase, open_database
from engine.errors import InternalError
from engine.expr import codec as expr_codec
from engine.expr.core import Func, InputRef
from engine.plan import stream_codec
from engine.plan.stream_codec import decode_plan, encode_plan
from engine.plan.stream_plan import StreamPlan, explain_lines
from engine.state import codec
from engine.state import format as data_format
from engine.state.disk_table import DiskStateTable
from engine.state.format import FORMAT_KEY
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.stream.job_plan import PLAN_KEY
from engine.stream.operators import hash_join
from engine.types import INT

SETUP = [
    "CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT)",
    "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'a', 5)",
]
VIEWS = {
    "agg": "SELECT k, count(*) AS n, min(v) AS lo, sum(DISTINCT v) AS sd FROM t "
    "WHERE v > 1 GROUP BY k",
    "j": "SELECT a.id, b.k FROM t AS a LEFT JOIN t AS b ON a.id = b.id + 1",
    "top": "SELECT id, v FROM t ORDER BY v DESC LIMIT 2",
    "inl": "SELECT id, k IN ('a', 'c') AS x, k LIKE 'a%' AS y, v / 2 AS h FROM t",
}
QUERIES = {
    "agg": "SELECT * FROM agg ORDER BY k",
    "j": "SELECT * FROM j ORDER BY id",
    "top": "SELECT * FROM top ORDER BY v",
    "inl": "SELECT * FROM inl ORDER BY id",
}


def _open(d: Path, cls: type[SwellDatabase] = SwellDatabase) -> SwellDatabase:
    return cls(Config(data_dir=d, barrier_interval_ms=60_000))


def _rows(s: Any, q: str) -> list[tuple[Any, ...]]:
    return list(s.execute_simple(q)[-1].rows)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "data"
    db = open_database(Config(data_dir=d, barrier_interval_ms=60_000))
    try:
        s = db.connect("root", "dev")
        for q in SETUP:
            s.execute_simple(q)
        for name, q in VIEWS.items():
            s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        s.execute_simple("FLUSH")
    finally:
        db.close()
    yield d


def _check_after_insert(s: Any) -> None:
    s.execute_simple("INSERT INTO t VALUES (4, 'b', 1), (5, 'c', 100)")
    s.execute_simple("DELETE FROM t WHERE id = 1")
    s.execute_simple("FLUSH")
    assert _rows(s, QUERIES["agg"]) == [("a", 1, 5, 5), ("b", 1, 20, 20), ("c", 1, 100, 100)]
    assert _rows(s, QUERIES["j"]) == [(2, None), (3, "b"), (4, "a"), (5, "b")]
    assert _rows(s, QUERIES["top"]) == [(2, 20), (5, 100)]
    assert _rows(s, QUERIES["inl"]) == [
        (2, False, False, 10),
        (3, True, True, 2),
        (4, False, False, 0),
        (5, True, False, 50),
    ]


class _NoPlanning(SwellDatabase):
    """Recovery must not plan any job that has a stored plan."""

    calls: list[str] = []

    def _plan_from_sql(self, rel: Any, ids: Any) -> Any:
        _NoPlanning.calls.append(rel.name)
        return super()._plan_from_sql(rel, ids)


def test_recovery_builds_the_stored_plan_without_planning(data_dir: Path) -> None:
    _NoPlanning.calls = []
    db = _open(data_dir, _NoPlanning)
    try:
        # only the IN-list/LIKE view needs its SQL bound again, for those two kernels
        assert _NoPlanning.calls == ["inl"]
        _check_after_insert(db.connect("root", "dev"))
    finally:
        db.close()


def test_state_ids_stay_with_their_operators(data_dir: Path) -> None:
    db = _open(data_dir)
    try:
        rel = db.catalog.find("agg")
        assert rel is not None
        plan = decode_plan(rel.extra[PLAN_KEY])
        by_name = {t.name: t.id for t in plan.tables}
        assert by_name == rel.state_tables
        assert sorted(by_name) == [
            "mat.segments",
            "n2.distinct_2",
            "n2.groups",
            "n2.minmax_1",
        ]
        flow = db.runtime.views[rel.id]
        assert sorted(t.table_id for t in flow.tables) == sorted(by_name.values())
    finally:
        db.close()


def _as_format_1(d: Path) -> dict[str, dict[str, int]]:
    """Make `d` look like a directory written before plans were stored: format version 1,
    catalog entries without plans. Returns each view's recorded state-table ids."""
    db = _open(d)
    try:
        ids = {}
        for rel in db.catalog.relations.values():
            if rel.extra.pop(PLAN_KEY, None) is not None:
                ids[rel.name] = dict(rel.state_tables)
        db.runtime._dirty_catalog = True
        db.connect("root", "dev").execute_simple("FLUSH")
    finally:
        db.close()
    with StateStore.open(d / "state") as st:
        st.db.put(FORMAT_KEY, struct.pack(">I", 1))
    return ids


@pytest.mark.parametrize("by", ["format migration", "recovery"])
def test_jobs_without_a_plan_are_planned_once_with_their_ids(
    data_dir: Path, by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _as_format_1(data_dir)
    assert sorted(ids) == sorted(VIEWS)
    if by == "recovery":  # the per-entry fallback, without the format step
        monkeypatch.setattr(
            data_format, "MIGRATIONS", {**data_format.MIGRATIONS, 1: lambda c: None}
        )
    db = _open(data_dir)
    try:
        for name, before in ids.items():
            rel = db.catalog.find(name)
            assert rel is not None and PLAN_KEY in rel.extra
            assert rel.state_tables == before
            plan = decode_plan(rel.extra[PLAN_KEY], lambda f: f)  # kernels not needed here
            assert {t.name: t.id for t in plan.tables} == before
        _check_after_insert(db.connect("root", "dev"))
    finally:
        db.close()
    with StateStore.open(data_dir / "state") as st:
        assert data_format.stored_version(st) == data_format.FORMAT_VERSION == 11
    _NoPlanning.calls = []
    db = _open(data_dir, _NoPlanning)  # the plans were stored
    try:
        assert _NoPlanning.calls == ["inl"]
    finally:
        db.close()


def test_stored_plan_is_versioned_json(data_dir: Path) -> None:
    db = _open(data_dir)
    try:
        rel = db.catalog.find("j")
        assert rel is not None
        data = rel.extra[PLAN_KEY]
        assert json.loads(json.dumps(data)) == data
        assert data["version"] == 1
        kinds = [n["node"] for n in data["nodes"]]
        assert kinds == [
            "StreamProject",  # each side: the columns the query reads (plan_prune) ...
            "StreamProject",  # ... then its join key
            "StreamProject",
            "StreamProject",
            "StreamHashJoin",
            "StreamProject",
            "StreamProject",
            "StreamMaterialize",
        ]
        again = encode_plan(decode_plan(data))
        assert again == data
        shown = explain_lines(decode_plan(data))
        assert shown[3].startswith("    └─StreamHashJoin { type: LeftOuter, predicate: _jk_l0")
        bad = dict(data, version=99)
        with pytest.raises(InternalError, match="format version 99"):
            decode_plan(bad)
    finally:
        db.close()


def test_a_plan_that_cannot_be_decoded_names_its_job(data_dir: Path) -> None:
    db = _open(data_dir)
    try:
        rel = db.catalog.find("agg")
        assert rel is not None
        pred = rel.extra[PLAN_KEY]["nodes"][0]["predicate"]
        assert pred["name"] == "greater"
        pred["name"] = "no_such_function"
        db.runtime._dirty_catalog = True
        db.connect("root", "dev").execute_simple("FLUSH")
    finally:
        db.close()
    with pytest.raises(
        InternalError, match='materialized view "agg": .*no function no_such_function'
    ):
        _open(data_dir)


def test_group_tables_move_to_the_disk_layout(data_dir: Path) -> None:
    """Format 2 -> 3: an aggregation's group table written as a resident table's log
    records is rewritten in the disk-table layout; the view answers as before."""
    db = _open(data_dir)
    try:
        rel = db.catalog.find("agg")
        assert rel is not None
        gid = rel.state_tables["n2.groups"]
        want = _rows(db.connect("root", "dev"), QUERIES["agg"])
    finally:
        db.close()
    with StateStore.open(data_dir / "state") as st:  # rewrite it as format 2 had it
        disk = DiskStateTable(gid, "groups", st, dist_len=1)
        rows = dict(disk.items())
        assert rows
        old = StateTable(gid, "groups")
        old.put_many(list(rows), list(rows.values()))
        batch = st.new_batch()
        disk.drop(batch)
        old.write_dirty(batch)
        st.write(batch)
        st.db.put(FORMAT_KEY, struct.pack(">I", 2))
    db = _open(data_dir)
    try:
        assert _rows(db.connect("root", "dev"), QUERIES["agg"]) == want
        _check_after_insert(db.connect("root", "dev"))
    finally:
        db.close()
    with StateStore.open(data_dir / "state") as st:
        assert data_format.stored_version(st) == data_format.FORMAT_VERSION
        assert (
            st.last_key_in(codec.table_prefix(gid) + b"\x01", codec.table_prefix(gid + 1)) is None
        )
        assert dict(DiskStateTable(gid, "groups", st, dist_len=1).items()).keys() >= rows.keys()


def test_join_sides_move_to_the_keyed_layout(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Format 5 -> 6: a hash join's sides written in the resident segment layout are
    converted to the keyed disk layout when the view loads them; the view answers as
    before and keeps joining new rows."""
    with monkeypatch.context() as m:  # build the state as format 4 wrote it
        m.setattr(hash_join, "DiskStateTable", type("NotDisk", (), {}))
        db = _open(data_dir)
        try:
            s = db.connect("root", "dev")
            s.execute_simple("DROP MATERIALIZED VIEW j")
            s.execute_simple(f"CREATE MATERIALIZED VIEW j AS {VIEWS['j']}")
            s.execute_simple("FLUSH")
            rel = db.catalog.find("j")
            assert rel is not None
            sides = {n: i for n, i in rel.state_tables.items() if n.endswith((".left", ".right"))}
            want = _rows(db.connect("root", "dev"), QUERIES["j"])
        finally:
            db.close()
    with StateStore.open(data_dir / "state") as st:
        batch = st.new_batch()
        for tid in sides.values():
            disk = DiskStateTable(tid, "side", st, dist_len=1)
            rows = dict(disk.items())
            assert ("meta",) in rows  # the segment layout
            old = StateTable(tid, "side")
            old.put_many(list(rows), list(rows.values()))
            disk.drop(batch)
            old.write_dirty(batch)
        st.write(batch)
        st.db.put(FORMAT_KEY, struct.pack(">I", 5))
    db = _open(data_dir)
    try:
        assert _rows(db.connect("root", "dev"), QUERIES["j"]) == want
        _check_after_insert(db.connect("root", "dev"))
    finally:
        db.close()
    with StateStore.open(data_dir / "state") as st:
        assert data_format.stored_version(st) == data_format.FORMAT_VERSION
        for tid in sides.values():
            prefix, end = codec.table_prefix(tid), codec.table_prefix(tid + 1)
            assert st.last_key_in(prefix + b"\x01", end) is None
            keyed = DiskStateTable(tid, "s", st, dist_len=1)
            assert all(len(k) == 1 for k, v in keyed.items() if len(v) == 3)


def _chain(n: int, kernel: Any) -> Func:
    """`a + a + ... + a` with `n` additions, nested as the parser builds it."""
    a = InputRef(0, INT, "a")
    e: Func = Func("add", (a, a), INT, kernel, "+")
    for _ in range(n - 1):
        e = Func("add", (e, a), INT, kernel, "+")
    return e


def test_calls_are_found_in_a_deep_expression_in_linear_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stored call is found among the plan's calls by its stored form, also deep inside
    a 2,000-term sum; building those forms serializes each node once (building every
    sub-call's form from scratch was quadratic: minutes for such a view)."""
    bound = _chain(2000, kernel=lambda *_: None)
    plan = cast(StreamPlan, SimpleNamespace(nodes=[SimpleNamespace(exprs=[bound])]))
    calls = [0]
    real = expr_codec.expr_to_json

    def counting(e: Any) -> Any:
        calls[0] += 1
        return real(e)

    monkeypatch.setattr(expr_codec, "expr_to_json", counting)
    monkeypatch.setattr(stream_codec, "expr_to_json", counting)
    find = stream_codec.funcs_of(plan)
    assert calls[0] == 0  # nothing is indexed until a lookup asks
    decoded = _chain(1500, kernel=None)  # a stored call without its kernel
    found = find(decoded)
    assert found is not None and found.kernel is bound.args[0].args[0].kernel
    assert found.args[1] == decoded.args[1] and str(found) == str(decoded)
    assert calls[0] <= 3 * 2000
    assert find(Func("add", (InputRef(1, INT, "b"), InputRef(0, INT, "a")), INT, None, "+")) is None
