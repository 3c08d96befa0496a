"""ImageDecoder: encoded images (JPEG, PNG …) to ``uint8`` tensors ``[C, H, W]``.

Decoding itself is :mod:`rayform.media._image` (simplejpeg, else Pillow). The decoder is
thread-safe and both libraries release the GIL while decoding, so the pipeline splits a block's
images across its decode threads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch

from rayform.decoders._arrow import BlobReader
from rayform.decoders._base import ColumnDecoder, DecodeConcurrency, DecodeRequest, FieldBatch
from rayform.decoders._requests import output_row_matrix
from rayform.media._image import decode_image_planes, require_image_backend


def decode_image_chw(data: bytes | memoryview, *, use_simplejpeg: bool = True
                     ) -> torch.Tensor | None:
    """Decode one encoded image to a contiguous ``[C, H, W]`` tensor; ``None`` if undecodable."""
    planes = decode_image_planes(data, use_simplejpeg=use_simplejpeg)
    return None if planes is None else torch.from_numpy(planes)


class ImageDecoder(ColumnDecoder):
    """Decode the first blob of each row (JPEG, PNG …) to ``uint8 [C, H, W]``.

    With a window the output is ``[T, C, H, W]``. A null or empty row, an undecodable blob, or a
    window whose frames differ in shape gives ``None``.
    """

    def __init__(self) -> None:
        require_image_backend()

    @property
    def decode_concurrency(self) -> DecodeConcurrency:
        return "requests"

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]
               ) -> list[torch.Tensor | None]:
        if not requests:
            return []
        rows = output_row_matrix(requests)
        if batch.select is None and rows is not None:
            reader = BlobReader(batch.column)
            return _decode_rows(reader, rows, windowed=batch.is_windowed)
        out: list[torch.Tensor | None] = []
        for request in requests:
            taken = batch.take_output_rows(request)
            local = np.arange(len(taken), dtype=np.int64)[None, :]
            out.extend(_decode_rows(BlobReader(taken), local, windowed=batch.is_windowed))
        return out


def _decode_rows(reader: BlobReader, rows: npt.NDArray[np.int64], *, windowed: bool
                 ) -> list[torch.Tensor | None]:
    decoded: dict[int, torch.Tensor | None] = {}
    used: set[int] = set()
    out: list[torch.Tensor | None] = []
    for request_rows in rows.tolist():
        frames: list[torch.Tensor | None] = []
        for row in request_rows:
            if row not in decoded:
                decoded[row] = _to_chw(reader.blob(row))
            frame = decoded[row]
            if frame is not None and not windowed and row in used:
                frame = frame.clone()  # every sample owns its memory (stacking copies anyway)
            used.add(row)
            frames.append(frame)
        out.append(_assemble(frames, windowed=windowed))
    return out


def _to_chw(blob: memoryview | None) -> torch.Tensor | None:
    # Contiguous planes, made on a decode thread: stacking them is then a plain copy, where
    # stacking [H, W, C] views would transpose in the collating (main) thread.
    return None if blob is None else decode_image_chw(blob)


def _assemble(frames: list[torch.Tensor | None], *, windowed: bool) -> torch.Tensor | None:
    present = [f for f in frames if f is not None]
    if len(present) != len(frames):
        return None
    if not windowed:
        return present[0]
    if len({tuple(f.shape) for f in present}) != 1:
        return None
    return torch.stack(present)
