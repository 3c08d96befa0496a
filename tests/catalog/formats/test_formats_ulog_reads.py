"""How a truncated ULog is noticed: the end marker read after the file, and where a log may end."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from rayform.catalog import Catalog
from rayform.errors import CorruptRecordingError
from rayform.importers.ulog._reads import MARKER, MARKER_KEY, MARKER_VALUE, marked_file

SMALL = "px4-pyulog-ulog/sample_log_small.ulg"


def test_the_marked_file_is_the_file_then_the_marker(tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000  # more than one buffer of the reader
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with path.open("rb") as raw:
        raw.read(7)  # the importer has checked the magic bytes
        marked = marked_file(raw)
        assert marked.read(10) == data[:10]
        assert marked.seek(-3, io.SEEK_CUR) == 7
        assert marked.read(5) == data[7:12]
        assert marked.read() == data[12:] + MARKER
        assert marked.read(3) == b""
        assert marked.seek(len(data) - 2) == len(data) - 2
        assert marked.read(4) == data[-2:] + MARKER[:2]
        assert marked.seek(-1, io.SEEK_END) == len(data) + len(MARKER) - 1
        assert marked.read() == MARKER[-1:]
        marked.close()
        assert not raw.closed  # the importer's own handle stays open
        raw.seek(0)
        assert raw.read(1) == data[:1]


def test_the_marker_is_a_ulog_info_message_pyulog_reads() -> None:
    size, kind = struct.unpack_from("<HB", MARKER)
    assert (size + 3, kind) == (len(MARKER), ord("I"))
    pyulog_core = pytest.importorskip("pyulog.core")
    header = b"ULog\x01\x12\x35\x01" + bytes(8)
    log = pyulog_core.ULog(io.BytesIO(header + MARKER))
    assert log.msg_info_dict == {MARKER_KEY: MARKER_VALUE}


def _message_ends(data: bytes) -> list[int]:
    """Where each message of a ULog file ends (its messages follow the 16-byte header)."""
    ends, at = [], 16
    while at + 3 <= len(data):
        (size,) = struct.unpack_from("<H", data, at)
        at += 3 + size
        if at <= len(data):
            ends.append(at)
    return ends


@pytest.mark.realdata
def test_a_log_cut_at_a_message_end_registers_and_one_byte_shorter_does_not(
        tmp_path: Path, realdata: Path, catalog: Catalog) -> None:
    pytest.importorskip("pyulog")
    data = (realdata / SMALL).read_bytes()
    end = _message_ends(data)[-200]  # in the data section, before the log's own end
    clean = tmp_path / "clean.ulg"
    clean.write_bytes(data[:end])
    ds = catalog.create_dataset("x")
    assert ds.register(clean).wait().segment_ids == ["clean"]
    props = ds.segment_record("clean").properties
    assert f"info:{MARKER_KEY}" not in props  # the marker is ours, not the log's
    assert props["info:sys_name"] == "PX4"
    cut = tmp_path / "cut.ulg"
    cut.write_bytes(data[:end - 1])
    with pytest.raises(CorruptRecordingError, match=r"cut.ulg: truncated: the message at byte"):
        ds.register(cut)
    assert ds.segment_ids() == ["clean"]
