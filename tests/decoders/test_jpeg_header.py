"""The JPEG frame header read in Python (rayform.media._jpeg_header): the library's answer, no GIL release."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from rayform.media import _image as image_module
from rayform.media._jpeg_header import UNKNOWN, frame_header

simplejpeg = pytest.importorskip("simplejpeg")


def _jpeg(h: int, w: int, mode: str, seed: int, **options: object) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (h, w, 4), dtype=np.uint8)
    image = Image.fromarray(pixels, "CMYK") if mode == "CMYK" \
        else Image.fromarray(pixels[..., :3]).convert(mode)
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=90, **options)
    return buf.getvalue()


CASES = [
    _jpeg(37, 53, "RGB", 0),
    _jpeg(224, 224, "RGB", 1),
    _jpeg(12, 16, "L", 2),
    _jpeg(31, 17, "RGB", 3, progressive=True),
    _jpeg(20, 30, "RGB", 4, subsampling=0),
    _jpeg(9, 11, "CMYK", 5),
    # an EXIF segment holding bytes that look like a frame header: the walk skips segments whole
    _jpeg(40, 24, "RGB", 6, exif=b"Exif\x00\x00" + b"\xff\xc0\x00\x11\x08\x00\x01\x00\x01" * 8),
]


@pytest.mark.parametrize("blob", CASES)
def test_the_frame_header_is_the_librarys(blob: bytes) -> None:
    height, width, colorspace, _ = simplejpeg.decode_jpeg_header(blob)
    components = {"Gray": 1, "RGB": 3, "YCbCr": 3, "CMYK": 4}[colorspace]
    assert frame_header(blob) == (height, width, components)
    assert frame_header(memoryview(blob)) == (height, width, components)


def test_planes_shape_needs_no_library_call_for_common_jpegs(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """simplejpeg's header call releases the GIL (a round trip per image on a decode thread): the
    common frames are read in Python, other data still goes to the library."""
    want = {blob: image_module.jpeg_planes_shape(blob) for blob in CASES}
    assert want[CASES[2]] == (1, 12, 16) and want[CASES[5]] is None  # grey; CMYK: Pillow's

    def refuse(*_: object) -> None:
        raise AssertionError("the library's header parse was called")

    monkeypatch.setattr(simplejpeg, "decode_jpeg_header", refuse)
    for blob, shape in want.items():
        assert image_module.jpeg_planes_shape(blob) == shape


@pytest.mark.parametrize("cut", [2, 3, 5, 20, 100])
def test_cut_or_odd_headers_are_left_to_the_library(cut: int) -> None:
    blob = CASES[0]
    assert frame_header(blob[:cut]) == UNKNOWN
    assert image_module.jpeg_planes_shape(blob[:cut]) is None  # the library refuses them too
    assert frame_header(b"\x89PNG\r\n") is None
    lossless = bytearray(blob)
    at = lossless.index(b"\xff\xc0")
    lossless[at + 1] = 0xC3  # a lossless frame: not read here
    assert frame_header(bytes(lossless)) == UNKNOWN
    twelve_bit = bytearray(blob)
    twelve_bit[at + 4] = 12
    assert frame_header(bytes(twelve_bit)) == UNKNOWN
