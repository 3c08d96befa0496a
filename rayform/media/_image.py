"""Encoded images (JPEG, PNG …) to numpy arrays, ``[H, W, C]`` or planar ``[C, H, W]``.

JPEGs are decoded with simplejpeg (libjpeg-turbo, about 1.5x faster than Pillow here) when it is
installed, otherwise with Pillow; both give the same pixels. Other formats go through Pillow. Both
libraries release the GIL while decoding, so callers may decode on several threads.
"""

from __future__ import annotations

import importlib
import io
import sys
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided

from rayform.media._jpeg_header import frame_header, frame_header_end

_JPEG_MAGIC = b"\xff\xd8"
_LITTLE_ENDIAN = sys.byteorder == "little"
_WORD_BYTES = 4  # spare bytes after an RGBX buffer (see _rgbx_words)
_INSTALL_HINT = "ImageDecoder needs simplejpeg or Pillow: pip install 'rayform[image]'"

# The codec libraries are imported on first decode, not when ``rayform`` is imported (the
# importers load this package to probe videos). Tests set them to ``None`` to simulate absence.
_UNRESOLVED: Any = object()
_simplejpeg: Any = _UNRESOLVED
_pil_image: Any = _UNRESOLVED


def _jpeg_lib() -> Any:
    """simplejpeg, or ``None`` when it is not installed."""
    global _simplejpeg
    if _simplejpeg is _UNRESOLVED:
        try:
            _simplejpeg = importlib.import_module("simplejpeg")
        except ImportError:  # pragma: no cover - depends on the environment
            _simplejpeg = None
    return _simplejpeg


def _pil() -> Any:
    """Pillow's ``Image`` module, or ``None`` when Pillow is not installed."""
    global _pil_image
    if _pil_image is _UNRESOLVED:
        try:
            _pil_image = importlib.import_module("PIL.Image")
        except ImportError:  # pragma: no cover - depends on the environment
            _pil_image = None
    return _pil_image


def require_image_backend() -> None:
    """Raise ``ImportError`` naming the extra when neither simplejpeg nor Pillow is installed."""
    if _jpeg_lib() is None and _pil() is None:
        raise ImportError(_INSTALL_HINT)


def decode_image(data: bytes | memoryview, *, use_simplejpeg: bool = True
                 ) -> npt.NDArray[np.uint8] | npt.NDArray[np.uint16] | None:
    """Decode one encoded image to an ``[H, W, C]`` array; ``None`` when it cannot be decoded.

    Channels follow the image: 1 for grayscale, 3 for RGB, 4 for RGBA / CMYK. Palette images are
    expanded to RGB (RGBA with transparency); 16-bit grayscale PNGs stay ``uint16``.
    """
    if use_simplejpeg:
        fast = _decode_simplejpeg(data, colorspace_rgb="RGB")
        if fast is not None:
            return fast
    if _pil() is None:
        if _jpeg_lib() is None:
            raise ImportError(_INSTALL_HINT)
        return None
    return _decode_pillow(data)


def decode_image_planes(data: bytes | memoryview, *, use_simplejpeg: bool = True
                        ) -> npt.NDArray[np.uint8] | npt.NDArray[np.uint16] | None:
    """Decode one encoded image to a contiguous planar ``[C, H, W]`` array; ``None`` if undecodable.

    JPEGs that :func:`jpeg_planes_shape` accepts go through :func:`decode_jpeg_planes_into`
    (RGBX split into planes in one pass, about 5x cheaper than transposing ``[H, W, 3]``).
    """
    shape = jpeg_planes_shape(data) if use_simplejpeg else None
    if shape is not None:
        planes = np.empty(shape, dtype=np.uint8)
        if decode_jpeg_planes_into(data, planes):
            return planes
    arr = decode_image(data, use_simplejpeg=use_simplejpeg)
    if arr is None:
        return None
    planar: npt.NDArray[np.uint8] | npt.NDArray[np.uint16] = arr.transpose(2, 0, 1).copy()
    return planar


def jpeg_planes_shape(data: bytes | memoryview) -> tuple[int, int, int] | None:
    """``(C, H, W)`` of a JPEG that :func:`decode_jpeg_planes_into` can decode, else ``None``.

    Reads the header only (microseconds), in Python for the common frames so that a decode
    thread keeps the GIL (:mod:`rayform.media._jpeg_header`), else with simplejpeg. ``None`` for
    other formats, CMYK JPEGs, damaged headers, a big-endian machine or a missing simplejpeg:
    decode those with :func:`decode_image_planes`.
    """
    jpeg = _jpeg_lib()
    if jpeg is None or not _LITTLE_ENDIAN or bytes(data[:2]) != _JPEG_MAGIC:
        return None
    header = frame_header(data)
    if isinstance(header, tuple):
        height, width, components = header
        # libjpeg: one component is grey, three are YCbCr or RGB; four (CMYK, YCCK) stay Pillow's.
        return (components, height, width) if components in (1, 3) else None
    try:
        height, width, colorspace, _ = jpeg.decode_jpeg_header(data)
    except ValueError:
        return None
    if colorspace == "Gray":
        return 1, int(height), int(width)
    if colorspace in ("RGB", "YCbCr"):
        return 3, int(height), int(width)
    return None


def jpeg_planes_shapes(blobs: Iterable[bytes | memoryview]) -> set[tuple[int, int, int] | None]:
    """The distinct :func:`jpeg_planes_shape` of ``blobs``, reading few headers: a blob whose
    first bytes equal those the last header read took (:func:`frame_header_end`: markers,
    tables and frame header) has that header's shape, so the frames of one camera, written by
    one encoder, cost a comparison of a few hundred bytes each rather than a header walk."""
    shapes: set[tuple[int, int, int] | None] = set()
    known = b""
    for blob in blobs:
        if known and blob[:len(known)] == known:
            continue
        shapes.add(jpeg_planes_shape(blob))
        end = frame_header_end(blob)
        known = bytes(blob[:end]) if end else b""
    return shapes


def decode_jpeg_planes_into(data: bytes | memoryview, out: npt.NDArray[np.uint8]) -> bool:
    """Decode a JPEG into the planar ``uint8`` array ``out`` (``[C, H, W]``, C-contiguous).

    ``out`` has the shape :func:`jpeg_planes_shape` gave. Nothing is allocated: grey JPEGs are
    decoded straight into ``out``, colour ones into a per-thread RGBX scratch buffer that stays in
    the CPU cache and is then split into the planes. Returns ``False`` when simplejpeg cannot
    decode the data (``out`` is then undefined; Pillow may still read it, see
    :func:`decode_image_planes`).
    """
    jpeg = _jpeg_lib()
    channels, height, width = out.shape
    try:
        if channels == 1:
            jpeg.decode_jpeg(data, colorspace="GRAY", buffer=out)
            return True
        scratch, words = _rgbx_scratch(height, width)
        jpeg.decode_jpeg(data, colorspace="RGBX", buffer=scratch)
    except ValueError:
        return False
    np.copyto(out, words, casting="unsafe")  # the planes, in one pass (see _rgbx_words)
    return True


def decode_jpeg_into(data: bytes | memoryview, out: npt.NDArray[np.uint8]) -> bool:
    """Decode a JPEG into the interleaved ``uint8`` array ``out`` (``[H, W, C]``, C-contiguous).

    ``out`` has the shape of :func:`jpeg_planes_shape` with the channels last: the layout
    libjpeg-turbo writes, so the pixels are written once, straight into ``out`` (as cheap as a
    bare decode; :func:`decode_jpeg_planes_into` pays a planar split on top). Returns ``False``
    when simplejpeg cannot decode the data or the image is not ``out``'s shape (``out`` is then
    undefined).
    """
    jpeg = _jpeg_lib()
    channels = out.shape[2]
    try:
        got = jpeg.decode_jpeg(data, colorspace="GRAY" if channels == 1 else "RGB", buffer=out)
    except ValueError:
        return False
    return tuple(got.shape) == tuple(out.shape)


_scratch = threading.local()


def _rgbx_scratch(height: int, width: int
                  ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32]]:
    """This thread's RGBX buffer ``[H, W, 4]`` and its planar word view (see :func:`_rgbx_words`),
    made once per thread and image size."""
    cached: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32]] | None = \
        getattr(_scratch, "rgbx", None)
    if cached is None or cached[0].shape != (height, width, 4):
        padded = np.empty(height * width * 4 + _WORD_BYTES, dtype=np.uint8)
        cached = padded[: height * width * 4].reshape(height, width, 4), _rgbx_words(padded, height, width)
        _scratch.rgbx = cached
    return cached


def _rgbx_words(padded: npt.NDArray[np.uint8], height: int, width: int) -> npt.NDArray[np.uint32]:
    """``[3, H, W]`` little-endian ``uint32`` words over the RGBX bytes at the start of ``padded``:
    word ``[c, y, x]`` starts at byte ``c`` of pixel ``(y, x)``, so its low byte is channel ``c``.

    Casting this view to ``uint8`` deinterleaves RGBX into planes in one numpy pass (about 3x
    cheaper than three masked shifts, 5x cheaper than a transposing copy). The last word of plane 2
    ends 2 bytes past the last pixel, which is why ``padded`` carries ``_WORD_BYTES`` spare bytes
    (they only feed the discarded high bytes).
    """
    assert _LITTLE_ENDIAN and padded.nbytes >= height * width * 4 + _WORD_BYTES
    return as_strided(padded[:4].view(np.uint32), shape=(3, height, width),
                      strides=(1, 4 * width, 4), writeable=False)


def _decode_simplejpeg(data: bytes | memoryview, *, colorspace_rgb: str
                       ) -> npt.NDArray[np.uint8] | None:
    """simplejpeg's decode of a colour or grey JPEG; ``None`` to let Pillow decide."""
    jpeg = _jpeg_lib()
    if jpeg is None or bytes(data[:2]) != _JPEG_MAGIC:
        return None
    try:
        _, _, colorspace, _ = jpeg.decode_jpeg_header(data)
        if colorspace == "Gray":
            return jpeg.decode_jpeg(data, colorspace="GRAY")  # type: ignore[no-any-return]
        if colorspace in ("RGB", "YCbCr"):
            return jpeg.decode_jpeg(data, colorspace=colorspace_rgb)  # type: ignore[no-any-return]
    except ValueError:
        pass  # Pillow decides (it may still read a slightly damaged file, or reject it)
    return None


def _decode_pillow(data: bytes | memoryview
                   ) -> npt.NDArray[np.uint8] | npt.NDArray[np.uint16] | None:
    pil = _pil()
    assert pil is not None
    try:
        with pil.open(io.BytesIO(data)) as opened:
            img: Any = opened
            if img.mode == "P":
                img = img.convert("RGBA" if "transparency" in img.info else "RGB")
            elif img.mode == "1":
                img = img.convert("L")
            elif img.mode in ("I;16", "I;16B", "I;16L"):
                arr16 = np.array(img, dtype=np.uint16)
                return arr16[..., None]
            elif img.mode not in ("L", "LA", "RGB", "RGBA", "CMYK"):
                img = img.convert("RGB")
            arr = np.array(img, dtype=np.uint8)
    except (OSError, ValueError, SyntaxError):
        return None
    return arr[..., None] if arr.ndim == 2 else arr
