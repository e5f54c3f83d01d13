"""The remote state store's object storage: an S3 bucket and prefix, reached with boto3.

Why a thin wrapper: the uploader and the restore need five operations (put a file or
bytes, get, list, delete in bulk) with the same error handling and timeouts; everything
else about S3 (endpoint, credentials, region) comes from the standard `AWS_*`
environment variables boto3 reads itself (`AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3`,
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` / `AWS_DEFAULT_REGION`, or a
profile), so MinIO, moto and real S3 work the same way.

Timeouts and retries: botocore's own retries are off (one attempt per call, short connect
and read timeouts), because the uploader retries whole steps with its own backoff and
reports every failure (`rw_catalog.rw_state_store_status`, metrics). A stalled endpoint
thus costs one read timeout per attempt instead of botocore's retry budget.

Lifecycle: `ObjectStore(parse_store_url(text))` at startup (cheap: no request); thread-
safe (boto3 clients are); no close needed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import InvalidParameterValue
from engine.state.store import StorageError

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 5.0
"""Per socket read: a stalled endpoint fails an attempt after this long."""
MULTIPART_BYTES = 64 << 20
"""Files above this are uploaded in parts (S3 allows 5 GB in one PUT; parts retry cheaper)."""


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """`s3://bucket/prefix`: the bucket and the key prefix (empty or ending with '/')."""

    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def parse_store_url(text: str) -> StoreUrl:
    """Parse `--state-store`; only `s3://bucket[/prefix]` is supported."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() != "s3":
        raise InvalidParameterValue(
            f'unsupported state store "{text}"',
            hint="Use s3://bucket/prefix (endpoint and keys from the AWS_* variables).",
        )
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InvalidParameterValue(f'state store "{text}" names no bucket')
    prefix = prefix.strip("/")
    return StoreUrl(bucket, prefix + "/" if prefix else "")


class ObjectStore:
    """The bucket and prefix of one state store; keys passed in are relative to the prefix."""

    def __init__(self, url: StoreUrl, client: Any = None) -> None:
        self.url = url
        self._client = client if client is not None else _client()

    def _key(self, rel: str) -> str:
        return self.url.prefix + rel

    def put_bytes(self, rel: str, data: bytes) -> None:
        self._call(
            "put",
            rel,
            self._client.put_object,
            Bucket=self.url.bucket,
            Key=self._key(rel),
            Body=data,
        )

    def put_file(self, rel: str, path: Path) -> None:
        from boto3.s3.transfer import TransferConfig

        cfg = TransferConfig(multipart_threshold=MULTIPART_BYTES, use_threads=False)
        self._call(
            "upload",
            rel,
            self._client.upload_file,
            str(path),
            self.url.bucket,
            self._key(rel),
            Config=cfg,
        )

    def get_bytes(self, rel: str) -> bytes:
        resp = self._call(
            "get", rel, self._client.get_object, Bucket=self.url.bucket, Key=self._key(rel)
        )
        return resp["Body"].read()  # type: ignore[no-any-return]

    def download_file(self, rel: str, path: Path, progress: Callable[[int], None]) -> None:
        from boto3.s3.transfer import TransferConfig

        cfg = TransferConfig(multipart_threshold=MULTIPART_BYTES, use_threads=False)
        self._call(
            "download",
            rel,
            self._client.download_file,
            self.url.bucket,
            self._key(rel),
            str(path),
            Callback=progress,
            Config=cfg,
        )

    def list(self, rel_prefix: str) -> Iterator[tuple[str, int]]:
        """(key relative to the store's prefix, size) of every object under `rel_prefix`."""
        paginator = self._client.get_paginator("list_objects_v2")
        n = len(self.url.prefix)
        try:
            for page in paginator.paginate(Bucket=self.url.bucket, Prefix=self._key(rel_prefix)):
                for obj in page.get("Contents", ()):
                    yield obj["Key"][n:], int(obj["Size"])
        except Exception as e:
            raise _error("list", rel_prefix, e) from e

    def delete_many(self, rels: Iterable[str]) -> int:
        """Delete the objects (1000 per request); returns how many were asked to go."""
        keys = [self._key(r) for r in rels]
        for i in range(0, len(keys), 1000):
            part = keys[i : i + 1000]
            resp = self._call(
                "delete",
                part[0],
                self._client.delete_objects,
                Bucket=self.url.bucket,
                Delete={"Objects": [{"Key": k} for k in part], "Quiet": True},
            )
            errors = resp.get("Errors") or []
            if errors:
                e = errors[0]
                raise StorageError(
                    f"could not delete {len(errors)} object(s) from {self.url}",
                    detail=f"{e.get('Key')}: {e.get('Code')} {e.get('Message')}",
                )
        return len(keys)

    def _call(self, what: str, rel: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except Exception as e:
            raise _error(what, rel, e, self.url) from e


def is_not_found(exc: BaseException) -> bool:
    """True when `exc` (or its cause) is S3's NoSuchKey / 404."""
    e: BaseException | None = exc
    while e is not None:
        code = getattr(e, "response", {}).get("Error", {}).get("Code")
        if code in ("NoSuchKey", "404", "NotFound"):
            return True
        e = e.__cause__
    return False


def _error(what: str, rel: str, e: Exception, url: StoreUrl | None = None) -> StorageError:
    where = f"{url}/{rel}" if url is not None else rel
    return StorageError(f"state store {what} failed: {where}", detail=f"{type(e).__name__}: {e}")


def _client() -> Any:
    import boto3
    from botocore.config import Config

    cfg = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"total_max_attempts": 1, "mode": "standard"},
        # a custom endpoint (MinIO, moto) usually has no per-bucket host names
        s3={"addressing_style": "path" if _custom_endpoint() else "auto"},
    )
    return boto3.session.Session().client("s3", config=cfg)


def _custom_endpoint() -> bool:
    return bool(os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
