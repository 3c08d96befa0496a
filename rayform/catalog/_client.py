"""CatalogClient: Rerun's ``rerun.catalog.CatalogClient`` surface over an embedded :class:`Catalog`.

A Rerun script that opens ``CatalogClient(url)`` and calls ``get_dataset(name=…)``,
``create_dataset``, ``datasets()``, ``entries()``, ``get_table``, ``create_table`` or ``ctx`` ports
by importing this class and passing a catalog directory or ``s3://`` / ``https://`` URL instead of
a server address. What a server does and an embedded catalog has no use for is left out:
``version_info``, ``benchmark``, ``stage``, ``register_table`` (Lance tables) and
``do_global_maintenance``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pyarrow as pa

from rayform.catalog._catalog import Catalog
from rayform.catalog._dataset_entry import DatasetEntry
from rayform.catalog._table_entry import TableEntry
from rayform.errors import CatalogNotFoundError, ConfigError, EntryNotFoundError

if TYPE_CHECKING:
    import datafusion

_SERVER_SCHEMES = ("rerun://", "rerun+http://", "rerun+https://")


class CatalogClient:
    """A client over an embedded catalog, with Rerun 0.41's ``CatalogClient`` methods.

    Args:
        url: the catalog: a directory, ``file://``, ``s3://`` or ``https://`` URL.
        token: Rerun's server token; an embedded catalog takes none (must be ``None``; object
            store credentials come from the environment).
        create: create the catalog when it does not exist yet (rayform option).

    Raises:
        CatalogNotFoundError: no catalog at ``url`` (or a Rerun server URL).
        ConfigError: a ``token`` was given.
    """

    def __init__(self, url: str | os.PathLike[str], *, token: str | None = None,
                 create: bool = False) -> None:
        text = os.fspath(url)
        if text.startswith(_SERVER_SCHEMES):
            raise CatalogNotFoundError(
                f"{text!r} is a Rerun server URL; rayform opens catalogs directly: pass a "
                "catalog directory or an s3:// / https:// catalog URL, e.g. "
                "CatalogClient('/data/catalog')"
            )
        if token is not None:
            raise ConfigError(
                "CatalogClient(token=…) authenticates to a Rerun server; an embedded rayform "
                "catalog takes no token (S3 credentials come from the AWS_* environment)"
            )
        self._catalog = Catalog.create(text) if create else Catalog.open(text)

    @property
    def catalog(self) -> Catalog:
        """The underlying :class:`Catalog` (SQL, slices, statistics …)."""
        return self._catalog

    @property
    def url(self) -> str:
        return self._catalog.url

    def __repr__(self) -> str:
        return f"CatalogClient({self.url!r})"

    # --------------------------------------------------------------------------- listings
    def entries(self, *, include_hidden: bool = False) -> list[DatasetEntry | TableEntry]:
        """Every entry: the datasets, then the tables (rayform has no hidden entries)."""
        datasets: list[DatasetEntry | TableEntry] = list(self.datasets(include_hidden=include_hidden))
        return datasets + list(self.tables(include_hidden=include_hidden))

    def datasets(self, *, include_hidden: bool = False) -> list[DatasetEntry]:
        return self._catalog.datasets()

    def tables(self, *, include_hidden: bool = False) -> list[TableEntry]:
        return self._catalog.tables()

    def entry_names(self, *, include_hidden: bool = False) -> list[str]:
        return self.dataset_names() + self.table_names()

    def dataset_names(self, *, include_hidden: bool = False) -> list[str]:
        return self._catalog.dataset_names()

    def table_names(self, *, include_hidden: bool = False) -> list[str]:
        return self._catalog.table_names()

    # ---------------------------------------------------------------------------- lookups
    def get_dataset(self, name: str | None = None, *, id: str | None = None) -> DatasetEntry:
        """The dataset with this name or entry id (exactly one of them).

        Raises:
            EntryNotFoundError: no such dataset.
            ConfigError: both or neither of ``name`` and ``id``.
        """
        if _by_name(name, id, "get_dataset"):
            assert name is not None
            return self._catalog.get_dataset(name)
        for dataset in self._catalog.datasets():
            if dataset.id == id:
                return dataset
        raise EntryNotFoundError(f"catalog {self.url} has no dataset with id {id!r}; "
                                 f"datasets: {self.dataset_names()}")

    def get_table(self, name: str | None = None, *, id: str | None = None) -> TableEntry:
        """The table with this name or entry id (exactly one of them).

        Raises:
            EntryNotFoundError: no such table.
            ConfigError: both or neither of ``name`` and ``id``.
        """
        if _by_name(name, id, "get_table"):
            assert name is not None
            return self._catalog.get_table(name)
        for table in self._catalog.tables():
            if table.id == id:
                return table
        raise EntryNotFoundError(f"catalog {self.url} has no table with id {id!r}; "
                                 f"tables: {self.table_names()}")

    # ---------------------------------------------------------------------------- creation
    def create_dataset(self, name: str, *, exist_ok: bool = False) -> DatasetEntry:
        """Create an empty dataset (or return the existing one with ``exist_ok``)."""
        return self._catalog.create_dataset(name, exist_ok=exist_ok)

    def create_table(self, name: str, schema: pa.Schema, url: str | None = None) -> TableEntry:
        """Create an empty table with ``schema``, stored inside the catalog.

        Raises:
            ConfigError: a ``url`` (Rerun's Lance table location) was given.
        """
        if url is not None:
            raise ConfigError(
                f"create_table(url={url!r}): rayform stores tables inside the catalog; leave "
                "url unset"
            )
        return self._catalog.create_table(name, schema)

    # -------------------------------------------------------------------------------- SQL
    @property
    def ctx(self) -> datafusion.SessionContext:
        """The DataFusion context with every dataset and table registered."""
        return self._catalog.ctx


def _by_name(name: str | None, entry_id: str | None, method: str) -> bool:
    if (name is None) == (entry_id is None):
        raise ConfigError(f"{method} needs exactly one of name= and id=, got name={name!r}, "
                          f"id={entry_id!r}")
    return name is not None
