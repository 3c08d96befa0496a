"""The JPEG frame header read in Python (rayform.media._jpeg_header): the library's answer, no GIL release."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from rayform.media import _image as image_module
from rayform.media._jpeg_header import UNKNOWN, frame_header, frame_header_end

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


def test_frames_of_one_encoder_share_the_header_bytes_read() -> None:
    """The bytes the walk reads end with the frame header: same bytes, same frame header."""
    blob = CASES[1]
    end = frame_header_end(blob)
    at = blob.index(b"\xff\xc0")
    assert end == at + 10 and frame_header(blob[:end]) == frame_header(blob)
    other = _jpeg(224, 224, "RGB", 9)  # another frame of the same size from the same encoder
    assert other[:end] == blob[:end] and other != blob
    assert frame_header_end(b"\x89PNG\r\n") == 0 and frame_header_end(blob[:100]) == 0


def test_planes_shapes_walk_only_headers_that_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of one camera's frames reads one header; a frame whose bytes differ before its
    frame header's end (another size, another encoder) is read itself."""
    same = [_jpeg(224, 224, "RGB", seed) for seed in range(10, 16)]
    mixed = [*same[:2], CASES[0], same[2], CASES[2], CASES[5], b"\x89PNG\r\n", same[3]]
    want = {image_module.jpeg_planes_shape(blob) for blob in mixed}
    assert image_module.jpeg_planes_shapes(mixed) == want == {(3, 224, 224), (3, 37, 53),
                                                              (1, 12, 16), None}
    assert image_module.jpeg_planes_shapes(memoryview(b) for b in mixed) == want
    walked: list[int] = []
    real = image_module.jpeg_planes_shape

    def counting(blob: bytes | memoryview) -> tuple[int, int, int] | None:
        walked.append(len(blob))
        return real(blob)

    monkeypatch.setattr(image_module, "jpeg_planes_shape", counting)
    assert image_module.jpeg_planes_shapes(same) == {(3, 224, 224)}
    assert len(walked) == 1, "one header walked for six frames of one camera"
    walked.clear()
    grown = bytearray(same[1])
    grown[frame_header_end(grown) - 4] += 1  # the frame's height differs: its header is read
    assert image_module.jpeg_planes_shapes([same[0], bytes(grown), same[2]]) == {
        (3, 224, 224), (3, 225, 224)}
    assert len(walked) == 3
