"""gather_blobs: a batch's blobs joined from each segment's BlobTable equal Arrow's take of the rows;
the pipeline joins them into a column only when a decoder reads ``FieldBatch.column``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import torch
from dataloader_factories import CAMERA

from rayform.catalog import DatasetEntry
from rayform.dataloader import DataSource, Field, ImageDecoder, RerunMapDataset
from rayform.dataloader._gather import (
    GatheredBlobs,
    gather_arrow,
    gather_blob_views,
    gather_blobs,
)
from rayform.dataloader._segment_columns import SegmentColumn, _blob_table
from rayform.decoders import ColumnDecoder, DecodeRequest, FieldBatch
from rayform.decoders._image import decode_image_chw


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


def test_gathered_blob_views_make_the_same_column_only_when_asked() -> None:
    rng = np.random.default_rng(1)
    for large in (False, True):
        cols: list[SegmentColumn | None] = [
            segment([rng.bytes(int(rng.integers(1, 30))) for _ in range(20)], large=large)
            for _ in range(2)]
        runs = [("a", 0, 3), ("b", 3, 5)]
        rows = rng.integers(0, 20, size=(5, 2)).astype(np.int64)
        ok = np.ones(5, dtype=np.bool_)
        column_type = cols[0].values.type  # type: ignore[union-attr]
        views: list[memoryview] = []
        joined = gather_blobs(column_type, runs, cols, rows, ok, views)
        found = gather_blob_views(column_type, runs, cols, rows, ok)
        assert joined is not None and found is not None
        blobs, out_rows = found
        assert np.array_equal(out_rows, joined[1])
        assert [bytes(v) for v in blobs.views] == [bytes(v) for v in views]
        assert blobs.column().equals(joined[0]) and blobs.column().type == column_type


class _ColumnImages(ColumnDecoder):
    """Decodes each request's image from ``batch.column`` (not ``batch.blobs``), noting whether
    the column was made before it read it."""

    def __init__(self) -> None:
        self.made_before: list[bool] = []

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> list[Any]:
        self.made_before.append(batch.has_column)
        column = batch.column
        return [decode_image_chw(column[r.output_row_indices[0]].as_py()[0]) for r in requests]


def test_jpeg_path_never_joins_the_blobs_and_a_column_decoder_still_gets_them(
        robots_dataset: DatasetEntry, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline leaves a blob field's Arrow column to be made when a decoder reads it:
    ImageDecoder reads the blobs where they lie (no column), a decoder that reads ``column``
    gets the same rows."""
    indices = [7, 0, 12, 3, 5, 1]
    for threads in (1, 2):
        images = RerunMapDataset(DataSource(robots_dataset), "frame_index",
                                 {"camera": Field(CAMERA, ImageDecoder())}, decode_threads=threads)
        with monkeypatch.context() as patch:
            patch.setattr(GatheredBlobs, "column", lambda self: pytest.fail("blobs joined"))
            want = list(images.__getitems__(indices))
        reader = _ColumnImages()
        columns = RerunMapDataset(DataSource(robots_dataset), "frame_index",
                                  {"camera": Field(CAMERA, reader)}, decode_threads=threads)
        got = list(columns.__getitems__(indices))
        assert reader.made_before == [False]
        for got_sample, want_sample in zip(got, want, strict=True):
            assert torch.equal(got_sample["camera"], want_sample["camera"])


def test_a_field_batch_column_may_be_made_when_first_read() -> None:
    made: list[int] = []
    column = blob_column([b"ab", b"c"])

    def make() -> pa.Array:
        made.append(1)
        return column

    batch = FieldBatch(make_column=make)
    assert not batch.has_column and not made
    options = batch.with_options(output_arena=None, channels_last=True, decode_threads=2)
    assert not options.has_column and options.channels_last and options.decode_threads == 2
    assert batch.column is column and batch.column is column and made == [1] and batch.has_column
    assert batch.with_options(output_arena=None, channels_last=False,
                              decode_threads=None).column is column and made == [1]
    assert FieldBatch(column=column).has_column
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = batch.nope  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="column= "):
        FieldBatch()
    with pytest.raises(TypeError, match="outer Arrow List"):
        _ = FieldBatch(make_column=lambda: pa.array([1])).column
