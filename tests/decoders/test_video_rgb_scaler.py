"""RgbScaler: RGB straight into our arrays, pixel-identical to PyAV's reformat for every tag."""

from __future__ import annotations

from functools import cache
from typing import Any

import av
import numpy as np
import pytest
from av.video.reformatter import VideoReformatter
from video_fixtures import synthetic_frames

from rayform.media._rgb_scaler import COEFFICIENTS, RgbScaler
from rayform.media._video_encode import encode_video_packets

RANGES = (0, 1, 2)  # unspecified, limited (MPEG), full (JPEG)


@cache
def decoded(height: int, width: int) -> list[Any]:
    packets, _ = encode_video_packets(synthetic_frames(6, height=height, width=width),
                                      codec="h264", gop=3, fps=30)
    ctx = av.CodecContext.create("h264", "r")
    frames = [f for data in packets for f in ctx.decode(av.Packet(data))]
    return frames + list(ctx.decode(None))


def pyav_rgb(frame: Any) -> Any:
    return VideoReformatter().reformat(frame, format="rgb24", threads=1).to_ndarray()


def test_the_library_pyav_loaded_is_found() -> None:
    assert RgbScaler().available


@pytest.mark.parametrize("colorspace", sorted(COEFFICIENTS))
@pytest.mark.parametrize("color_range", RANGES)
def test_every_covered_tag_matches_pyav_pixel_for_pixel(colorspace: int, color_range: int) -> None:
    scaler = RgbScaler()
    for frame in decoded(48, 64)[:3]:
        frame.colorspace = colorspace
        frame.color_range = color_range
        out = np.full((48, 64, 3), 7, dtype=np.uint8)
        assert scaler.convert(frame, out)
        np.testing.assert_array_equal(out, pyav_rgb(frame))


@pytest.mark.parametrize("width", [48, 64, 80, 112, 224])
def test_widths_it_takes_are_exact_and_write_nothing_past_the_array(width: int) -> None:
    scaler = RgbScaler()
    for height in (34, 48):
        frame = decoded(height, width)[4]
        size = height * width * 3
        memory = np.full(size + 4096, 0xA5, dtype=np.uint8)  # the array, then a guard band
        out = memory[:size].reshape(height, width, 3)
        assert scaler.convert(frame, out)
        np.testing.assert_array_equal(out, pyav_rgb(frame))
        assert (memory[size:] == 0xA5).all(), "swscale wrote past the end of the array"


def test_widths_swscale_cannot_write_exactly_are_refused() -> None:
    scaler = RgbScaler()
    for width in (50, 56, 72):
        out = np.zeros((48, width, 3), dtype=np.uint8)
        assert not scaler.convert(decoded(48, width)[2], out)
        assert not out.any()


def test_frames_it_does_not_cover_are_left_untouched() -> None:
    scaler = RgbScaler()
    frame = decoded(48, 64)[1]
    out = np.zeros((48, 64, 3), dtype=np.uint8)
    assert not scaler.convert(frame.reformat(format="yuvj420p"), out)
    assert not scaler.convert(frame, np.zeros((48, 64, 4), dtype=np.uint8))  # wrong shape
    assert not scaler.convert(frame, np.zeros((48, 128, 3), dtype=np.uint8)[:, ::2])  # strided
    frame.colorspace = 3  # a reserved tag PyAV's reformat refuses
    assert not scaler.convert(frame, out)
    assert not out.any()


def test_a_context_that_converts_unlike_pyav_is_never_used(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """Each new context is checked against PyAV's reformat first: with the wrong coefficients
    for a tag, the scaler refuses that tag's frames instead of writing other pixels."""
    monkeypatch.setitem(COEFFICIENTS, 1, 9)  # BT.709 frames converted as BT.2020: a mismatch
    scaler = RgbScaler()
    frame = decoded(48, 64)[2]
    frame.colorspace = 1
    out = np.zeros((48, 64, 3), dtype=np.uint8)
    assert not scaler.convert(frame, out)
    assert not scaler.convert(frame, out)  # remembered, not checked again
    assert not out.any()
    frame.colorspace = 2
    assert scaler.convert(frame, out)
    np.testing.assert_array_equal(out, pyav_rgb(frame))


def fresh(height: int, width: int) -> list[Any]:
    """Frames no other test has retagged (``decoded`` is shared)."""
    return decoded.__wrapped__(height, width)


def test_convert_at_writes_the_same_pixels_at_an_address() -> None:
    scaler = RgbScaler()
    frames = fresh(48, 64)
    bank = np.full((len(frames), 48, 64, 3), 7, dtype=np.uint8)
    base = bank.__array_interface__["data"][0]
    for i, frame in enumerate(frames):
        assert scaler.convert_at(frame, base + i * bank[0].nbytes)
    for i, frame in enumerate(frames):
        np.testing.assert_array_equal(bank[i], pyav_rgb(frame))


def test_convert_at_checks_the_frame_every_time() -> None:
    # The context of the last frame's tags is remembered; a frame with other tags is checked anew.
    scaler = RgbScaler()
    frame = fresh(48, 64)[2]
    memory = np.zeros(48 * 64 * 3 + 16, dtype=np.uint8)
    address = memory.__array_interface__["data"][0]
    address += -address % 16
    assert scaler.convert_at(frame, address)
    assert not scaler.convert_at(frame, address + 1), "unaligned memory is refused"
    assert not scaler.convert_at(frame.reformat(format="yuvj420p"), address)
    assert scaler.convert_at(frame, address)
    frame.colorspace = 3  # a reserved tag PyAV's reformat refuses
    assert not scaler.convert_at(frame, address)
    assert not scaler.convert_at(fresh(48, 56)[2], address), "a width swscale cannot write"
