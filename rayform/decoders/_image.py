"""ImageDecoder: encoded images (JPEG, PNG …) to ``uint8`` tensors ``[C, H, W]``.

Decoding itself is :mod:`rayform.media._image` (simplejpeg, else Pillow). The decoder is
thread-safe and both libraries release the GIL while decoding, so the pipeline splits a block's
images across its decode threads. When every image of a call is a JPEG of one size, they are
decoded straight into one planar buffer ``[N, T, C, H, W]`` taken from the process's
:data:`~rayform.decoders._buffer_pool.FRAME_POOL` (no allocation, no page faults per frame), or,
inside a rayform dataset, into the block's one buffer in block order, each request at its
sample's row (:class:`~rayform.decoders._output_arena.OutputArena`, shared by the decode
threads); each sample's tensor is a view of its slot. When every request of the call decoded, the
result is :class:`~rayform.decoders.TensorRows` over that buffer (batching datasets cut batches
from it without per-sample tensors: a run of consecutive samples is a view).

With :attr:`FieldBatch.channels_last` (the map datasets, and the iterable one cutting its own
batches) the buffer is ``[N, T, H, W, C]``, written as libjpeg-turbo writes pixels, and each
result a ``[C, H, W]`` view of ``[H, W, C]`` memory, the layout Rerun's ``ImageDecoder`` returns
(torchvision's ``pil_to_tensor`` is such a view too): the same pixel values, no planar split;
``.contiguous()`` gives planar memory where code needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import numpy.typing as npt
import torch

from rayform.decoders._arrow import BlobReader
from rayform.decoders._base import ColumnDecoder, DecodeConcurrency, DecodeRequest, FieldBatch
from rayform.decoders._buffer_pool import FRAME_POOL
from rayform.decoders._output_arena import OutputArena
from rayform.decoders._requests import RequestArrays, output_row_matrix
from rayform.decoders._tensor_rows import TensorRows
from rayform.media._image import (
    decode_image_planes,
    decode_jpeg_into,
    decode_jpeg_planes_into,
    jpeg_planes_shapes,
    require_image_backend,
)


def decode_image_chw(data: bytes | memoryview, *, use_simplejpeg: bool = True
                     ) -> torch.Tensor | None:
    """Decode one encoded image to a contiguous ``[C, H, W]`` tensor; ``None`` if undecodable."""
    planes = decode_image_planes(data, use_simplejpeg=use_simplejpeg)
    return None if planes is None else torch.from_numpy(planes)


class ImageDecoder(ColumnDecoder):
    """Decode the first blob of each row (JPEG, PNG …) to ``uint8 [C, H, W]``.

    With a window the output is ``[T, C, H, W]``. A null or empty row gives ``None`` (missing
    data); an undecodable blob, or a window whose frames differ in shape, gives ``None`` and is
    reported as a failure (:meth:`FieldBatch.report_failure`), so that a rayform dataset raises,
    skips or keeps it as its ``on_decode_error`` says.
    """

    def __init__(self) -> None:
        require_image_backend()

    @property
    def decode_concurrency(self) -> DecodeConcurrency:
        return "requests"

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]
               ) -> Sequence[torch.Tensor | None]:
        if not requests:
            return []
        rows = output_row_matrix(requests)
        if batch.select is None and rows is not None:
            # The pipeline's blobs as they lie in the segments, when it has them at hand.
            blob_of = batch.blobs.__getitem__ if batch.blobs is not None \
                else BlobReader(batch.column).blob
            arena = batch.output_arena
            shared = None
            if arena is not None and isinstance(requests, RequestArrays):
                shared = partial(_arena_rows, arena, requests.sample_positions,
                                 windowed=batch.is_windowed, channels_last=batch.channels_last)
            return _decode_rows(blob_of, rows, windowed=batch.is_windowed, shared=shared,
                                report=lambda i, why: batch.report_failure(requests[i], why),
                                channels_last=batch.channels_last)
        out: list[torch.Tensor | None] = []
        for request in requests:
            taken = batch.take_output_rows(request)
            local = np.arange(len(taken), dtype=np.int64)[None, :]
            out.extend(_decode_rows(BlobReader(taken).blob, local, windowed=batch.is_windowed,
                                    report=partial(_report_one, batch, request)))
        return out


def _report_one(batch: FieldBatch, request: DecodeRequest, _: int, reason: str) -> None:
    batch.report_failure(request, reason)


_UNDECODABLE = object()  # a blob that is there but is not an image
SlabViews = tuple[npt.NDArray[np.uint8], torch.Tensor]
"""A decode buffer ``[N, T, …]`` as the numpy array the frames are decoded into and as the
result tensor (``[N, T, C, H, W]`` windowed, else ``[N, C, H, W]``; views of channels-last
memory with ``channels_last``)."""
SharedRows = Callable[[tuple[int, ...]], tuple[SlabViews, npt.NDArray[np.int64]] | None]
"""Given a request's frame shape, the block's shared buffer (its views) and these requests'
rows of it."""


def _slab_views(buffer: torch.Tensor, *, windowed: bool, channels_last: bool) -> SlabViews:
    """The numpy array and the result tensor of a decode buffer ``[N, T, *slot]``.

    The tensor is made from a numpy view (one ``torch.from_numpy``), not with torch's
    ``permute`` and indexing: those release the GIL, and the thread making the views (the
    block's first task, taken by the thread that woke the decode threads) would then wait for
    the woken threads' Python to hand it back before its first decode.
    """
    array = buffer.numpy()
    planes = array.transpose(0, 1, 4, 2, 3) if channels_last else array  # [N, T, C, H, W]
    return array, torch.from_numpy(planes if windowed else planes[:, 0])


def _arena_rows(arena: OutputArena, sample_positions: npt.NDArray[np.int64],
                row_shape: tuple[int, ...], *, windowed: bool, channels_last: bool
                ) -> tuple[SlabViews, npt.NDArray[np.int64]] | None:
    """The block buffer's views (made once per block: the tasks then make no torch calls) and
    the rows of these requests."""
    got = arena.rows(sample_positions, row_shape)
    if got is None:
        return None
    views = arena.derived(("image", windowed, channels_last),
                          partial(_slab_views, windowed=windowed, channels_last=channels_last))
    return views, got[1]


BlobOf = Callable[[int], memoryview | None]
"""A row's blob (``None``: a null or empty row)."""


def _decode_rows(blob_of: BlobOf, rows: npt.NDArray[np.int64], *, windowed: bool,
                 report: Callable[[int, str], object],
                 shared: SharedRows | None = None,
                 channels_last: bool = False) -> Sequence[torch.Tensor | None]:
    blobs = {row: blob_of(row) for row in set(rows.ravel().tolist())}  # each row's blob, once
    shapes = jpeg_planes_shapes(blob for blob in blobs.values() if blob is not None)
    if len(shapes) == 1:
        shape = shapes.pop()
        if shape is not None:
            return _decode_into_slab(blobs, rows, shape, windowed=windowed, report=report,
                                     shared=shared, channels_last=channels_last)
    return _decode_one_by_one(blob_of, rows, windowed=windowed, report=report)


def _decode_into_slab(blobs: dict[int, memoryview | None], rows: npt.NDArray[np.int64],
                      shape: tuple[int, int, int], *, windowed: bool,
                      report: Callable[[int, str], object],
                      shared: SharedRows | None,
                      channels_last: bool = False) -> Sequence[torch.Tensor | None]:
    """Every output frame decoded (or, for a repeated row, copied) into its slot of one pooled
    ``[N, T, C, H, W]`` buffer; request ``i`` gets slot ``i`` (``[T, C, H, W]`` windowed, else
    ``[C, H, W]``), or ``None`` when one of its frames is missing or undecodable (reported).

    With ``channels_last`` the buffer is ``[N, T, H, W, C]``, decoded into as libjpeg-turbo writes
    pixels (no planar split), and the results are ``[…, C, H, W]`` views of it
    (``torch.channels_last`` memory).

    When every request decoded, the result is :class:`TensorRows` over the buffer (``[N, C, H, W]``
    or ``[N, T, C, H, W]``), so that a batching dataset cuts batches from it (a view for
    consecutive rows) instead of stacking per-sample tensors. ``shared`` (the pipeline's
    :class:`~rayform.decoders._output_arena.OutputArena`) gives the block's buffer and these
    requests' (scattered) rows of the
    block's one buffer, when it can."""
    n, width = rows.shape
    channels, height, across = shape
    slot_shape = (height, across, channels) if channels_last else shape
    decode_into = decode_jpeg_into if channels_last else decode_jpeg_planes_into
    got = None if shared is None else shared((width, *slot_shape))
    targets: npt.NDArray[np.int64] | None = None
    if got is None:
        frame_bytes = channels * height * across
        buffer = torch.from_numpy(FRAME_POOL.take(n * width * frame_bytes)
                                  .reshape(n, width, *slot_shape))
        slab, stacked = _slab_views(buffer, windowed=windowed, channels_last=channels_last)
        slots = list(range(n))
    else:
        (slab, stacked), targets = got
        slots = targets.tolist()
    first: dict[int, npt.NDArray[np.uint8] | None] = {}
    failures: dict[int, str] = {}
    complete = [True] * n
    for i, request_rows in enumerate(rows.tolist()):
        for t, row in enumerate(request_rows):
            slot = slab[slots[i], t]
            if row not in first:
                blob = blobs[row]
                ok = blob is not None and (decode_into(blob, slot)
                                           or _pillow_into(blob, slot, channels_last))
                first[row] = slot if ok else None
                if blob is not None and not ok:
                    failures[row] = f"batch row {row}: the image bytes cannot be decoded"
                continue
            source = first[row]
            if source is not None:  # (a missing row marks the request incomplete below)
                np.copyto(slot, source)
        for row in request_rows:
            if first[row] is None:
                complete[i] = False
                if row in failures:
                    report(i, failures[row])
                    break
    if all(complete):
        return TensorRows(stacked, targets)
    views = stacked.unbind(0)  # every slot's view, made in C
    return [views[slot] if ok else None for slot, ok in zip(slots, complete, strict=True)]


def _pillow_into(blob: memoryview, slot: npt.NDArray[np.uint8], channels_last: bool) -> bool:
    """A JPEG simplejpeg refused (slightly damaged): Pillow may still read it."""
    planes = decode_image_planes(blob, use_simplejpeg=False)
    if planes is None or planes.dtype != slot.dtype:
        return False
    image = planes.transpose(1, 2, 0) if channels_last else planes
    if image.shape != slot.shape:
        return False
    np.copyto(slot, image)
    return True


def _decode_one_by_one(blob_of: BlobOf, rows: npt.NDArray[np.int64], *, windowed: bool,
                       report: Callable[[int, str], object]) -> list[torch.Tensor | None]:
    decoded: dict[int, torch.Tensor | object | None] = {}
    used: set[int] = set()
    out: list[torch.Tensor | None] = []
    for i, request_rows in enumerate(rows.tolist()):
        frames: list[torch.Tensor | None] = []
        failure: str | None = None
        for row in request_rows:
            if row not in decoded:
                decoded[row] = _to_chw(blob_of(row))
            frame = decoded[row]
            if frame is _UNDECODABLE:
                failure = failure or f"batch row {row}: the image bytes cannot be decoded"
                frames.append(None)
                continue
            assert frame is None or isinstance(frame, torch.Tensor)
            if frame is not None and not windowed and row in used:
                frame = frame.clone()  # every sample owns its memory (stacking copies anyway)
            used.add(row)
            frames.append(frame)
        result, failure = _assemble(frames, windowed=windowed, failure=failure)
        if failure is not None:
            report(i, failure)
        out.append(result)
    return out


def _to_chw(blob: memoryview | None) -> torch.Tensor | object | None:
    # Contiguous planes, made on a decode thread: stacking them is then a plain copy, where
    # stacking [H, W, C] views would transpose in the collating (main) thread.
    if blob is None:
        return None
    chw = decode_image_chw(blob)
    return _UNDECODABLE if chw is None else chw


def _assemble(frames: list[torch.Tensor | None], *, windowed: bool, failure: str | None
              ) -> tuple[torch.Tensor | None, str | None]:
    present = [f for f in frames if f is not None]
    if len(present) != len(frames):
        return None, failure
    if not windowed:
        return present[0], None
    shapes = sorted({tuple(f.shape) for f in present})
    if len(shapes) != 1:
        return None, f"the window's images differ in size {shapes}"
    return torch.stack(present), None
