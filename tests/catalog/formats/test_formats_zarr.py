"""Zarr replay buffers: episodes as segments, values equal to zarr's own read (bit-exact), v2 and
v3 stores, folders and ``.zip``, pixel images, timelines, damaged stores."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from zarr_sources import write_replay_buffer, write_zip_buffer

from rayform.catalog import Catalog
from rayform.cli import main
from rayform.errors import ConfigError, ConversionWarning, CorruptRecordingError, FormatError
from rayform.importers import _registry, find_importer, register_importer
from rayform.importers.zarr import ZarrImporter

zarr = pytest.importorskip("zarr")
PUSHT = "zarr-diffusion-policy-pusht/pusht_cchi_v7_replay.zarr"
LENGTHS = [2, 5, 1, 4]  # with 3-row chunks: episodes start and end inside chunks


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importers registered by a test are dropped after it."""
    monkeypatch.setattr(_registry, "_REGISTRY", list(_registry._REGISTRY))


def _values(ds: object, segment: str, column: str, timeline: str = "frame_index") -> np.ndarray:
    seg = ds.open_segment(segment)  # type: ignore[attr-defined]
    return np.array(seg.column(column, timeline).values.to_pylist())


def _pixels(ds: object, segment: str, name: str, dtype: str) -> np.ndarray:
    """An ``Image:buffer`` entity's frames as stored: one row of values per frame."""
    column = ds.open_segment(segment).column(f"/{name}:Image:buffer",  # type: ignore[attr-defined]
                                             "frame_index")
    frames = [row[0] for row in column.values.to_pylist()]
    return np.stack([np.frombuffer(f, dtype=dtype) for f in frames])


def _properties(ds: object) -> dict[str, dict[str, object]]:
    rows = ds.segment_table_arrow().to_pylist()  # type: ignore[attr-defined]
    return {r["rerun_segment_id"]: {k.removeprefix("property:"): v for k, v in r.items()
                                    if k.startswith("property:")} for r in rows}


@pytest.mark.realdata
def test_pusht_episodes_equal_zarrs_read(realdata: Path, catalog: Catalog,
                                         own_registry: None) -> None:
    store = realdata / PUSHT
    group = zarr.open_group(str(store), mode="r")
    ends = group["meta/episode_ends"][:]
    register_importer(ZarrImporter(fps=10, episodes=[0, 1, 205]))
    ds = catalog.create_dataset("pusht")
    ds.register(store)
    assert ds.segment_ids() == ["episode_000000", "episode_000001", "episode_000205"]
    assert ds.timelines == {"frame_index": "sequence", "timestamp": "duration"}
    props = _properties(ds)
    for episode in (0, 1, 205):
        start, stop = (0 if episode == 0 else int(ends[episode - 1])), int(ends[episode])
        segment = f"episode_{episode:06d}"
        assert props[segment]["length"] == stop - start
        assert props[segment]["source_first_row"] == start
        assert props[segment]["time_grid"] == "from_rate"
        for name in ("state", "action", "keypoint", "n_contacts"):
            source = group[f"data/{name}"][start:stop]
            got = _values(ds, segment, f"/{name}:Scalars:scalars").astype(np.float32)
            assert got.tobytes() == source.reshape(stop - start, -1).tobytes(), name
        pixels = group["data/img"][start:stop]
        assert _pixels(ds, segment, "img", "<f4").tobytes() == pixels.astype("<f4").tobytes()
        seg = ds.open_segment(segment)
        np.testing.assert_array_equal(seg.column("/state:Scalars:scalars", "timestamp").index,
                                      np.arange(stop - start) * 100_000_000)
    fmt = ds.open_segment("episode_000000").column("/img:Image:format", "frame_index")
    assert fmt.is_static
    assert fmt.values[0].as_py() == [{"width": 96, "height": 96, "pixel_format": None,
                                      "color_model": 2, "channel_datatype": 34}]  # RGB, F32
    assert [props[s]["length"] for s in ds.segment_ids()] == [161, 118, 25650 - int(ends[204])]


@pytest.mark.realdata
def test_pusht_images_at_a_declared_dtype(realdata: Path, catalog: Catalog,
                                          own_registry: None) -> None:
    store = realdata / PUSHT
    register_importer(ZarrImporter(image_dtype={"img": "uint8"}, episodes=[1]))
    ds = catalog.create_dataset("pusht8")
    ds.register(store)
    source = zarr.open_group(str(store), mode="r")["data/img"][161:279]
    schema = {f.name: str(f.type) for f in ds.schema().arrow}
    assert schema["/img:Image:buffer"] == "list<item: binary>"
    assert "/img:Scalars:scalars" not in schema
    got = _pixels(ds, "episode_000001", "img", "u1")
    np.testing.assert_array_equal(got, source.reshape(118, -1).astype(np.uint8))
    fmt = ds.open_segment("episode_000001").column("/img:Image:format", "frame_index")
    assert fmt.values[0].as_py()[0]["channel_datatype"] == 6  # U8
    assert ds.timelines == {"frame_index": "sequence"}
    assert _properties(ds)["episode_000001"]["time_grid"] == "frame_index_only"


@pytest.mark.realdata
def test_pusht_pixels_load_as_images_equal_to_zarrs_read(realdata: Path, catalog: Catalog,
                                                         own_registry: None) -> None:
    """A dataloader Field with RawImageDecoder yields PushT's frames, float32 as stored, equal to
    the zarr array (channels first, as every image decoder gives them); at a declared dtype
    the same frames come as uint8."""
    torch = pytest.importorskip("torch")
    from rayform.dataloader import DataSource, Field, RerunMapDataset
    from rayform.decoders import RawImageDecoder

    torch.set_num_threads(1)
    store = realdata / PUSHT
    source = zarr.open_group(str(store), mode="r")["data/img"][0:161]
    register_importer(ZarrImporter(fps=10, episodes=[0]))
    ds = catalog.create_dataset("pusht")
    ds.register(store)
    data = RerunMapDataset(DataSource(ds), "frame_index",
                           {"img": Field("/img:Image:buffer", RawImageDecoder())})
    assert len(data) == 161
    for i in (0, 80, 160):
        got = data[i]["img"]
        assert got.dtype == torch.float32 and tuple(got.shape) == (3, 96, 96)
        np.testing.assert_array_equal(got.numpy().transpose(1, 2, 0), source[i])
    register_importer(ZarrImporter(fps=10, episodes=[0], image_dtype={"img": "uint8"}))
    ds8 = catalog.create_dataset("pusht8")
    ds8.register(store)
    data8 = RerunMapDataset(DataSource(ds8), "frame_index",
                            {"img": Field("/img:Image:buffer", RawImageDecoder())})
    got8 = data8[42]["img"]
    assert got8.dtype == torch.uint8
    np.testing.assert_array_equal(got8.numpy().transpose(1, 2, 0), source[42].astype(np.uint8))


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("layout", ["folder", "zip"])
def test_v2_v3_folders_and_zips_register_every_episode(tmp_path: Path, catalog: Catalog,
                                                       zarr_format: int, layout: str) -> None:
    path = tmp_path / ("buf.zarr" if layout == "folder" else "buf.zarr.zip")
    if layout == "folder":
        arrays = write_replay_buffer(str(path), LENGTHS, zarr_format=zarr_format, umi=True)
    else:
        arrays = write_zip_buffer(path, LENGTHS, zarr_format=zarr_format, umi=True)
    assert find_importer(path).name == "zarr"
    ds = catalog.create_dataset("buf")
    ds.register(path)
    assert ds.segment_ids() == [f"episode_{i:06d}" for i in range(len(LENGTHS))]
    starts = np.concatenate(([0], np.cumsum(LENGTHS)[:-1]))
    for i, (start, length) in enumerate(zip(starts, LENGTHS, strict=True)):
        segment = f"episode_{i:06d}"
        for name, values in arrays.items():
            rows = values[start:start + length].reshape(length, -1)
            got = _pixels(ds, segment, name, "u1") if name == "camera0_rgb" \
                else _values(ds, segment, f"/{name}:Scalars:scalars")
            np.testing.assert_array_equal(got, rows)
    schema = {f.name: str(f.type) for f in ds.schema().arrow}
    assert schema["/camera0_rgb:Image:buffer"] == "list<item: binary>"
    fmt = ds.open_segment("episode_000000").column("/camera0_rgb:Image:format", "frame_index")
    assert fmt.values[0].as_py()[0]["width"] == 8 and fmt.values[0].as_py()[0]["height"] == 6
    assert "/robot0_eef_pos:Image:format" not in schema


def test_timestamps_array_becomes_the_time_timeline(tmp_path: Path, catalog: Catalog) -> None:
    arrays = write_replay_buffer(str(tmp_path / "real.zarr"), [3, 2], timestamps=True)
    ds = catalog.create_dataset("real")
    ds.register(tmp_path / "real.zarr")
    assert ds.timelines == {"frame_index": "sequence", "timestamp": "timestamp"}
    seg = ds.open_segment("episode_000001")
    index = np.asarray(seg.column("/state:Scalars:scalars", "timestamp").index, np.int64)
    np.testing.assert_array_equal(index, np.rint(arrays["timestamp"][3:] * 1e9).astype(np.int64))
    assert _properties(ds)["episode_000001"]["time_grid"] == "source"


def test_cli_fps_and_options(tmp_path: Path, catalog: Catalog, own_registry: None) -> None:
    write_replay_buffer(str(tmp_path / "b.zarr"), LENGTHS)
    assert main(["--catalog", catalog.url, "register", "cli", str(tmp_path / "b.zarr"),
                 "--create", "--fps", "10"]) == 0
    seg = catalog.get_dataset("cli").open_segment("episode_000001")
    np.testing.assert_array_equal(seg.column("/state:Scalars:scalars", "timestamp").index,
                                  np.arange(5) * 100_000_000)
    with pytest.raises(ConfigError, match="image_dtype"):
        ZarrImporter(image_dtype={"img": "complex64"})
    register_importer(ZarrImporter(image_dtype={"nope": "uint8"}))
    with pytest.raises(ConfigError, match=r"image_dtype names \['nope'\]"):
        catalog.create_dataset("x").register(tmp_path / "b.zarr")
    register_importer(ZarrImporter(episodes=[9]))
    with pytest.raises(ConfigError, match=r"episodes \[9\] out of range"):
        catalog.create_dataset("y").register(tmp_path / "b.zarr")


def test_lossy_declared_dtype_is_refused(tmp_path: Path, catalog: Catalog,
                                         own_registry: None) -> None:
    arrays = write_replay_buffer(str(tmp_path / "b.zarr"), [3])
    group = zarr.open_group(str(tmp_path / "b.zarr"), mode="r+")
    group["data/img"][0, 0, 0, 0] = arrays["img"][0, 0, 0, 0] + 0.5
    register_importer(ZarrImporter(image_dtype={"img": "uint8"}))
    ds = catalog.create_dataset("x")
    with pytest.raises(FormatError, match="does not convert exactly to uint8"):
        ds.register(tmp_path / "b.zarr")
    assert ds.segment_ids() == []


@pytest.mark.parametrize(("damage", "message"), [
    ("truncate_chunk", r"data/state rows 0\.\.3 cannot be read"),
    ("truncate_late_chunk", r"data/state rows 6\.\.9 cannot be read"),
    ("delete_chunk", r"data/state has 3 of its 4 chunks"),
    ("bad_ends", r"the last of meta/episode_ends is 11 but the data arrays have 12 rows"),
    ("decreasing_ends", r"must be non-decreasing"),
    ("bad_metadata", r"not a readable Zarr store"),
])
def test_damaged_stores_get_a_format_error_naming_the_store(tmp_path: Path, catalog: Catalog,
                                                            damage: str, message: str) -> None:
    path = tmp_path / "b.zarr"
    write_replay_buffer(str(path), LENGTHS)
    chunk = path / "data" / "state" / "0.0"
    if damage == "truncate_chunk":
        chunk.write_bytes(chunk.read_bytes()[:10])
    elif damage == "truncate_late_chunk":  # read with others ahead (or on the reading thread)
        late = path / "data" / "state" / "2.0"
        late.write_bytes(late.read_bytes()[:10])
    elif damage == "delete_chunk":
        chunk.unlink()
    elif damage in ("bad_ends", "decreasing_ends"):
        ends = [2, 7, 8, 11] if damage == "bad_ends" else [2, 7, 5, 12]
        group = zarr.open_group(str(path), mode="r+")
        group["meta/episode_ends"][:] = np.array(ends, np.int64)
    elif damage == "bad_metadata":
        (path / ".zgroup").write_text("{not json")
    ds = catalog.create_dataset("x")
    with pytest.raises(FormatError, match=message) as info:
        ds.register(path)
    assert str(path) in str(info.value)
    assert ds.segment_ids() == []
    if damage in ("truncate_chunk", "truncate_late_chunk", "delete_chunk", "bad_metadata"):
        assert isinstance(info.value, CorruptRecordingError)


def test_bit_flip_in_a_checksummed_chunk_is_found(tmp_path: Path, catalog: Catalog) -> None:
    # Zarr chunks carry no checksum unless the store adds one (v3's crc32c codec): a flipped bit
    # in a plain chunk reads as another value in every reader. With the codec, it is refused.
    path = tmp_path / "b.zarr"
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    rng = np.random.default_rng(0)
    root.create_group("data").create_array(
        "state", data=rng.normal(size=(6, 4)).astype(np.float32), chunks=(3, 4),
        compressors=[zarr.codecs.Crc32cCodec()])
    root.create_group("meta").create_array("episode_ends", data=np.array([2, 6]))
    chunk = path / "data" / "state" / "c" / "1" / "0"
    data = bytearray(chunk.read_bytes())
    data[5] ^= 0x04
    chunk.write_bytes(bytes(data))
    ds = catalog.create_dataset("x")
    with pytest.raises(CorruptRecordingError, match=r"data/state rows 3\.\.6 cannot be read \(.*checksum"):
        ds.register(path)
    assert ds.segment_ids() == []


def test_truncated_zip_and_missing_zarr_package(tmp_path: Path, catalog: Catalog,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "b.zarr.zip"
    write_zip_buffer(path, LENGTHS)
    cut = tmp_path / "cut.zarr.zip"
    cut.write_bytes(path.read_bytes()[:-200])
    assert find_importer(cut).name == "zarr"  # the zip's central directory is cut off
    with pytest.raises(CorruptRecordingError, match=rf"{cut}: not a readable Zarr store"):
        catalog.create_dataset("cut").register(cut)
    # a zip member carries a CRC-32: a flipped bit in a chunk is found
    import zipfile

    with zipfile.ZipFile(path) as zf:
        member = zf.getinfo("data/state/0.0")
    flipped = tmp_path / "flipped.zarr.zip"
    data = bytearray(path.read_bytes())
    data[member.header_offset + 30 + len(member.filename) + len(member.extra) + 20] ^= 0x01
    flipped.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordingError, match=r"data/state rows 0\.\.3 cannot be read"):
        catalog.create_dataset("flipped").register(flipped)
    monkeypatch.setitem(sys.modules, "zarr", None)
    assert find_importer(path).name == "zarr"  # sniffing needs no optional package
    with pytest.raises(ImportError, match=r"pip install 'rayform\[zarr\]'"):
        catalog.create_dataset("x").register(path)


class _CountingArray:
    """An array that records which rows each read asked for (zarr's read into a given buffer)."""

    def __init__(self, values: np.ndarray, chunk: int) -> None:
        self.values, self.chunks, self.shape = values, (chunk,), values.shape
        self.dtype = values.dtype
        self.reads: list[tuple[int, int]] = []

    def get_basic_selection(self, key: slice, *, out: object) -> None:
        self.reads.append((key.start, key.stop))
        out.as_numpy_array()[...] = self.values[key]  # type: ignore[attr-defined]


def _chunk_by_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers made after this read no chunk ahead of the rows asked for (every test chunk
    holds fewer bytes than the read-ahead window)."""
    from rayform.importers.zarr import _store

    monkeypatch.setattr(_store, "WINDOW_BYTES", 0)


def test_row_reader_decompresses_each_chunk_once_and_keeps_little(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rayform.importers.zarr._store import RowReader

    _chunk_by_chunk(monkeypatch)
    values = np.arange(100)
    array = _CountingArray(values, chunk=7)
    reader = RowReader(array, name="x", path=Path("store.zarr"))
    lengths = [3, 11, 1, 0, 20, 6, 30, 29]
    start = 0
    for length in lengths:
        np.testing.assert_array_equal(reader.take(start, start + length),
                                      values[start:start + length])
        # Two buffers, each at most an episode and two chunks: the rest of the last chunk
        # read, then the chunks read for this episode.
        assert all(len(b) <= max(lengths) + 2 * 7 for b in reader._buffers if b is not None)
        start += length
    covered = [r for lo, hi in array.reads for r in range(lo, hi)]
    assert covered == list(range(100))  # every row read once, in order
    assert all(lo % 7 == 0 for lo, _ in array.reads)  # in whole chunks


def test_row_reader_rows_outlive_the_next_read_and_buffers_are_reused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The importer reads an episode while the one before it is written: the rows a take
    returned stay as they are through the next take, and the reads go to two buffers of the
    reader's own, not to a fresh array each."""
    from rayform.importers.zarr._store import RowReader

    _chunk_by_chunk(monkeypatch)
    values = np.arange(400 * 3).reshape(400, 3)
    reader = RowReader(_CountingArray(values, chunk=7), name="x", path=Path("store.zarr"))
    buffers: set[int] = set()
    previous: tuple[np.ndarray, int, int] | None = None
    for start in range(0, 400, 8):
        rows = reader.take(start, start + 8)
        np.testing.assert_array_equal(rows, values[start:start + 8])
        if previous is not None:
            kept, lo, hi = previous
            np.testing.assert_array_equal(kept, values[lo:hi])  # still as it was
        previous = rows, start, start + 8
        buffers |= {id(b) for b in reader._buffers if b is not None}
    assert len(buffers) <= 4  # grown a few times at most, never one per episode


def test_row_reader_reads_small_chunks_ahead_but_not_past_the_episodes_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A zarr read costs about a millisecond however little it reads: an array of few bytes a
    step is read ahead, in one read for many episodes, up to the rows the importer will ask
    for next (``ahead``) and no further."""
    from rayform.importers.zarr import _store

    monkeypatch.setattr(_store, "WINDOW_BYTES", 7 * 8 * 4)  # four chunks of 7 int64 rows
    values = np.arange(100, dtype=np.int64)
    array = _CountingArray(values, chunk=7)
    reader = _store.RowReader(array, name="x", path=Path("store.zarr"))
    for lo, hi in ((0, 3), (3, 9), (9, 20)):
        np.testing.assert_array_equal(reader.take(lo, hi, ahead=24), values[lo:hi])
    assert array.reads == [(0, 28)]  # one read: ahead=24, in whole chunks, within the window
    np.testing.assert_array_equal(reader.take(20, 24, ahead=24), values[20:24])
    np.testing.assert_array_equal(reader.take(50, 52, ahead=90), values[50:52])
    np.testing.assert_array_equal(reader.take(52, 90, ahead=90), values[52:90])
    assert array.reads == [(0, 28), (49, 77), (77, 91)]  # the window, then what was left


def test_episodes_read_chunk_by_chunk_equal_zarrs_read(tmp_path: Path, catalog: Catalog,
                                                       own_registry: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Episodes spanning several chunks, ending inside one, empty, or picked out of order, read
    a chunk at a time (as large images are) on the reading thread, equal zarr's own read; an
    empty episode (two equal ends) is an empty segment."""
    _chunk_by_chunk(monkeypatch)
    lengths = [2, 9, 0, 1, 4, 7, 3]
    # (seed 3: no chunk of n_contacts all zeros, which zarr would not store)
    arrays = write_replay_buffer(str(tmp_path / "b.zarr"), lengths, chunk_rows=3, seed=3)
    chosen = [0, 1, 2, 3, 4, 6, 5]
    register_importer(ZarrImporter(fps=10, episodes=chosen))
    ds = catalog.create_dataset("b")
    ds.register(tmp_path / "b.zarr")
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    props = _properties(ds)
    for episode in chosen:
        start, length = int(starts[episode]), lengths[episode]
        segment = f"episode_{episode:06d}"
        assert props[segment]["length"] == length
        if length == 0:
            continue
        for name, values in arrays.items():
            rows = values[start:start + length].reshape(length, -1)
            got = _pixels(ds, segment, name, "<f4") if name == "img" \
                else _values(ds, segment, f"/{name}:Scalars:scalars").astype(values.dtype)
            assert got.tobytes() == rows.tobytes(), (episode, name)
        np.testing.assert_array_equal(
            ds.open_segment(segment).column("/state:Scalars:scalars", "timestamp").index,
            np.arange(length) * 100_000_000)


def test_episodes_are_read_on_a_thread_beside_the_writer(tmp_path: Path, catalog: Catalog,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Every episode's rows are read on the reading thread (the next one while the main thread
    writes the one before), none on the writing thread."""
    import threading

    from rayform.importers.zarr import _store

    readers: list[str] = []
    take = _store.RowReader.take

    def recording_take(self: _store.RowReader, start: int, stop: int, *,
                       ahead: int | None = None) -> np.ndarray:
        readers.append(threading.current_thread().name)
        return take(self, start, stop, ahead=ahead)

    monkeypatch.setattr(_store.RowReader, "take", recording_take)
    write_replay_buffer(str(tmp_path / "b.zarr"), LENGTHS)
    catalog.create_dataset("b").register(tmp_path / "b.zarr")
    assert len(readers) == 5 * len(LENGTHS)  # five arrays, each episode
    assert all(name.startswith("rayform-zarr") for name in readers), set(readers)


def test_mutated_metadata_never_escapes_as_a_raw_error(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "b.zarr"
    write_replay_buffer(str(path), LENGTHS)
    targets = [path / "data" / "state" / ".zarray", path / "meta" / "episode_ends" / ".zarray",
               path / "data" / ".zgroup"]
    originals = {t: t.read_bytes() for t in targets}
    refused = 0
    for trial in range(60):
        target = targets[trial % len(targets)]
        data = bytearray(originals[target])
        data[int(rng.integers(0, len(data)))] = int(rng.integers(32, 127))
        target.write_bytes(bytes(data))
        out = tmp_path / f"out{trial}"
        out.mkdir()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConversionWarning)  # zarr's, named: reported
                ZarrImporter().convert(path, out)
        except FormatError:  # ConfigError never: these are the store's bytes, not options
            refused += 1
        target.write_bytes(originals[target])
    assert refused > 0


def test_older_python_is_told_zarr_needs_3_11(tmp_path: Path, catalog: Catalog,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    write_replay_buffer(tmp_path / "buf.zarr", LENGTHS)
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    ds = catalog.create_dataset("z")
    with pytest.raises(ImportError, match=r"needs Python 3\.11 or newer \(this is Python 3\.10\)"):
        ds.register(tmp_path / "buf.zarr")


def test_big_endian_pixels_are_stored_little_endian(tmp_path: Path) -> None:
    """Image:buffer holds little-endian values (what Image:format's channel types mean): a v2
    store's big-endian ``>f4`` frames are converted, equal in value."""
    from rayform.importers.zarr._importer import _pixel_rows

    frames = np.arange(2 * 3 * 4 * 3, dtype=">f4").reshape(2, 3, 4, 3)
    rows = _pixel_rows(frames, "img", tmp_path)
    stored = [np.frombuffer(row[0], "<f4").reshape(3, 4, 3) for row in rows.to_pylist()]
    np.testing.assert_array_equal(np.stack(stored), frames)
    assert rows.to_pylist()[0][0] != frames[0].tobytes()  # the bytes did change order
