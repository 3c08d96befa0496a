"""FrameSlab's capturer: frames straight into their slots, the same values as capture()."""

from __future__ import annotations

from typing import Any

import av
import numpy as np
from av.video.reformatter import VideoReformatter
from video_fixtures import synthetic_frames

from rayform.decoders._video_output import FrameSlab
from rayform.media._rgb_scaler import RgbScaler
from rayform.media._video_encode import encode_video_packets


def frames(height: int, width: int, count: int = 5) -> list[Any]:
    packets, _ = encode_video_packets(synthetic_frames(count, height=height, width=width),
                                      codec="h264", gop=3, fps=30)
    ctx = av.CodecContext.create("h264", "r")
    return [f for data in packets for f in ctx.decode(av.Packet(data))] + list(ctx.decode(None))


def pyav_rgb(frame: Any) -> Any:
    return VideoReformatter().reformat(frame, format="rgb24", threads=1).to_ndarray()


def test_the_capturer_fills_the_slots_as_capture_does() -> None:
    decoded = frames(48, 64)
    keys = [0, 1, 2, 3, 1, 4]  # key 1 has two slots
    fast = FrameSlab(keys, output_format="rgb")
    slow = FrameSlab(keys, output_format="rgb")
    capture = fast.capturer(VideoReformatter(), RgbScaler())
    for key, frame in enumerate(decoded):
        capture(key, frame)
        slow.capture(key, frame, VideoReformatter())
    fast_slots, slow_slots = fast.slots(), slow.slots()
    assert fast_slots is not None and slow_slots is not None
    np.testing.assert_array_equal(fast_slots[0][0], slow_slots[0][0])
    for key, frame in enumerate(decoded):
        np.testing.assert_array_equal(fast.captured[key], pyav_rgb(frame))
        assert np.shares_memory(fast.captured[key], fast_slots[0][0]), "converted in its slot"
    np.testing.assert_array_equal(fast_slots[0][0][4], pyav_rgb(decoded[1]))


def test_a_frame_of_another_size_gets_memory_of_its_own() -> None:
    slab = FrameSlab([0, 1], output_format="rgb")
    capture = slab.capturer(VideoReformatter(), RgbScaler())
    small, large = frames(48, 64)[0], frames(64, 80)[0]
    capture(0, small)
    capture(1, large)
    np.testing.assert_array_equal(slab.captured[1], pyav_rgb(large))
    assert slab.slots() is None, "not every frame lies in the slots"
