"""Bad input: each case raises a specific rayform.errors exception with a helpful message and
leaves the catalog directory byte-for-byte unchanged."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from recording_factories import RecordingFactory, disk_state

import rayform
from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._snapshot import clear_cache
from rayform.errors import (
    CatalogNotFoundError,
    ColumnNotFoundError,
    ConfigError,
    CorruptMetadataError,
    CorruptRecordingError,
    EntryExistsError,
    EntryNotFoundError,
    FormatError,
    InvalidNameError,
    QueryError,
    RayformError,
    SchemaConflictError,
    SegmentNotFoundError,
    SourceNotFoundError,
    UnknownFormatError,
)
from rayform.recording._file import HEADER_KEY

Guard = Callable[[Path], AbstractContextManager[None]]


@pytest.fixture
def root(robots: DatasetEntry) -> Path:
    return Path(robots.catalog.url)


def _rewrite_header(src: Path, dest: Path, edit: Callable[[dict[str, object]], None]) -> Path:
    """Copy a recording with its JSON header edited (a crafted or damaged file), as a format
    version 1 file (no checksum), so that the edit itself is what registration meets."""
    reader = pa.ipc.open_file(pa.memory_map(str(src), "r"))
    table = reader.read_all()
    header = json.loads(table.schema.metadata[HEADER_KEY])
    header.pop("content_sha256")
    header["format_version"] = 1
    edit(header)
    schema = table.schema.with_metadata({HEADER_KEY: json.dumps(header).encode()})
    with pa.OSFile(str(dest), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        writer.write_table(table.replace_schema_metadata(schema.metadata))
    return dest


def test_missing_file(robots: DatasetEntry, root: Path, recording_factory: RecordingFactory,
                      disk_unchanged: Guard, tmp_path: Path) -> None:
    good = recording_factory("new")
    missing = tmp_path / "nope.rfr"
    with disk_unchanged(root), pytest.raises(SourceNotFoundError, match=r"nope\.rfr: no such file"):
        robots.register([good, missing])  # the good file is not stored either
    assert robots.refresh().segment_ids() == ["ep0", "ep1", "ep2"]


def test_unknown_format(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                        tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a recording\n")
    with disk_unchanged(root), pytest.raises(UnknownFormatError,
                                             match=r"notes\.txt: not a recording format.*"
                                                   r"RecordingWriter"):
        robots.register(text)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    # An importer for folder formats may claim the folder and explain what it lacks.
    with disk_unchanged(root), pytest.raises(FormatError, match=r"empty_dir"):
        robots.register(empty)


@pytest.mark.parametrize(("column", "values", "message"), [
    ("/joints/position", np.zeros((3, 7), np.float32),
     r"column '/joints/position:Scalars:scalars' has type list<item: float> but the dataset's "
     r"schema holds list<item: double>"),
    ("/gripper", np.zeros(3, np.int64), r"column '/gripper:Scalars:scalars'"),
])
def test_column_type_conflict(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                              tmp_path: Path, column: str, values: np.ndarray,
                              message: str) -> None:
    path = tmp_path / "conflict.rfr"
    with rayform.RecordingWriter(path, recording_id="conflict") as rec:
        rec.log_scalars(column, timelines={"frame_index": [0, 1, 2]}, values=values)
    with disk_unchanged(root), pytest.raises(SchemaConflictError, match=message) as info:
        robots.register(path)
    assert "conflict.rfr" in str(info.value)


def test_timeline_kind_conflict(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                                tmp_path: Path) -> None:
    path = tmp_path / "kind.rfr"
    with rayform.RecordingWriter(path, recording_id="kind") as rec:
        rec.log_scalars("/x", timelines={"frame_index": np.array([1], "datetime64[ns]")},
                        values=[1.0])
    with disk_unchanged(root), pytest.raises(SchemaConflictError,
                                             match=r"timeline 'frame_index' is a timestamp "
                                                   r"timeline here but a sequence"):
        robots.register(path)


def test_conflict_inside_one_registration(catalog: Catalog, disk_unchanged: Guard,
                                          tmp_path: Path) -> None:
    ds = catalog.create_dataset("d")
    paths = []
    for i, dtype in enumerate([np.float64, np.int32]):
        paths.append(tmp_path / f"{i}.rfr")
        with rayform.RecordingWriter(paths[-1], recording_id=f"s{i}") as rec:
            rec.log_scalars("/x", timelines={"t": [0]}, values=np.array([1], dtype))
    with disk_unchanged(Path(catalog.url)), pytest.raises(SchemaConflictError, match=r"'/x:"):
        ds.register(paths)


def test_malformed_sql_changes_nothing(robots: DatasetEntry, root: Path,
                                       disk_unchanged: Guard) -> None:
    with disk_unchanged(root), pytest.raises(QueryError, match=r"SELEC"):
        robots.catalog.sql("SELEC 1")


def test_unknown_dataset_table_and_segment(robots: DatasetEntry, root: Path,
                                           disk_unchanged: Guard) -> None:
    catalog = robots.catalog
    with disk_unchanged(root):
        with pytest.raises(EntryNotFoundError, match=r"no dataset 'robot'; datasets: \['robots'\]"):
            catalog.get_dataset("robot")
        with pytest.raises(EntryNotFoundError, match=r"no table 'robots'"):
            catalog.get_table("robots")
        with pytest.raises(SegmentNotFoundError, match=r"no segment 'ep9'; see segment_ids"):
            robots.segment_record("ep9")
        with pytest.raises(SegmentNotFoundError, match=r"'ep9'"):
            robots.open_segment("ep9")
        with pytest.raises(SegmentNotFoundError, match=r"segment 'ep9' is not in the dataset"):
            robots.unregister(segments_to_drop=["ep0", "ep9"])
        with pytest.raises(SegmentNotFoundError, match=r"'ep0'"):
            robots.filter_segments(["ep1"]).segment_record("ep0")
        with pytest.raises(ColumnNotFoundError, match=r"segment 'ep0' has no column '/nope:X'"):
            robots.open_segment("ep0").column("/nope:X", "frame_index")
        with pytest.raises(EntryExistsError, match=r"dataset 'robots' already exists.*exist_ok"):
            catalog.create_dataset("robots")
        with pytest.raises(EntryExistsError, match=r"'robots' already exists as a dataset"):
            catalog.create_table("robots", pa.schema([("x", pa.int64())]))
    assert robots.refresh().segment_ids() == ["ep0", "ep1", "ep2"]


BAD_NAMES = ["../evil", "a/b", "a\\b", "..", "x/../../y", "/abs", "a..b", ""]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_never_reach_outside(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                                   recording_factory: RecordingFactory, tmp_path: Path,
                                   name: str) -> None:
    catalog = robots.catalog
    source = recording_factory("fine")
    outside = disk_state(tmp_path)
    with disk_unchanged(root):
        with pytest.raises(InvalidNameError, match=r"entry name|non-empty"):
            catalog.create_dataset(name)
        with pytest.raises(InvalidNameError, match=r"entry name|non-empty"):
            catalog.create_table(name, pa.schema([("x", pa.int64())]))
        with pytest.raises(InvalidNameError):
            catalog.get_dataset(name)
        with pytest.raises(InvalidNameError, match=r"layer name"):
            robots.register(source, layer_name=name)
        with pytest.raises(InvalidNameError, match=r"segment id"):
            robots.unregister(segments_to_drop=name)
        with pytest.raises(InvalidNameError, match=r"segment id"):
            rayform.RecordingWriter(tmp_path / "w.rfr", recording_id=name)
    assert disk_state(tmp_path) == outside


@pytest.mark.parametrize("recording_id", ["../../evil", "a/b", "c\\d", ".."])
def test_crafted_recording_id_is_refused(robots: DatasetEntry, root: Path,
                                         disk_unchanged: Guard, tmp_path: Path,
                                         recording_factory: RecordingFactory,
                                         recording_id: str) -> None:
    def edit(header: dict[str, object]) -> None:
        header["recording_id"] = recording_id

    crafted = _rewrite_header(recording_factory("ok"), tmp_path / "crafted.rfr", edit)
    with disk_unchanged(root), pytest.raises(InvalidNameError, match=r"crafted\.rfr.*segment id"):
        robots.register(crafted)


def _truncate(path: Path, size: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:size])


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.3, 0.5, 0.9, 0.999])
def test_truncated_recording(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                             recording_factory: RecordingFactory, fraction: float) -> None:
    path = recording_factory("trunc", filename="trunc.rfr")
    _truncate(path, max(6, int(path.stat().st_size * fraction)))
    with disk_unchanged(root), pytest.raises(CorruptRecordingError,
                                             match=r"trunc\.rfr: not a readable rayform "
                                                   r"recording \(truncated or damaged"):
        robots.register(path)


def test_damaged_recording_bytes(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                                 recording_factory: RecordingFactory) -> None:
    path = recording_factory("bent", filename="bent.rfr")
    data = bytearray(path.read_bytes())
    data[-20:-10] = b"\xff" * 10  # inside the footer
    path.write_bytes(bytes(data))
    with disk_unchanged(root), pytest.raises(CorruptRecordingError, match=r"bent\.rfr"):
        robots.register(path)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda h: h.update(format_version=7), r"format_version 7 is not supported.*upgrade"),
    (lambda h: h.pop("timelines"), r"invalid recording header: key timelines: Field required"),
    (lambda h: h.update(entities={"/x": {"start": 0, "stop": 10**9, "components": []}}),
     r"entity '/x' rows \[0, 1000000000\) outside the table"),
    (lambda h: h["entities"]["/gripper"].update(components=["Scalars:nope"]),
     r"lists component 'Scalars:nope' but the column is missing"),
    (lambda h: h.update(timelines={"frame_index": "sequence", "ghost": "sequence"}),
     r"header names timeline 'ghost' but no column"),
])
def test_bad_recording_header(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                              tmp_path: Path, recording_factory: RecordingFactory,
                              edit: Callable[[dict[str, object]], None], message: str) -> None:
    path = _rewrite_header(recording_factory("hdr"), tmp_path / "hdr.rfr", edit)
    with disk_unchanged(root), pytest.raises(CorruptRecordingError, match=message):
        robots.register(path)


def test_arrow_file_without_header(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                                   tmp_path: Path) -> None:
    path = tmp_path / "plain.arrow"
    table = pa.table({"x": [1, 2]})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    with disk_unchanged(root), pytest.raises(CorruptRecordingError,
                                             match=r"plain\.arrow: Arrow file has no "
                                                   r"'rayform:recording' header"):
        robots.register(path)


def test_missing_or_damaged_asset(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                                  tmp_path: Path) -> None:
    path = tmp_path / "vid.rfr"
    with rayform.RecordingWriter(path, recording_id="vid") as rec:
        digest = rec.log_video_asset("/cam", b"mp4-bytes" * 10, timelines={"t": [0]},
                                     frame_timestamps_ns=[0], is_keyframe=[True])
    asset = tmp_path / "vid.rfr.assets" / digest
    asset.write_bytes(b"tampered")
    with disk_unchanged(root), pytest.raises(CorruptRecordingError, match=r"damaged asset"):
        robots.register(path)
    asset.unlink()
    with disk_unchanged(root), pytest.raises(CorruptRecordingError,
                                             match=rf"asset {digest} \(video/mp4\) is missing"):
        robots.register(path)


def test_bad_register_options(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                              recording_factory: RecordingFactory) -> None:
    path = recording_factory("opt")
    with disk_unchanged(root):
        with pytest.raises(ConfigError, match=r"on_duplicate='overwrite' is not one of"):
            robots.register(path, on_duplicate="overwrite")
        with pytest.raises(ConfigError, match=r"2 layer names for 1 sources"):
            robots.register(path, layer_name=["a", "b"])
        with pytest.raises(ValueError, match="no data sources to register"):
            robots.register([])
        skipped = recording_factory("ep0")
        assert robots.register(skipped, on_duplicate="skip").wait().segment_ids == ["ep0"]
        with pytest.raises(EntryNotFoundError, match=r"no snapshot 0"):
            robots.at_version(0)


# ------------------------------------------------------------------- damaged metadata
def test_missing_catalog(tmp_path: Path) -> None:
    with pytest.raises(CatalogNotFoundError, match=r"directory does not exist.*Catalog\.create"):
        Catalog.open(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "plain").mkdir()
    with pytest.raises(CatalogNotFoundError, match=r"not a rayform catalog \(no catalog\.json\)"):
        Catalog.open(tmp_path / "plain")
    assert list((tmp_path / "plain").iterdir()) == []


def _versions(root: Path, name: str) -> list[Path]:
    return sorted((root / "entries" / name / "versions").glob("[0-9]*.json"))


@pytest.mark.parametrize(("target", "content", "message"), [
    ("catalog.json", b'{"format": "rayform-catal', r"catalog\.json: metadata is not valid JSON"),
    ("catalog.json", b'{"format": "other-tool", "format_version": 1}',
     r"catalog\.json: not a rayform-catalog file \(format='other-tool'\)"),
    ("catalog.json", b'["a list"]', r"catalog\.json: metadata must be a JSON object"),
    ("catalog.json", b'{"format": "rayform-catalog", "format_version": 9, "created_at_ns": 1}',
     r"catalog\.json: format_version 9 is not supported.*upgrade rayform"),
    ("catalog.json", b'{"format": "rayform-catalog", "format_version": 1}',
     r"catalog\.json: invalid rayform-catalog.*key created_at_ns: Field required"),
    ("entry.json", b"\x00\xff garbage", r"entry\.json: metadata is not valid JSON"),
    ("entry.json", b'{"format": "rayform-entry", "format_version": 1, "id": "x", "name": "robots",'
                   b' "kind": "video", "created_at_ns": 1}',
     r"entry\.json: invalid rayform-entry.*key kind"),
    ("snapshot", b"", r"000000000001\.json: metadata is not valid JSON"),
    ("snapshot", b'{"format": "rayform-dataset-version", "format_version": 1, "version": "1"}',
     r"000000000001\.json: invalid rayform-dataset-version \(format_version 1\): key version"),
    ("snapshot", b'{"format": "rayform-table-version", "format_version": 1}',
     r"000000000001\.json: not a rayform-dataset-version file"),
])
def test_damaged_metadata_names_the_file(robots: DatasetEntry, root: Path,
                                         disk_unchanged: Guard, target: str, content: bytes,
                                         message: str) -> None:
    path = {"catalog.json": root / "catalog.json",
            "entry.json": root / "entries" / "robots" / "entry.json",
            "snapshot": _versions(root, "robots")[0]}[target]
    path.chmod(0o644)
    path.write_bytes(content)
    with disk_unchanged(root):
        with pytest.raises(CorruptMetadataError, match=message) as info:
            Catalog.open(root).get_dataset("robots")
        assert str(path) in str(info.value)
        assert isinstance(info.value, RayformError)
        if target != "catalog.json":
            with pytest.raises(CorruptMetadataError, match=message):
                Catalog.open(root).sql("SELECT * FROM robots.segments").to_arrow_table()


def _index_object(root: Path) -> Path:
    header = json.loads(_versions(root, "robots")[-1].read_bytes())
    digest = str(header["segment_index"])
    return root / "objects" / digest[:2] / digest


@pytest.mark.parametrize("damage", ["truncate", "delete", "foreign", "bad_record"])
def test_damaged_segment_index(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                               damage: str) -> None:
    path = _index_object(root)
    path.chmod(0o644)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
        message = r"segment index is not a readable Arrow IPC file"
    elif damage == "delete":
        path.unlink()
        message = r"its segment index object [0-9a-f]{64} is missing"
    elif damage == "foreign":
        table = pa.table({"x": [1, 2, 3]})
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        message = r"not a rayform segment index"
    else:
        table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
        records = table.column("record").to_pylist()
        records[1] = json.dumps({**json.loads(records[1]), "num_rows": "many"})
        table = table.set_column(table.schema.get_field_index("record"), "record",
                                 pa.array(records, pa.string()))
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        message = r"segment 'ep1': invalid segment record: key num_rows"
    clear_cache()  # another process would not have the object cached
    with disk_unchanged(root):
        ds = Catalog.open(root).get_dataset("robots")  # the header alone is fine
        with pytest.raises(CorruptMetadataError, match=message) as info:
            [ds.segment_record(s) for s in ds.segment_ids()]
        assert "000000000001.json" in str(info.value)
