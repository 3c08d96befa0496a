"""Remote reads: the map dataset reads the next segments ahead (verified), and opening a remote
slice costs as few metadata round trips as it can."""

from __future__ import annotations

import hashlib
import pickle
import time
from pathlib import Path

import pytest
import torch
from surface_data import write_episode
from surface_servers import Https

import rayform
from rayform.dataloader import (
    DataSource,
    Field,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
)
from rayform.errors import RemoteError
from rayform.storage._cache import ObjectCache
from rayform.storage._store import object_key

torch.set_num_threads(1)
JOINTS = "/joints/position:Scalars:scalars"


def objects_of(slice_: rayform.catalog.Slice) -> dict[str, str]:
    """Segment id -> its recording object (one layer per segment in these catalogs)."""
    view = slice_.view()
    return {r.segment_id: r.layers["base"].object for r in view.segment_records()}


def wait_for_gets(https: Https, digests: list[str], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(https.log.gets_of(d) for d in digests):
        if time.monotonic() > deadline:
            raise AssertionError(f"not fetched: {[d for d in digests if not https.log.gets_of(d)]}")
        time.sleep(0.01)


def map_dataset(view: rayform.DatasetView) -> RerunMapDataset:
    return RerunMapDataset(DataSource(view), "frame_index",
                           {"q": Field(JOINTS, NumericDecoder())}, sample_metadata=True)


def test_the_segments_after_the_first_batch_are_fetched_in_the_background(
        https_catalog: Https, local_catalog: rayform.Catalog, cache_dir: Path) -> None:
    remote = rayform.Catalog.open(https_catalog.url).get_dataset("robots")
    objects = {r.segment_id: r.layers["base"].object for r in remote.segment_records()}
    ds = map_dataset(remote)
    assert not any(https_catalog.log.gets_of(d) for d in objects.values())
    first = ds.__getitems__([0])  # only ep0 is needed
    assert first[0]["meta"]["segment_id"] == "ep0"
    wait_for_gets(https_catalog, [objects["ep1"], objects["ep2"]])  # read ahead, unasked
    cache = ObjectCache(cache_dir)
    for digest in objects.values():
        deadline = time.monotonic() + 20
        while cache.cached(digest) is None:  # installed, verified
            assert time.monotonic() < deadline
            time.sleep(0.01)
    fetched = len(https_catalog.log.object_gets())
    samples = ds.__getitems__(list(range(len(ds))))
    assert {s["meta"]["segment_id"] for s in samples} == {"ep0", "ep1", "ep2"}
    assert len(https_catalog.log.object_gets()) == fetched  # read from the cache
    assert https_catalog.log.refetched() == []  # nothing downloaded twice
    local = map_dataset(local_catalog.get_dataset("robots"))
    for a, b in zip(samples, local.__getitems__(list(range(len(local)))), strict=True):
        assert torch.equal(a["q"], b["q"])


def test_a_corrupt_object_read_ahead_never_enters_the_cache(
        https_catalog: Https, local_catalog: rayform.Catalog, cache_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "2")
    made = rayform.Client(local_catalog).slices.create("robots")
    remote = rayform.Client(https_catalog.url).slices.get(made.id)
    bad = objects_of(remote)["ep2"]
    served = Path(local_catalog.url) / object_key(bad)
    data = bytearray(served.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the server (or the path to it) alters the file
    served.chmod(0o644)
    served.write_bytes(bytes(data))
    ds = rayform.torch.EpisodeDataset(remote, obs=["joints/position"], fps=15, seed=None)
    ds.__getitems__([0])
    deadline = time.monotonic() + 20
    while https_catalog.log.gets_of(bad) < 2:  # the read-ahead tried it, twice
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.2)
    assert not ObjectCache(cache_dir).path_of(bad).exists()
    last = len(ds) - 1
    with pytest.raises(RemoteError, match="sha256") as info:
        ds.__getitems__([last])  # the reader's own request reports it
    assert bad in str(info.value)
    assert not ObjectCache(cache_dir).path_of(bad).exists()
    assert hashlib.sha256(data).hexdigest() != bad


def test_offline_nothing_is_read_ahead(https_catalog: Https, local_catalog: rayform.Catalog,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    made = rayform.Client(local_catalog).slices.create("robots")
    rayform.Client(https_catalog.url).pull(made.id, progress=False)
    gets = len(https_catalog.log.gets)
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    remote = rayform.Client(https_catalog.url).slices.get(made.id)
    ds = rayform.torch.EpisodeDataset(remote, obs=["joints/position"], fps=15, seed=None)
    assert len(ds.__getitems__(list(range(len(ds))))) == len(ds)
    time.sleep(0.1)
    assert len(https_catalog.log.gets) == gets


def test_opening_a_remote_slice_fetches_catalog_json_once_per_catalog(
        https_catalog: Https, local_catalog: rayform.Catalog, tmp_path: Path) -> None:
    made = rayform.Client(local_catalog).slices.create("robots")
    newer = write_episode(tmp_path / "ep9.rfr", "ep9", seed=9)
    local_catalog.get_dataset("robots").register(newer).wait()  # snapshot 2; the slice pins 1
    view = rayform.Client(https_catalog.url).slices.get(made.id).view()
    assert view.segment_ids() == ["ep0", "ep1", "ep2"]
    assert not any("/versions/000000000002" in p for p in https_catalog.log.gets)
    catalog_gets = [p for p in https_catalog.log.gets if p.endswith("/catalog.json")]
    version_lists = [p for p in https_catalog.log.gets if "/versions/.listing" in p]
    # the client's catalog, whose store the slice's view reuses; the pinned snapshot is read,
    # the newer ones are neither listed nor loaded
    assert len(catalog_gets) == 1
    assert version_lists == []


def test_a_remote_episode_dataset_starts_downloading_when_built(
        https_catalog: Https, local_catalog: rayform.Catalog) -> None:
    made = rayform.Client(local_catalog).slices.create("robots")
    remote = rayform.Client(https_catalog.url).slices.get(made.id)
    rayform.torch.EpisodeDataset(remote, obs=["joints/position"], fps=15)
    wait_for_gets(https_catalog, made.objects())  # no batch asked for yet
    assert https_catalog.log.refetched() == []


def test_an_iterable_pass_reads_its_segments_ahead_in_block_order(
        https_catalog: Https, local_catalog: rayform.Catalog) -> None:
    """The iterable dataset knows its order: starting a pass announces the segments of its fetch
    blocks, so they download (verified, once) while the first block decodes."""
    remote = rayform.Catalog.open(https_catalog.url).get_dataset("robots")
    objects = {r.segment_id: r.layers["base"].object for r in remote.segment_records()}
    fields = {"q": Field(JOINTS, NumericDecoder())}
    ds = RerunIterableDataset(DataSource(remote), "frame_index", fields,
                              shuffle_strategy=NoShuffle(), fetch_block_size=4)
    stream = iter(ds)
    first = next(stream)
    wait_for_gets(https_catalog, list(objects.values()))  # all three, before they are reached
    got = [first, *stream]
    assert https_catalog.log.refetched() == []
    local = RerunIterableDataset(DataSource(local_catalog.get_dataset("robots")), "frame_index",
                                 fields, shuffle_strategy=NoShuffle(), fetch_block_size=4)
    want = list(local)
    assert len(got) == len(want)
    assert all(torch.equal(a["q"], b["q"]) for a, b in zip(got, want, strict=True))


def test_a_remote_episode_dataset_starts_downloading_before_it_reads_the_catalog(
        https_catalog: Https, local_catalog: rayform.Catalog) -> None:
    """The slice names its objects: their downloads need not wait for ``catalog.json`` (one
    round trip less before the first batch). Shown by a slice read from a store of its own
    (unpickled) whose ``catalog.json`` is gone: the dataset fails, but its objects were already
    on their way."""
    made = rayform.Client(local_catalog).slices.create("robots")
    remote = pickle.loads(pickle.dumps(rayform.Client(https_catalog.url).slices.get(made.id)))
    assert remote.store is None and remote.segments == made.segments
    (Path(local_catalog.url) / "catalog.json").unlink()
    with pytest.raises(rayform.errors.CatalogNotFoundError, match=r"catalog\.json"):
        rayform.torch.EpisodeDataset(remote, obs=["joints/position"], fps=15)
    wait_for_gets(https_catalog, made.objects())
    assert https_catalog.log.refetched() == []


def test_a_remote_episode_dataset_reads_each_metadata_file_once(
        https_catalog: Https, local_catalog: rayform.Catalog) -> None:
    """The catalog files the dataset needs are requested together, early; each read takes its
    early response, so nothing is requested twice."""
    made = rayform.Client(local_catalog).slices.create("robots")
    remote = rayform.Client(https_catalog.url).slices.get(made.id)
    before = len(https_catalog.log.gets)
    ds = rayform.torch.EpisodeDataset(remote, obs=["joints/position"], fps=15)
    assert len(ds) > 0
    metadata = [p for p in https_catalog.log.gets[before:] if "/objects/" not in p]
    # catalog.json too, but the client's store that read the slice has it already
    assert sorted(p.rsplit("/cat/", 1)[1] for p in metadata) == sorted(
        k for k in remote.metadata_keys() if k != "catalog.json")


def test_a_cold_remote_epoch_requests_catalog_json_once(
        https_catalog: Https, local_catalog: rayform.Catalog) -> None:
    """Client, slice, dataset and its first batch read ``catalog.json`` once: the slice's view
    reuses the store that read the slice. The samples are the local catalog's."""
    made = rayform.Client(local_catalog).slices.create("robots")
    remote = rayform.Client(https_catalog.url).slices.get(made.id)
    ds = rayform.torch.EpisodeDataset(remote, obs=["joints/position"], fps=15, seed=None)
    got = ds.__getitems__(list(range(len(ds))))
    assert [p for p in https_catalog.log.gets if p.endswith("/catalog.json")] == [
        "/cat/catalog.json"]
    local = rayform.torch.EpisodeDataset(made, obs=["joints/position"], fps=15, seed=None)
    want = local.__getitems__(list(range(len(local))))
    assert len(got) == len(want) > 0
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a["joints/position"], b["joints/position"])
