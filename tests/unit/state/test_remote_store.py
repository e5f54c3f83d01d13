"""The remote state store's pieces against moto's S3 server: manifests, restore choice, URLs.

The end-to-end behaviour (upload, FLUSH, outage, GC, restore of a whole server) is in
tests/e2e/test_state_store_s3.py; these pin the rules a restore relies on.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InvalidParameterValue
from engine.state import restore as remote_restore
from engine.state.manifest import (
    FileEntry,
    LineageFile,
    Manifest,
    list_manifests,
    manifest_key,
    manifest_name,
    parse_manifest_name,
)
from engine.state.s3 import ObjectStore, StoreUrl, parse_store_url
from engine.state.store import StorageError
from harness.iceberg import moto_s3  # noqa: F401


def _store(moto: dict[str, Any]) -> ObjectStore:
    bucket = moto["bucket"](f"rs-{uuid.uuid4().hex[:10]}")
    return ObjectStore(StoreUrl(bucket, "p/"), client=moto["client"])


def test_store_urls() -> None:
    assert parse_store_url("s3://b/a/b/") == StoreUrl("b", "a/b/")
    assert parse_store_url("s3://b") == StoreUrl("b", "")
    assert str(parse_store_url("s3://b/x")) == "s3://b/x"
    for bad in ("file:///tmp/x", "b/x", "s3:///x"):
        with pytest.raises(InvalidParameterValue):
            parse_store_url(bad)


def test_manifest_round_trip_and_names() -> None:
    m = Manifest(
        7,
        "lin",
        "w" * 32,
        1.5,
        [FileEntry("state/CURRENT", 3, None, b"abc"), FileEntry("state/000009.sst", 99, "k")],
    )
    back = Manifest.from_bytes(m.to_bytes())
    assert back == m and back.object_keys() == {"k"} and back.total_bytes == 102
    names = [manifest_name(e, "w" * 32, a) for e, a in ((10, 1), (9, 5), (10, 2))]
    assert sorted(names) == [names[1], names[0], names[2]]  # by epoch, then attempt
    assert parse_manifest_name(names[0]) == (10, "w" * 12)
    assert parse_manifest_name("junk.json") is None
    for bad in ("../x", "state/../../etc", "secret.key", "/state/x"):
        raw = Manifest(1, "l", "w", 0, [FileEntry(bad, 1, None, b"x")]).to_bytes()
        with pytest.raises(StorageError):
            Manifest.from_bytes(raw)


def test_restore_takes_the_newest_complete_manifest(
    moto_s3: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    remote = _store(moto_s3)
    remote.put_bytes("files/state/000009.sst.aa", b"x" * 20)
    old = Manifest(
        4,
        "lin",
        "w1",
        0,
        [
            FileEntry("state/CURRENT", 2, None, b"ok"),
            FileEntry("state/000009.sst", 20, "files/state/000009.sst.aa"),
        ],
    )
    # a later attempt whose objects the collector already deleted (a PUT that landed late)
    late = Manifest(5, "lin", "w1", 0, [FileEntry("state/000010.sst", 5, "files/gone")])
    remote.put_bytes(manifest_key(manifest_name(4, "w1", 1)), old.to_bytes())
    remote.put_bytes(manifest_key(manifest_name(5, "w1", 2)), late.to_bytes())
    assert len(list_manifests(remote)) == 2
    data = tmp_path / "data"
    data.mkdir()
    prepared = remote_restore.prepare(data, remote, keep=3)
    assert prepared.restored is not None and prepared.restored.epoch == 4
    assert (data / "state" / "CURRENT").read_bytes() == b"ok"
    assert (data / "state" / "000009.sst").read_bytes() == b"x" * 20
    assert not (data / remote_restore.RESTORE_DIR).exists()
    assert LineageFile.read(data) == LineageFile(str(remote.url), "lin")
    # a data directory with state: another history is refused, its own is used
    (data / "state-store.json").unlink()
    with pytest.raises(StorageError, match="different histories"):
        remote_restore.prepare(data, remote, keep=3)
    LineageFile(str(remote.url), "lin").write(data)
    again = remote_restore.prepare(data, remote, keep=3)
    assert again.restored is None and again.newest_epoch == 4
    with pytest.raises(StorageError, match="older than the newest"):
        remote_restore.check_local_epoch(data, 3, again, str(remote.url))
    remote_restore.check_local_epoch(data, 4, again, str(remote.url))


def test_an_empty_store_starts_a_new_history(
    moto_s3: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    remote = _store(moto_s3)
    p = remote_restore.prepare(tmp_path, remote, keep=3)
    assert p.restored is None and p.manifests == {} and p.newest_epoch == -1
    assert LineageFile.read(tmp_path) == LineageFile(str(remote.url), p.lineage)
