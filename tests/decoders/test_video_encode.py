"""The video encoding helper and the keyframe detector that checks where a decode may start."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from video_fixtures import codec_params, reference_frames, synthetic_frames

from rayform.errors import ConfigError
from rayform.media._video_bitstream import (
    detect_gop_start,
    is_annex_b,
    length_prefixed_to_annex_b,
)
from rayform.media._video_encode import (
    available_video_codecs,
    encode_video_packets,
    write_video_mp4,
)


@pytest.mark.parametrize("codec", codec_params())
@pytest.mark.parametrize("gop", [1, 8])
def test_packets_one_per_frame_with_keyframes_every_gop(codec: str, gop: int) -> None:
    frames = synthetic_frames(20)
    packets, is_keyframe = encode_video_packets(frames, codec=codec, gop=gop, fps=30)
    assert len(packets) == 20 and is_keyframe.dtype == bool
    np.testing.assert_array_equal(np.flatnonzero(is_keyframe), np.arange(0, 20, gop))
    # Every keyframe is self-contained: the detector agrees with the encoder's flags.
    assert [detect_gop_start(p, codec) for p in packets] == is_keyframe.tolist()
    decoded = reference_frames(packets, codec)
    assert len(decoded) == 20
    # Lossy, but close to the input.
    assert np.abs(decoded[5].astype(int) - frames[5].astype(int)).mean() < 12


@pytest.mark.parametrize("codec", codec_params())
def test_write_mp4_without_b_frames(tmp_path: Path, codec: str) -> None:
    path = write_video_mp4(tmp_path / "v.mp4", synthetic_frames(12), codec=codec, gop=4, fps=15)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        packets = [p for p in container.demux(stream) if p.size]
    assert len(packets) == 12
    assert all(p.pts == p.dts for p in packets)
    assert [p.is_keyframe for p in packets] == [i % 4 == 0 for i in range(12)]


def test_available_codecs_are_known_names() -> None:
    assert set(available_video_codecs()) <= {"h264", "h265", "av1"}


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"codec": "h264", "gop": 0}, "gop"),
    ({"codec": "h264", "fps": 0}, "fps"),
    ({"codec": "mjpeg-xyz"}, "no encoder"),
])
def test_bad_encode_options(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        encode_video_packets(synthetic_frames(2), **kwargs)  # type: ignore[arg-type]


def test_bad_frames() -> None:
    with pytest.raises(ConfigError, match="even width and height"):
        encode_video_packets(np.zeros((2, 7, 8, 3), np.uint8))
    with pytest.raises(ConfigError, match=r"\[H, W, 3\]"):
        encode_video_packets(np.zeros((2, 8, 8), np.uint8))
    with pytest.raises(ConfigError, match="empty"):
        encode_video_packets([])


# ------------------------------------------------------------------------- keyframe detection
def nal_units(packet: bytes) -> list[bytes]:
    return [n for n in packet.replace(b"\x00\x00\x00\x01", b"\x00\x00\x01").split(b"\x00\x00\x01")
            if n]


def test_h264_detector() -> None:
    packets, _ = encode_video_packets(synthetic_frames(3), codec="h264", gop=2)
    assert detect_gop_start(packets[0], "h264") is True
    assert detect_gop_start(packets[1], "avc") is False  # a P-frame
    idr_only = b"".join(b"\x00\x00\x00\x01" + n for n in nal_units(packets[0])
                        if n[0] & 0x1F not in (7, 8))
    assert detect_gop_start(idr_only, "h264") is False  # no parameter sets to start from
    assert detect_gop_start(b"", "h264") is False


@pytest.mark.parametrize("codec", codec_params()[1:])
def test_h265_and_av1_detectors(codec: str) -> None:
    packets, _ = encode_video_packets(synthetic_frames(3), codec=codec, gop=2)
    assert detect_gop_start(packets[0], codec) is True
    assert detect_gop_start(packets[1], codec) is False
    assert detect_gop_start(b"\xff" * 16, codec) is False


def test_unknown_codecs_are_not_judged() -> None:
    assert detect_gop_start(b"\x00\x00\x01\x65", "mjpeg") is None


def test_length_prefixed_to_annex_b() -> None:
    packets, _ = encode_video_packets(synthetic_frames(1), codec="h264", gop=1)
    nals = nal_units(packets[0])
    avcc = b"".join(len(n).to_bytes(4, "big") + n for n in nals)
    assert not is_annex_b(avcc)
    converted = length_prefixed_to_annex_b(avcc)
    assert is_annex_b(converted) and nal_units(converted) == nals
    assert length_prefixed_to_annex_b(b"\x00\x00\x00\x09abc") == b"\x00\x00\x00\x09abc"
