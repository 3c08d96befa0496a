"""Error texts a Rerun user greps for, kept beside rayform's own detail; and an undecodable
sample that is ``None`` without a Python warning (so ``filterwarnings=error`` stays quiet)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from video_fixtures import packet_batch, request

from rayform.decoders import VideoFrameDecoder, Yuv420Collator, Yuv420Frame


def _frame(**kwargs: str) -> Yuv420Frame:
    return Yuv420Frame(y=torch.zeros((1, 2, 2), dtype=torch.uint8),
                       uv=torch.zeros((2, 1, 1), dtype=torch.uint8), **kwargs)  # type: ignore[arg-type]


def test_yuv_errors_say_what_rerun_says() -> None:
    with pytest.raises(ValueError, match="empty sequence"):
        Yuv420Frame.stack([])
    with pytest.raises(ValueError, match=r"color space.*'xyz'|'xyz'.*color space"):
        _frame(color_space="xyz")
    with pytest.raises(ValueError, match="color range"):
        _frame(color_range="tv")
    with pytest.raises(ValueError, match=r"filter or replace None.*field 'image'|'image'.*filter "
                                         r"or replace None"):
        Yuv420Collator()([{"image": _frame()}, {"image": None}])
    with pytest.warns(UserWarning, match="defaults to BT.601 limited"):
        _frame().to_rgb()


def test_an_undecodable_sample_is_none_without_a_warning() -> None:
    pytest.importorskip("av")
    from video_fixtures import synthetic_frames

    from rayform.media._video_encode import encode_video_packets

    packets, is_keyframe = encode_video_packets(synthetic_frames(8), codec="h264", gop=4, fps=30)
    broken = [b"\x00\x00\x00\x01\x65" + bytes(40) if i < 4 else p for i, p in enumerate(packets)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = VideoFrameDecoder().decode(packet_batch(broken, is_windowed=True),
                                         [request(0, [1, 2], is_keyframe),
                                          request(1, [5, 6], is_keyframe)])
    assert out[0] is None and out[1] is not None and tuple(out[1].shape[:2]) == (2, 3)
    assert np.asarray(out[1]).dtype == np.uint8
