"""The one exception hierarchy of rayform.

Every class also inherits the builtin a caller would naturally catch::

    RayformError
    ├── CatalogError
    │   ├── CatalogNotFoundError     (FileNotFoundError)  no catalog at that URL
    │   ├── EntryNotFoundError       (LookupError)        unknown dataset or table
    │   ├── EntryExistsError         (FileExistsError)    name already taken
    │   ├── SegmentNotFoundError     (LookupError)        unknown segment id
    │   ├── DuplicateSegmentError    (ValueError)         segment+layer already registered
    │   ├── InvalidNameError         (ValueError)         bad entry name / segment id / layer
    │   ├── SchemaConflictError      (ValueError, TypeError)  column type the dataset's schema
    │   │                                                    cannot merge
    │   ├── CorruptMetadataError     (ValueError)         damaged or foreign metadata file
    │   ├── CommitConflictError      (RuntimeError)       gave up after repeated concurrent commits
    │   ├── ReadOnlyCatalogError     (PermissionError)    write to an https:// catalog
    │   ├── UnsafeStoreError         (RuntimeError)       the store cannot make commits exclusive
    │   └── ObjectMissingError       (FileNotFoundError)  an object a snapshot names is gone
    ├── SourceNotFoundError          (FileNotFoundError, ValueError)  a file to register does not
    │                                                                  exist
    ├── FormatError                  (ValueError)
    │   ├── UnknownFormatError                            no importer recognises the file
    │   └── CorruptRecordingError                         truncated / damaged recording
    ├── ColumnNotFoundError          (KeyError)           unknown column or timeline
    ├── QueryError                   (ValueError)         DataFusion rejected a query
    ├── ConfigError                  (ValueError)         bad dataloader / decoder configuration
    ├── DecodeError                  (ValueError)         a blob could not be decoded
    ├── LocalStorageError            (OSError)            a local folder cannot be written
    │   ├── DiskFullError                                 no space (ENOSPC) or quota (EDQUOT) left
    │   └── CacheError                                    the cache folder is unusable
    └── RemoteError                  (OSError)            object store / network failure
        ├── OfflineError                                  RAYFORM_OFFLINE=1 and object not cached
        └── IntegrityError                                remote bytes that do not match the hash
                                                          trusted metadata names for them

Warnings (not errors; ``warnings.warn`` categories)::

    ConversionWarning                (UserWarning)        an importer skipped part of a source or
                                                          kept it as raw bytes
"""

from __future__ import annotations


class RayformError(Exception):
    """Base class of every error rayform raises on purpose."""


class CatalogError(RayformError):
    """Something about the catalog, its entries or segments."""


class CatalogNotFoundError(CatalogError, FileNotFoundError):
    """No catalog exists at the given URL."""


class EntryNotFoundError(CatalogError, LookupError):
    """No dataset or table with that name."""


class EntryExistsError(CatalogError, FileExistsError):
    """A dataset or table with that name already exists."""


class SegmentNotFoundError(CatalogError, LookupError):
    """No segment with that id in the dataset."""


class DuplicateSegmentError(CatalogError, ValueError):
    """The segment id and layer are already registered and on_duplicate is 'error'."""


class InvalidNameError(CatalogError, ValueError):
    """An entry name, segment id or layer name that is not allowed."""


class SchemaConflictError(CatalogError, ValueError, TypeError):
    """A column's (or property's) Arrow type cannot be merged into the dataset's schema.

    A ``ValueError`` as Rerun raises for a registration whose schema does not merge, and still a
    ``TypeError`` as in earlier rayform versions.
    """


class CorruptMetadataError(CatalogError, ValueError):
    """A metadata file is damaged, truncated, foreign, or of an unknown format version."""


class CommitConflictError(CatalogError, RuntimeError):
    """A metadata commit kept losing races with concurrent writers."""


class ReadOnlyCatalogError(CatalogError, PermissionError):
    """The catalog's storage cannot be written (for example an https:// catalog)."""


class UnsafeStoreError(CatalogError, RuntimeError):
    """The object store ignores conditional writes, so concurrent commits could overwrite each
    other; rayform refuses to commit there rather than lose updates."""


class ObjectMissingError(CatalogError, FileNotFoundError):
    """A data object named by the metadata is missing from the catalog (or vanished from the
    local cache while being read, even after one refetch)."""


class SourceNotFoundError(RayformError, FileNotFoundError, ValueError):
    """A file or folder given to register or import does not exist.

    Also a ``ValueError``, so that ``except ValueError`` around ``register(...).wait()`` (what a
    Rerun script catches) sees every registration error.
    """


class FormatError(RayformError, ValueError):
    """A recording file or folder could not be read."""


class UnknownFormatError(FormatError):
    """No importer recognises the file or folder."""


class CorruptRecordingError(FormatError):
    """A recording is truncated or damaged."""


class ColumnNotFoundError(RayformError, KeyError):
    """An unknown column, entity or timeline was asked for."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class QueryError(RayformError, ValueError):
    """DataFusion rejected a query (malformed SQL, unknown table, bad parameter)."""


class ConfigError(RayformError, ValueError):
    """A dataloader, decoder or sampling configuration that cannot work."""


class DecodeError(RayformError, ValueError):
    """An encoded blob (image, video packet) could not be decoded."""


class LocalStorageError(RayformError, OSError):
    """Writing into a local folder (a catalog, the cache, a staging folder) failed."""


class DiskFullError(LocalStorageError):
    """The filesystem of a local folder has no space (ENOSPC) or quota (EDQUOT) left."""


class CacheError(LocalStorageError):
    """The local cache folder cannot be used: it is a file, cannot be created, or was deleted."""


class RemoteError(RayformError, OSError):
    """An object store or HTTP server failed after retries."""


class OfflineError(RemoteError):
    """RAYFORM_OFFLINE=1 forbids the network and the object is not in the local cache."""


class IntegrityError(RemoteError):
    """A remote object's bytes (a block of it) do not hash to what the catalog's metadata names:
    altered on the server or in transit; nothing of it reached a reader."""


class ConversionWarning(UserWarning):
    """An importer registered a source but skipped part of it or kept it undecoded (raw bytes)."""


__all__ = [
    "CacheError",
    "CatalogError",
    "CatalogNotFoundError",
    "ColumnNotFoundError",
    "CommitConflictError",
    "ConfigError",
    "ConversionWarning",
    "CorruptMetadataError",
    "CorruptRecordingError",
    "DecodeError",
    "DiskFullError",
    "DuplicateSegmentError",
    "EntryExistsError",
    "EntryNotFoundError",
    "FormatError",
    "IntegrityError",
    "InvalidNameError",
    "LocalStorageError",
    "ObjectMissingError",
    "OfflineError",
    "QueryError",
    "RayformError",
    "ReadOnlyCatalogError",
    "RemoteError",
    "SchemaConflictError",
    "SegmentNotFoundError",
    "SourceNotFoundError",
    "UnknownFormatError",
    "UnsafeStoreError",
]
