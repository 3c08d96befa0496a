"""``rayform pull`` and ``RAYFORM_OFFLINE=1``."""

from __future__ import annotations

from pathlib import Path

import pytest
from surface_servers import Https

import rayform
from rayform.catalog import pull_slice
from rayform.errors import OfflineError

JOINTS = "/joints/position:Scalars:scalars"
CAM = "/cam0/rgb:EncodedImage:blob"


def read_everything(view: rayform.DatasetView) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for sid in view.segment_ids():
        seg = view.open_segment(sid)
        out[sid] = [seg.column(c, "frame_index").values.to_pylist() for c in (JOINTS, CAM)]
    return out


def test_offline_without_a_cache_names_what_is_missing(https_catalog: Https,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    with pytest.raises(OfflineError, match=r"catalog\.json.*rayform pull slc_"):
        rayform.Client(https_catalog.url)
    assert https_catalog.log.gets == []


def test_pulled_slice_trains_offline(https_catalog: Https, local_catalog: rayform.Catalog,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    slice_id = rayform.Client(local_catalog).slices.create("robots", segments=["ep0", "ep2"]).id
    result = rayform.Client(https_catalog.url).pull(slice_id, progress=True)
    assert (result.slice_id, result.num_objects, result.fetched_objects) == (slice_id, 2, 2)
    assert result.fetched_bytes == result.num_bytes > 0
    assert f"pull {slice_id}" in capsys.readouterr().err  # the progress bar
    again = pull_slice(rayform.Client(https_catalog.url), slice_id, progress=False)
    assert again.fetched_objects == 0

    seen = len(https_catalog.log.gets)
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    client = rayform.Client(https_catalog.url)
    slice_ = client.slices.get(slice_id)
    assert read_everything(slice_.view()) == read_everything(slice_.view(local_catalog))
    assert len(https_catalog.log.gets) == seen  # not one request while offline


def test_offline_reading_beyond_the_pulled_slice_suggests_pull(
        https_catalog: Https, local_catalog: rayform.Catalog,
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = rayform.Client(local_catalog)
    pulled = client.slices.create("robots", segments=["ep0"])
    other = client.slices.create("robots", segments=["ep1"])
    remote = rayform.Client(https_catalog.url)
    remote.pull(pulled.id, progress=False)
    remote.slices.get(other.id)  # metadata seen online, data not fetched
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    view = rayform.Client(https_catalog.url).slices.get(other.id).view()
    digest = other.segments[0].objects[0]
    with pytest.raises(OfflineError, match=rf"object {digest}.*rayform pull slc_") as info:
        view.open_segment("ep1").column(JOINTS, "frame_index")
    assert "RAYFORM_OFFLINE" in str(info.value)


def test_offline_forbids_writes(s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = rayform.Catalog.create(s3_url)
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    with pytest.raises(OfflineError, match="forbids"):
        catalog.create_dataset("robots")


def test_local_catalogs_ignore_offline_mode(local_catalog: rayform.Catalog,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    client = rayform.Client(Path(local_catalog.url))
    slice_ = client.slices.create("robots")
    assert len(read_everything(slice_.view())) == 3
    result = client.pull(slice_.id, progress=False)
    assert (result.fetched_objects, result.cache_dir) == (0, None)


def test_pull_fetches_what_this_process_held_in_memory(https_catalog: Https,
                                                        local_catalog: rayform.Catalog,
                                                        cache_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The segment index read earlier lives in this process's memory; pull must still put it on
    disk, or the training process (fresh, offline) cannot open the slice."""
    import shutil

    from rayform.catalog._snapshot import clear_cache

    slice_id = rayform.Client(local_catalog).slices.create("robots", segments=["ep1"]).id
    rayform.Client(https_catalog.url).slices.get(slice_id).view().segment_records()
    shutil.rmtree(cache_dir)  # a cleaned cache; the process keeps its in-memory index
    rayform.Client(https_catalog.url).pull(slice_id, progress=False)
    clear_cache()  # the training process starts fresh
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    view = rayform.Client(https_catalog.url).slices.get(slice_id).view()
    assert read_everything(view) == read_everything(
        rayform.Client(local_catalog).slices.get(slice_id).view())


def test_pull_checks_offline_readability_before_reporting_success(
        https_catalog: Https, local_catalog: rayform.Catalog,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """If anything an offline read needs were not cached, pull says so instead of succeeding."""
    from rayform.storage import RemoteStore

    slice_id = rayform.Client(local_catalog).slices.create("robots", segments=["ep0"]).id
    monkeypatch.setattr(RemoteStore, "_remember", lambda self, space, key, data: None)
    with pytest.raises(OfflineError, match=rf"rayform pull {slice_id}: the slice was fetched, but "
                                           r"an offline read would still fail: .*catalog\.json"):
        rayform.Client(https_catalog.url).pull(slice_id, progress=False)
