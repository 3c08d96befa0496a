"""rayform.ray on a local cluster: ingest, statistics and segment reads equal the single-process path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from ray_episodes import ACTIONS, CAMERA, JOINTS

from rayform.catalog import Catalog, DatasetEntry, compute_statistics
from rayform.errors import CorruptRecordingError, SourceNotFoundError

pytest.importorskip("ray")

from rayform import ray as rf_ray

pytestmark = [
    pytest.mark.ray,
    # Ray Data's DataContext sets deprecated fields of its own in __init__ (ray 2.60).
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

# The columns of a segment table that identify content (not registration time or storage URL).
CONTENT_COLUMNS = ["rerun_segment_id", "rerun_layer_names", "rerun_num_rows", "rerun_size_bytes",
                   "rayform_segment_version", "property:success", "property:task",
                   "frame_index:start", "frame_index:end", "real_time:start", "real_time:end"]


def _content(ds: DatasetEntry) -> pa.Table:
    return ds.segment_table_arrow().select(CONTENT_COLUMNS)


def test_register_many_commits_once_the_same_segments(
        ray_cluster: Any, episode_files: list[Path], make_catalog: Callable[..., Catalog]) -> None:
    single = make_catalog().create_dataset("robots")
    single.register(episode_files).wait()
    distributed = make_catalog().create_dataset("robots")
    result = rf_ray.register_many(distributed, episode_files,
                                  options=rf_ray.TaskOptions(max_concurrency=2)).wait()
    assert sorted(result.segment_ids) == ["ep0", "ep1", "ep2", "ep3"]
    assert distributed.snapshot_version == 1  # one atomic commit
    assert _content(distributed).equals(_content(single))
    assert distributed.schema().arrow.equals(single.schema().arrow)
    objects = {r.segment_id: [layer.object for layer in r.layers.values()]
               for r in distributed.segment_records()}
    assert objects == {r.segment_id: [layer.object for layer in r.layers.values()]
                       for r in single.segment_records()}
    # skip policy: nothing new, no new snapshot; the skipped segments are listed, as in Rerun
    again = rf_ray.register_many(distributed, episode_files, on_duplicate="skip").wait()
    assert sorted(again.segment_ids) == distributed.segment_ids()
    assert distributed.snapshot_version == 1


def test_failed_task_leaves_the_catalog_unchanged(
        ray_cluster: Any, episode_files: list[Path], make_catalog: Callable[..., Catalog],
        tmp_path: Path) -> None:
    ds = make_catalog().create_dataset("robots")
    ds.register(episode_files[:1]).wait()
    before_version, before_table = ds.snapshot_version, ds.segment_table_arrow()
    broken = tmp_path / "broken.rfr"
    data = episode_files[2].read_bytes()
    broken.write_bytes(data[: len(data) // 2])  # truncated mid-file: sniffed as a recording
    with pytest.raises(CorruptRecordingError, match=r"broken\.rfr"):
        rf_ray.register_many(ds, [episode_files[1], broken, episode_files[3]])
    with pytest.raises(SourceNotFoundError, match=r"missing\.rfr"):
        rf_ray.register_many(ds, [episode_files[1], tmp_path / "missing.rfr"])
    fresh = ds.catalog.get_dataset("robots")
    assert fresh.snapshot_version == before_version
    assert fresh.segment_table_arrow().equals(before_table)


def test_statistics_equal_the_single_process_path(
        ray_cluster: Any, episode_files: list[Path], make_catalog: Callable[..., Catalog]) -> None:
    ds = make_catalog().create_dataset("robots")
    ds.register(episode_files).wait()
    expected = compute_statistics(ds).to_arrow()
    for options in (rf_ray.TaskOptions(max_concurrency=2),
                    rf_ray.TaskOptions(segments_per_task=3, max_concurrency=1)):
        got = rf_ray.compute_statistics(ds, options=options)
        assert got.to_arrow().equals(expected)
    view = ds.filter_segments(["ep1", "ep3"])
    got = rf_ray.compute_statistics(view, [ACTIONS], timeline="real_time", quantiles=(0.3,))
    assert got.to_arrow().equals(
        compute_statistics(view, [ACTIONS], timeline="real_time", quantiles=(0.3,)).to_arrow())
    assert sorted(got.segments) == ["ep1", "ep3"]


def test_read_segments_rows_equal_the_reader(
        ray_cluster: Any, episode_files: list[Path], make_catalog: Callable[..., Catalog]) -> None:
    ds = make_catalog().create_dataset("robots")
    ds.register(episode_files).wait()
    columns = [JOINTS, CAMERA]
    dataset = rf_ray.read_segments(ds, columns=columns, index="frame_index")
    got = pa.concat_tables(ray_cluster.get(dataset.to_arrow_refs()))
    expected = ds.filter_contents(["/joints/position", "/cam0/rgb"]).reader_arrow("frame_index")
    expected = expected.select(["rerun_segment_id", "frame_index", *columns])
    order = [("rerun_segment_id", "ascending"), ("frame_index", "ascending")]
    assert got.sort_by(order).equals(expected.sort_by(order))
    # latest-at fill and a filtered view
    view = ds.filter_segments(["ep2"])
    filled = rf_ray.read_segments(view, columns=[JOINTS, CAMERA], index="frame_index",
                                  fill_latest_at=True).take_all()
    assert len(filled) == 80 and all(row[CAMERA] is not None for row in filled)
    assert {row["rerun_segment_id"] for row in filled} == {"ep2"}
    # a slice: its pinned segments, rows inside its time range
    from rayform.catalog._slices import TimeRange, create_slice

    slice_ = create_slice(ds.catalog, ds, segments=["ep0", "ep1"],
                          time_range=TimeRange(timeline="frame_index", start=10, end=20))
    rows = rf_ray.read_segments(slice_, columns=[JOINTS], index="frame_index").take_all()
    assert sorted((r["rerun_segment_id"], r["frame_index"]) for r in rows) == [
        (s, f) for s in ("ep0", "ep1") for f in range(10, 21)]


def test_export_lerobot_writes_the_same_folder(
        ray_cluster: Any, episode_files: list[Path], make_catalog: Callable[..., Catalog],
        tmp_path: Path) -> None:
    pytest.importorskip("av")
    from rayform.exporters import export_lerobot

    ds = make_catalog().create_dataset("robots")
    ds.register(episode_files).wait()
    kwargs: dict[str, Any] = {"fps": 20, "timeline": "real_time",
                              "features": {"observation.state": JOINTS, "action": ACTIONS,
                                           "observation.images.cam0": CAMERA}}
    single = export_lerobot(ds, tmp_path / "single", **kwargs)
    distributed = rf_ray.export_lerobot(ds, tmp_path / "ray", **kwargs,
                                        options=rf_ray.TaskOptions(segments_per_task=2))
    assert (distributed.num_episodes, distributed.num_frames) == (4, single.num_frames)
    files = sorted(p.relative_to(single.root) for p in single.root.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(distributed.root)
                           for p in distributed.root.rglob("*") if p.is_file())
    assert any(f.suffix == ".mp4" for f in files) and any(f.suffix == ".parquet" for f in files)
    for name in files:
        assert (single.root / name).read_bytes() == (distributed.root / name).read_bytes(), name


def test_register_many_refuses_an_empty_list_before_any_task(tmp_path: Path) -> None:
    import rayform.ray as rr
    from rayform.errors import ConfigError

    dataset = Catalog.create(tmp_path / "cat").create_dataset("robots")
    with pytest.raises(ConfigError, match=r"register_many: no data sources to register \(an empty list"):
        rr.register_many(dataset, [])
    assert dataset.segment_ids() == []
