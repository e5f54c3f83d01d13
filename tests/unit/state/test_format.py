"""Data-directory format versions: stamped, checked, migrated in one write, or refused."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from engine.database import Config, SwellDatabase
from engine.state import format as data_format
from engine.state.format import FORMAT_KEY, DataFormatError, MigrationContext
from engine.state.store import StateStore


def open_db(path: Path) -> SwellDatabase:
    return SwellDatabase(Config(data_dir=path, barrier_interval_ms=3_600_000))


def stored(path: Path) -> int | None:
    with StateStore.open(path / "state") as st:
        return data_format.stored_version(st)


def set_version(path: Path, version: int | None) -> None:
    with StateStore.open(path / "state") as st:
        if version is None:
            st.db.delete(FORMAT_KEY)
        else:
            st.db.put(FORMAT_KEY, struct.pack(">I", version))


def make_dir(path: Path) -> None:
    db = open_db(path)
    s = db.connect("root", "dev")
    s.execute_simple("CREATE TABLE t (a INT)")
    s.execute_simple("INSERT INTO t VALUES (1), (2)")
    db.close()


def count(path: Path) -> int:
    db = open_db(path)
    try:
        rows = db.connect("root", "dev").execute_simple("SELECT count(*) FROM t")[0].rows
        return int(rows[0][0])
    finally:
        db.close()


def test_a_fresh_directory_is_stamped_with_the_current_version(tmp_path: Path) -> None:
    open_db(tmp_path).close()
    assert stored(tmp_path) == data_format.FORMAT_VERSION


def test_a_directory_without_a_version_is_version_1_and_opens(tmp_path: Path) -> None:
    make_dir(tmp_path)
    set_version(tmp_path, None)  # as written before versions existed
    assert stored(tmp_path) == data_format.UNVERSIONED == 1
    assert count(tmp_path) == 2
    assert stored(tmp_path) == data_format.FORMAT_VERSION


def test_a_newer_directory_is_refused_naming_both_versions(tmp_path: Path) -> None:
    make_dir(tmp_path)
    newer = data_format.FORMAT_VERSION + 1
    set_version(tmp_path, newer)
    with pytest.raises(DataFormatError) as ei:
        open_db(tmp_path)
    msg = str(ei.value)
    assert f"format version {newer}" in msg
    assert f"format version {data_format.FORMAT_VERSION}" in msg
    assert stored(tmp_path) == newer  # untouched, and the store was closed (reopens)


def test_an_older_directory_without_a_migration_path_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dir(tmp_path)
    set_version(tmp_path, 1)
    monkeypatch.setattr(data_format, "FORMAT_VERSION", 3)
    monkeypatch.setattr(data_format, "MIGRATIONS", {2: lambda ctx: None})  # 2 -> 3 only
    with pytest.raises(DataFormatError) as ei:
        open_db(tmp_path)
    assert "format version 1" in str(ei.value) and "format version 3" in str(ei.value)
    assert "from format version 1 to 2" in (ei.value.detail or "")
    assert stored(tmp_path) == 1


def test_an_older_directory_is_migrated_once_in_one_atomic_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dir(tmp_path)
    set_version(tmp_path, 1)
    seen: list[int] = []

    def one_to_two(ctx: MigrationContext) -> None:
        assert ctx.db is not None and ctx.db.catalog.find("t") is not None  # planner usable
        seen.append(1)
        ctx.batch.put(b"\xff\xffmigrated", b"yes")

    def two_to_three(ctx: MigrationContext) -> None:  # a catalog change, as a plan store does
        seen.append(2)
        ctx.db.catalog.find("t").extra["migrated"] = "2->3"
        ctx.extras["catalog"] = ctx.db.catalog.to_bytes()

    monkeypatch.setattr(data_format, "FORMAT_VERSION", 3)
    monkeypatch.setattr(data_format, "MIGRATIONS", {1: one_to_two, 2: two_to_three})
    assert count(tmp_path) == 2
    assert seen == [1, 2]
    with StateStore.open(tmp_path / "state") as st:
        assert data_format.stored_version(st) == 3
        assert st.get(b"\xff\xffmigrated") == b"yes"
    assert count(tmp_path) == 2
    assert seen == [1, 2]  # not again
    db = open_db(tmp_path)
    try:
        assert db.catalog.by_id(db.catalog.get("t").id).extra["migrated"] == "2->3"
    finally:
        db.close()


def test_a_failing_migration_leaves_the_directory_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dir(tmp_path)
    set_version(tmp_path, 1)

    def broken(ctx: MigrationContext) -> None:
        ctx.batch.put(b"\xff\xffhalf", b"done")
        raise RuntimeError("boom")

    monkeypatch.setattr(data_format, "FORMAT_VERSION", 2)
    monkeypatch.setattr(data_format, "MIGRATIONS", {1: broken})
    with pytest.raises(RuntimeError):
        open_db(tmp_path)
    with StateStore.open(tmp_path / "state") as st:
        assert data_format.stored_version(st) == 1
        assert st.get(b"\xff\xffhalf") is None
