"""Export a segment to ``.rrd`` with rerun-sdk; registering it again gives the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from format_sources import synthetic_frames, write_lerobot_v21

from rayform.catalog import Catalog, DatasetView, RecordingWriter
from rayform.exporters import export_rrd
from rayform.media._video_encode import encode_video_packets

pytest.importorskip("rerun")


def _assert_same_segment(a: DatasetView, b: DatasetView, segment_id: str) -> None:
    sa, sb = a.open_segment(segment_id), b.open_segment(segment_id)
    # the .rrd importer states that it kept the source's time timelines as they were
    assert sb.record.properties == {"time_grid": "source", **sa.record.properties}
    assert {f.name: f.type for f in a.schema().arrow} == {f.name: f.type for f in b.schema().arrow}
    assert a.timelines == b.timelines
    for column in a.schema().component_columns():
        if not sa.has_column(column):
            continue
        for timeline in a.timelines:
            ra, rb = sa.column(column, timeline), sb.column(column, timeline)
            assert ra.is_static == rb.is_static, column
            np.testing.assert_array_equal(ra.index, rb.index, err_msg=column)
            assert ra.values.equals(rb.values), (column, timeline)


def test_native_recording_round_trips_through_rrd(tmp_path: Path, catalog: Catalog) -> None:
    frames = synthetic_frames(6)
    packets, keys = encode_video_packets(frames, codec="h264", gop=3, fps=10)
    with RecordingWriter(tmp_path / "ep.rfr", recording_id="ep7") as rec:
        rec.set_properties(task="pour", success=True, score=0.5, attempts=3)
        frame = {"frame_index": np.arange(6),
                 "real_time": (1_700_000_000_000_000_000 + np.arange(6) * 10**8)
                 .astype("datetime64[ns]")}
        rec.log_scalars("/joints", timelines=frame, values=np.arange(18, dtype=np.float32)
                        .reshape(6, 3))
        rec.log_scalars("/gripper", timelines={"frame_index": np.array([1, 4])},
                        values=np.array([0.0, 1.0]))
        rec.log_encoded_images("/img", timelines={"frame_index": np.arange(2)},
                               blobs=[b"\xff\xd8a", b"\xff\xd8b"], media_type="image/jpeg")
        rec.log_video_stream("/cam", timelines=frame, samples=packets, is_keyframe=keys,
                             codec="h264")
        rec.log_columns("/notes", timelines={"frame_index": np.arange(2)},
                        components={"TextDocument:text": ["a", "b"]})
        rec.log_static("/calib", components={"Scalars:scalars": np.array([1.0, 2.0])})
    ds = catalog.create_dataset("native")
    ds.register(tmp_path / "ep.rfr")
    out = export_rrd(ds, "ep7", tmp_path / "ep7.rrd")
    import rerun.chunk

    entries = rerun.chunk.RrdReader(out).recordings()
    assert [e.recording_id for e in entries] == ["ep7"]
    back = catalog.create_dataset("back")
    back.register(out)
    _assert_same_segment(ds, back, "ep7")


def test_lerobot_video_asset_round_trips_through_rrd(tmp_path: Path, catalog: Catalog) -> None:
    pytest.importorskip("av")
    write_lerobot_v21(tmp_path / "src", lengths={0: 8})
    ds = catalog.create_dataset("lr")
    ds.register(tmp_path / "src")
    out = export_rrd(ds, "episode_000000", tmp_path / "ep.rrd")
    back = catalog.create_dataset("back")
    back.register(out)
    _assert_same_segment(ds, back, "episode_000000")
