"""NumericDecoder: shapes, dtypes, windows, ragged rows, nulls, selectors (vectorised and per row)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest
import torch

from rayform.decoders import DecodeRequest, FieldBatch, NumericDecoder, RequestArrays


def _requests(outputs: Sequence[Sequence[int]], *, arrays: bool) -> Sequence[DecodeRequest]:
    if arrays and len({len(o) for o in outputs}) == 1:
        return RequestArrays(
            sample_positions=np.arange(len(outputs), dtype=np.int64),
            segment_ids=["s"] * len(outputs),
            index_values=np.arange(len(outputs), dtype=np.int64),
            output_rows=np.array(outputs, dtype=np.int64).reshape(len(outputs), -1))
    return [DecodeRequest(i, "s", i, tuple(sorted(set(o))), tuple(o))
            for i, o in enumerate(outputs)]


def _decode(column: pa.Array, outputs: Sequence[Sequence[int]], *, windowed: bool,
            arrays: bool, select: object = None) -> list[torch.Tensor | None]:
    batch = FieldBatch(column=column, is_windowed=windowed, select=select)  # type: ignore[arg-type]
    return NumericDecoder().decode(batch, _requests(outputs, arrays=arrays))


@pytest.mark.parametrize("arrays", [True, False])
@pytest.mark.parametrize("dtype", [pa.float64(), pa.float32(), pa.int16(), pa.uint8(),
                                   pa.bool_()])
def test_dtype_and_shapes(arrays: bool, dtype: pa.DataType) -> None:
    np_dtype = np.dtype(dtype.to_pandas_dtype())
    values = (np.arange(20).reshape(5, 4) % 3).astype(np_dtype)
    column = pa.array(values.tolist(), pa.list_(dtype))
    single = _decode(column, [[3], [0]], windowed=False, arrays=arrays)
    assert [tuple(t.shape) for t in single] == [(4,), (4,)]  # type: ignore[union-attr]
    assert single[0].numpy().dtype == np_dtype  # type: ignore[union-attr]
    assert np.array_equal(single[0].numpy(), values[3])  # type: ignore[union-attr]
    window = _decode(column, [[0, 0, 1], [4, 2, 3]], windowed=True, arrays=arrays)
    assert window[0].shape == (3, 4)  # type: ignore[union-attr]
    assert np.array_equal(window[1].numpy(), values[[4, 2, 3]])  # type: ignore[union-attr]


@pytest.mark.parametrize("arrays", [True, False])
def test_scalars_nested_and_fixed_size_lists(arrays: bool) -> None:
    scalars = pa.array([[1.5], [2.5], [3.5]], pa.list_(pa.float64()))
    out = _decode(scalars, [[1, 2]], windowed=True, arrays=arrays)
    assert out[0].shape == (2, 1) and out[0].flatten().tolist() == [2.5, 3.5]  # type: ignore[union-attr]
    fixed = pa.array([[[1, 2, 3]], [[4, 5, 6]]], pa.list_(pa.list_(pa.int32(), 3)))
    assert _decode(fixed, [[1]], windowed=False, arrays=arrays)[0].tolist() == [4, 5, 6]  # type: ignore[union-attr]
    nested = pa.array([[[1, 2], [3]], [[4], [5, 6]]], pa.list_(pa.list_(pa.int64())))
    got = _decode(nested, [[0], [1]], windowed=False, arrays=arrays)
    assert [t.tolist() for t in got] == [[1, 2, 3], [4, 5, 6]]  # type: ignore[union-attr]
    sliced = pa.array([[9.0, 9.0], [1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float64())).slice(1)
    assert _decode(sliced, [[1]], windowed=False, arrays=arrays)[0].tolist() == [3.0, 4.0]  # type: ignore[union-attr]


@pytest.mark.parametrize("arrays", [True, False])
def test_ragged_empty_and_null_rows(arrays: bool) -> None:
    column = pa.array([[1.0], [2.0, 3.0], [], None, [4.0, 5.0]], pa.list_(pa.float64()))
    out = _decode(column, [[0], [1], [2], [3]], windowed=False, arrays=arrays)
    assert out[0].tolist() == [1.0] and out[1].tolist() == [2.0, 3.0]  # type: ignore[union-attr]
    assert out[2] is not None and out[2].numel() == 0
    assert out[3] is None
    window = _decode(column, [[0, 1], [1, 4], [3, 4]], windowed=True, arrays=arrays)
    assert window[0] is None, "rows of different widths in one window"
    assert window[1].tolist() == [[2.0, 3.0], [4.0, 5.0]]  # type: ignore[union-attr]
    assert window[2] is None, "a null row in a window"


def test_outputs_are_writeable_copies() -> None:
    column = pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float64()))
    out = _decode(column, [[0], [0]], windowed=False, arrays=True)
    out[0][0] = 100.0  # type: ignore[index]
    assert column.to_pylist()[0] == [1.0, 2.0]
    assert out[1].tolist() == [1.0, 2.0]  # type: ignore[union-attr]


def test_select_keeps_the_row_count() -> None:
    column = pa.array([[{"x": 1.0, "y": 2.0}], [{"x": 3.0, "y": 4.0}]],
                      pa.list_(pa.struct([("x", pa.float64()), ("y", pa.float64())])))

    def pick_x(rows: pa.Array) -> pa.Array:
        return pa.compute.struct_field(pa.compute.list_element(rows, 0), [0])

    out = _decode(column, [[0, 1]], windowed=True, arrays=True, select=pick_x)
    assert out[0].shape == (2, 1) and out[0].flatten().tolist() == [1.0, 3.0]  # type: ignore[union-attr]

    def drop_rows(rows: pa.Array) -> pa.Array:
        return rows.slice(0, 1)

    with pytest.raises(ValueError, match="select changed the row count"):
        _decode(column, [[0, 1]], windowed=True, arrays=True, select=drop_rows)


def test_field_batch_needs_an_outer_list() -> None:
    with pytest.raises(TypeError, match="outer Arrow List type"):
        FieldBatch(column=pa.array([1.0, 2.0]))


def test_request_arrays_build_decode_requests_lazily() -> None:
    requests = RequestArrays(
        sample_positions=np.array([4, 1]), segment_ids=["a", "b"],
        index_values=np.array([10, 20]), output_rows=np.array([[3, 3, 5], [6, 7, 7]]),
        decode_starts=np.array([1, 6]), decode_stops=np.array([6, 8]), starts_at_keyframe=True,
        ns_dtype="datetime64[ns]")
    first = requests[0]
    assert first == DecodeRequest(4, "a", np.datetime64(10, "ns"), (1, 2, 3, 4, 5), (3, 3, 5),
                                  True)
    assert [r.segment_id for r in requests] == ["a", "b"]
    assert requests[1:][0].decode_row_indices == (6, 7)
    with pytest.raises(IndexError):
        requests[2]
