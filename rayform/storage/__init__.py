"""Storage: where a catalog's bytes live — local directories, S3 and HTTPS stores, the cache.

Knows nothing of datasets: keys, immutable content-addressed objects, exclusive creates, listings
for servers that cannot list, retries, and the local content-addressed cache of remote objects.
"""

from __future__ import annotations

from rayform.storage._cache import ObjectCache, default_cache_dir, is_offline
from rayform.storage._listing import index_catalog
from rayform.storage._local import LocalStore
from rayform.storage._open import open_remote_store, open_store
from rayform.storage._remote import RemoteStore, Transport
from rayform.storage._retry import RetryPolicy
from rayform.storage._store import Store, object_key, sha256_file

__all__ = [
    "LocalStore",
    "ObjectCache",
    "RemoteStore",
    "RetryPolicy",
    "Store",
    "Transport",
    "default_cache_dir",
    "index_catalog",
    "is_offline",
    "object_key",
    "open_remote_store",
    "open_store",
    "sha256_file",
]
