"""gather_blobs: a batch's blobs joined from each segment's BlobTable equal Arrow's take of the rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rayform.dataloader._gather import gather_arrow, gather_blobs
from rayform.dataloader._segment_columns import SegmentColumn, _blob_table


def blob_column(blobs: list[bytes], *, large: bool = False) -> pa.Array:
    blob_type = pa.large_binary() if large else pa.binary()
    return pa.array([[b] for b in blobs], type=pa.list_(blob_type))


def segment(blobs: list[bytes], *, large: bool = False) -> SegmentColumn:
    values = blob_column(blobs, large=large)
    return SegmentColumn(
        index=np.arange(len(blobs), dtype=np.int64),
        values=values,
        is_static=False,
        dense=None,
        blobs=_blob_table(values),
    )


def served(column: pa.Array, rows: np.ndarray) -> list[list[bytes]]:
    return [[column[int(r)].as_py()[0] for r in sample] for sample in rows]


def test_blobs_match_the_arrow_gather_with_repeats_windows_and_missing_samples() -> None:
    rng = np.random.default_rng(0)
    segments = [[rng.bytes(int(rng.integers(1, 40))) for _ in range(30)] for _ in range(3)]
    for large in (False, True):
        cols: list[SegmentColumn | None] = [segment(s, large=large) for s in segments]
        cols.insert(1, None)  # a segment without the column
        runs = [("a", 0, 4), ("b", 4, 6), ("c", 6, 11), ("d", 11, 12)]
        rows = rng.integers(0, 30, size=(12, 3)).astype(np.int64)
        rows[2] = rows[1]  # two samples reading the same rows
        rows[7, 1] = -1  # a sample with a missing output
        ok = (rows >= 0).all(axis=1)
        ok[4:6] = False  # the segment without the column
        column_type = cols[0].values.type  # type: ignore[union-attr]
        got = gather_blobs(column_type, runs, cols, rows, ok)
        assert got is not None
        column, out_rows = got
        assert column.type == column_type
        want, want_rows, _, _ = gather_arrow(column_type, runs, cols, rows, ok, None, None)
        keep = np.flatnonzero(ok)
        assert served(column, out_rows[keep]) == served(want, want_rows[keep])
        # every distinct (segment, row) is copied once
        assert len(column) == len(
            {(int(np.searchsorted([4, 6, 11], i, side="right")), int(r)) for i in keep for r in rows[i]}
        )


def test_rows_with_several_blobs_or_nulls_have_no_blob_table() -> None:
    two = pa.array([[b"a", b"b"], [b"c"]], type=pa.list_(pa.binary()))
    null = pa.array([[b"a"], None], type=pa.list_(pa.binary()))
    empty = pa.array([[b"a"], []], type=pa.list_(pa.binary()))
    assert _blob_table(two) is None and _blob_table(null) is None and _blob_table(empty) is None
    assert _blob_table(pa.array([[b"a"], [b"bc"]], type=pa.list_(pa.binary()))) is not None


def test_a_sliced_column_serves_its_own_rows() -> None:
    blobs = [bytes([i]) * (i + 1) for i in range(20)]
    values = blob_column(blobs).slice(5, 10)
    col = SegmentColumn(
        index=np.arange(10, dtype=np.int64),
        values=values,
        is_static=False,
        dense=None,
        blobs=_blob_table(values),
    )
    rows = np.array([[0], [9], [3]], dtype=np.int64)
    got = gather_blobs(values.type, [("a", 0, 3)], [col], rows, np.ones(3, dtype=np.bool_))
    assert got is not None
    assert served(got[0], got[1]) == [[blobs[5]], [blobs[14]], [blobs[8]]]
