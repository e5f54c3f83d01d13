"""Object stores for the `storage` catalog: local files and S3, with an atomic put-if-absent.

The storage (Hadoop-style) catalog keeps a table's metadata files next to its data and
commits a new table version by *creating* `v<N+1>.metadata.json`: whoever creates it first
wins, everyone else must reload and retry. That needs one primitive the Arrow file systems
do not offer, "write this object only if it does not exist":

* local files: write a temporary file, then `os.link` it to the final name (link fails
  with `FileExistsError` when the name exists; rename would silently replace it);
* S3: `PutObject` with `If-None-Match: *` (conditional write, enforced by AWS S3, MinIO
  and moto; answers 412 when the key exists).

Lifecycle: one store per catalog instance; stateless apart from the boto3 client.
"""

from __future__ import annotations

import os
import uuid
from typing import Any
from urllib.parse import urlparse


class ObjectStore:
    """Keys are full locations (`file:///...`, `/abs/path`, `s3://bucket/key`)."""

    def put_if_absent(self, location: str, data: bytes) -> bool:
        raise NotImplementedError

    def put(self, location: str, data: bytes) -> None:
        raise NotImplementedError

    def get(self, location: str) -> bytes | None:
        raise NotImplementedError

    def list_children(self, location: str) -> list[str]:
        """Names of the direct "directories" under `location`."""
        raise NotImplementedError

    def exists_prefix(self, location: str) -> bool:
        raise NotImplementedError

    def delete_prefix(self, location: str) -> None:
        raise NotImplementedError

    def make_dir(self, location: str) -> None:
        raise NotImplementedError


def _local_path(location: str) -> str:
    if location.startswith("file://"):
        return urlparse(location).path
    return location


class LocalStore(ObjectStore):
    def put_if_absent(self, location: str, data: bytes) -> bool:
        path = _local_path(location)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def put(self, location: str, data: bytes) -> None:
        path = _local_path(location)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def get(self, location: str) -> bytes | None:
        try:
            with open(_local_path(location), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def list_children(self, location: str) -> list[str]:
        path = _local_path(location)
        try:
            return sorted(
                e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith(".")
            )
        except FileNotFoundError:
            return []

    def exists_prefix(self, location: str) -> bool:
        return os.path.isdir(_local_path(location))

    def delete_prefix(self, location: str) -> None:
        import shutil

        shutil.rmtree(_local_path(location), ignore_errors=True)

    def make_dir(self, location: str) -> None:
        os.makedirs(_local_path(location), exist_ok=True)


class S3Store(ObjectStore):
    def __init__(self, props: dict[str, str]) -> None:
        import boto3
        from botocore.config import Config

        path_style = props.get("s3.force-virtual-addressing", "false").lower() != "true"
        self.client: Any = boto3.client(
            "s3",
            endpoint_url=props.get("s3.endpoint") or None,
            region_name=props.get("s3.region") or None,
            aws_access_key_id=props.get("s3.access-key-id") or None,
            aws_secret_access_key=props.get("s3.secret-access-key") or None,
            config=Config(
                s3={"addressing_style": "path" if path_style else "virtual"},
                retries={"max_attempts": 2, "mode": "standard"},
                connect_timeout=5,
                read_timeout=30,
            ),
        )

    @staticmethod
    def _split(location: str) -> tuple[str, str]:
        u = urlparse(location)
        return u.netloc, u.path.lstrip("/")

    def put_if_absent(self, location: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        bucket, key = self._split(location)
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (
                409,
                412,
            ):
                return False
            raise

    def put(self, location: str, data: bytes) -> None:
        bucket, key = self._split(location)
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, location: str) -> bytes | None:
        from botocore.exceptions import ClientError

        bucket, key = self._split(location)
        try:
            return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise

    def list_children(self, location: str) -> list[str]:
        bucket, key = self._split(location.rstrip("/") + "/")
        out: list[str] = []
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=key, Delimiter="/"
        )
        for page in pages:
            for cp in page.get("CommonPrefixes", []):
                name = cp["Prefix"][len(key) :].rstrip("/")
                if name and not name.startswith("."):
                    out.append(name)
        return sorted(out)

    def exists_prefix(self, location: str) -> bool:
        bucket, key = self._split(location.rstrip("/") + "/")
        r = self.client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        return bool(r.get("KeyCount"))

    def delete_prefix(self, location: str) -> None:
        bucket, key = self._split(location.rstrip("/") + "/")
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
        for page in pages:
            objs = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if objs:
                self.client.delete_objects(Bucket=bucket, Delete={"Objects": objs})

    def make_dir(self, location: str) -> None:
        # S3 has no directories: a zero-byte marker object makes the prefix exist
        bucket, key = self._split(location.rstrip("/") + "/")
        self.client.put_object(Bucket=bucket, Key=key, Body=b"")


def store_for(location: str, props: dict[str, str]) -> ObjectStore:
    scheme = urlparse(location).scheme
    if scheme in ("s3", "s3a", "s3n"):
        return S3Store(props)
    if scheme in ("", "file"):
        return LocalStore()
    raise ValueError(f"unsupported warehouse scheme {scheme!r}")
