"""Yuv420Frame: validation, stacking, conversion to RGB, and the collator."""

from __future__ import annotations

import pickle

import av
import numpy as np
import pytest
import torch

from rayform.decoders._yuv import Yuv420Collator, Yuv420Frame
from rayform.errors import ConfigError


def frame_from_rgb(rgb: np.ndarray, *, space: str = "bt709",
                   color_range: str = "limited") -> tuple[Yuv420Frame, np.ndarray]:
    """Convert with FFmpeg to yuv420p (tagged), return it as planes and FFmpeg's RGB of it."""
    av_space = {"bt601": "ITU601", "bt709": "ITU709"}[space]
    av_range = {"limited": "MPEG", "full": "JPEG"}[color_range]
    src = av.VideoFrame.from_ndarray(rgb, format="rgb24")
    yuv = src.reformat(format="yuv420p", dst_colorspace=av_space, dst_color_range=av_range)
    h, w = rgb.shape[:2]
    planes = yuv.to_ndarray()
    y = planes[:h][None].copy()
    u = planes[h:h + h // 4].reshape(h // 2, w // 2)
    v = planes[h + h // 4:].reshape(h // 2, w // 2)
    frame = Yuv420Frame(y=torch.from_numpy(y), uv=torch.from_numpy(np.stack([u, v])),
                        color_space=space, color_range=color_range)  # type: ignore[arg-type]
    back = yuv.reformat(format="rgb24", src_colorspace=av_space, src_color_range=av_range)
    return frame, back.to_ndarray()


@pytest.mark.parametrize("space", ["bt601", "bt709"])
@pytest.mark.parametrize("color_range", ["limited", "full"])
def test_to_rgb_matches_ffmpeg(space: str, color_range: str) -> None:
    rng = np.random.default_rng(0)
    # Flat 2x2 blocks, so FFmpeg's chroma interpolation and ours see the same chroma.
    small = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
    rgb = small.repeat(2, axis=0).repeat(2, axis=1)
    frame, expected = frame_from_rgb(rgb, space=space, color_range=color_range)
    out = frame.to_rgb(dtype=torch.uint8)
    assert out.shape == (3, 24, 32) and out.dtype == torch.uint8
    diff = np.abs(out.permute(1, 2, 0).numpy().astype(int) - expected.astype(int))
    assert diff.max() <= 3
    as_float = frame.to_rgb()
    assert as_float.dtype == torch.float32 and 0.0 <= float(as_float.min()) <= float(
        as_float.max()) <= 1.0
    assert torch.allclose(frame.to_rgb(normalize=False), as_float * 255.0, atol=1e-3)


def test_unspecified_metadata_warns_and_reads_bt601_limited() -> None:
    y = torch.full((1, 2, 2), 235, dtype=torch.uint8)
    uv = torch.full((2, 1, 1), 128, dtype=torch.uint8)
    frame = Yuv420Frame(y=y, uv=uv)
    with pytest.warns(UserWarning, match="unspecified.*defaults to BT.601 limited"):
        rgb = frame.to_rgb(dtype=torch.uint8)
    assert rgb.unique().tolist() == [255]


def test_odd_sizes_and_stacking() -> None:
    y = torch.zeros((1, 5, 7), dtype=torch.uint8)
    uv = torch.full((2, 3, 4), 128, dtype=torch.uint8)
    frame = Yuv420Frame(y=y, uv=uv, color_space="bt709", color_range="full")
    assert frame.to_rgb().shape == (3, 5, 7)
    stacked = Yuv420Frame.stack([frame, frame.clone()])
    assert stacked.y.shape == (2, 1, 5, 7) and stacked.uv.shape == (2, 2, 3, 4)
    assert stacked.to_rgb().shape == (2, 3, 5, 7)
    assert (stacked.height, stacked.width) == (5, 7)
    clone = frame.clone()
    assert clone.y.data_ptr() != frame.y.data_ptr()
    restored = pickle.loads(pickle.dumps(frame))
    assert torch.equal(restored.uv, frame.uv) and restored.color_range == "full"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"color_space": "srgb"}, "color_space"),
    ({"color_range": "tv"}, "color_range"),
    ({"y": torch.zeros((2, 4, 4), dtype=torch.uint8)}, r"\[\.\.\., 1, H, W\]"),
    ({"uv": torch.zeros((2, 3, 3), dtype=torch.uint8)}, "uv must be"),
    ({"y": torch.zeros((1, 4, 4), dtype=torch.float32)}, "uint8"),
])
def test_validation(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"y": torch.zeros((1, 4, 4), dtype=torch.uint8),
                               "uv": torch.zeros((2, 2, 2), dtype=torch.uint8)}
    with pytest.raises(ConfigError, match=match):
        Yuv420Frame(**{**base, **kwargs})  # type: ignore[arg-type]


def test_stack_refuses_mixed_metadata() -> None:
    y = torch.zeros((1, 2, 2), dtype=torch.uint8)
    uv = torch.zeros((2, 1, 1), dtype=torch.uint8)
    with pytest.raises(ConfigError, match="colour metadata"):
        Yuv420Frame.stack([Yuv420Frame(y=y, uv=uv, color_space="bt601"),
                           Yuv420Frame(y=y, uv=uv, color_space="bt709")])


def test_collator_stacks_yuv_and_default_collates_the_rest() -> None:
    y = torch.zeros((1, 2, 2), dtype=torch.uint8)
    uv = torch.zeros((2, 1, 1), dtype=torch.uint8)
    batch = [{"cam": Yuv420Frame(y=y, uv=uv, color_space="bt601", color_range="limited"),
              "state": torch.ones(3) * i} for i in range(4)]
    out = Yuv420Collator()(batch)
    assert isinstance(out["cam"], Yuv420Frame) and out["cam"].y.shape == (4, 1, 2, 2)
    assert out["state"].shape == (4, 3)
    with pytest.raises(ConfigError, match="'cam' is None"):
        Yuv420Collator()([{"cam": None}])


def test_cuda_conversion_is_refused_inside_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    y = torch.zeros((1, 2, 2), dtype=torch.uint8)
    uv = torch.zeros((2, 1, 1), dtype=torch.uint8)
    frame = Yuv420Frame(y=y, uv=uv, color_space="bt601", color_range="limited")
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: object())
    with pytest.raises(RuntimeError, match="DataLoader worker"):
        frame.to_rgb("cuda")


def test_rerun_style_positional_frame_and_to_rgb_overrides() -> None:
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8).repeat(2, 0).repeat(2, 1)
    tagged, _ = frame_from_rgb(rgb, space="bt709", color_range="full")
    bare = Yuv420Frame(tagged.y, tagged.uv, "unspecified", "unspecified")  # Rerun's positions
    assert bare.color_space == "unspecified"
    with pytest.warns(UserWarning, match="unspecified"):
        guessed = bare.to_rgb()
    overridden = bare.to_rgb(color_space="bt709", color_range="full", non_blocking=True)
    assert torch.equal(overridden, tagged.to_rgb()), "the override replaces the metadata"
    assert not torch.allclose(guessed, overridden), "BT.601 limited differs from BT.709 full"
    assert torch.equal(tagged.to_rgb(color_space="bt709"), tagged.to_rgb())
    with pytest.raises(ConfigError, match="color_space"):
        tagged.to_rgb(color_space="srgb")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="color_range"):
        tagged.to_rgb(color_range="tv")  # type: ignore[arg-type]
