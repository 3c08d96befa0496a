"""What a store holds: its content-addressed objects with their sizes and ages (for ``gc``).

A key is one of rayform's objects only when it has the exact shape ``objects/ab/<sha256>`` with
``ab`` the digest's first two characters; anything else below ``objects/`` (a stray upload, a
crafted key) is no object of ours and is neither counted nor deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from rayform._digest import is_digest
from rayform.storage._store import OBJECTS_PREFIX


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredObject:
    """One object a store holds.

    Attributes:
        digest: its sha256 (its name).
        size_bytes: its size.
        age_s: seconds since it was stored or last renewed (a writer reusing it renews it), by
            the store's own clock where it has one (an S3 server's ``Date``), never negative.
        stamp: the store's raw modification stamp, compared again just before a delete (an
            object renewed in between is kept).
    """

    digest: str
    size_bytes: int
    age_s: float
    stamp: str


def digest_of_key(key: str) -> str | None:
    """The digest of an object key ``objects/ab/<digest>``; None for any other key."""
    parts = key.split("/")
    if len(parts) != 3 or parts[0] != OBJECTS_PREFIX:
        return None
    prefix, name = parts[1], parts[2]
    if not is_digest(name) or name[:2] != prefix:
        return None
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedKey:
    """One key of a remote store as its server lists it.

    Attributes:
        key: relative to the catalog root.
        size_bytes: its size.
        age_s: seconds since it was last written, by the server's clock (never negative).
        stamp: what identifies this write of it (an S3 ``ETag`` and ``LastModified``).
    """

    key: str
    size_bytes: int
    age_s: float
    stamp: str
