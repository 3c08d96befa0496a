"""Distributed registration: convert and store files in parallel Ray tasks, then commit once.

Each task opens the catalog itself, converts one source (any importer), validates and indexes its
recordings and copies them into the content-addressed object store (``prepare_layer``). The driver
then commits every layer in one atomic snapshot through :meth:`DatasetEntry.register_prepared`, the
same commit :meth:`DatasetEntry.register` uses. If any task fails, its error is raised and nothing
is committed: the objects other tasks already copied stay unreferenced (invisible, as after a
crash), and the dataset's snapshot and segment table are unchanged.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from rayform.catalog._catalog import Catalog
from rayform.catalog._dataset_entry import DatasetEntry, RegistrationHandle
from rayform.catalog._handle import CatalogHandle
from rayform.catalog._registration import (
    OnDuplicate,
    PreparedLayer,
    local_source,
    prepare_layer,
    registration_request,
)
from rayform.importers import find_importer
from rayform.ray._cluster import TaskOptions, run_tasks
from rayform.recording._columns import DEFAULT_LAYER
from rayform.storage._fetch import parse_source


def _prepare_source(catalog_url: str, source: str, layer_name: str) -> list[PreparedLayer]:
    """Runs in a Ray task: fetch ``source`` if remote, convert it, store its recordings."""
    store = Catalog.open(catalog_url).store
    staging = store.staging_dir()
    try:
        path, source_uri = local_source(parse_source(source), staging / "_fetched")
        importer = find_importer(path)
        return [prepare_layer(store, recording, source_uri=source_uri, layer_name=layer_name)
                for recording in importer.convert(path, staging)]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def register_many(dataset: DatasetEntry,
                  uris: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                  layer_name: str | Sequence[str] = DEFAULT_LAYER,
                  on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
                  options: TaskOptions | None = None) -> RegistrationHandle:
    """Register many recordings, converting them in parallel Ray tasks, and commit once.

    The arguments are those of :meth:`DatasetEntry.register` (one Ray task per source), plus
    ``options``. The sources and the catalog must be reachable from the workers at the same paths
    (a shared filesystem; relative paths are resolved here first).

    Raises:
        The first failing task's own error (``SourceNotFoundError``, ``UnknownFormatError``,
        ``CorruptRecordingError`` …), or those of the commit (``DuplicateSegmentError``,
        ``SchemaConflictError``); in every case nothing is committed.
        ConfigError: no sources (before any Ray task starts).
    """
    _, _, policy = registration_request(uris, layer_name, on_duplicate,  # raises on no sources
                                        caller="register_many")
    prepared = prepare_many(dataset.catalog, uris, layer_name=layer_name, options=options)
    return dataset.register_prepared(prepared, on_duplicate=policy)


def prepare_many(catalog: CatalogHandle,
                 uris: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                 layer_name: str | Sequence[str] = DEFAULT_LAYER,
                 options: TaskOptions | None = None) -> list[PreparedLayer]:
    """The first half of :func:`register_many`: convert and store every source in Ray tasks.

    Nothing is committed; pass the result to :meth:`DatasetEntry.register_prepared` (the CLI does
    so only after every source converted, so a failed ``register --create`` creates no dataset).
    """
    paths, layers, _ = registration_request(uris, layer_name, OnDuplicate.ERROR,
                                            caller="register_many")
    sources = [p.uri if p.path is None else str(p.path.resolve()) for p in paths]
    catalog.require_writable()
    calls = [(catalog.url, source, layer) for source, layer in zip(sources, layers, strict=True)]
    results = run_tasks(_prepare_source, calls, options)
    return [layer for result in results for layer in result]


__all__ = ["prepare_many", "register_many"]
