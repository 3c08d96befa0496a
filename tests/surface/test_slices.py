"""``rayform.Client`` and slices: selection, pinning, stable ids, immutability."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from surface_data import EPOCH_NS, FRAME_NS, build_catalog, write_episode

import rayform
from rayform import TimeRange
from rayform.errors import (
    CatalogNotFoundError,
    ConfigError,
    CorruptMetadataError,
    EntryNotFoundError,
    InvalidNameError,
    QueryError,
    SegmentNotFoundError,
)

JOINTS = "/joints/position:Scalars:scalars"


def joints_of(view: rayform.DatasetView, segment_id: str) -> list[object]:
    return view.open_segment(segment_id).column(JOINTS, "frame_index").values.to_pylist()


def test_create_get_list(local_catalog: rayform.Catalog) -> None:
    client = rayform.Client(local_catalog)
    slice_ = client.slices.create("robots", name="all")
    assert re.fullmatch(r"slc_[0-9a-f]{8}", slice_.id)
    assert slice_.segment_ids == ["ep0", "ep1", "ep2"]
    records = local_catalog.get_dataset("robots").segment_records()
    assert slice_.segment_versions == {r.segment_id: r.version for r in records}
    assert slice_.objects() == sorted(layer.object for r in records for layer in r.layers.values())
    assert slice_.dataset_version == 1
    assert client.slices.get(slice_.id) == slice_
    assert client.slices.list() == [slice_]
    assert (Path(local_catalog.url) / "slices" / f"{slice_.id}.json").is_file()


def test_where_uses_parameters_not_formatting(local_catalog: rayform.Catalog) -> None:
    slices = rayform.Client(local_catalog).slices
    lab_a = slices.create("robots", where='"property:site" = $site', params={"site": "lab-a"})
    assert lab_a.segment_ids == ["ep0", "ep2"]
    assert lab_a.where == '"property:site" = $site'
    both = slices.create("robots", where='"property:success" AND "property:site" = $site',
                         params={"site": "lab-a"})
    assert both.segment_ids == ["ep0"]
    with pytest.raises(ConfigError, match="empty"):  # the value is data, never SQL
        slices.create("robots", where='"property:site" = $site',
                      params={"site": "x' OR '1'='1"})
    with pytest.raises(QueryError, match="no_such_column"):
        slices.create("robots", where="no_such_column > 1")
    with pytest.raises(QueryError):
        slices.create("robots", where="true; DROP TABLE segments")


def test_segments_and_errors(local_catalog: rayform.Catalog) -> None:
    slices = rayform.Client(local_catalog).slices
    assert slices.create("robots", segments=["ep2", "ep1"]).segment_ids == ["ep1", "ep2"]
    with pytest.raises(SegmentNotFoundError, match="ep9"):
        slices.create("robots", segments=["ep1", "ep9"])
    with pytest.raises(EntryNotFoundError, match="slc_00000000"):
        slices.get("slc_00000000")
    with pytest.raises(InvalidNameError, match="slc_"):
        slices.get("../../etc/passwd")


def test_time_range_keeps_overlapping_segments(local_catalog: rayform.Catalog,
                                               tmp_path: Path) -> None:
    ds = local_catalog.get_dataset("robots")
    ds.register(write_episode(tmp_path / "late.rfr", "late", seed=5, first_frame=1000)).wait()
    slices = rayform.Client(local_catalog).slices
    early = slices.create("robots", time_range=(0, 23))  # ints: the one sequence timeline
    assert early.segment_ids == ["ep0", "ep1", "ep2"]
    assert early.time_range == TimeRange(timeline="frame_index", start=0, end=23)
    start = np.datetime64(EPOCH_NS + 1005 * FRAME_NS, "ns")
    late = slices.create("robots", time_range=(start, start + np.timedelta64(1, "s")))
    assert late.segment_ids == ["late"]
    assert late.time_range is not None and late.time_range.timeline == "real_time"
    explicit = slices.create("robots", time_range=TimeRange(timeline="frame_index",
                                                            start=1010, end=2000))
    assert explicit.segment_ids == ["late"]
    with pytest.raises(ConfigError, match="no timeline"):
        slices.create("robots", time_range=TimeRange(timeline="nope", start=0, end=1))
    with pytest.raises(ConfigError, match="after end"):
        TimeRange(timeline="frame_index", start=5, end=1)


def test_ids_are_stable_and_derived_from_content(local_catalog: rayform.Catalog,
                                                 tmp_path: Path) -> None:
    slices = rayform.Client(local_catalog).slices
    first = slices.create("robots", segments=["ep0", "ep1"])
    again = slices.create("robots", where="rerun_segment_id IN ('ep0', 'ep1')")
    assert again.id == first.id  # the same selection is the same slice
    assert again.created_at_ns == first.created_at_ns
    assert slices.create("robots", segments=["ep0", "ep1"], name="x").id != first.id
    assert slices.create("robots", segments=["ep0"]).id != first.id
    assert len(slices.list()) == 3
    # The same recordings in another catalog give the same id.
    other = build_catalog(tmp_path / "other", tmp_path / "src2")
    assert rayform.Client(other).slices.create("robots", segments=["ep0", "ep1"]).id == first.id


def test_a_slice_keeps_reading_the_versions_it_pinned(local_catalog: rayform.Catalog,
                                                      tmp_path: Path) -> None:
    client = rayform.Client(local_catalog)
    old = client.slices.create("robots")
    stored = (Path(local_catalog.url) / "slices" / f"{old.id}.json").read_bytes()
    before = joints_of(old.view(), "ep1")
    ds = local_catalog.get_dataset("robots")
    ds.register(write_episode(tmp_path / "ep1b.rfr", "ep1", seed=42),
                on_duplicate="replace").wait()
    assert ds.segment_record("ep1").version != old.segment_versions["ep1"]
    assert joints_of(ds, "ep1") != before

    reread = rayform.Client(local_catalog.url).slices.get(old.id)
    assert reread == old
    assert joints_of(reread.view(), "ep1") == before
    assert reread.view().snapshot_version == 1
    assert (Path(local_catalog.url) / "slices" / f"{old.id}.json").read_bytes() == stored
    new = client.slices.create("robots")
    assert new.id != old.id
    assert new.segment_versions["ep1"] == ds.segment_record("ep1").version
    assert joints_of(new.view(), "ep1") == joints_of(ds, "ep1")


def test_edited_slice_files_are_refused(local_catalog: rayform.Catalog) -> None:
    client = rayform.Client(local_catalog)
    slice_ = client.slices.create("robots", segments=["ep0"])
    path = Path(local_catalog.url) / "slices" / f"{slice_.id}.json"
    path.write_text(path.read_text().replace('"ep0"', '"ep1"'))
    with pytest.raises(CorruptMetadataError, match="does not match its id"):
        client.slices.get(slice_.id)


def test_client_catalog_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   local_catalog: rayform.Catalog) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    default = rayform.Client()
    assert Path(default.catalog.url) == tmp_path / "data" / "rayform" / "catalog"
    assert default.catalog.dataset_names() == []
    monkeypatch.setenv("RAYFORM_CATALOG", local_catalog.url)
    assert rayform.Client().catalog.dataset_names() == ["robots"]
    assert rayform.Client(local_catalog.url).catalog.url == local_catalog.url
    with pytest.raises(CatalogNotFoundError):
        rayform.Client(tmp_path / "typo")
    assert repr(rayform.Client(local_catalog)) == f"Client({local_catalog.url!r})"


def test_import_rayform_does_not_import_torch() -> None:
    import subprocess

    code = "import sys, rayform; rayform.Client; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
