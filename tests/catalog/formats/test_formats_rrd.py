"""Rerun ``.rrd`` files (written with rerun-sdk) register with Rerun's names and values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rrd_sources import START_NS, merge_rrd, write_rrd

from rayform.catalog import Catalog

pytest.importorskip("rerun")


def test_recording_becomes_segment_with_timelines_components_and_properties(
        tmp_path: Path, catalog: Catalog) -> None:
    truth = write_rrd(tmp_path / "a.rrd", "rec_a")
    ds = catalog.create_dataset("rrd")
    assert ds.register(tmp_path / "a.rrd").wait().segment_ids == ["rec_a"]
    assert ds.timelines == {"frame": "sequence", "sim_time": "timestamp", "log_time": "timestamp"}
    columns = set(ds.schema().component_columns())
    assert {"/robot/joints:Scalars:scalars", "/notes:TextDocument:text",
            "/cam:VideoStream:sample", "/cam:VideoStream:codec", "/snapshot:EncodedImage:blob",
            "/snapshot:EncodedImage:media_type", "/world/base:Transform3D:translation",
            "/world/base:Transform3D:parent_frame", "/config:TextDocument:text"} <= columns
    row = ds.segment_table_arrow().to_pylist()[0]
    assert row["property:RecordingInfo:name"] == "name of rec_a"
    assert row["property:task:text"] == "stack blocks"
    assert row["property:success:value"] is True
    assert isinstance(row["property:RecordingInfo:start_time"], int)
    seg = ds.open_segment("rec_a")
    joints = seg.column("/robot/joints:Scalars:scalars", "frame")
    np.testing.assert_array_equal(joints.index, np.arange(12))
    np.testing.assert_allclose(np.stack(joints.values.to_pylist()), truth.joints)
    sim = seg.column("/robot/joints:Scalars:scalars", "sim_time").index
    np.testing.assert_array_equal(sim - START_NS, np.arange(12) * 100_000_000)
    assert seg.column("/notes:TextDocument:text", "frame").values.to_pylist() == \
        [[t] for t in truth.texts]
    samples = seg.column("/cam:VideoStream:sample", "frame").values
    assert str(samples.type) == "list<item: binary>"  # rayform's blob type
    assert [v[0] for v in samples.to_pylist()] == truth.packets
    assert seg.column("/cam:VideoStream:codec", "frame").values[0].as_py() == ["h264"]
    keys = seg.column("/cam:VideoStream:is_keyframe", "frame").values.to_pylist()
    assert [k[0] for k in keys] == truth.is_keyframe.tolist()  # parsed from the bitstream
    assert sum(truth.is_keyframe) == 3
    assert seg.column("/snapshot:EncodedImage:blob", "frame").values.to_pylist() == [[truth.jpeg]]
    static = seg.column("/config:TextDocument:text", "frame")
    assert static.is_static and static.values[0].as_py() == ["static config"]
    translation = seg.column("/world/base:Transform3D:translation", "frame").values
    assert translation.to_pylist() == [[[1.0, 2.0, 3.0]]]


def test_every_recording_of_a_file_is_a_segment(tmp_path: Path, catalog: Catalog) -> None:
    write_rrd(tmp_path / "a.rrd", "rec_a", seed=1)
    write_rrd(tmp_path / "b.rrd", "rec_b", seed=2)
    if not merge_rrd([tmp_path / "a.rrd", tmp_path / "b.rrd"], tmp_path / "ab.rrd"):
        pytest.skip("the rerun CLI (part of rerun-sdk) is not on this machine")
    ds = catalog.create_dataset("merged")
    assert sorted(ds.register(tmp_path / "ab.rrd").wait().segment_ids) == ["rec_a", "rec_b"]
    a = ds.open_segment("rec_a").column("/robot/joints:Scalars:scalars", "frame").values
    b = ds.open_segment("rec_b").column("/robot/joints:Scalars:scalars", "frame").values
    assert a.to_pylist() != b.to_pylist()


def test_rrd_and_native_recordings_share_a_dataset(tmp_path: Path, catalog: Catalog) -> None:
    from rayform.catalog import RecordingWriter

    write_rrd(tmp_path / "a.rrd", "rec_a")
    with RecordingWriter(tmp_path / "n.rfr", recording_id="native") as rec:
        rec.log_video_stream("/cam", timelines={"frame": np.arange(2)}, samples=[b"a", b"b"],
                             is_keyframe=[True, False], codec="h264")
    ds = catalog.create_dataset("mixed")
    ds.register([tmp_path / "a.rrd", tmp_path / "n.rfr"])  # same column types: no conflict
    assert ds.segment_ids() == ["native", "rec_a"]
