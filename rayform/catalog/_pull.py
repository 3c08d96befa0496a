"""``rayform pull``: prefetch everything a slice reads into the local cache, for offline training.

Pulling reads the slice's metadata the way training will (so it is cached for
``RAYFORM_OFFLINE=1``), fetches the snapshot's segment index object to disk (a process that read
it before holds it in memory only) and downloads the data objects in parallel with a progress
bar in bytes. Objects already cached (and intact) are not downloaded again. It ends with an
offline dry run: the slice is opened again as a fresh offline process would open it, so a
``pull`` that returns guarantees an offline read. A cache cleaned under the pull (files deleted
between its steps, or while it runs) is noticed by that dry run: the pull runs once more, online,
and a second miss is an :class:`~rayform.errors.OfflineError` naming the cache. On a local
catalog there is nothing to fetch; the objects are only checked to be present.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rayform.catalog._catalog import Catalog
from rayform.catalog._metadata import DatasetVersion, block_lists
from rayform.catalog._slices import Slice, load_slice
from rayform.catalog._snapshot import clear_cache
from rayform.catalog._versions import load_version
from rayform.errors import OfflineError
from rayform.storage._remote import RemoteStore

DEFAULT_WORKERS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class PullResult:
    """What a pull did.

    Attributes:
        slice_id: the slice pulled.
        num_objects / num_bytes: every object the slice reads, and their total size.
        fetched_objects / fetched_bytes: the part that had to be downloaded.
        seconds: wall time.
        cache_dir: where the objects are (None for a local catalog).
    """

    slice_id: str
    num_objects: int
    num_bytes: int
    fetched_objects: int
    fetched_bytes: int
    seconds: float
    cache_dir: str | None

    def summary(self) -> str:
        """One line for a terminal."""
        rate = self.fetched_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0
        where = f" into {self.cache_dir}" if self.cache_dir else " (local catalog, nothing to fetch)"
        return (f"{self.slice_id}: {self.num_objects} objects, {self.num_bytes / 1e6:.1f} MB; "
                f"fetched {self.fetched_objects} ({self.fetched_bytes / 1e6:.1f} MB) in "
                f"{self.seconds:.1f} s ({rate:.1f} MB/s){where}")


def pull_slice(target: Catalog | Any, slice_id: str | Slice, *, progress: bool = True,
               max_workers: int = DEFAULT_WORKERS) -> PullResult:
    """Fetch a slice's metadata and data objects into the local cache.

    Args:
        target: a :class:`Catalog` or a :class:`rayform.Client`.
        slice_id: ``"slc_…"`` or a :class:`Slice`.
        progress: show a tqdm bar (bytes) on stderr.
        max_workers: parallel downloads.

    Raises:
        EntryNotFoundError: no such slice.
        RemoteError: a download failed after retries.
        OfflineError: ``RAYFORM_OFFLINE=1`` and something is not cached yet, or the closing
            offline dry run found something an offline read would miss, twice (the pull ran
            once more in between: something deletes the cache, or it cannot hold the files).
    """
    catalog: Catalog = getattr(target, "catalog", target)
    started = time.perf_counter()
    slice_ = slice_id if isinstance(slice_id, Slice) else load_slice(catalog, slice_id)
    store = catalog.store
    if not isinstance(store, RemoteStore):
        sizes, _ = _object_sizes(slice_, catalog)
        for digest in sizes:
            store.object_path(digest)  # raises when an object is missing
        return PullResult(slice_id=slice_.id, num_objects=len(sizes),
                          num_bytes=sum(sizes.values()), fetched_objects=0, fetched_bytes=0,
                          seconds=time.perf_counter() - started, cache_dir=None)
    fetched: dict[str, int] = {}
    for attempt in range(2):
        # Every round opens the catalog afresh, online: what this process read before (its
        # catalog.json, snapshots, segment index) may have been deleted from the cache since.
        sizes, missing = _fetch(store, slice_, saved=isinstance(slice_id, str),
                                progress=progress, max_workers=max_workers)
        fetched.update(missing)
        try:
            offline_dry_run(store, slice_)
            break
        except OfflineError as err:
            if attempt:
                raise OfflineError(
                    f"{err} (twice: everything was fetched again in between; if something is "
                    f"deleting the cache {store.cache.root}, stop it and pull again)"
                ) from err
    return PullResult(slice_id=slice_.id, num_objects=len(sizes), num_bytes=sum(sizes.values()),
                      fetched_objects=len(fetched), fetched_bytes=sum(fetched.values()),
                      seconds=time.perf_counter() - started, cache_dir=str(store.cache.root))


def _object_sizes(slice_: Slice, catalog: Catalog) -> tuple[dict[str, int], dict[str, str]]:
    """Every object the slice's segments read (recordings and assets), with its size, and the
    block-hash object of each recording that has one; reading the slice's metadata through
    ``catalog`` caches it for offline use."""
    view = slice_.view(catalog)
    view.schema()
    sizes: dict[str, int] = {}
    lists: dict[str, str] = {}
    for record in view.segment_records():
        lists.update(block_lists(record))
        for layer in record.layers.values():
            sizes[layer.object] = layer.size_bytes
            sizes.update(layer.assets)
    return sizes, lists


def _fetch(store: RemoteStore, slice_: Slice, *, saved: bool, progress: bool,
           max_workers: int) -> tuple[dict[str, int], dict[str, int]]:
    """One online round: the slice's metadata (its own file too when it was named by id, so
    ``saved``), its segment index and every object not cached; returns the sizes of all objects
    and of those downloaded."""
    from tqdm import tqdm

    clear_cache()  # the segment index from disk (or the server), not from this process's memory
    catalog = Catalog(store)  # reads catalog.json online: on disk again for offline use
    if saved:
        load_slice(catalog, slice_.id)  # its file too (from the server if it vanished)
    sizes, lists = _object_sizes(slice_, catalog)
    store.note_block_hashes(lists)
    header = load_version(store, slice_.dataset, slice_.dataset_version, DatasetVersion)
    store.object_path(header.segment_index)  # on disk, not only in this process's memory
    missing = {d: n for d, n in sizes.items() if not store.is_cached(d)}
    show = progress and sys.stderr is not None
    with tqdm(total=sum(missing.values()), unit="B", unit_scale=True, unit_divisor=1024,
              desc=f"pull {slice_.id}", disable=not show) as bar:

        def fetch(digest: str) -> None:
            store.object_path(digest)
            bar.update(missing[digest])

        with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
            for _ in pool.map(fetch, sorted(missing, key=missing.__getitem__, reverse=True)):
                pass
            # The block-hash objects too (each already fetched to verify its recording, unless
            # the recording was cached): a cache copied elsewhere reads the slice block by block.
            for _ in pool.map(store.object_path, sorted(set(lists.values()))):
                pass
    return sizes, missing


def offline_dry_run(store: RemoteStore, slice_: Slice) -> None:
    """Open ``slice_`` as a fresh offline process would: metadata from the disk cache only, no
    segment index from memory, every recording file opened.

    Raises:
        OfflineError: something an offline read needs is not in the cache (naming it).
    """
    clear_cache()  # a fresh process has no segment index in memory
    try:
        view = slice_.view(Catalog(store.offline_view()))
        view.schema()
        for segment_id in view.segment_ids():
            segment = view.open_segment(segment_id)
            segment.files()
            for layer in segment.record.layers.values():
                for asset in layer.assets:
                    segment.asset_path(asset)
    except OfflineError as err:
        raise OfflineError(
            f"rayform pull {slice_.id}: the slice was fetched, but an offline read would still "
            f"fail: {err}"
        ) from err
