"""SegmentData: a column's rows are read in place from the memory-mapped recording, not copied."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rayform.catalog import DatasetEntry
from rayform.catalog._segment_data import one_array

JOINTS = "/joints/position:Scalars:scalars"


def test_one_chunk_is_the_chunk_itself_and_several_are_concatenated() -> None:
    base = pa.array([[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]], pa.list_(pa.float64()))
    single = pa.chunked_array([base]).slice(1, 2)
    out = one_array(single)
    assert out.to_pylist() == [[3.0], [4.0, 5.0, 6.0]]
    assert out.values.buffers()[1].address == base.values.buffers()[1].address, "not copied"
    split = pa.chunked_array([base.slice(0, 1), base.slice(1)])
    assert one_array(split).to_pylist() == base.to_pylist()


def test_a_segment_column_views_the_recording_file(robots: DatasetEntry) -> None:
    """Every process that reads a segment (each DataLoader worker) shares the file's pages
    instead of holding its own copy of the column."""
    seg = robots.open_segment("ep0")
    rows = seg.column(JOINTS, "frame_index")
    file_buffers = {
        buf.address
        for _, table in seg.files() if JOINTS in table.column_names
        for chunk in table.column(JOINTS).chunks
        for buf in chunk.values.buffers() if buf is not None
    }
    assert rows.values.values.buffers()[1].address in file_buffers
    np.testing.assert_array_equal(np.diff(rows.index) > 0, True)
