"""TextDecoder: string rows (``TextDocument:text``) to ``str``, windows, nulls, wrong types."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rayform.decoders import DecodeRequest, FieldBatch, RequestArrays, TextDecoder

TEXTS = pa.array([["pick"], ["place"], None, [], ["line one", "line two"]], pa.list_(pa.string()))


def test_rows_become_strings() -> None:
    requests = RequestArrays(sample_positions=np.arange(5, dtype=np.int64), segment_ids=["s"] * 5,
                             index_values=np.arange(5, dtype=np.int64),
                             output_rows=np.array([[1], [0], [2], [3], [4]], dtype=np.int64))
    out = TextDecoder().decode(FieldBatch(column=TEXTS), requests)
    assert out == ["place", "pick", None, None, "line one\nline two"]


def test_windows_give_lists_and_a_missing_row_gives_none() -> None:
    batch = FieldBatch(column=TEXTS, is_windowed=True)
    requests = [DecodeRequest(0, "s", 0, (0, 1), (0, 1, 1)), DecodeRequest(1, "s", 1, (1, 2), (1, 2))]
    assert TextDecoder().decode(batch, requests) == [["pick", "place", "place"], None]


def test_large_strings_and_selectors() -> None:
    column = pa.array([["a"], ["b"]], pa.list_(pa.large_string()))
    batch = FieldBatch(column=column, select=lambda rows: rows)
    assert TextDecoder().decode(batch, [DecodeRequest(0, "s", 0, (1,), (1,))]) == ["b"]


def test_numbers_are_refused() -> None:
    batch = FieldBatch(column=pa.array([[1.0]], pa.list_(pa.float64())))
    with pytest.raises(TypeError, match="TextDecoder reads string rows"):
        TextDecoder().decode(batch, [DecodeRequest(0, "s", 0, (0,), (0,))])
