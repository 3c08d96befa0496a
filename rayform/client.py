"""``rayform.Client``: the entry point of the Rayform guide — a catalog and its slices.

The catalog comes from the ``catalog`` argument, else ``RAYFORM_CATALOG``, else a default local
directory (``$XDG_DATA_HOME/rayform/catalog``, i.e. ``~/.local/share/rayform/catalog``), created
when absent. Any catalog URL works: a directory, ``s3://bucket/prefix`` or ``https://host/path``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rayform.catalog._catalog import Catalog
from rayform.catalog._dataset import DatasetView
from rayform.catalog._pull import PullResult, pull_slice
from rayform.catalog._slices import (
    ExcludedRange,
    Slice,
    TimeRange,
    create_slice,
    list_slices,
    load_slice,
)

CATALOG_ENV = "RAYFORM_CATALOG"


def default_catalog_dir() -> Path:
    """``$XDG_DATA_HOME/rayform/catalog`` (``~/.local/share/rayform/catalog`` by default)."""
    data_home = os.environ.get("XDG_DATA_HOME")
    base = Path(data_home).expanduser() if data_home else Path.home() / ".local" / "share"
    return base / "rayform" / "catalog"


class Slices:
    """``client.slices``: create, get and list the slices of the client's catalog."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def create(self, dataset: str | DatasetView, *, segments: Sequence[str] | None = None,
               where: str | None = None, params: Mapping[str, Any] | None = None,
               time_range: TimeRange | tuple[Any, Any] | None = None,
               name: str | None = None, exclude: Sequence[ExcludedRange] = ()) -> Slice:
        """Pin a selection of ``dataset`` to its current segment versions and save it.

        Creating the same selection again returns the same slice (same id). See
        :func:`rayform.catalog._slices.create_slice` for the arguments and errors.
        """
        return create_slice(self._catalog, dataset, segments=segments, where=where,
                            params=params, time_range=time_range, name=name, exclude=exclude)

    def get(self, slice_id: str) -> Slice:
        """The slice ``slc_…``.

        Raises:
            InvalidNameError: not a slice id.
            EntryNotFoundError: no such slice in this catalog.
        """
        return load_slice(self._catalog, slice_id)

    def list(self) -> list[Slice]:
        """Every slice of the catalog, oldest first."""
        return list_slices(self._catalog)


class Client:
    """A connection to a Rayform catalog.

    Args:
        catalog: a catalog URL or path, or an open :class:`Catalog`; default ``RAYFORM_CATALOG``,
            else :func:`default_catalog_dir` (created when absent).

    Raises:
        CatalogNotFoundError: an explicit catalog (argument or ``RAYFORM_CATALOG``) does not exist.
    """

    def __init__(self, catalog: str | os.PathLike[str] | Catalog | None = None) -> None:
        if isinstance(catalog, Catalog):
            self._catalog = catalog
        else:
            url = os.fspath(catalog) if catalog is not None else os.environ.get(CATALOG_ENV)
            self._catalog = (Catalog.open(url) if url
                             else Catalog.create(default_catalog_dir(), exist_ok=True))
        self.slices = Slices(self._catalog)

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    def pull(self, slice_id: str | Slice, *, progress: bool = True) -> PullResult:
        """Prefetch every file of a slice into the local cache (``rayform pull``)."""
        return pull_slice(self._catalog, slice_id, progress=progress)

    def __repr__(self) -> str:
        return f"Client({self._catalog.url!r})"
