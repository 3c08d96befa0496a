"""SegmentData: a column's rows are read in place from the memory-mapped recording, not copied."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rayform.catalog import DatasetEntry
from rayform.catalog._segment_data import one_array

JOINTS = "/joints/position:Scalars:scalars"
BLOBS = "/cam0/rgb:EncodedImage:blob"


def test_one_chunk_is_the_chunk_itself_and_several_are_concatenated() -> None:
    base = pa.array([[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]], pa.list_(pa.float64()))
    single = pa.chunked_array([base]).slice(1, 2)
    out = one_array(single)
    assert out.to_pylist() == [[3.0], [4.0, 5.0, 6.0]]
    assert out.values.buffers()[1].address == base.values.buffers()[1].address, "not copied"
    split = pa.chunked_array([base.slice(0, 1), base.slice(1)])
    assert one_array(split).to_pylist() == base.to_pylist()


def test_a_segment_column_views_the_recording_file(robots: DatasetEntry) -> None:
    """A column's rows are the opened file's buffers, not a copy. For encoded media (stored
    uncompressed) these are the memory-mapped file's pages, shared by every process that reads
    the segment (each DataLoader worker); numeric columns (zstd-compressed, format version 3)
    are decompressed once when the segment is opened."""
    seg = robots.open_segment("ep0")
    for column, values_buffer in ((JOINTS, 1), (BLOBS, 2)):
        rows = seg.column(column, "frame_index")
        file_buffers = {
            buf.address
            for _, table in seg.files() if column in table.column_names
            for chunk in table.column(column).chunks
            for buf in chunk.values.buffers() if buf is not None
        }
        assert rows.values.values.buffers()[values_buffer].address in file_buffers
        np.testing.assert_array_equal(np.diff(rows.index) > 0, True)
