"""BufferPool: buffers come back once nothing references them, never while a view is alive."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
import torch
from PIL import Image

from rayform.decoders import DecodeRequest, FieldBatch, ImageDecoder, _buffer_pool
from rayform.decoders._buffer_pool import BufferPool
from rayform.media._image import decode_image


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def test_an_idle_buffer_is_lent_again() -> None:
    pool = BufferPool(max_bytes=1 << 20)
    first = pool.take(1000)
    assert first.shape == (1000,) and first.dtype == np.uint8
    where = _address(first)
    del first
    again = pool.take(900)
    assert _address(again) == where and again.shape == (900,)


def test_a_buffer_with_a_live_view_or_tensor_is_not_reused() -> None:
    pool = BufferPool(max_bytes=1 << 20)
    view = pool.take(1000).reshape(10, 100)[3]
    tensor = torch.from_numpy(pool.take(1000))
    taken = {_address(view) - 300, tensor.data_ptr()}
    assert len(taken) == 2
    third = pool.take(1000)
    assert _address(third) not in taken
    del view
    assert _address(pool.take(1000)) in taken - {tensor.data_ptr()}


def test_the_pool_keeps_at_most_max_bytes() -> None:
    pool = BufferPool(max_bytes=256 << 10)
    held = [pool.take(100 << 10) for _ in range(5)]
    assert pool.pooled_bytes <= 256 << 10
    assert all(h.shape == (100 << 10,) for h in held), "beyond the bound, plain allocations"
    del held
    big = pool.take(200 << 10)  # idle buffers are dropped to make room
    assert big.shape == (200 << 10,) and pool.pooled_bytes <= 256 << 10
    with pytest.raises(ValueError, match="nbytes >= 0"):
        pool.take(-1)


def test_a_forked_child_starts_with_an_empty_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = BufferPool(max_bytes=1 << 20)
    parents = [pool.take(100 << 10) for _ in range(3)]
    del parents
    assert pool.pooled_bytes >= 300 << 10
    monkeypatch.setattr(_buffer_pool.os, "getpid", lambda: -7)
    child = pool.take(100 << 10)
    assert pool.pooled_bytes == child.nbytes + (28 << 10), "only the child's own buffer"


def _jpeg(value: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    arr = np.clip(value + rng.normal(0, 20, (24, 32, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _decode(blobs: list[bytes], outputs: list[list[int]], *, windowed: bool
            ) -> list[torch.Tensor | None]:
    column = pa.array([[b] for b in blobs], pa.list_(pa.binary()))
    requests = [DecodeRequest(i, "s", i, tuple(sorted(set(o))), tuple(o))
                for i, o in enumerate(outputs)]
    return ImageDecoder().decode(FieldBatch(column=column, is_windowed=windowed), requests)


def _planes(blob: bytes) -> np.ndarray:
    pixels = decode_image(blob, use_simplejpeg=False)
    assert pixels is not None
    return pixels.transpose(2, 0, 1)


def test_decoded_frames_keep_their_pixels_while_later_blocks_reuse_the_pool() -> None:
    pytest.importorskip("simplejpeg")
    blobs = [_jpeg(40 * k, k) for k in range(4)]
    first = _decode(blobs[:2], [[0], [1], [1]], windowed=False)
    kept = [t.clone() for t in first if t is not None]
    for _ in range(3):  # later blocks of the same size
        _decode(blobs[2:], [[0], [1], [0]], windowed=False)
    assert [torch.equal(a, b) for a, b in zip(first, kept, strict=True)] == [True] * 3  # type: ignore[arg-type]
    assert first[1] is not None and first[2] is not None
    assert first[1].data_ptr() != first[2].data_ptr(), "each sample owns its memory"
    assert np.array_equal(first[0].numpy(), _planes(blobs[0]))  # type: ignore[union-attr]


def test_jpeg_windows_decode_into_one_buffer_pixel_exact() -> None:
    pytest.importorskip("simplejpeg")
    blobs = [_jpeg(60 * k, k) for k in range(3)]
    grey = io.BytesIO()
    Image.fromarray(np.full((24, 32), 90, np.uint8)).save(grey, format="JPEG")
    out = _decode(blobs, [[0, 1, 2], [2, 2, 0]], windowed=True)
    assert out[0] is not None and out[1] is not None
    assert out[0].shape == (3, 3, 24, 32) and out[0].is_contiguous()
    for t, row in enumerate([2, 2, 0]):
        assert np.array_equal(out[1][t].numpy(), _planes(blobs[row]))
    grey_out = _decode([grey.getvalue()], [[0]], windowed=False)[0]
    assert grey_out is not None and grey_out.shape == (1, 24, 32)
    assert int(grey_out.float().mean().round()) == 90


def test_a_damaged_jpeg_in_a_block_is_none_and_the_rest_decode() -> None:
    pytest.importorskip("simplejpeg")
    good = _jpeg(100, 1)
    broken = good[:40] + b"\x00" * 20  # a valid header, then garbage
    out = _decode([good, broken], [[0], [1]], windowed=False)
    assert out[0] is not None and np.array_equal(out[0].numpy(), _planes(good))
    reference = decode_image(broken, use_simplejpeg=False)
    assert (out[1] is None) == (reference is None)
