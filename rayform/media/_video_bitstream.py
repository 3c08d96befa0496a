"""Video bitstream inspection: Annex B framing and "can decoding start here?" for H.264/H.265/AV1.

Only the few header bits needed to tell whether a packet opens a group of pictures are parsed; the
pixels are FFmpeg's job.
"""

from __future__ import annotations

from collections.abc import Iterator

from rayform.media._video_codec import canonical_codec

_H264_IDR = 5
_H264_NON_IDR = 1
_H264_SPS = 7
_H265_SPS = 33
_H265_IRAP = range(16, 24)
_AV1_SEQUENCE_HEADER = 1
_AV1_FRAME_HEADER = 3
_AV1_FRAME = 6


def is_annex_b(packet: bytes) -> bool:
    """The packet starts with an Annex B start code (``00 00 01`` or ``00 00 00 01``)."""
    return packet[:3] == b"\x00\x00\x01" or packet[:4] == b"\x00\x00\x00\x01"


def length_prefixed_to_annex_b(packet: bytes, *, length_size: int = 4) -> bytes:
    """Rewrite AVCC/HVCC framing (big-endian NAL lengths) as Annex B start codes.

    Returns the input unchanged if the lengths do not add up (it is then not length-prefixed).
    """
    out = bytearray()
    pos = 0
    n = len(packet)
    while pos + length_size <= n:
        size = int.from_bytes(packet[pos:pos + length_size], "big")
        pos += length_size
        if size == 0 or pos + size > n:
            return packet
        out += b"\x00\x00\x00\x01"
        out += packet[pos:pos + size]
        pos += size
    return bytes(out) if pos == n else packet


def _annex_b_nal_units(packet: bytes) -> Iterator[bytes]:
    """The NAL unit payloads (header included) of an Annex B packet."""
    starts: list[int] = []
    i = packet.find(b"\x00\x00\x01")
    while i >= 0:
        starts.append(i + 3)
        i = packet.find(b"\x00\x00\x01", i + 3)
    for k, start in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(packet)
        yield packet[start:end]


class _BitReader:
    """Reads big-endian bits and Exp-Golomb codes (for a few slice/frame header fields)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def bit(self) -> int:
        byte = self._pos >> 3
        if byte >= len(self._data):
            raise EOFError
        value = (self._data[byte] >> (7 - (self._pos & 7))) & 1
        self._pos += 1
        return value

    def bits(self, count: int) -> int:
        value = 0
        for _ in range(count):
            value = (value << 1) | self.bit()
        return value

    def ue(self) -> int:
        zeros = 0
        while self.bit() == 0:
            zeros += 1
            if zeros > 31:
                raise EOFError
        return (1 << zeros) - 1 + self.bits(zeros)


def _h264_gop_start(packet: bytes) -> bool:
    has_sps = False
    for nal in _annex_b_nal_units(packet):
        if not nal:
            continue
        nal_type = nal[0] & 0x1F
        if nal_type == _H264_SPS:
            has_sps = True
        elif nal_type == _H264_IDR:
            return has_sps
        elif nal_type == _H264_NON_IDR:
            # A non-IDR I slice after in-band parameter sets (recovery-point streams).
            try:
                reader = _BitReader(nal[1:])
                reader.ue()  # first_mb_in_slice
                slice_type = reader.ue()
            except EOFError:
                return False
            return has_sps and slice_type in (2, 7)
    return False


def _h265_gop_start(packet: bytes) -> bool:
    has_sps = False
    for nal in _annex_b_nal_units(packet):
        if len(nal) < 2:
            continue
        nal_type = (nal[0] >> 1) & 0x3F
        if nal_type == _H265_SPS:
            has_sps = True
        elif nal_type in _H265_IRAP:
            return has_sps
        elif nal_type < 32:  # a non-IRAP picture slice
            return False
    return False


def _leb128(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for i in range(8):
        if pos >= len(data):
            raise EOFError
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            break
    return value, pos


def _av1_gop_start(packet: bytes) -> bool:
    pos = 0
    reduced_still_picture = False
    has_sequence_header = False
    try:
        while pos < len(packet):
            header = packet[pos]
            obu_type = (header >> 3) & 0x0F
            has_extension = bool(header & 0x04)
            has_size = bool(header & 0x02)
            pos += 2 if has_extension else 1
            if has_size:
                size, pos = _leb128(packet, pos)
            else:
                size = len(packet) - pos
            payload = packet[pos:pos + size]
            pos += size
            if obu_type == _AV1_SEQUENCE_HEADER:
                has_sequence_header = True
                reader = _BitReader(payload)
                reader.bits(3)  # seq_profile
                reader.bit()  # still_picture
                reduced_still_picture = bool(reader.bit())
            elif obu_type in (_AV1_FRAME_HEADER, _AV1_FRAME):
                if not has_sequence_header:
                    return False
                if reduced_still_picture:
                    return True
                reader = _BitReader(payload)
                if reader.bit():  # show_existing_frame
                    return False
                return reader.bits(2) == 0  # frame_type == KEY_FRAME
    except EOFError:
        return False
    return False


def detect_gop_start(packet: bytes, codec: str) -> bool | None:
    """Whether decoding can start at ``packet`` (a keyframe with its parameter sets).

    Args:
        packet: one encoded sample; H.264/H.265 in Annex B framing, AV1 as OBUs.
        codec: the stream's codec name or alias.

    Returns:
        ``True`` or ``False`` for H.264, H.265 and AV1; ``None`` for other codecs (unknown:
        trust the recorded keyframe flag).
    """
    kind = canonical_codec(codec)
    if kind == "h264":
        return _h264_gop_start(packet)
    if kind == "h265":
        return _h265_gop_start(packet)
    if kind == "av1":
        return _av1_gop_start(packet)
    return None
