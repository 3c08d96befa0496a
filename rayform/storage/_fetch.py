"""Recordings named by URI: ``file://`` and plain paths resolved, ``s3://`` / ``https://`` fetched.

A remote recording is streamed by the same transports that read remote catalogs
(:class:`~rayform.storage._s3.S3Transport`, :class:`~rayform.storage._https.HttpTransport`) into
a local folder, hashed while it is written, retried with the catalogs' :class:`RetryPolicy`
(each attempt starts the file afresh, and a short body is an error, never a registered recording).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from rayform.errors import ConfigError, OfflineError, SourceNotFoundError
from rayform.storage._cache import HashingSink, is_offline
from rayform.storage._https import HttpTransport
from rayform.storage._remote import Transport
from rayform.storage._retry import RetryPolicy, TransientError
from rayform.storage._s3 import S3Transport

REMOTE_SCHEMES = ("s3://", "https://", "http://")
FILE_SCHEME = "file://"


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceUri:
    """One source of a registration: a local path, or the URL of a remote file.

    Attributes:
        uri: what the caller passed (as text).
        path: the local file or folder, or ``None`` for a remote URL (``s3://``, ``https://``).
    """

    uri: str
    path: Path | None

    @property
    def is_remote(self) -> bool:
        return self.path is None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedFile:
    """A remote file copied to a local path.

    Attributes:
        url: where it came from.
        path: the local copy.
        sha256: the hex digest of the bytes written.
        size_bytes: their number.
    """

    url: str
    path: Path
    sha256: str
    size_bytes: int


def parse_source(uri: str | os.PathLike[str]) -> SourceUri:
    """Classify a source: ``file:///abs/x.rrd`` (what ``Path.as_uri()`` gives) and plain paths are
    local; ``s3://bucket/key`` and ``https://host/path`` are remote files.

    Raises:
        ConfigError: another scheme (``gs://``, ``rerun+http://`` …), a ``file://`` URI naming a
            remote host, or a remote URL with a query string or without a file name.
    """
    if isinstance(uri, os.PathLike):
        return SourceUri(uri=os.fspath(uri), path=Path(uri))
    if not isinstance(uri, str):
        raise TypeError(f"a source is a path or URI string, got {type(uri).__name__}: {uri!r}")
    if uri.startswith(FILE_SCHEME):
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"source {uri!r} names host {parts.netloc!r}; file:// URIs must be "
                              "local (file:///abs/path, as Path.as_uri() writes them)")
        return SourceUri(uri=uri, path=Path(url2pathname(parts.path)))
    if uri.startswith(REMOTE_SCHEMES):
        parts = urlsplit(uri)
        if parts.query or parts.fragment:
            raise ConfigError(f"source {uri!r}: URLs with a query string or fragment (pre-signed "
                              "URLs) are not supported; name the object as s3://bucket/key or "
                              "https://host/path")
        if not _file_name(uri):
            raise ConfigError(f"source {uri!r} names a folder; remote sources must name one file "
                              "(s3://bucket/key.rrd, https://host/path/x.mcap)")
        return SourceUri(uri=uri, path=None)
    scheme, sep, _ = uri.partition("://")
    if sep and scheme.isascii() and scheme.replace("+", "").isalnum():
        raise ConfigError(
            f"source {uri!r}: scheme {scheme + '://'!r} is not supported; use a path, "
            "file:///abs/path, s3://bucket/key or https://host/path"
        )
    return SourceUri(uri=uri, path=Path(uri))


def fetch_file(url: str, dest_dir: Path, *, retry: RetryPolicy | None = None) -> FetchedFile:
    """Stream the remote file ``url`` into ``dest_dir`` (under its own file name), hashing it.

    Raises:
        SourceNotFoundError: the server has no such file.
        OfflineError: ``RAYFORM_OFFLINE=1``.
        RemoteError: every attempt failed (dropped connections, HTTP 5xx, truncated bodies) or the
            server refused the request.
        ImportError: ``s3://`` without boto3 installed.
    """
    source = parse_source(url)
    if not source.is_remote:
        raise ConfigError(f"fetch_file needs an s3:// or https:// URL, got {url!r}")
    if is_offline():
        raise OfflineError(f"RAYFORM_OFFLINE=1 forbids downloading the source {url}; unset it "
                           "or copy the file here and register its path")
    policy = retry if retry is not None else RetryPolicy.from_env()
    name = _file_name(url)
    base = url[: len(url) - len(url.rpartition("/")[2])].rstrip("/")
    transport: Transport = S3Transport(base, retry=policy) if url.startswith("s3://") \
        else HttpTransport(base, retry=policy)
    key = url.rpartition("/")[2] if url.startswith("s3://") else unquote(url.rpartition("/")[2])
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / name

    def attempt() -> FetchedFile:
        with dest.open("wb") as fh:
            sink = HashingSink(fh)
            try:
                transport.download(key, sink)
            except FileNotFoundError:
                raise SourceNotFoundError(f"{url}: no such file on the server; check the URL "
                                          "to register") from None
            except TransientError:
                fh.truncate(0)
                raise
        return FetchedFile(url=url, path=dest, sha256=sink.hash.hexdigest(),
                           size_bytes=sink.size)

    try:
        return policy.run(attempt, what=f"download of source {url}")
    except BaseException:
        dest.unlink(missing_ok=True)
        raise


def _file_name(url: str) -> str:
    """The last path component of a URL, usable as a local file name ("" if none)."""
    name = unquote(urlsplit(url).path.rpartition("/")[2])
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        return ""
    return name
