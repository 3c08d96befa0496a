"""Plain MP4 files register as one segment each, the file kept as a video asset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from format_sources import synthetic_frames

from rayform.catalog import Catalog
from rayform.media._video_encode import write_video_mp4

pytest.importorskip("av")


def test_mp4_becomes_a_segment_with_one_row_per_frame(tmp_path: Path, catalog: Catalog) -> None:
    path = write_video_mp4(tmp_path / "cam front.mp4", synthetic_frames(9), codec="h264", gop=3,
                           fps=15)
    ds = catalog.create_dataset("videos")
    assert ds.register(path).wait().segment_ids == ["cam_front"]
    row = ds.segment_table_arrow().to_pylist()[0]
    assert (row["property:codec"], row["property:width"], row["property:height"]) == \
        ("h264", 64, 48)
    assert row["property:num_frames"] == 9 and row["property:rate_hz"] == 15.0
    seg = ds.open_segment("cam_front")
    refs = seg.column("/video:VideoFrameReference:timestamp", "frame_index")
    np.testing.assert_array_equal(refs.index, np.arange(9))
    expected_ns = np.rint(np.arange(9) / 15 * 1e9).astype(np.int64)
    np.testing.assert_allclose(np.concatenate(refs.values.to_pylist()), expected_ns, atol=1)
    np.testing.assert_allclose(seg.column("/video:VideoFrameReference:timestamp",
                                          "video_time").index, expected_ns, atol=1)
    keys = np.concatenate(seg.column("/video:VideoFrameReference:is_keyframe",
                                     "frame_index").values.to_pylist())
    assert keys.tolist() == [True, False, False] * 3
    digest = seg.column("/video:AssetVideo:asset", "frame_index").values[0][0].as_py()
    assert seg.asset_path(digest).read_bytes() == path.read_bytes()
