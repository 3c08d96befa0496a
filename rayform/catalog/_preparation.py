"""Preparing a registration: sources converted, inspected and stored before anything commits.

Used by :meth:`DatasetEntry.register` and by ``rayform register`` (which prepares before it
creates the dataset): everything that can be wrong with the input (a missing file, an unknown or
damaged format, a bad id, two sources of one segment layer) raises while converting, before any
object is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from rayform._atomic import fsync_file
from rayform.catalog._metadata import SegmentRecord
from rayform.catalog._registration import (
    DUPLICATE_FIX,
    PreparedLayer,
    duplicate_message,
    inspect_layer,
    local_source,
    store_layer,
)
from rayform.errors import DuplicateSegmentError
from rayform.importers import find_importer
from rayform.importers._options import NO_OPTIONS, ImportOptions, require_options_read
from rayform.storage._fetch import SourceUri
from rayform.storage._store import Store

STORE_THREADS = 2
"""Layers stored at once: hashing is the bottleneck of storing, and hashlib frees the GIL."""


def require_distinct(layers: Sequence[PreparedLayer]) -> None:
    """Refuse a registration that holds the same segment id and layer twice."""
    seen: dict[tuple[str, str], PreparedLayer] = {}
    for prep in layers:
        key = (prep.segment_id, prep.layer_name)
        first = seen.get(key)
        if first is not None:
            raise DuplicateSegmentError(
                f"duplicate segment layers in request: segment {prep.segment_id!r} layer "
                f"{prep.layer_name!r} appears twice in this registration ({first.layer.source_uri} "
                f"and {prep.layer.source_uri}); give each recording a distinct recording id"
            )
        seen[key] = prep


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisteredSource:
    """A source whose every segment already has its layer in the dataset (found unconverted)."""

    uri: str
    layer_name: str
    segment_ids: tuple[str, ...]


def registered_sources(sources: Sequence[SourceUri], layers: Sequence[str],
                       record: Callable[[str], SegmentRecord | None]) -> list[RegisteredSource]:
    """The local sources whose segment ids (read without converting, where the format allows)
    all hold their layer already (``record``: a segment id's record in the dataset, or None)."""
    found: list[RegisteredSource] = []
    for source, layer in zip(sources, layers, strict=True):
        if source.path is None:
            continue
        ids = find_importer(source.path).segment_ids(source.path)
        if not ids:
            continue
        records = [record(i) for i in ids]
        if all(r is not None and layer in r.layers for r in records):
            found.append(RegisteredSource(uri=source.uri, layer_name=layer,
                                          segment_ids=tuple(ids)))
    return found


def refuse_registered(found: Sequence[RegisteredSource], *, fix: str = DUPLICATE_FIX) -> None:
    """Raise for the first source already registered (``on_duplicate='error'``).

    Raises:
        DuplicateSegmentError: naming its segment, layer and ``fix``.
    """
    if found:
        first = found[0]
        raise DuplicateSegmentError(duplicate_message(first.segment_ids[0], first.layer_name,
                                                      fix=fix))


def convert_sources(sources: Sequence[SourceUri], layers: Sequence[str], staging: Path, *,
                    desc: str, show: bool, options: ImportOptions = NO_OPTIONS
                    ) -> list[PreparedLayer]:
    """Every source converted under ``staging`` and inspected (nothing stored).

    Local sources are checked before any remote one is fetched; so are ``options`` (an option
    that none of the local sources' importers reads is refused when every source is local).

    Raises:
        RayformError: a missing or damaged source, an unknown format, a bad id, or one segment
            layer given twice.
    """
    from tqdm import tqdm

    local = [find_importer(source.path) for source in sources if source.path is not None]
    if len(local) == len(sources):
        require_options_read(options, local)
    used = []
    inspected: list[PreparedLayer] = []
    # Converted recordings are flushed to disk while the next ones convert: storing them later
    # fsyncs them (durable before a snapshot names them), which then finds nothing left to write.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rayform-flush") as flush:
        for i, (source, layer) in enumerate(tqdm(list(zip(sources, layers, strict=True)),
                                                 desc=desc, unit="file", disable=not show)):
            path, source_uri = local_source(source, staging / f"{i:06d}-source")
            out = staging / f"{i:06d}"
            out.mkdir()
            importer = find_importer(path)
            used.append(importer)
            for recording in importer.configured(options).convert(path, out):
                converted = recording != path and recording.is_relative_to(out)
                inspected.append(inspect_layer(recording, source_uri=source_uri,
                                               layer_name=layer, request_uri=source.uri,
                                               converted=converted))
                if converted:
                    flush.submit(_flush, recording)
    require_options_read(options, used)
    require_distinct(inspected)
    return inspected


def _flush(path: Path) -> None:
    with suppress(OSError):  # best effort: storing the file fsyncs it again and reports errors
        fsync_file(path)


def store_layers(store: Store, inspected: Sequence[PreparedLayer], *, desc: str, show: bool
                 ) -> list[PreparedLayer]:
    """Every inspected layer's objects stored (content-addressed; nothing committed) and durable,
    on up to :data:`STORE_THREADS` threads. The folders the objects went into are fsynced once
    each at the end (many layers share one), before this returns."""
    from tqdm import tqdm

    pending: set[str] = set()
    if len(inspected) <= 1:
        with store.folder_syncs_deferred(pending):
            stored = [store_layer(store, prep) for prep in inspected]
        store.sync_folders(pending)
        return stored
    total = sum(prep.layer.size_bytes for prep in inspected)
    with ThreadPoolExecutor(max_workers=min(len(inspected), STORE_THREADS),
                            thread_name_prefix="rayform-store") as pool, \
            tqdm(total=total, desc=desc, unit="B", unit_scale=True, disable=not show) as bar:
        def store_one(prep: PreparedLayer) -> PreparedLayer:
            with store.folder_syncs_deferred(pending):
                stored = store_layer(store, prep)
            bar.update(prep.layer.size_bytes)
            return stored

        layers = list(pool.map(store_one, inspected))
    store.sync_folders(pending)
    return layers
