"""Opening a store from a catalog URL: the factory that sits above the local and remote stores."""

from __future__ import annotations

import os
import re
from pathlib import Path

from rayform.errors import CatalogNotFoundError
from rayform.storage._cache import ObjectCache
from rayform.storage._https import HttpTransport
from rayform.storage._local import LocalStore
from rayform.storage._remote import RemoteStore, Transport
from rayform.storage._retry import RetryPolicy
from rayform.storage._s3 import S3Transport
from rayform.storage._store import Store

# A URL scheme (two letters at least, so that a Windows drive "C:" is not one).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def open_store(url: str | os.PathLike[str], *, create: bool = False) -> Store:
    """Open the store behind a catalog URL (a local path; remote schemes plug in here)."""
    text = os.fspath(url)
    if text.startswith(("s3://", "https://", "http://")):
        return open_remote_store(text)
    scheme = _SCHEME.match(text)
    if scheme and scheme[1].lower() != "file":
        raise CatalogNotFoundError(
            f"catalog URL {text!r}: scheme {scheme[1]!r} is not supported; use a local path, "
            "file://, s3://, https:// or http://")
    root = Path(text[len("file://"):] if text.startswith("file://") else text).expanduser()
    if not root.is_dir() and root.exists():
        raise CatalogNotFoundError(
            f"no catalog at {text!r}: it is a file, not a catalog directory; name the folder "
            "that holds catalog.json")
    if create:
        root.mkdir(parents=True, exist_ok=True)
    elif not root.is_dir():
        raise CatalogNotFoundError(
            f"no catalog at {text!r}: the directory does not exist; create one with "
            "Catalog.create(path) or `rayform init PATH`"
        )
    return LocalStore(root)


def open_remote_store(url: str, *, cache: ObjectCache | None = None,
                      retry: RetryPolicy | None = None) -> RemoteStore:
    """The store of an ``s3://``, ``https://`` or ``http://`` catalog URL.

    Raises:
        ImportError: ``s3://`` without boto3 installed.
        CatalogNotFoundError: a malformed URL.
    """
    policy = retry if retry is not None else RetryPolicy.from_env()
    transport: Transport
    if url.startswith("s3://"):
        transport = S3Transport(url, retry=policy)
    else:
        transport = HttpTransport(url, retry=policy)
    return RemoteStore(transport, cache=cache, retry=policy)

