"""Crafted local catalogs: no name or digest read from metadata may reach outside the catalog.

Every metadata field that names a file (a snapshot's segment index, a table's objects, a layer's
object and assets in the segment index, a slice's objects) and every name (entry files, folders
below ``entries/``) is filled with an absolute path, a ``../`` path, a NUL and an overlong name.
Each case raises ``CorruptMetadataError`` naming the field, and nothing on disk changes: not the
catalog, and not a victim file beside it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

import rayform
from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._snapshot import clear_cache
from rayform.errors import CorruptMetadataError, InvalidNameError
from rayform.storage import LocalStore, ObjectCache, object_key

Guard = Callable[[Path], AbstractContextManager[None]]
PAYLOADS = ["absolute", "dotdot", "nul", "overlong", "uppercase"]


@pytest.fixture
def root(robots: DatasetEntry) -> Path:
    return Path(robots.catalog.url)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file beside the catalog that crafted metadata points at; it must survive untouched."""
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    return path


def payload(kind: str, victim: Path, root: Path) -> str:
    """A crafted 'digest' of the given kind, aimed at ``victim`` where it is a path."""
    return {
        "absolute": str(victim),
        "dotdot": os.path.relpath(victim, root / "objects" / "ab"),
        "nul": "a" * 32 + "\x00" + "b" * 31,
        "overlong": "c" * 300,
        "uppercase": "D" * 64,
    }[kind]


def _newest(root: Path, name: str) -> Path:
    return sorted((root / "entries" / name / "versions").glob("*.json"))[-1]


def _edit_json(path: Path, edit: Callable[[dict[str, object]], None]) -> None:
    data = json.loads(path.read_bytes())
    edit(data)
    path.chmod(0o644)
    path.write_text(json.dumps(data))


def _store_object(root: Path, table: pa.Table) -> str:
    """Write ``table`` as an Arrow IPC object of the catalog; returns its digest."""
    tmp = root.parent / "crafted.arrow"
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    digest, _ = LocalStore(root).put_object(tmp)
    tmp.unlink()
    return digest


def _craft_index(root: Path, edit: Callable[[dict[str, object], list[str]], None]) -> None:
    """Rewrite the newest snapshot's segment index with ep0's record (and objects) edited."""
    snapshot = _newest(root, "robots")
    digest = json.loads(snapshot.read_bytes())["segment_index"]
    table = pa.ipc.open_file(pa.memory_map(str(root / object_key(digest)), "r")).read_all()
    records = table.column("record").to_pylist()
    objects = table.column("objects").to_pylist()
    record = json.loads(records[0])
    edit(record, objects[0])
    records[0] = json.dumps(record)
    table = table.set_column(table.schema.get_field_index("record"), "record",
                             pa.array(records, pa.string()))
    table = table.set_column(table.schema.get_field_index("objects"), "objects",
                             pa.array(objects, pa.list_(pa.string())))
    crafted = _store_object(root, table)
    _edit_json(snapshot, lambda d: d.update(segment_index=crafted))


@pytest.mark.parametrize("kind", PAYLOADS)
def test_snapshot_segment_index_must_be_a_digest(root: Path, victim: Path, tmp_path: Path,
                                                 disk_unchanged: Guard, kind: str) -> None:
    _edit_json(_newest(root, "robots"), lambda d: d.update(segment_index=payload(kind, victim, root)))
    clear_cache()
    with disk_unchanged(tmp_path), pytest.raises(CorruptMetadataError) as info:
        Catalog.open(root).get_dataset("robots").segment_ids()
    assert "key segment_index" in str(info.value)
    assert "000000000001.json" in str(info.value)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("kind", PAYLOADS)
def test_layer_object_in_the_segment_index_must_be_a_digest(
        root: Path, victim: Path, tmp_path: Path, disk_unchanged: Guard, kind: str) -> None:
    bad = payload(kind, victim, root)

    def edit(record: dict[str, object], objects: list[str]) -> None:
        layers = record["layers"]
        assert isinstance(layers, dict)
        layers["base"]["object"] = bad
        objects[0] = bad

    _craft_index(root, edit)
    clear_cache()
    with disk_unchanged(tmp_path), pytest.raises(CorruptMetadataError,
                                                 match="is not a content digest") as info:
        Catalog.open(root).get_dataset("robots").open_segment("ep0").column(
            "/joints/position:Scalars:scalars", "frame_index")
    assert "segment index" in str(info.value)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("kind", PAYLOADS)
def test_layer_record_object_and_assets_must_be_digests(
        root: Path, victim: Path, tmp_path: Path, disk_unchanged: Guard, kind: str) -> None:
    """The record alone is crafted (the index's object column still looks right)."""
    bad = payload(kind, victim, root)

    def edit(record: dict[str, object], objects: list[str]) -> None:
        layer = record["layers"]["base"]  # type: ignore[index]
        layer["assets"] = {bad: 9}
        layer["object"] = bad

    _craft_index(root, edit)
    clear_cache()
    ds = Catalog.open(root).get_dataset("robots")
    with disk_unchanged(tmp_path), pytest.raises(CorruptMetadataError) as info:
        ds.open_segment("ep0").column("/joints/position:Scalars:scalars", "frame_index")
    message = str(info.value)
    assert "segment 'ep0': invalid segment record" in message
    assert "key layers.base.object" in message
    assert "layers.base.assets" in message
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("kind", PAYLOADS)
def test_table_objects_must_be_digests(catalog: Catalog, victim: Path, tmp_path: Path,
                                       disk_unchanged: Guard, kind: str) -> None:
    table = catalog.create_table("notes", pa.schema([("x", pa.int64())]))
    table.append(x=[1, 2])
    root = Path(catalog.url)
    _edit_json(_newest(root, "notes"),
               lambda d: d.update(objects=[payload(kind, victim, root)]))
    with disk_unchanged(tmp_path), pytest.raises(CorruptMetadataError) as info:
        Catalog.open(root).get_table("notes").to_arrow()
    assert "key objects.0" in str(info.value)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("kind", PAYLOADS)
def test_slice_objects_must_be_digests(robots: DatasetEntry, root: Path, victim: Path,
                                       tmp_path: Path, disk_unchanged: Guard, kind: str) -> None:
    slice_ = rayform.Client(robots.catalog).slices.create("robots", segments=["ep0"])
    path = root / "slices" / f"{slice_.id}.json"

    def edit(d: dict[str, object]) -> None:
        d["segments"][0]["objects"] = [payload(kind, victim, root)]  # type: ignore[index]

    _edit_json(path, edit)
    with disk_unchanged(tmp_path), pytest.raises(CorruptMetadataError) as info:
        rayform.Client(Catalog.open(root)).slices.get(slice_.id)
    assert "key segments.0.objects.0" in str(info.value)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("name", ["../../x", "/abs/x", "a\x00b", "n" * 300])
def test_entry_file_with_a_crafted_name_is_refused(root: Path, tmp_path: Path,
                                                   disk_unchanged: Guard, name: str,
                                                   recording_factory: RecordingFactory) -> None:
    recording = recording_factory("new", seed=5)
    _edit_json(root / "entries" / "robots" / "entry.json", lambda d: d.update(name=name))
    with disk_unchanged(tmp_path):
        with pytest.raises(CorruptMetadataError, match=r"entry\.json: invalid rayform-entry.*key name"):
            Catalog.open(root).get_dataset("robots").register(recording)
        with pytest.raises(CorruptMetadataError, match="key name"):
            Catalog.open(root).create_dataset("robots", exist_ok=True)


def test_entry_file_naming_another_entry_is_refused(root: Path, tmp_path: Path,
                                                    disk_unchanged: Guard) -> None:
    _edit_json(root / "entries" / "robots" / "entry.json", lambda d: d.update(name="other"))
    with disk_unchanged(tmp_path), pytest.raises(
            CorruptMetadataError, match=r"entry file names 'other' but lives in folder 'robots'"):
        Catalog.open(root).get_dataset("robots")


def test_entry_folder_with_an_invalid_name_is_refused(root: Path, tmp_path: Path,
                                                      disk_unchanged: Guard) -> None:
    (root / "entries" / ("x" * 200)).mkdir()
    with disk_unchanged(tmp_path), pytest.raises(
            CorruptMetadataError, match=r"entries: folder 'x+' is not a valid entry name"):
        Catalog.open(root).dataset_names()


@pytest.mark.parametrize("key", ["../outside", "/etc/passwd", "entries/../../x", "a\x00b",
                                 "entries/" + "y" * 300, "entries//x"])
def test_store_paths_never_leave_their_root(root: Path, tmp_path: Path, key: str,
                                            disk_unchanged: Guard) -> None:
    """Defence in depth: the one place that builds paths refuses keys leaving the root."""
    store = LocalStore(root)
    cache = ObjectCache(tmp_path / "cache")
    with disk_unchanged(tmp_path):
        for call in (lambda: store.read_bytes(key), lambda: store.exists(key),
                     lambda: store.create_exclusive(key, b"x"), lambda: store.list_names(key)):
            with pytest.raises(InvalidNameError, match="must stay inside"):
                call()
        for digest_call in (lambda: store.object_path(key), lambda: cache.cached(key),
                            lambda: cache.path_of(key)):
            with pytest.raises(CorruptMetadataError, match="is not a content digest"):
                digest_call()
