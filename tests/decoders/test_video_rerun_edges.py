"""VideoFrameDecoder edges where Rerun's behaviour is the contract: requests without a keyframe
start get ``None``; ``window_storage="view"`` shares memory only for consecutive frames."""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt
import pytest
from video_fixtures import hwc, packet_batch, reference_frames, request, synthetic_frames

from rayform.decoders import RequestArrays, VideoFrameDecoder

pytest.importorskip("av")


@cache
def _stream() -> tuple[list[bytes], npt.NDArray[np.bool_], list[npt.NDArray[np.uint8]]]:
    from rayform.media._video_encode import encode_video_packets

    packets, is_keyframe = encode_video_packets(synthetic_frames(24), codec="h264", gop=8, fps=30)
    return packets, is_keyframe, reference_frames(packets, "h264")


def test_a_request_not_starting_at_a_keyframe_gets_none() -> None:
    packets, is_keyframe, reference = _stream()
    requests = [request(0, [5], is_keyframe, starts_at_keyframe=False),
                request(1, [6], is_keyframe)]
    out = VideoFrameDecoder().decode(packet_batch(packets), requests)
    assert out[0] is None
    np.testing.assert_array_equal(hwc(out[1]), reference[6])
    arrays = RequestArrays(sample_positions=np.arange(2), segment_ids=["seg", "seg"],
                           index_values=np.array([5, 6]), output_rows=np.array([[5], [6]]),
                           decode_starts=np.array([0, 0]), decode_stops=np.array([6, 7]),
                           starts_at_keyframe=False)
    assert list(VideoFrameDecoder().decode(packet_batch(packets), arrays)) == [None, None]


def test_view_storage_copies_windows_that_are_not_consecutive() -> None:
    packets, is_keyframe, reference = _stream()
    batch = packet_batch(packets, is_windowed=True)
    windows = [[1, 3], [3, 5], [2, 3]]  # every other frame, twice; then a consecutive one
    out = VideoFrameDecoder(window_storage="view").decode(
        batch, [request(i, w, is_keyframe) for i, w in enumerate(windows)])
    out[0][1].zero_()  # frame 3 of the first sample, written in place
    np.testing.assert_array_equal(hwc(out[1][0]), reference[3])  # the second's frame 3: intact
    np.testing.assert_array_equal(hwc(out[2][1]), reference[3])
    assert out[0].untyped_storage().data_ptr() != out[1].untyped_storage().data_ptr()
