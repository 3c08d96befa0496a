"""MCAP input that used to be dropped silently: an unknown chunk compression is refused naming
the file; a topic repeated with another message type is renamed with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayform.catalog import Catalog
from rayform.errors import ConversionWarning, FormatError

pytest.importorskip("mcap_ros2")


def _with_compression(tmp_path: Path, *, indexed: bool) -> Path:
    """A zstd MCAP whose chunks (and chunk indexes) claim the unknown compression 'zsxd'."""
    from mcap.writer import CompressionType, IndexType, Writer

    path = tmp_path / "odd.mcap"
    with path.open("wb") as fh:
        writer = Writer(fh, compression=CompressionType.ZSTD, use_chunking=True,
                        index_types=IndexType.ALL if indexed else IndexType.NONE)
        writer.start(profile="ros2", library="test")
        schema = writer.register_schema("std_msgs/msg/Int32", "ros2msg", b"int32 data")
        channel = writer.register_channel("/n", "cdr", schema)
        for i in range(50):
            writer.add_message(channel, log_time=i, publish_time=i,
                               data=b"\x00\x01\x00\x00" + i.to_bytes(4, "little"))
        writer.finish()
    data = path.read_bytes()
    assert data.count(b"zstd") >= 1
    path.write_bytes(data.replace(b"zstd", b"zsxd"))
    return path


@pytest.mark.parametrize("indexed", [True, False])
def test_unknown_chunk_compression_is_refused_naming_the_file(tmp_path: Path, catalog: Catalog,
                                                              indexed: bool) -> None:
    path = _with_compression(tmp_path, indexed=indexed)
    with pytest.raises(FormatError, match=r"odd\.mcap: MCAP chunks compressed with 'zsxd'"):
        catalog.create_dataset("x").register(path)
    assert catalog.get_dataset("x").segment_ids() == []


def test_a_topic_repeated_with_another_type_is_renamed_with_a_warning(
        tmp_path: Path, catalog: Catalog) -> None:
    from mcap.writer import Writer

    path = tmp_path / "two.mcap"
    with path.open("wb") as fh:
        writer = Writer(fh)
        writer.start(profile="ros2", library="test")
        ints = writer.register_schema("std_msgs/msg/Int32", "ros2msg", b"int32 data")
        floats = writer.register_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data")
        a = writer.register_channel("/v", "cdr", ints)
        b = writer.register_channel("/v", "cdr", floats)
        for i in range(5):
            writer.add_message(a, log_time=i, publish_time=i,
                               data=b"\x00\x01\x00\x00" + i.to_bytes(4, "little"))
            writer.add_message(b, log_time=i, publish_time=i,
                               data=b"\x00\x01\x00\x00" + bytes(4) + bytes(8))
        writer.finish()
    ds = catalog.create_dataset("x")
    with pytest.warns(ConversionWarning) as caught:
        ds.register(path)
    assert any("topic '/v' appears with types" in str(w.message) for w in caught), [
        str(w.message) for w in caught]
