"""ImageDecoder: JPEG (simplejpeg and Pillow, pixel-identical), PNG modes, windows, bad input."""

from __future__ import annotations

import io
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from PIL import Image

from rayform.decoders import DecodeRequest, FieldBatch, ImageDecoder, TensorRows
from rayform.decoders._image import decode_image_chw
from rayform.media import _image as image_module
from rayform.media._image import decode_image

REALDATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata"
STEREO = REALDATA / "opencv-stereo-calib-frames"


def _encode(arr: np.ndarray, fmt: str, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def _scene(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx * 255 // max(w, 1), yy * 255 // max(h, 1), (xx + yy) % 256], -1)
    return np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)


def _column(blobs: Sequence[bytes | None]) -> pa.Array:
    return pa.array([None if b is None else [b] for b in blobs], pa.list_(pa.binary()))


def _decode(column: pa.Array, outputs: Sequence[Sequence[int]], *, windowed: bool
            ) -> list[torch.Tensor | None]:
    requests = [DecodeRequest(i, "s", i, tuple(sorted(set(o))), tuple(o))
                for i, o in enumerate(outputs)]
    return ImageDecoder().decode(FieldBatch(column=column, is_windowed=windowed), requests)


@pytest.mark.parametrize(("h", "w", "subsampling"), [(224, 224, 2), (37, 53, 0), (64, 48, 1)])
def test_simplejpeg_and_pillow_give_the_same_pixels(h: int, w: int, subsampling: int) -> None:
    pytest.importorskip("simplejpeg")
    for seed in range(3):
        colour = _encode(_scene(h, w, seed), "JPEG", quality=85, subsampling=subsampling)
        grey = _encode(_scene(h, w, seed)[..., 0], "JPEG", quality=85)
        for blob, channels in ((colour, 3), (grey, 1)):
            fast = decode_image(blob, use_simplejpeg=True)
            slow = decode_image(blob, use_simplejpeg=False)
            assert fast is not None and slow is not None
            assert fast.shape == slow.shape == (h, w, channels)
            assert np.array_equal(fast, slow)
            planes = decode_image_chw(blob)
            assert planes is not None and planes.is_contiguous()
            assert np.array_equal(planes.numpy(), slow.transpose(2, 0, 1))
            pillow_planes = decode_image_chw(blob, use_simplejpeg=False)
            assert pillow_planes is not None and torch.equal(planes, pillow_planes)


@pytest.mark.realdata
def test_real_jpeg_frames_are_pixel_identical() -> None:
    frames = sorted(STEREO.glob("*.jpg")) if STEREO.is_dir() else []
    if not frames:
        pytest.skip(f"realdata JPEG frames not found under {STEREO}")
    pytest.importorskip("simplejpeg")
    for path in frames:
        blob = path.read_bytes()
        fast, slow = decode_image(blob), decode_image(blob, use_simplejpeg=False)
        assert fast is not None and slow is not None
        assert np.array_equal(fast, slow), path.name
        planes = decode_image_chw(blob)
        assert planes is not None
        assert np.array_equal(planes.numpy(), slow.transpose(2, 0, 1)), path.name
        with Image.open(path) as img:
            assert fast.shape[:2] == (img.height, img.width)


def test_simplejpeg_is_used_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("simplejpeg")

    def no_pillow(data: object) -> None:
        raise AssertionError("JPEG went to Pillow although simplejpeg is installed")

    monkeypatch.setattr(image_module, "_decode_pillow", no_pillow)
    blob = _encode(_scene(16, 16, 0), "JPEG")
    out = _decode(_column([blob]), [[0]], windowed=False)
    assert out[0] is not None and out[0].shape == (3, 16, 16)


def test_pillow_fallback_and_missing_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    blob = _encode(_scene(16, 12, 1), "JPEG")
    expected = decode_image(blob, use_simplejpeg=False)
    monkeypatch.setattr(image_module, "_simplejpeg", None)
    got = _decode(_column([blob]), [[0]], windowed=False)[0]
    assert got is not None and np.array_equal(got.permute(1, 2, 0).numpy(), expected)
    monkeypatch.setattr(image_module, "_pil_image", None)
    with pytest.raises(ImportError, match=r"pip install 'rayform\[image\]'"):
        ImageDecoder()


def test_png_modes_give_channels_like_pillow() -> None:
    rgb = _scene(10, 6, 2)
    rgba = np.concatenate([rgb, np.full((10, 6, 1), 128, np.uint8)], axis=-1)
    palette = Image.fromarray(rgb).convert("P")
    buf = io.BytesIO()
    palette.save(buf, format="PNG")
    blobs = [_encode(rgb, "PNG"), _encode(rgba, "PNG"), _encode(rgb[..., 1], "PNG"),
             buf.getvalue()]
    out = _decode(_column(blobs), [[0], [1], [2], [3]], windowed=False)
    assert [tuple(t.shape) for t in out if t is not None] == [(3, 10, 6), (4, 10, 6),
                                                              (1, 10, 6), (3, 10, 6)]
    assert all(t is not None and t.dtype == torch.uint8 and t.is_contiguous() for t in out)
    assert np.array_equal(out[0].permute(1, 2, 0).numpy(), rgb)  # type: ignore[union-attr]
    assert np.array_equal(out[1].permute(1, 2, 0).numpy(), rgba)  # type: ignore[union-attr]
    assert np.array_equal(out[3].permute(1, 2, 0).numpy(),  # type: ignore[union-attr]
                          np.asarray(palette.convert("RGB")))


def test_windows_missing_rows_and_bad_blobs() -> None:
    shades = [_encode(np.full((4, 5, 3), v, np.uint8), "PNG") for v in (10, 20, 30)]
    small = _encode(np.zeros((2, 2, 3), np.uint8), "PNG")
    column = pa.array([[shades[0]], [shades[1]], [shades[2]], None, [], [b"not an image"],
                       [small]], pa.list_(pa.binary()))
    out = _decode(column, [[0, 1, 2], [2, 2, 0], [0, 3], [4], [5], [0, 6]], windowed=True)
    assert out[0] is not None and out[0].shape == (3, 3, 4, 5)
    assert out[0][:, 0, 0, 0].tolist() == [10, 20, 30]
    assert out[1] is not None and out[1][:, 0, 0, 0].tolist() == [30, 30, 10]
    assert out[2] is None, "a null row in the window"
    assert out[3] is None, "an empty row"
    assert out[4] is None, "an undecodable blob"
    assert out[5] is None, "frames of different shapes in one window"
    single = _decode(column, [[1], [1]], windowed=False)
    assert single[0] is not None and single[1] is not None
    assert single[0].data_ptr() != single[1].data_ptr(), "repeated rows do not share memory"


@pytest.mark.parametrize("layout", ["large_binary", "list_uint8", "select"])
def test_blob_layouts(layout: str) -> None:
    blob = _encode(np.full((3, 4, 3), 77, np.uint8), "PNG")
    select = None
    if layout == "large_binary":
        column = pa.array([[blob]], pa.list_(pa.large_binary()))
    elif layout == "list_uint8":
        column = pa.array([[list(blob)]], pa.list_(pa.list_(pa.uint8())))
    else:
        column = pa.array([[{"data": blob, "format": "png"}]],
                          pa.list_(pa.struct([("data", pa.binary()), ("format", pa.string())])))

        def select(rows: pa.Array) -> pa.Array:
            return pa.compute.struct_field(pa.compute.list_element(rows, 0), [0])

    batch = FieldBatch(column=column, select=select)
    out = ImageDecoder().decode(batch, [DecodeRequest(0, "s", 0, (0,), (0,))])
    assert out[0] is not None and out[0].shape == (3, 3, 4)
    assert int(out[0].max()) == 77


@pytest.mark.parametrize(("h", "w"), [(1, 1), (3, 5), (37, 53)])
def test_rgbx_word_view_deinterleaves_exactly_whatever_follows_the_pixels(h: int, w: int) -> None:
    # The planar word view reads 2 bytes past the last pixel: those must never reach a plane.
    rgbx = np.random.default_rng(h * w).integers(0, 256, (h, w, 4), dtype=np.uint8)
    for trailing in (0x00, 0xFF):
        padded = np.full(h * w * 4 + image_module._WORD_BYTES, trailing, dtype=np.uint8)
        padded[: h * w * 4] = rgbx.reshape(-1)
        planes = np.empty((3, h, w), dtype=np.uint8)
        np.copyto(planes, image_module._rgbx_words(padded, h, w), casting="unsafe")
        assert np.array_equal(planes, rgbx[..., :3].transpose(2, 0, 1))


def test_jpeg_planes_decoded_on_many_threads_at_once_stay_pixel_exact() -> None:
    # Each thread splits through its own RGBX scratch buffer and word view (thread-local).
    pytest.importorskip("simplejpeg")
    blobs = [_encode(_scene(48 + 8 * (k % 2), 40, k), "JPEG", quality=90) for k in range(16)]
    expected = [decode_image(b, use_simplejpeg=False) for b in blobs]

    def planes_of(blob: bytes) -> np.ndarray:
        shape = image_module.jpeg_planes_shape(blob)
        assert shape is not None
        out = np.empty(shape, dtype=np.uint8)
        for _ in range(20):  # many rounds so that the threads' decodes interleave
            assert image_module.decode_jpeg_planes_into(blob, out)
        return out

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(planes_of, blobs))
    for planes, pixels in zip(got, expected, strict=True):
        assert pixels is not None and np.array_equal(planes, pixels.transpose(2, 0, 1))


def test_jpegs_of_one_size_come_back_as_rows_of_one_buffer() -> None:
    """All decoded: TensorRows over the [N, C, H, W] buffer (request i is row i); one missing:
    a plain list with None there."""
    pytest.importorskip("simplejpeg")
    blobs = [_encode(_scene(12, 10, k), "JPEG", quality=90) for k in range(3)]
    out = _decode(_column(blobs), [[2], [0], [1]], windowed=False)
    assert isinstance(out, TensorRows) and out.tensor.shape == (3, 3, 12, 10)
    for i, k in enumerate((2, 0, 1)):
        pixels = decode_image(blobs[k], use_simplejpeg=False)
        assert pixels is not None and np.array_equal(out[i].numpy(), pixels.transpose(2, 0, 1))
    windows = _decode(_column(blobs), [[0, 1], [1, 2]], windowed=True)
    assert isinstance(windows, TensorRows) and windows.tensor.shape == (2, 2, 3, 12, 10)
    partial = _decode(_column([*blobs, None]), [[0], [3]], windowed=False)
    assert not isinstance(partial, TensorRows) and partial[1] is None and partial[0] is not None


@pytest.mark.parametrize(("h", "w"), [(12, 10), (37, 53)])
def test_jpegs_decoded_channels_last_are_views_of_interleaved_pixels(h: int, w: int) -> None:
    """FieldBatch.channels_last: [C, H, W] (windowed [T, C, H, W]) views of [H, W, C] memory,
    pixel-equal to Pillow, for colour and grey JPEGs; damaged bytes are still reported."""
    pytest.importorskip("simplejpeg")
    for grey in (False, True):
        blobs = [_encode(_scene(h, w, k)[..., 0] if grey else _scene(h, w, k), "JPEG",
                         quality=90) for k in range(3)]
        requests = [DecodeRequest(i, "s", i, (k,), (k,)) for i, k in enumerate((2, 0, 1))]
        out = ImageDecoder().decode(FieldBatch(column=_column(blobs), channels_last=True),
                                    requests)
        channels = 1 if grey else 3
        assert isinstance(out, TensorRows) and out.tensor.shape == (3, channels, h, w)
        assert out.tensor.stride()[1:] == (1, w * channels, channels), "interleaved memory"
        for i, k in enumerate((2, 0, 1)):
            pixels = decode_image(blobs[k], use_simplejpeg=False)
            assert pixels is not None
            assert np.array_equal(out[i].numpy(), pixels.transpose(2, 0, 1))
        windowed = [DecodeRequest(i, "s", i, (0, 1), (0, 1)) for i in range(2)]
        windows = ImageDecoder().decode(
            FieldBatch(column=_column(blobs), is_windowed=True, channels_last=True), windowed)
        assert isinstance(windows, TensorRows) and windows.tensor.shape == (2, 2, channels, h, w)
        assert windows.tensor.stride(2) == 1
        assert torch.equal(windows[1], torch.stack([out[1], out[2]]))
    bad = [_encode(_scene(h, w, 0), "JPEG", quality=90)]
    bad.append(bad[0][: len(bad[0]) // 3])  # truncated: neither simplejpeg nor Pillow reads it
    failures: list[str] = []
    got = ImageDecoder().decode(
        FieldBatch(column=_column(bad), channels_last=True,
                   on_failure=lambda request, why: failures.append(why)),
        [DecodeRequest(i, "s", i, (i,), (i,)) for i in range(2)])
    assert not isinstance(got, TensorRows) and got[1] is None and got[0] is not None
    assert len(failures) == 1


def test_decode_jpeg_into_refuses_a_buffer_of_another_shape() -> None:
    pytest.importorskip("simplejpeg")
    blob = _encode(_scene(20, 30, 1), "JPEG", quality=90)
    out = np.empty((20, 30, 3), dtype=np.uint8)
    assert image_module.decode_jpeg_into(blob, out)
    pixels = decode_image(blob, use_simplejpeg=False)
    assert pixels is not None and np.array_equal(out, pixels)
    for shape in ((20, 22, 3), (24, 30, 3), (10, 30, 3)):
        assert not image_module.decode_jpeg_into(blob, np.empty(shape, dtype=np.uint8)), shape
    assert not image_module.decode_jpeg_into(b"\xff\xd8 not a jpeg", out)


@pytest.mark.parametrize("windowed", [False, True])
def test_tasks_of_one_arena_share_its_result_tensor(windowed: bool) -> None:
    """The decode tasks of a block (chunks of its requests) write into the block's arena and
    return one result tensor, made by the first task, with their rows of it: the others make no
    torch calls (each releases the GIL) between their decodes."""
    pytest.importorskip("simplejpeg")
    from rayform.decoders import RequestArrays
    from rayform.decoders._output_arena import OutputArena
    from rayform.decoders._requests import CodedIds

    blobs = [_encode(_scene(24, 32, k), "JPEG", quality=90) for k in range(4)]
    positions = np.array([3, 1, 0, 2], dtype=np.int64)
    width = 2 if windowed else 1
    rows = np.array([[k, min(k + 1, 3)][:width] for k in range(4)], dtype=np.int64)
    requests = RequestArrays(sample_positions=positions,
                             segment_ids=CodedIds(np.zeros(4, dtype=np.int64), ["s"]),
                             index_values=np.arange(4, dtype=np.int64), output_rows=rows)
    batch = FieldBatch(column=_column(blobs), is_windowed=windowed, channels_last=True,
                       output_arena=OutputArena(4, positions), blobs=[memoryview(b) for b in blobs])
    first = ImageDecoder().decode(batch, requests[:2])
    second = ImageDecoder().decode(batch, requests[2:])
    assert isinstance(first, TensorRows) and isinstance(second, TensorRows)
    assert first.tensor is second.tensor, "one result tensor for the block"
    assert first.rows is not None and first.rows.tolist() == [3, 1]
    whole = first.tensor
    assert whole.shape == ((4, width, 3, 24, 32) if windowed else (4, 3, 24, 32))
    for i, position in enumerate(positions.tolist()):
        for t, row in enumerate(rows[i].tolist()):
            pixels = decode_image(blobs[row], use_simplejpeg=True)
            assert pixels is not None
            frame = whole[position, t] if windowed else whole[position]
            assert np.array_equal(frame.numpy(), pixels.transpose(2, 0, 1))
