"""The catalog: a directory (or object-store prefix) of datasets and tables, with SQL over it.

Layout::

    catalog.json                            format marker and version
    entries/<name>/entry.json               kind (dataset | table), id, creation time
    entries/<name>/versions/<n>.json        immutable metadata snapshots, one per commit
    objects/<ab>/<sha256>                   immutable, content-addressed data files and
                                            dataset segment indexes
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rayform.catalog._dataset_entry import DatasetEntry
from rayform.catalog._lifecycle import dataset_state, revive_dataset
from rayform.catalog._metadata import CatalogMeta, EntryMeta
from rayform.catalog._query import QueryPlane
from rayform.catalog._registration import schema_to_text
from rayform.catalog._table_entry import TableEntry
from rayform.catalog._versions import entry_key
from rayform.errors import (
    CatalogNotFoundError,
    CorruptMetadataError,
    EntryExistsError,
    EntryNotFoundError,
    InvalidNameError,
    ReadOnlyCatalogError,
)
from rayform.recording._names import validate_entry_name
from rayform.storage._documents import FORMAT_VERSION, dump_model, parse_model
from rayform.storage._open import open_store
from rayform.storage._staged import store_staged
from rayform.storage._store import Store

if TYPE_CHECKING:
    import datafusion

CATALOG_FILE = "catalog.json"


class Catalog:
    """An embedded catalog. Use :meth:`create` or :meth:`open`."""

    def __init__(self, store: Store) -> None:
        raw = _read_or_none(store, CATALOG_FILE)
        if raw is None:
            raise CatalogNotFoundError(
                f"{store.url} is not a rayform catalog (no {CATALOG_FILE}); create one with "
                "Catalog.create(url) or `rayform init URL`"
            )
        self.meta = parse_model(CatalogMeta, raw, source=f"{store.url}/{CATALOG_FILE}")
        self.store = store
        self._query = QueryPlane(self)

    # ----------------------------------------------------------------------- construction
    @classmethod
    def create(cls, url: str | os.PathLike[str], *, exist_ok: bool = True) -> Catalog:
        """Create a catalog at ``url`` (a directory), or open it if it exists and ``exist_ok``."""
        store = open_store(url, create=True)
        meta = CatalogMeta(format="rayform-catalog", format_version=FORMAT_VERSION,
                           created_at_ns=time.time_ns())
        if not store.create_exclusive(CATALOG_FILE, dump_model(meta)) and not exist_ok:
            raise EntryExistsError(f"a catalog already exists at {store.url}")
        return cls(store)

    @classmethod
    def open(cls, url: str | os.PathLike[str]) -> Catalog:
        """Open an existing catalog.

        Raises:
            CatalogNotFoundError: nothing (or no catalog) at ``url``.
            CorruptMetadataError: its ``catalog.json`` is damaged or foreign.
        """
        return cls(open_store(url))

    @property
    def url(self) -> str:
        return self.store.url

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        """A catalog pickles as its URL and reopens in the receiving process (workers, Ray)."""
        return (type(self).open, (self.url,))

    def __repr__(self) -> str:
        return f"Catalog({self.url!r})"

    def require_writable(self) -> None:
        if self.store.read_only:
            raise ReadOnlyCatalogError(
                f"catalog {self.url} is read-only; register into a local or s3:// catalog"
            )

    # ---------------------------------------------------------------------------- entries
    def _entry_meta(self, name: str) -> EntryMeta | None:
        """The entry file of ``name``; its folder name is the truth, so the file must agree.

        Raises:
            CorruptMetadataError: damaged, or naming another entry (a crafted ``entry.json``).
        """
        key = entry_key(name)
        raw = _read_or_none(self.store, key)
        if raw is None:
            return None
        meta = parse_model(EntryMeta, raw, source=f"{self.url}/{key}")
        if meta.name != name:
            raise CorruptMetadataError(
                f"{self.url}/{key}: the entry file names {meta.name!r} but lives in folder "
                f"{name!r}; the folder name is the entry's name — restore the file or rename "
                "the folder"
            )
        return meta

    def entry_names(self) -> list[str]:
        """The names of the folders below ``entries/``, each a valid entry name.

        Raises:
            CorruptMetadataError: a listed name is not a valid entry name (damaged or crafted).
        """
        names = [n for n in self.store.list_names("entries") if not n.startswith(".")]
        for name in names:
            try:
                validate_entry_name(name)
            except InvalidNameError as err:
                raise CorruptMetadataError(
                    f"{self.url}/entries: folder {name[:80]!r} is not a valid entry name ({err}); "
                    "remove or rename it"
                ) from None
        return names

    def _names_of_kind(self, kind: str) -> list[str]:
        out = []
        for name in self.entry_names():
            meta = self._entry_meta(name)
            if meta is not None and meta.kind == kind:
                out.append(name)
        return out

    def dataset_names(self) -> list[str]:
        """The live datasets (deleted and renamed-away ones are not listed)."""
        return [n for n in self._names_of_kind("dataset") if dataset_state(self.store, n).exists]

    def table_names(self) -> list[str]:
        return self._names_of_kind("table")

    def datasets(self) -> list[DatasetEntry]:
        return [self.get_dataset(n) for n in self.dataset_names()]

    def tables(self) -> list[TableEntry]:
        return [self.get_table(n) for n in self.table_names()]

    def _create_entry(self, name: str, kind: str, exist_ok: bool, *,
                      table_schema: pa.Schema | None = None,
                      revive: bool = False) -> EntryMeta:
        validate_entry_name(name)
        self.require_writable()
        meta = EntryMeta(format="rayform-entry", format_version=FORMAT_VERSION,
                         id=uuid.uuid4().hex, name=name, kind=kind,  # type: ignore[arg-type]
                         created_at_ns=time.time_ns(),
                         table_schema_ipc=None if table_schema is None
                         else schema_to_text(table_schema))
        if self.store.create_exclusive(entry_key(name), dump_model(meta)):
            if revive:  # the folder may hold the snapshots of a rename that never landed
                revive_dataset(self.store, name)
            return meta
        existing = self._entry_meta(name)
        assert existing is not None
        if existing.kind != kind:
            raise EntryExistsError(f"{name!r} already exists as a {existing.kind}, not a {kind}")
        if revive and revive_dataset(self.store, name):  # deleted or renamed away: created anew
            return existing
        if not exist_ok:
            raise EntryExistsError(
                f"{kind} {name!r} already exists; pass exist_ok=True to use it, or pick another name"
            )
        return existing

    def create_dataset(self, name: str, *, exist_ok: bool = False) -> DatasetEntry:
        """Create an empty dataset (or return the existing one with ``exist_ok``).

        The name of a deleted (or renamed) dataset can be used again: the new dataset continues
        the folder's snapshot numbers after the tombstone, so slices of the old one still read.
        """
        return DatasetEntry(self, self._create_entry(name, "dataset", exist_ok, revive=True))

    def delete_dataset(self, name: str) -> None:
        """Delete dataset ``name`` in one atomic commit (see :meth:`DatasetEntry.delete`).

        Raises:
            EntryNotFoundError: no such dataset.
        """
        self.get_dataset(name).delete()

    def rename_dataset(self, name: str, new_name: str) -> DatasetEntry:
        """Rename dataset ``name`` to ``new_name`` in one atomic commit; returns it.

        Raises:
            EntryNotFoundError: no dataset ``name``.
            EntryExistsError: ``new_name`` is taken by a dataset or a table.
        """
        entry = self.get_dataset(name)
        entry.set_name(new_name)
        return entry

    def _get_meta(self, name: str, kind: str) -> EntryMeta:
        validate_entry_name(name)
        meta = self._entry_meta(name)
        if meta is None or meta.kind != kind:
            known = getattr(self, f"{kind}_names")()
            raise EntryNotFoundError(
                f"catalog {self.url} has no {kind} {name!r}; {kind}s: {known}"
            )
        return meta

    def dataset_meta(self, name: str) -> EntryMeta:
        """The entry file of dataset ``name`` (its id and creation time), without reading any of
        its snapshots.

        Raises:
            EntryNotFoundError: no such dataset.
        """
        return self._get_meta(name, "dataset")

    def get_dataset(self, name: str) -> DatasetEntry:
        """The dataset ``name`` at its newest snapshot.

        Raises:
            EntryNotFoundError: no such dataset.
        """
        return DatasetEntry(self, self._get_meta(name, "dataset"))

    def create_table(self, name: str, schema: pa.Schema, *, exist_ok: bool = False) -> TableEntry:
        """Create an empty table with ``schema`` (one atomic write)."""
        return TableEntry(self, self._create_entry(name, "table", exist_ok, table_schema=schema))

    def get_table(self, name: str) -> TableEntry:
        return TableEntry(self, self._get_meta(name, "table"))

    def store_table_object(self, table: pa.Table) -> str:
        """Write ``table`` as an Arrow IPC object; returns its content hash."""
        def write(path: Path) -> None:
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
                w.write_table(table)

        return store_staged(self.store, "table.arrow", write,
                            what=f"writing table rows for catalog {self.url}")

    # ------------------------------------------------------------------------------- SQL
    @property
    def ctx(self) -> datafusion.SessionContext:
        """This process's DataFusion context with every dataset and table registered."""
        return self._query.sync()

    def from_arrow(self, table: pa.Table) -> datafusion.DataFrame:
        """Wrap an Arrow table as a DataFrame of this process's context (no catalog sync)."""
        return self._query.from_arrow(table)

    def sql(self, query: str, param_values: dict[str, Any] | None = None, *,
            allow_statements: bool = False, timeout_s: float | None = None
            ) -> datafusion.DataFrame:
        """Run SQL over segment tables, index ranges, per-entity data and tables.

        Use ``$name`` placeholders with ``param_values`` rather than formatting strings.

        SQL is read-only by default: DDL (``CREATE EXTERNAL TABLE``, ``CREATE VIEW``, ``DROP``),
        DML (``COPY … TO``, ``INSERT``) and statements (``SET``) are refused with
        :class:`~rayform.errors.QueryError`, because DataFusion would otherwise read and write
        any file the process may (see docs/security.md); datasets change through ``register``
        and ``unregister``. ``allow_statements=True`` runs the query with DataFusion's defaults,
        for a trusted user who wants its full power.

        Limits (docs/security.md): a query of more than 1 MiB or 1,000 operators is refused
        before planning, each context has a memory pool (``$RAYFORM_SQL_MEMORY_BYTES``), and
        ``timeout_s`` cancels planning or any one execution of the returned frame that runs
        longer (main thread only).

        Raises:
            QueryError: DataFusion rejected the query, it was refused as a write, it passed a
                limit; the returned DataFrame raises it too when executing fails
                (``collect``, ``to_arrow_table`` …).
            ConfigError: a bad ``timeout_s``, or one given outside the main thread.
        """
        return self._query.sql(query, param_values, allow_statements=allow_statements,
                               timeout_s=timeout_s)


def _read_or_none(store: Store, key: str) -> bytes | None:
    try:
        return store.read_bytes(key)
    except FileNotFoundError:
        return None
