"""RecordingWriter round trips: values, Arrow types, DESIGN §2 column names, errors."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image
from recording_factories import (
    EPOCH_NS,
    FRAME_NS,
    KEYFRAME_EVERY,
    NUM_JOINTS,
    RecordingFactory,
    gripper_values,
    joint_values,
    jpeg_bytes,
    video_packet,
)

import rayform
from rayform.catalog import Catalog
from rayform.errors import ConfigError, InvalidNameError, SchemaConflictError
from rayform.recording._file import open_recording
from rayform.recording._writer import asset_dir_for

EXPECTED_TYPES = {
    "frame_index": pa.int64(),
    "real_time": pa.timestamp("ns"),
    "elapsed": pa.duration("ns"),
    "/joints/position:Scalars:scalars": pa.list_(pa.float64()),
    "/gripper:Scalars:scalars": pa.list_(pa.float32()),
    "/cam0/rgb:EncodedImage:blob": pa.list_(pa.binary()),
    "/cam0/rgb:EncodedImage:media_type": pa.list_(pa.string()),
    "/cam1:VideoStream:sample": pa.list_(pa.binary()),
    "/cam1:VideoStream:is_keyframe": pa.list_(pa.bool_()),
    "/cam1:VideoStream:codec": pa.list_(pa.string()),
    "/debug/loss:Scalars:scalars": pa.list_(pa.float64()),
    "/robot/description:TextDocument:text": pa.list_(pa.string()),
}


def _entity_rows(path: Path, entity: str, *, static: bool = False) -> pa.Table:
    header, table = open_recording(path)
    rows = (header.static_entities if static else header.entities)[entity]
    return table.slice(rows.start, rows.stop - rows.start)


def test_header_names_timelines_entities_and_properties(recording_factory: RecordingFactory
                                                        ) -> None:
    path = recording_factory("ep7", seed=7, num_frames=12, properties={"operator": "ann"})
    header, table = open_recording(path)
    assert header.recording_id == "ep7"
    assert header.timelines == {"frame_index": "sequence", "real_time": "timestamp",
                                "elapsed": "duration"}
    assert sorted(header.entities) == ["/cam0/rgb", "/cam1", "/debug/loss", "/gripper",
                                       "/joints/position"]
    assert sorted(header.static_entities) == ["/cam1", "/robot/description"]
    assert header.properties == {"task": "task-1", "success": False, "site": "lab-b",
                                 "robot": "arm7", "episode": 7, "score": 1.75, "operator": "ann"}
    assert type(header.properties["episode"]) is int
    assert type(header.properties["success"]) is bool
    assert type(header.properties["score"]) is float
    assert header.entities["/joints/position"].components == ["Scalars:scalars"]
    assert header.entities["/cam1"].components == ["VideoStream:is_keyframe",
                                                   "VideoStream:sample"]
    assert header.static_entities["/cam1"].components == ["VideoStream:codec"]
    rows = sum(r.stop - r.start for r in [*header.entities.values(),
                                          *header.static_entities.values()])
    assert rows == table.num_rows


def test_column_names_and_list_types_follow_design(recording_factory: RecordingFactory) -> None:
    _, table = open_recording(recording_factory("ep0", num_frames=9))
    assert {f.name: f.type for f in table.schema} == EXPECTED_TYPES


def test_scalar_and_vector_values_round_trip(recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep3", seed=3, num_frames=10, first_frame=5)
    joints = _entity_rows(path, "/joints/position")
    frames = np.arange(5, 15)
    assert joints.column("frame_index").to_pylist() == frames.tolist()
    assert joints.column("real_time").cast(pa.int64()).to_pylist() == \
        (EPOCH_NS + frames * FRAME_NS).tolist()
    assert joints.column("elapsed").cast(pa.int64()).to_pylist() == (frames * FRAME_NS).tolist()
    values = np.array(joints.column("/joints/position:Scalars:scalars").to_pylist())
    assert values.shape == (10, NUM_JOINTS)
    np.testing.assert_array_equal(values, joint_values(3, frames))
    gripper = _entity_rows(path, "/gripper")
    sub = frames[::3]
    assert gripper.column("frame_index").to_pylist() == sub.tolist()
    assert gripper.column("elapsed").null_count == len(sub)  # not logged on that timeline
    np.testing.assert_array_equal(
        np.array(gripper.column("/gripper:Scalars:scalars").to_pylist(), np.float32)[:, 0],
        gripper_values(3, sub))


def test_images_and_video_packets_round_trip(recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep2", seed=2, num_frames=12)
    cam = _entity_rows(path, "/cam0/rgb")
    blobs = [b[0] for b in cam.column("/cam0/rgb:EncodedImage:blob").to_pylist()]
    assert blobs == [jpeg_bytes(2, i) for i in range(0, 12, 3)]
    assert Image.open(io.BytesIO(blobs[0])).size == (8, 8)
    assert {m[0] for m in cam.column("/cam0/rgb:EncodedImage:media_type").to_pylist()} == \
        {"image/jpeg"}
    video = _entity_rows(path, "/cam1")
    frames = list(range(1, 12, 3))
    assert video.column("frame_index").to_pylist() == frames
    assert [s[0] for s in video.column("/cam1:VideoStream:sample").to_pylist()] == \
        [video_packet(2, i) for i in frames]
    assert [k[0] for k in video.column("/cam1:VideoStream:is_keyframe").to_pylist()] == \
        [i % KEYFRAME_EVERY == 0 for i in range(len(frames))]
    static = _entity_rows(path, "/cam1", static=True)
    assert static.column("/cam1:VideoStream:codec").to_pylist() == [["h264"]]
    assert static.column("frame_index").null_count == static.num_rows
    text = _entity_rows(path, "/robot/description", static=True)
    assert text.column("/robot/description:TextDocument:text").to_pylist() == [["arm7-urdf"]]


def test_arrow_inputs_and_other_types(tmp_path: Path) -> None:
    path = tmp_path / "arrow.rfr"
    with rayform.RecordingWriter(path, recording_id="arrow") as rec:
        rec.log_columns(
            "/mixed",
            timelines={"tick": pa.array([3, 1, 2], pa.int32()),
                       "ts": pa.array([3000, 1000, 2000], pa.timestamp("us"))},
            components={
                "Points:positions": pa.array([[1.0, 2.0], [3.0], []], pa.large_list(pa.float64())),
                "Label:text": pa.array(["c", "a", "b"]),
                "Mask:bits": np.array([[1, 0], [0, 1], [1, 1]], dtype=np.uint8),
            })
    header, table = open_recording(path)
    assert header.timelines == {"tick": "sequence", "ts": "timestamp"}
    assert table.schema.field("/mixed:Points:positions").type == pa.list_(pa.float64())
    assert table.schema.field("/mixed:Label:text").type == pa.list_(pa.string())
    assert table.schema.field("/mixed:Mask:bits").type == pa.list_(pa.uint8())
    # Rows come back sorted on the first timeline; µs timestamps are stored as ns.
    assert table.column("tick").to_pylist() == [1, 2, 3]
    assert table.column("ts").cast(pa.int64()).to_pylist() == [1_000_000, 2_000_000, 3_000_000]
    assert table.column("/mixed:Points:positions").to_pylist() == [[3.0], [], [1.0, 2.0]]
    assert table.column("/mixed:Label:text").to_pylist() == [["a"], ["b"], ["c"]]
    assert table.column("/mixed:Mask:bits").to_pylist() == [[0, 1], [1, 1], [1, 0]]


def test_sort_on_first_timeline_is_stable_across_blocks(tmp_path: Path) -> None:
    path = tmp_path / "ties.rfr"
    with rayform.RecordingWriter(path, recording_id="ties") as rec:
        rec.log_scalars("/s", timelines={"t": [5, 1, 5]}, values=[1.0, 2.0, 3.0])
        rec.log_scalars("/s", timelines={"t": [1, 5]}, values=[4.0, 5.0])
    _, table = open_recording(path)
    assert table.column("t").to_pylist() == [1, 1, 5, 5, 5]
    assert [v[0] for v in table.column("/s:Scalars:scalars").to_pylist()] == \
        [2.0, 4.0, 1.0, 3.0, 5.0]


def test_an_entity_logged_once_out_of_order_is_sorted(tmp_path: Path) -> None:
    path = tmp_path / "once.rfr"
    with rayform.RecordingWriter(path, recording_id="once") as rec:
        rec.log_scalars("/s", timelines={"t": [3, 1, 2]}, values=[3.0, 1.0, 2.0])
        rec.log_scalars("/in_order", timelines={"t": [7, 8]}, values=[7.0, 8.0])
    _, table = open_recording(path)
    assert table.column("t").to_pylist() == [7, 8, 1, 2, 3]  # entities in name order
    assert [v and v[0] for v in table.column("/s:Scalars:scalars").to_pylist()] == \
        [None, None, 1.0, 2.0, 3.0]


def test_timelines_shared_by_entities_are_checked_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline arrays an importer logs for many entities (once_as_arrow) are checked for
    order, measured and validated once per recording, not once per entity."""
    from rayform.recording import _writer

    checked: list[pa.Array] = []
    ascending = _writer._ascending

    def counted(values: pa.Array) -> bool:
        checked.append(values)
        return ascending(values)

    monkeypatch.setattr(_writer, "_ascending", counted)
    timelines = _writer.once_as_arrow({"frame_index": np.arange(20), "t": np.arange(20) * 5})
    path = tmp_path / "shared.rfr"
    with rayform.RecordingWriter(path, recording_id="shared") as rec:
        for i in range(6):
            rec.log_scalars(f"/e{i}", timelines=timelines, values=np.full(20, float(i)))
    assert len(checked) == 1
    _, table = open_recording(path)
    assert table.column("frame_index").to_pylist() == list(range(20)) * 6


def test_a_static_entity_without_components_has_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "empty.rfr"
    with rayform.RecordingWriter(path, recording_id="empty") as rec:
        rec.log_scalars("/s", timelines={"t": [0, 1]}, values=[1.0, 2.0])
        rec.log_static("/nothing", components={})
    header, table = open_recording(path)
    assert table.num_rows == 2
    assert header.static_entities["/nothing"].stop == header.static_entities["/nothing"].start


def test_video_asset_is_stored_content_addressed(tmp_path: Path) -> None:
    video = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8
    path = tmp_path / "asset.rfr"
    with rayform.RecordingWriter(path, recording_id="asset") as rec:
        digest = rec.log_video_asset("/cam2", video, timelines={"frame_index": [0, 1, 2]},
                                     frame_timestamps_ns=[0, 33, 66],
                                     is_keyframe=[True, False, False])
    assert digest == hashlib.sha256(video).hexdigest()
    assert (tmp_path / "asset.rfr.assets" / digest).read_bytes() == video
    catalog = Catalog.create(tmp_path / "cat")
    ds = catalog.create_dataset("videos")
    ds.register(path).wait()
    seg = ds.open_segment("asset")
    assert seg.asset_path(digest).read_bytes() == video
    assert seg.column("/cam2:AssetVideo:asset", "frame_index").values.to_pylist() == [[digest]]
    assert seg.column("/cam2:VideoFrameReference:timestamp", "frame_index").values.to_pylist() \
        == [[0], [33], [66]]
    table = ds.segment_table_arrow()
    assert table.column("rerun_size_bytes").to_pylist() == [path.stat().st_size + len(video)]


def test_writer_errors(tmp_path: Path) -> None:
    rec = rayform.RecordingWriter(tmp_path / "bad.rfr", recording_id="bad")
    with pytest.raises(ConfigError, match=r"'/a'.*timeline 'u' has 2 values, others 3"):
        rec.log_scalars("/a", timelines={"t": [0, 1, 2], "u": [0, 1]}, values=[1, 2, 3])
    with pytest.raises(ConfigError, match=r"has 2 rows but its timelines have 3"):
        rec.log_scalars("/a", timelines={"t": [0, 1, 2]}, values=[1, 2])
    with pytest.raises(ConfigError, match=r"timeline 't'.*dtype float64"):
        rec.log_scalars("/a", timelines={"t": [0.5, 1.5]}, values=[1, 2])
    rec.log_scalars("/a", timelines={"t": [0, 1]}, values=[1, 2])
    with pytest.raises(SchemaConflictError, match=r"timeline 't' was logged as a sequence"):
        rec.log_scalars("/b", timelines={"t": np.array([1], "datetime64[ns]")}, values=[1])
    with pytest.raises(InvalidNameError, match=r"entity path 'cam'"):
        rec.log_scalars("cam", timelines={"t": [0]}, values=[1])
    with pytest.raises(InvalidNameError, match=r"'\.\.'"):
        rec.log_scalars("/a/../b", timelines={"t": [0]}, values=[1])
    with pytest.raises(ConfigError, match=r"property 'bad'.*or a list of them, got \{"):
        rec.set_property("bad", {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"property 'bad'.*one type, got \[1, 'a'\]"):
        rec.set_property("bad", [1, "a"])
    with pytest.raises(ConfigError, match=r"is_keyframe has shape \(1,\), expected \(2,\)"):
        rec.log_video_stream("/v", timelines={"t": [0, 1]}, samples=[b"a", b"b"],
                             is_keyframe=[True], codec="h264")
    rec.close()
    with pytest.raises(ConfigError, match=r"already closed"):
        rec.log_scalars("/a", timelines={"t": [3]}, values=[3])
    with pytest.raises(InvalidNameError, match=r"segment id '\.\./x'"):
        rayform.RecordingWriter(tmp_path / "x.rfr", recording_id="../x")


def test_failed_writer_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "half.rfr"
    with pytest.raises(RuntimeError), rayform.RecordingWriter(path, recording_id="half") as rec:
        rec.log_scalars("/a", timelines={"t": [0]}, values=[1])
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_list_properties_keep_their_type_in_the_segment_table(tmp_path: Path) -> None:
    with rayform.RecordingWriter(tmp_path / "p.rfr", recording_id="p") as rec:
        rec.log_scalars("/x", timelines={"t": [0]}, values=[1.0])
        rec.set_properties(gains=[0.5, 1.5], joints=["a", "b"], trials=3)
    ds = Catalog.create(tmp_path / "cat").create_dataset("d")
    ds.register(tmp_path / "p.rfr").wait()
    table = ds.segment_table().to_arrow_table()
    assert table.schema.field("property:gains").type == pa.list_(pa.float64())
    assert table.schema.field("property:joints").type == pa.list_(pa.string())
    assert table.schema.field("property:trials").type == pa.int64()
    assert table.select(["property:gains", "property:joints", "property:trials"]).to_pylist() == \
        [{"property:gains": [0.5, 1.5], "property:joints": ["a", "b"], "property:trials": 3}]


def test_a_recording_written_again_with_the_same_asset_replaces_it(tmp_path: Path) -> None:
    """Writing a recording again at the same path, with the same asset file, used to fail with
    shutil.SameFileError (the asset folder already held a hard link of that file); a stale
    file under the asset's name is replaced."""
    video = tmp_path / "v.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)))
    out = tmp_path / "ep.rfr"
    digests = []
    for values in (np.arange(3.0), np.arange(3.0) + 1):
        with rayform.RecordingWriter(out, recording_id="ep") as rec:
            digests.append(rec.add_asset(video, media_type="video/mp4"))
            rec.log_scalars("/x", timelines={"frame_index": np.arange(3)}, values=values)
    assets = sorted(asset_dir_for(out).iterdir())
    assert [p.name for p in assets] == [digests[0]] == [digests[1]]
    assert assets[0].read_bytes() == video.read_bytes()
    assets[0].unlink()
    assets[0].write_bytes(b"stale")  # a leftover under the asset's name
    with rayform.RecordingWriter(out, recording_id="ep") as rec:
        rec.add_asset(video, media_type="video/mp4")
        rec.log_scalars("/x", timelines={"frame_index": np.arange(3)}, values=np.arange(3.0))
    assert assets[0].read_bytes() == video.read_bytes()
    assert sorted(p.name for p in asset_dir_for(out).iterdir()) == [digests[0]]
