"""What a store holds: its objects and keys with their sizes and ages (for ``gc``).

Only keys of the exact shape ``objects/ab/<sha256>`` are objects
(:func:`~rayform.storage._store.digest_of_key`); anything else below ``objects/`` (a stray
upload, a crafted key) is no object of rayform's and is neither counted nor deleted.
"""

from __future__ import annotations

from dataclasses import dataclass


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
