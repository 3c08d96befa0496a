"""The compressed record batch messages laid out by rayform are pyarrow's, byte for byte: on a
table of schemas (nulls, nested, large and sliced arrays, empty batches) and on random ones; so
are the files laid out around uncompressed ones (head and footer)."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayform.recording._compressed_message import compressed_message
from rayform.recording._ipc_file import _COMPRESSED, _message, encode_batch, write_ipc_file

_PRIMITIVES = [pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
               pa.uint32(), pa.uint64(), pa.float16(), pa.float32(), pa.float64(),
               pa.timestamp("ns"), pa.duration("ns"), pa.date32(), pa.string(), pa.large_string(),
               pa.binary(), pa.large_binary(), pa.binary(5), pa.decimal128(12, 3), pa.null()]


def _laid_out(batch: pa.RecordBatch) -> bytes:
    message = compressed_message(pa.ipc.read_message(batch.serialize()))
    assert message is not None
    return message.serialize().to_pybytes()


def _pyarrows(batch: pa.RecordBatch) -> bytes:
    return _message(batch, _COMPRESSED).serialize().to_pybytes()


def _random_type(rng: np.random.Generator, depth: int = 0) -> pa.DataType:
    kind = rng.integers(0, 10 if depth < 2 else 5)
    if kind < 5:
        return _PRIMITIVES[rng.integers(0, len(_PRIMITIVES))]
    child = _random_type(rng, depth + 1)
    if kind == 5:
        return pa.list_(child)
    if kind == 6:
        return pa.large_list(child)
    if kind == 7:
        return pa.list_(child, int(rng.integers(1, 4)))
    if kind == 8:
        return pa.struct([pa.field("a", child), pa.field("b", _random_type(rng, depth + 1))])
    return pa.map_(pa.int32(), child)


def _random_array(rng: np.random.Generator, t: pa.DataType, n: int) -> pa.Array:
    """``n`` values of ``t``: none, some or all null; small (compressible), zero or noisy."""
    null_share = (0.0, 0.3, 1.0)[rng.integers(0, 3)]
    mask = rng.random(n) < null_share
    mask_array = pa.array(mask) if mask.any() else None
    if pa.types.is_null(t):
        return pa.nulls(n)
    if pa.types.is_boolean(t):
        return pa.array(rng.random(n) < 0.5, mask=mask)
    if pa.types.is_decimal(t):
        return pa.array([None if m else decimal.Decimal(int(v)) / 1000
                         for v, m in zip(rng.integers(-10**6, 10**6, n), mask, strict=True)], t)
    if pa.types.is_fixed_size_binary(t):
        return pa.array([None if m else rng.bytes(t.byte_width) for m in mask], t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.array([None if m else "ab" * int(k) for k, m in zip(
            rng.integers(0, 5, n), mask, strict=True)], t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.array([None if m else rng.bytes(int(k)) for k, m in zip(
            rng.integers(0, 9, n), mask, strict=True)], t)
    if pa.types.is_fixed_size_list(t):
        child = _random_array(rng, t.value_type, n * t.list_size)
        return pa.FixedSizeListArray.from_arrays(child, t.list_size, mask=mask_array)
    if pa.types.is_map(t):
        offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 3, n))]).astype(np.int32)
        keys = pa.array(np.arange(offsets[-1], dtype=np.int32))
        return pa.MapArray.from_arrays(pa.array(offsets), keys,
                                       _random_array(rng, t.item_type, int(offsets[-1])))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        dtype = np.int32 if pa.types.is_list(t) else np.int64
        offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 4, n))]).astype(dtype)
        child = _random_array(rng, t.value_type, int(offsets[-1]))
        make = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        return make.from_arrays(pa.array(offsets), child, mask=mask_array)
    if pa.types.is_struct(t):
        children = [_random_array(rng, f.type, n) for f in t]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask_array)
    width = t.bit_width
    numbers = (rng.integers(0, 4, n) if rng.random() < 0.5 else
               rng.integers(0, 2 ** min(width, 62), n)) if rng.random() < 0.8 else np.zeros(n)
    plain = pa.array(numbers.astype(f"i{max(width // 8, 1)}"), mask=mask)
    return plain.view(t)


def _random_batch(seed: int) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    rows = int(rng.choice([0, 1, 7, 64, 1000]))
    columns = {f"c{i}": _random_array(rng, _random_type(rng), rows)
               for i in range(rng.integers(1, 8))}
    batch = pa.record_batch(columns)
    if rows and rng.random() < 0.5:
        start = int(rng.integers(0, rows))
        batch = batch.slice(start, int(rng.integers(0, rows - start + 1)))
    return batch


def _nested_sliced() -> pa.RecordBatch:
    lists = pa.array([[1.0, 2.0], None, [3.0], []] * 40, pa.list_(pa.float64()))
    points = pa.StructArray.from_arrays(
        [pa.array(np.arange(160, dtype=np.int16)), pa.array(["p"] * 80 + [None] * 80)],
        names=["x", "name"], mask=pa.array(np.arange(160) % 3 == 0))
    return pa.record_batch({"lists": lists, "points": points}).slice(13, 101)


def _alike_at_the_ends() -> pa.RecordBatch:
    values = np.arange(1000, dtype=np.int64) % 7
    other = values.copy()
    other[500] = 99
    return pa.record_batch({"a": pa.array(values), "b": pa.array(other), "c": pa.array(values)})


_TABLE: dict[str, Callable[[], pa.RecordBatch]] = {
    "numbers with nulls": lambda: pa.record_batch({
        "a": pa.array([1, None, 3] * 100, pa.int64()), "f": pa.array(np.linspace(0, 1, 300))}),
    "columns of nulls of each kind": lambda: pa.record_batch({
        f"n{i}": pa.nulls(50, t) for i, t in enumerate(
            [pa.float32(), pa.list_(pa.float64()), pa.string(), pa.large_list(pa.int8()),
             pa.list_(pa.float32(), 3), pa.struct([("x", pa.int32())]), pa.null()])}),
    "empty batch": lambda: pa.record_batch({
        "a": pa.array([], pa.int64()), "l": pa.array([], pa.list_(pa.string()))}),
    "only the null type": lambda: pa.record_batch({"z": pa.nulls(5)}),
    "no rows of the null type": lambda: pa.record_batch({"z": pa.nulls(0)}),
    "noise zstd cannot shrink": lambda: pa.record_batch({
        "noise": pa.array([np.random.default_rng(1).bytes(4000)], pa.large_binary())}),
    "zeros past the kept zero buffer": lambda: pa.record_batch({
        "z": pa.array(np.zeros(300_000, np.int64))}),
    "sliced nested arrays": _nested_sliced,
    "sliced at a bit offset": lambda: pa.record_batch({
        "b": pa.array([True, False, None] * 30), "s": pa.array(["x", None, "yz"] * 30)}
    ).slice(5, 61),
    "sliced to nothing": lambda: pa.record_batch({"a": pa.array([1, 2, 3])}).slice(3, 0),
    "columns sharing their list offsets and values": lambda: pa.record_batch({
        f"l{i}": pa.array([[float(k)] for k in range(500)], pa.list_(pa.float32()))
        for i in range(4)}),
    "buffers alike at their ends only": _alike_at_the_ends,
    "union": lambda: pa.record_batch({"u": pa.UnionArray.from_sparse(
        pa.array([0, 1, 0], pa.int8()), [pa.array([1, 2, 3]), pa.array(["a", "b", "c"])])}),
}


@pytest.mark.parametrize("case", sorted(_TABLE))
def test_laid_out_messages_are_pyarrows(case: str) -> None:
    batch = _TABLE[case]()
    assert _laid_out(batch) == _pyarrows(batch)
    assert _laid_out(batch) == _pyarrows(batch)  # again, the zero buffers' frames kept


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_laid_out_messages_of_random_batches_are_pyarrows(seed: int) -> None:
    batch = _random_batch(seed)
    laid_out = _laid_out(batch)
    assert laid_out == _pyarrows(batch)
    read = pa.ipc.read_record_batch(pa.ipc.read_message(laid_out), batch.schema)
    read.validate(full=True)
    assert read.serialize().equals(batch.serialize())  # not equals(): NaNs among the floats


def test_a_dictionary_columns_message_is_pyarrows_record_batch_message() -> None:
    batch = pa.record_batch({"d": pa.array(["a", "b", None, "a"] * 50).dictionary_encode(),
                             "x": pa.array(np.arange(200))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_COMPRESSED) as writer:
        writer.write_batch(batch)
    messages = list(pa.ipc.MessageReader.open_stream(sink.getvalue()))
    assert [m.type for m in messages] == ["schema", "dictionary", "record batch"]
    assert _laid_out(batch) == messages[-1].serialize().to_pybytes()


def test_view_types_are_left_to_pyarrow() -> None:
    """A string view's message counts its variadic buffers: laid out by pyarrow's writer."""
    batch = pa.record_batch({"v": pa.array(["a long enough string value"] * 300, pa.string_view())})
    assert compressed_message(pa.ipc.read_message(batch.serialize())) is None
    encoded = encode_batch(batch, compress=True)
    assert encoded.is_compressed
    assert encoded.message.serialize().to_pybytes() == _pyarrows(batch)


def test_zero_buffers_past_the_kept_frames_are_still_pyarrows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept frames of all-zero buffers are dropped when full and made again."""
    from rayform.recording import _compressed_message

    monkeypatch.setattr(_compressed_message, "_MAX_KEPT_ZERO_FRAMES", 3)
    monkeypatch.setattr(_compressed_message, "_ZERO_FRAMES", {})
    for rows in range(100, 120):
        batch = pa.record_batch({"n": pa.nulls(rows, pa.list_(pa.float32())),
                                 "z": pa.array(np.zeros(rows + 7, np.int32)[7:])})
        assert _laid_out(batch) == _pyarrows(batch)
    assert 0 < len(_compressed_message._ZERO_FRAMES) <= 3


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), count=st.sampled_from([0, 1, 2, 3, 13, 40]),
       header_bytes=st.integers(0, 300))
def test_laid_out_files_are_pyarrows(seed: int, count: int, header_bytes: int) -> None:
    """The head and the footer (grown from those of a file of no batch to one block per batch)
    are those pyarrow's file writer lays out, whatever the schema, its metadata's length (which
    moves the footer's alignment) and the number of batches."""
    batch = _random_batch(seed)
    schema = batch.schema.with_metadata({"rayform": "h" * header_bytes})
    batch = batch.replace_schema_metadata(schema.metadata)
    laid_out = pa.BufferOutputStream()
    write_ipc_file(laid_out, schema, [encode_batch(batch, compress=False)] * count)
    pyarrows = pa.BufferOutputStream()
    with pa.ipc.new_file(pyarrows, schema) as writer:
        for _ in range(count):
            writer.write_batch(batch)
    assert laid_out.getvalue().to_pybytes() == pyarrows.getvalue().to_pybytes()


@pytest.mark.parametrize("buffer_bytes", [64, 4096, 1 << 20])
def test_files_written_through_the_buffer_are_the_bytes_laid_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, buffer_bytes: int) -> None:
    """Batches smaller and larger than the write buffer land where the footer says."""
    from rayform.recording import _ipc_file

    monkeypatch.setattr(_ipc_file, "_WRITE_BUFFER_BYTES", buffer_bytes)
    batch = _random_batch(1)
    schema = batch.schema.with_metadata({"rayform": "header"})
    encoded = [encode_batch(batch.replace_schema_metadata(schema.metadata), compress=False)
               for _ in range(3)] + [encode_batch(pa.record_batch(
                   {name: pa.nulls(5000, t) for name, t in zip(schema.names, schema.types,
                                                               strict=True)}), compress=False)]
    layout = _ipc_file.write_recording_file(tmp_path / "f.arrow", schema, encoded)
    laid_out = pa.BufferOutputStream()
    assert write_ipc_file(laid_out, schema, encoded) == layout
    assert (tmp_path / "f.arrow").read_bytes() == laid_out.getvalue().to_pybytes()
    assert pa.ipc.open_file(tmp_path / "f.arrow").num_record_batches == 4
