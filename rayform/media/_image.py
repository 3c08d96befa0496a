"""Encoded images (JPEG, PNG …) to numpy arrays, ``[H, W, C]`` or planar ``[C, H, W]``.

JPEGs are decoded with simplejpeg (libjpeg-turbo, about 1.5x faster than Pillow here) when it is
installed, otherwise with Pillow; both give the same pixels. Other formats go through Pillow. Both
libraries release the GIL while decoding, so callers may decode on several threads.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import numpy as np
import numpy.typing as npt

_JPEG_MAGIC = b"\xff\xd8"
_LITTLE_ENDIAN = sys.byteorder == "little"
_INSTALL_HINT = "ImageDecoder needs simplejpeg or Pillow: pip install 'rayform[image]'"

_simplejpeg: Any
_pil_image: Any
try:
    import simplejpeg

    _simplejpeg = simplejpeg
except ImportError:  # pragma: no cover - depends on the environment
    _simplejpeg = None

try:
    from PIL import Image

    _pil_image = Image
except ImportError:  # pragma: no cover - depends on the environment
    _pil_image = None


def require_image_backend() -> None:
    """Raise ``ImportError`` naming the extra when neither simplejpeg nor Pillow is installed."""
    if _simplejpeg is None and _pil_image is None:
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
    if _pil_image is None:
        if _simplejpeg is None:
            raise ImportError(_INSTALL_HINT)
        return None
    return _decode_pillow(data)


def decode_image_planes(data: bytes | memoryview, *, use_simplejpeg: bool = True
                        ) -> npt.NDArray[np.uint8] | npt.NDArray[np.uint16] | None:
    """Decode one encoded image to a contiguous planar ``[C, H, W]`` array; ``None`` if undecodable.

    Colour JPEGs are decoded by simplejpeg to RGBX and split into planes with three shifts of
    the 32-bit pixels, about 3x cheaper than transposing an ``[H, W, 3]`` array.
    """
    if use_simplejpeg and _LITTLE_ENDIAN:
        rgbx = _decode_simplejpeg(data, colorspace_rgb="RGBX")
        if rgbx is not None:
            if rgbx.shape[2] == 1:
                return rgbx.reshape(1, rgbx.shape[0], rgbx.shape[1])
            return _rgbx_planes(rgbx)
    arr = decode_image(data, use_simplejpeg=use_simplejpeg)
    if arr is None:
        return None
    planar: npt.NDArray[np.uint8] | npt.NDArray[np.uint16] = arr.transpose(2, 0, 1).copy()
    return planar


def _decode_simplejpeg(data: bytes | memoryview, *, colorspace_rgb: str
                       ) -> npt.NDArray[np.uint8] | None:
    """simplejpeg's decode of a colour or grey JPEG; ``None`` to let Pillow decide."""
    if _simplejpeg is None or bytes(data[:2]) != _JPEG_MAGIC:
        return None
    try:
        _, _, colorspace, _ = _simplejpeg.decode_jpeg_header(data)
        if colorspace == "Gray":
            return _simplejpeg.decode_jpeg(data, colorspace="GRAY")  # type: ignore[no-any-return]
        if colorspace in ("RGB", "YCbCr"):
            return _simplejpeg.decode_jpeg(data, colorspace=colorspace_rgb)  # type: ignore[no-any-return]
    except ValueError:
        pass  # Pillow decides (it may still read a slightly damaged file, or reject it)
    return None


def _rgbx_planes(rgbx: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """``[H, W, 4]`` RGBX bytes to ``[3, H, W]`` planes (little-endian pixel words)."""
    h, w, _ = rgbx.shape
    words = rgbx.view(np.uint32).reshape(h, w)
    planes = np.empty((3, h, w), dtype=np.uint8)
    np.bitwise_and(words, 0xFF, out=planes[0], casting="unsafe")
    np.right_shift(words, 8, out=planes[1], casting="unsafe")
    np.right_shift(words, 16, out=planes[2], casting="unsafe")
    return planes


def _decode_pillow(data: bytes | memoryview
                   ) -> npt.NDArray[np.uint8] | npt.NDArray[np.uint16] | None:
    assert _pil_image is not None
    try:
        with _pil_image.open(io.BytesIO(data)) as opened:
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
