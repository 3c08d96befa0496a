"""Catalogs in S3-compatible object storage (``s3://bucket/prefix``), read and written with boto3.

Credentials, region and endpoint come from boto3's usual chain (``AWS_ACCESS_KEY_ID``,
``~/.aws/config``, instance roles, ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` for MinIO, R2,
``rclone serve s3`` …). boto3's own retries are off: :class:`RetryPolicy` retries every request the
same way for both remote protocols. One client per process (thread-safe), made after a fork.

Exclusive creates (metadata commits) send ``If-None-Match: *``, which AWS S3, MinIO and R2 honour:
of two writers racing for the same snapshot number exactly one wins. Before its first commit a
process probes the server (one hidden key written twice with the header, then deleted). A server
that ignores the header (``rclone serve s3`` 1.75 does) would let two writers committing at once
overwrite each other and lose registrations, each reported as a success, so commits there are
refused with :class:`~rayform.errors.UnsafeStoreError` — unless ``RAYFORM_S3_SINGLE_WRITER=1``
declares that one process writes at a time; each commit is then checked before the write and read
back after it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from rayform.errors import CatalogNotFoundError, RemoteError, UnsafeStoreError
from rayform.storage._cache import Sink
from rayform.storage._inventory import ListedKey
from rayform.storage._parts import RangeReply, parse_content_range
from rayform.storage._remote import PROBE_PREFIX, Transport
from rayform.storage._retry import RetryPolicy, TransientError

CHUNK_BYTES = 1 << 20
SINGLE_PUT_LIMIT = 4 << 30  # larger files go up in parts (one PUT is at most 5 GiB)
_MISSING = {"404", "NoSuchKey", "NotFound"}
_TRANSIENT = {"500", "502", "503", "504", "429", "SlowDown", "InternalError", "RequestTimeout",
              "ServiceUnavailable", "Throttling", "ThrottlingException", "RequestTimeTooSkewed"}
_PRECONDITION = {"412", "PreconditionFailed", "ConditionalRequestConflict", "409"}


def _boto() -> Any:
    try:
        import boto3
        import botocore
    except ImportError as err:
        raise ImportError("s3:// catalogs need boto3: pip install 'rayform[s3]'") from err
    return boto3, botocore


SINGLE_WRITER_ENV = "RAYFORM_S3_SINGLE_WRITER"
_CONDITIONAL: dict[tuple[str, str], bool] = {}  # (endpoint, bucket) -> honours If-None-Match


def single_writer() -> bool:
    """True when ``RAYFORM_S3_SINGLE_WRITER`` declares that one process writes at a time."""
    return os.environ.get(SINGLE_WRITER_ENV, "").strip().lower() not in ("", "0", "false", "no")


_CLIENTS: dict[tuple[object, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()
_CLIENT_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_PROFILE",
               "AWS_DEFAULT_REGION", "AWS_REGION")


def _after_fork_in_child() -> None:
    """A forked worker makes its own client (and a free lock: another thread may have held it)."""
    global _CLIENTS_LOCK
    _CLIENTS_LOCK = threading.Lock()
    _CLIENTS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _client_for(connect_timeout_s: float, timeout_s: float) -> Any:
    """This process's boto3 S3 client for the current AWS settings (made once: building one
    costs ~0.2 s of model loading; clients are thread-safe, and a fork gets a new one)."""
    key = (os.getpid(), connect_timeout_s, timeout_s,
           *(os.environ.get(name) for name in _CLIENT_ENV))
    client = _CLIENTS.get(key)
    if client is not None:
        return client
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            boto3, botocore = _boto()
            custom_endpoint = bool(os.environ.get("AWS_ENDPOINT_URL_S3")
                                   or os.environ.get("AWS_ENDPOINT_URL"))
            config = botocore.config.Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                connect_timeout=connect_timeout_s,
                read_timeout=timeout_s,
                # read-ahead: 8 objects x 4 ranged parts, plus metadata and on-demand reads
                max_pool_connections=48,
                s3={"addressing_style": "path" if custom_endpoint else "auto"},
                # Checksum trailers (aws-chunked uploads) are not understood by every
                # S3-compatible server; content is verified by its sha256 name instead.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            )
            client = boto3.session.Session().client("s3", config=config)
            _CLIENTS[key] = client
    return client


class S3Transport(Transport):
    """Requests to one bucket, below one key prefix."""

    writable = True
    ranged = True

    def __init__(self, url: str, *, retry: RetryPolicy) -> None:
        rest = url[len("s3://"):].strip("/")
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise CatalogNotFoundError(f"{url!r} names no bucket; expected s3://bucket/prefix")
        _boto()
        self.url = f"s3://{rest}"
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._timeouts = (retry.connect_timeout_s, retry.timeout_s)

    # --------------------------------------------------------------------------- client
    def _client(self) -> Any:
        return _client_for(*self._timeouts)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        """Run one boto3 call, mapping its errors to ours."""
        _, botocore = _boto()
        try:
            return fn(**kwargs)
        except botocore.exceptions.ClientError as err:
            raise self._classify(what, err) from err
        except (botocore.exceptions.BotoCoreError, OSError) as err:
            if isinstance(err, botocore.exceptions.NoCredentialsError):
                raise RemoteError(
                    f"{what}: no AWS credentials; set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                    "or configure a profile"
                ) from err
            raise TransientError(f"{what}: {type(err).__name__}: {err}") from err

    def _classify(self, what: str, err: Any) -> Exception:
        code = str(err.response.get("Error", {}).get("Code", ""))
        status = str(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
        if code == "NoSuchBucket":
            return RemoteError(f"{what}: bucket {self.bucket!r} does not exist at this endpoint; "
                               "create it first, or check the URL and AWS_ENDPOINT_URL")
        if code in _MISSING or status == "404":
            return FileNotFoundError(f"{what}: no such key ({code or status})")
        if code in _TRANSIENT or status.startswith("5") or status == "429":
            return TransientError(f"{what}: {code} (HTTP {status})")
        if code in _PRECONDITION or status in ("412",):
            return FileExistsError(f"{what}: {code}")
        return RemoteError(f"{what}: {code} (HTTP {status}): {err}; check the bucket, the key "
                           "prefix and your permissions")

    # ---------------------------------------------------------------------------- reads
    def download(self, key: str, sink: Sink) -> None:
        what = f"GET {self.url}/{key}"
        resp = self._call(what, self._client().get_object, Bucket=self.bucket, Key=self._key(key))
        expected = int(resp.get("ContentLength", -1))
        received = 0
        for chunk in self._chunks(what, resp["Body"]):
            sink.write(chunk)  # a local failure (a full disk) is never a network one
            received += len(chunk)
        if 0 <= expected != received:
            raise TransientError(f"{what}: got {received} of {expected} bytes")

    def open_range(self, key: str, start: int, stop: int | None, /) -> RangeReply:
        """GET bytes ``[start, stop)`` of ``key``, or all of it when ``stop`` is None."""
        ranged = {} if stop is None else {"Range": f"bytes={start}-{stop - 1}"}
        what = f"GET {self.url}/{key}" + ("" if stop is None else f" bytes {start}-{stop - 1}")
        resp = self._call(what, self._client().get_object, Bucket=self.bucket,
                          Key=self._key(key), **ranged)
        length = int(resp["ContentLength"]) if "ContentLength" in resp else None
        found = parse_content_range(resp.get("ContentRange"), what=what)
        body = resp["Body"]
        return RangeReply(total_bytes=length if found is None else found[2],
                          start=0 if found is None else found[0], length_bytes=length,
                          accepts_ranges=True, chunks=self._chunks(what, body), close=body.close)

    def _chunks(self, what: str, body: Any) -> Iterator[bytes]:
        """A response body in chunks; a dropped connection raises ``TransientError``."""
        _, botocore = _boto()
        received = 0
        chunks = body.iter_chunks(CHUNK_BYTES)
        try:
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
                except (botocore.exceptions.BotoCoreError, OSError, ValueError) as err:
                    raise TransientError(f"{what}: connection dropped after {received} bytes: "
                                         f"{type(err).__name__}: {err}") from err
                received += len(chunk)
                yield chunk
        finally:
            body.close()

    def exists(self, key: str) -> bool:
        try:
            self._call(f"HEAD {self.url}/{key}", self._client().head_object,
                       Bucket=self.bucket, Key=self._key(key))
        except FileNotFoundError:
            return False
        return True

    def list_names(self, prefix: str) -> list[str]:
        base = self._key(prefix).rstrip("/")
        base = f"{base}/" if base else ""
        names: set[str] = set()
        paginator = self._client().get_paginator("list_objects_v2")
        what = f"list {self.url}/{prefix}"

        def pages() -> list[Any]:
            return list(paginator.paginate(Bucket=self.bucket, Prefix=base, Delimiter="/"))

        for page in self._call(what, pages):
            for item in page.get("CommonPrefixes", []):
                names.add(item["Prefix"][len(base):].rstrip("/"))
            for item in page.get("Contents", []):
                names.add(item["Key"][len(base):])
        names.discard("")
        return sorted(names)

    def list_keys_under(self) -> list[str]:
        """Every key below this transport's prefix, at any depth, relative to it (sorted)."""
        base = f"{self.prefix}/" if self.prefix else ""
        paginator = self._client().get_paginator("list_objects_v2")

        def pages() -> list[Any]:
            return list(paginator.paginate(Bucket=self.bucket, Prefix=base))

        keys = {item["Key"][len(base):] for page in self._call(f"list {self.url}/ (recursively)",
                                                               pages)
                for item in page.get("Contents", [])}
        keys.discard("")
        return sorted(keys)

    def stat(self, key: str) -> ListedKey | None:
        try:
            resp = self._call(f"HEAD {self.url}/{key}", self._client().head_object,
                              Bucket=self.bucket, Key=self._key(key))
        except FileNotFoundError:
            return None
        now = _server_now(resp)
        modified = resp.get("LastModified") or now  # a server that omits it: taken as new
        return ListedKey(key=key, size_bytes=int(resp.get("ContentLength", -1)),
                         age_s=_age_s(modified, now),
                         stamp=f"{resp.get('ETag', '')}@{modified.isoformat()}")

    def list_keys(self, prefix: str) -> list[ListedKey]:
        base = f"{self.prefix}/" if self.prefix else ""
        paginator = self._client().get_paginator("list_objects_v2")

        def pages() -> list[Any]:
            return list(paginator.paginate(Bucket=self.bucket, Prefix=base + prefix))

        out: list[ListedKey] = []
        for page in self._call(f"list {self.url}/{prefix}*", pages):
            now = _server_now(page)
            for item in page.get("Contents", []):
                modified = item["LastModified"]
                out.append(ListedKey(key=item["Key"][len(base):], size_bytes=int(item["Size"]),
                                     age_s=_age_s(modified, now),
                                     stamp=f"{item.get('ETag', '')}@{modified.isoformat()}"))
        return sorted(out, key=lambda k: k.key)

    def delete(self, key: str) -> None:
        self._call(f"DELETE {self.url}/{key}", self._client().delete_object,
                   Bucket=self.bucket, Key=self._key(key))

    # ---------------------------------------------------------------------------- writes
    def put_exclusive(self, key: str, data: bytes) -> bool:
        """Create ``key`` unless it exists (see the module docstring for unsafe servers).

        Raises:
            UnsafeStoreError: the server ignores ``If-None-Match`` and
                ``RAYFORM_S3_SINGLE_WRITER`` is not set.
        """
        if not self.honours_conditional_writes():
            if not single_writer():
                raise UnsafeStoreError(
                    f"{self.url}: this S3 server ignores If-None-Match (conditional writes), so "
                    "two writers committing at once would overwrite each other's snapshots and "
                    "lose registrations; use a server that honours it (AWS S3, MinIO, "
                    f"Cloudflare R2), or, if only one process ever writes to this catalog at a "
                    f"time, set {SINGLE_WRITER_ENV}=1"
                )
            return self._put_checked(key, data)
        if self.exists(key):
            return self._holds(key, data)
        try:
            self._call(f"PUT {self.url}/{key}", self._client().put_object, Bucket=self.bucket,
                       Key=self._key(key), Body=data, IfNoneMatch="*")
        except FileExistsError:
            return self._holds(key, data)
        return True

    def _holds(self, key: str, data: bytes) -> bool:
        """Whether an existing ``key`` is this very write: an earlier attempt whose answer was
        lost after the server applied it, met again by the retry. Commit bodies are unique (a
        random entry id, a commit time), so the same bytes are ours, not another writer's."""
        try:
            return self.get(key) == data
        except FileNotFoundError:
            return False

    def _put_checked(self, key: str, data: bytes) -> bool:
        """A single writer's create on a server without conditional writes: absent before, and
        ours when read back (a concurrent writer would show as a different content)."""
        if self.exists(key):
            return False
        self._call(f"PUT {self.url}/{key}", self._client().put_object, Bucket=self.bucket,
                   Key=self._key(key), Body=data)
        try:
            return self.get(key) == data
        except FileNotFoundError:
            return False

    def honours_conditional_writes(self) -> bool:
        """Whether the server refuses a second ``PUT`` with ``If-None-Match: *`` (probed once per
        process, endpoint and bucket: a hidden key written twice, then deleted)."""
        endpoint = str(self._client().meta.endpoint_url)
        cache_key = (endpoint, self.bucket)
        known = _CONDITIONAL.get(cache_key)
        if known is not None:
            return known
        probe = self._key(f"{PROBE_PREFIX}{uuid.uuid4().hex}")
        what = f"probing {self.url} for conditional writes"
        client = self._client()
        try:
            self._call(what, client.put_object, Bucket=self.bucket, Key=probe, Body=b"1",
                       IfNoneMatch="*")
            try:
                self._call(what, client.put_object, Bucket=self.bucket, Key=probe, Body=b"2",
                           IfNoneMatch="*")
                honoured = False
            except FileExistsError:
                honoured = True
        finally:
            with contextlib.suppress(Exception):
                client.delete_object(Bucket=self.bucket, Key=probe)
        _CONDITIONAL[cache_key] = honoured
        return honoured

    def upload(self, key: str, src: Path) -> None:
        if src.stat().st_size > SINGLE_PUT_LIMIT:
            self._call(f"PUT {self.url}/{key}", self._client().upload_file, Filename=str(src),
                       Bucket=self.bucket, Key=self._key(key))
            return
        with src.open("rb") as fh:
            self._call(f"PUT {self.url}/{key}", self._client().put_object, Bucket=self.bucket,
                       Key=self._key(key), Body=fh)


def _server_now(resp: Any) -> datetime:
    """The server's clock from a response's ``Date`` header (ages are then immune to a skewed
    local clock); the local clock when it has none."""
    header = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if header:
        try:
            return parsedate_to_datetime(header)
        except (TypeError, ValueError):
            pass
    return datetime.now(timezone.utc)


def _age_s(modified: datetime, now: datetime) -> float:
    if modified.tzinfo is None:
        modified = modified.replace(tzinfo=timezone.utc)
    return max(0.0, (now - modified).total_seconds())
