"""Recording format version 3: numeric batches are zstd-compressed, encoded media stays as-is
(read in place from the memory-mapped file), and version 2 files (all uncompressed) still read."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

from rayform.catalog import DatasetEntry
from rayform.recording._checksum import content_digest, stored_messages
from rayform.recording._file import HEADER_KEY, RecordingHeader, open_recording

JOINTS = "/joints/position:Scalars:scalars"
BLOBS = "/cam0/rgb:EncodedImage:blob"
PACKETS = "/cam1:VideoStream:sample"


def _stored_bodies(path: Path) -> list[pa.Buffer]:
    with pa.memory_map(str(path), "r") as mm:
        return [pa.py_buffer(body.to_pybytes()) for _, body in stored_messages(mm.read_buffer())]


def _entity_of_batch(header: RecordingHeader) -> list[str]:
    blocks = [*header.entities.items(), *header.static_entities.items()]
    return [entity for entity, _ in sorted(blocks, key=lambda item: item[1].start)]


def test_numeric_batches_are_compressed_and_media_batches_are_not(
        recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep", num_frames=300)
    header, table = open_recording(path)
    bodies = _stored_bodies(path)
    plain = [pa.ipc.read_message(batch.serialize()).body for batch in table.to_batches()]
    assert len(bodies) == len(plain) == len(_entity_of_batch(header))
    stored_as_is = {entity for entity, body, raw in zip(_entity_of_batch(header), bodies, plain,
                                                        strict=True) if body.equals(raw)}
    assert {"/cam0/rgb", "/cam1"} <= stored_as_is
    assert "/joints/position" not in stored_as_is
    joints = _entity_of_batch(header).index("/joints/position")
    assert bodies[joints].size < plain[joints].size / 3, "300 x 7 float64 rows compress well"


def test_compressed_values_read_back_exactly(recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep", seed=5)
    _, table = open_recording(path)
    rows = table.column(JOINTS).combine_chunks().drop_null()
    values = np.asarray(rows.flatten()).reshape(-1, 7)
    np.testing.assert_array_equal(values[:, 0], 5000.0 + np.arange(30) * 10.0)


def test_media_columns_view_the_memory_mapped_file(recording_factory: RecordingFactory) -> None:
    """Media batches are not compressed, so their bytes are read in place from the page cache;
    compressed batches are decompressed into memory (their buffers lie outside the file)."""
    path = recording_factory("ep", num_frames=600)
    size = path.stat().st_size
    with pa.memory_map(str(path), "r") as mm:
        start = mm.read_buffer().address
        table = pa.ipc.open_file(mm).read_all()

        def in_file(column: str) -> bool:
            chunks = [c for c in table.column(column).chunks if c.null_count < len(c)]
            address = chunks[0].values.buffers()[2].address if column != JOINTS \
                else chunks[0].values.buffers()[1].address
            return start <= address < start + size

        assert in_file(BLOBS) and in_file(PACKETS)
        assert not in_file(JOINTS)


def _as_version_2(src: Path, dest: Path) -> Path:
    """The same recording as rayform wrote it before version 3: every batch uncompressed and the
    checksum over those uncompressed messages."""
    table = pa.ipc.open_file(pa.memory_map(str(src), "r")).read_all()
    header = RecordingHeader.model_validate(json.loads(table.schema.metadata[HEADER_KEY]))
    header = header.model_copy(update={"format_version": 2})
    batches = table.to_batches()
    messages = [pa.ipc.read_message(b.serialize()) for b in batches]
    digest = content_digest(header, table.schema, ((m.metadata, m.body) for m in messages))
    header = header.model_copy(update={"content_sha256": digest})
    schema = table.schema.with_metadata({HEADER_KEY: header.to_bytes()})
    with pa.OSFile(str(dest), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return dest


def test_version_2_recordings_still_register_with_the_same_values(
        robots: DatasetEntry, tmp_path: Path, recording_factory: RecordingFactory) -> None:
    new = recording_factory("v3", seed=4, num_frames=600)
    old = _as_version_2(new, tmp_path / "v2.rfr")
    assert old.stat().st_size > new.stat().st_size
    header, _ = open_recording(old)
    assert header.format_version == 2
    robots.register(old).wait()
    stored = robots.open_segment("v3").column(JOINTS, "frame_index")
    expected = open_recording(new)[1].column(JOINTS).combine_chunks().drop_null()
    assert stored.values.to_pylist() == expected.to_pylist()


def test_compress_false_stores_every_batch_as_is(tmp_path: Path) -> None:
    from rayform import RecordingWriter

    values = np.zeros((400, 7))
    sizes = {}
    for compress in (True, False):
        path = tmp_path / f"{compress}.rfr"
        with RecordingWriter(path, recording_id="ep", compress=compress) as rec:
            rec.log_scalars("/q", timelines={"frame_index": np.arange(400)}, values=values)
        _, table = open_recording(path)
        plain = [pa.ipc.read_message(b.serialize()).body for b in table.to_batches()]
        as_is = [body.equals(raw) for body, raw in zip(_stored_bodies(path), plain, strict=True)]
        assert as_is == [not compress] * len(plain)
        np.testing.assert_array_equal(
            np.asarray(table.column("/q:Scalars:scalars").combine_chunks().flatten()), 0.0)
        sizes[compress] = path.stat().st_size
    assert sizes[True] * 4 < sizes[False]


def test_small_batches_are_stored_as_is(tmp_path: Path) -> None:
    """Below MIN_COMPRESSED_BYTES a batch is not compressed (per-buffer zstd costs more time
    than the few bytes it saves); the large entity beside it still is."""
    from rayform import RecordingWriter
    from rayform.recording._ipc_file import MIN_COMPRESSED_BYTES

    small_rows = MIN_COMPRESSED_BYTES // 8 // 7 // 2  # its timeline, offsets and nulls count too
    path = tmp_path / "mixed.rfr"
    with RecordingWriter(path, recording_id="ep") as rec:
        rec.log_scalars("/big", timelines={"frame_index": np.arange(2000)},
                        values=np.zeros((2000, 7)))
        rec.log_scalars("/small", timelines={"frame_index": np.arange(small_rows)},
                        values=np.zeros((small_rows, 7)))
    header, table = open_recording(path)
    plain = {entity: pa.ipc.read_message(b.serialize()).body
             for entity, b in zip(_entity_of_batch(header), table.to_batches(), strict=True)}
    stored = dict(zip(_entity_of_batch(header), _stored_bodies(path), strict=True))
    assert stored["/small"].equals(plain["/small"])
    assert stored["/big"].size < plain["/big"].size / 4
    np.testing.assert_array_equal(
        np.asarray(table.column("/small:Scalars:scalars").combine_chunks().drop_null().flatten()),
        0.0)


@pytest.mark.parametrize("plan", [(), (True,), (False,), (True, False, True), (False, True)])
def test_files_mixing_compressed_and_plain_batches_read_in_any_arrow_reader(
        plan: tuple[bool, ...]) -> None:
    from rayform.recording._ipc_file import encode_batch, write_ipc_file

    schema = pa.schema([pa.field("x", pa.list_(pa.float64())), pa.field("s", pa.string())])
    batches = [pa.record_batch([pa.array([[float(i), 1.0]] * (100 + i)),
                                pa.array([f"row {i}"] * (100 + i))], schema=schema)
               for i in range(len(plan))]
    sink = pa.BufferOutputStream()
    write_ipc_file(sink, schema, [encode_batch(b, compress=c) for b, c in zip(batches, plan,
                                                                               strict=True)])
    reader = pa.ipc.open_file(sink.getvalue())
    assert reader.num_record_batches == len(plan)
    for i, batch in enumerate(batches):
        got = reader.get_batch(i)
        got.validate(full=True)
        assert got.equals(batch)


def test_batches_encoded_on_threads_are_the_messages_encoded_one_by_one() -> None:
    """Several batches with a megabyte to compress go to two threads: each message (and the
    order) is what encoding them in turn gives."""
    from rayform.recording._ipc_file import encode_batch, encode_batches

    rng = np.random.default_rng(0)
    batches = []
    for _ in range(6):
        values = np.cumsum(rng.standard_normal(150_000)).astype(np.float32)
        offsets = pa.array(np.arange(150_001, dtype=np.int32))
        batches.append(pa.RecordBatch.from_arrays(
            [pa.ListArray.from_arrays(offsets, pa.array(values))], names=[JOINTS]))
    compress = [True, True, False, True, True, True]
    threaded = encode_batches(batches, compress)
    one_by_one = [encode_batch(b, compress=c) for b, c in zip(batches, compress, strict=True)]
    assert threaded[0].is_compressed and not threaded[2].is_compressed
    for got, want in zip(threaded, one_by_one, strict=True):
        assert got.is_compressed == want.is_compressed
        assert got.message.metadata.equals(want.message.metadata)
        assert got.message.body.equals(want.message.body)


def test_wide_batches_of_little_but_nulls_are_encoded_on_one_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches that hold megabytes only in their columns of nulls (a ULog recording: many
    entities, each a few of the wide schema's columns) are encoded on the calling thread: their
    zero buffers are compressed once, and two threads spent more than one on the rest. Batches
    holding a megabyte each besides go to two threads."""
    from rayform.recording import _ipc_file
    from rayform.recording._ipc_file import encode_batch, encode_batches

    pools: list[int] = []

    class CountedPool(ThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pools.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_ipc_file, "ThreadPoolExecutor", CountedPool)
    rng = np.random.default_rng(1)
    rows, width = 20_000, 40
    batches, logged = [], []
    for i in range(8):
        values = np.cumsum(rng.standard_normal(rows)).astype(np.float32)
        own = pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32)),
                                       pa.array(values))
        columns = [own if j == i else pa.nulls(rows, own.type) for j in range(width)]
        batches.append(pa.RecordBatch.from_arrays(columns, names=[f"c{j}" for j in range(width)]))
        logged.append(own.nbytes)
    compress = [True] * len(batches)
    assert sum(b.get_total_buffer_size() for b in batches) > sum(logged) >= 1 << 20
    one_thread = encode_batches(batches, compress, logged_bytes=logged)
    assert pools == []
    assert encode_batches(batches, compress, logged_bytes=[1 << 20] * 8) and pools == [1]
    for got, want in zip(one_thread, [encode_batch(b, compress=True) for b in batches],
                         strict=True):
        assert got.message.body.equals(want.message.body)


def test_batch_sizes_the_writer_adds_up_are_arrows_and_store_the_same_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer gives each batch's ``nbytes`` as the sum of its columns' (the shared columns
    of nulls measured once); Arrow's own walk of the batch finds the same, and so the same
    batches are compressed as when each batch is measured."""
    from rayform.recording import _writer
    from rayform.recording._writer import RecordingWriter

    given: list[tuple[pa.RecordBatch, int | None]] = []
    encode = _writer.encode_batches

    def recorded(batches, compress, nbytes=None, **kwargs):  # type: ignore[no-untyped-def]
        given.extend(zip(batches, nbytes or [None] * len(batches), strict=True))
        return encode(batches, compress, nbytes, **kwargs)

    def write(name: str) -> bytes:
        rng = np.random.default_rng(3)
        with RecordingWriter(tmp_path / name, recording_id="ep") as rec:
            for i, rows in enumerate((10, 10, 40, 300)):  # around MIN_COMPRESSED_BYTES
                t = {"frame_index": np.arange(rows)}
                rec.log_scalars(f"/e{i}", timelines=t, values=rng.integers(0, 9, (rows, 3)))
                rec.log_columns(f"/t{i}", timelines=t, components={
                    "TextDocument:text": [f"step {k}" for k in range(rows)]})
            rec.log_encoded_images("/cam", timelines={"frame_index": np.arange(5)},
                                   blobs=[b"\xff\xd8" + bytes(3000)] * 5, media_type="image/jpeg")
            rec.log_static("/s", components={"Scalars:scalars": [1.0, 2.0]})
        return (tmp_path / name).read_bytes()

    monkeypatch.setattr(_writer, "encode_batches", recorded)
    added_up = write("a.rfr")
    measured = [(batch, size) for batch, size in given if size is not None]
    assert len(measured) >= 8
    assert all(size == batch.nbytes for batch, size in measured)
    monkeypatch.setattr(_writer, "encode_batches",
                        lambda batches, compress, nbytes=None, **_: encode(batches, compress))
    assert write("b.rfr") == added_up
