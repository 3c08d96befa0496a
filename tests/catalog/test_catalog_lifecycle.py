"""A dataset's lifecycle: delete, rename, recreate and unregister, each one atomic commit that
keeps earlier snapshots readable (slices pinned to them) until gc reclaims what nothing names."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

import rayform
from rayform.catalog import Catalog, DatasetEntry, check_catalog, gc_catalog
from rayform.catalog._lifecycle import dataset_state
from rayform.catalog._metadata import DatasetVersion, RenameSource
from rayform.catalog._versions import latest_version_number, load_version, version_key
from rayform.errors import ConfigError, EntryExistsError, EntryNotFoundError
from rayform.storage._documents import dump_model

JOINTS = "/joints/position:Scalars:scalars"


def _rows(view: object) -> list[object]:
    return view.reader("frame_index").to_arrow_table().column(JOINTS).to_pylist()  # type: ignore[attr-defined]


def test_delete_hides_the_dataset_and_keeps_pinned_slices_until_gc(
        catalog: Catalog, robots: DatasetEntry) -> None:
    client = rayform.Client(catalog)
    pinned = client.slices.create("robots", segments=["ep0"])
    expected = _rows(pinned.view())
    robots.delete()
    assert catalog.dataset_names() == []
    with pytest.raises(EntryNotFoundError, match=r"'robots' was deleted \(snapshot 2\)"):
        catalog.get_dataset("robots")
    with pytest.raises(EntryNotFoundError, match="was deleted"):
        robots.delete()
    with pytest.raises(EntryNotFoundError, match="was deleted"):  # a stale handle cannot write
        robots.unregister(segments_to_drop="ep1")
    # the slice reads the snapshot it pinned, before and after gc
    assert _rows(client.slices.get(pinned.id).view()) == expected
    report = gc_catalog(catalog, grace_s=0)
    assert report.removed_objects >= 2  # ep1's and ep2's recordings: nothing names them now
    assert check_catalog(catalog).ok
    assert _rows(client.slices.get(pinned.id).view()) == expected


def test_gc_after_delete_without_slices_reclaims_every_recording(
        catalog: Catalog, robots: DatasetEntry) -> None:
    objects = Path(catalog.url) / "objects"
    stored = {p.name for p in objects.rglob("*") if p.is_file()}
    catalog.delete_dataset("robots")
    gc_catalog(catalog, grace_s=0)
    left = {p.name for p in objects.rglob("*") if p.is_file()}
    assert len(left) == 1 and not left & stored  # only the tombstone's (empty) segment index
    assert check_catalog(catalog).ok


def test_a_deleted_name_can_be_used_again(catalog: Catalog, robots: DatasetEntry,
                                          recording_factory: RecordingFactory) -> None:
    pinned = rayform.Client(catalog).slices.create("robots", segments=["ep1"])
    expected = _rows(pinned.view())
    robots.delete()
    again = catalog.create_dataset("robots")
    assert again.segment_ids() == [] and again.snapshot_version == 3
    again.register(recording_factory("fresh", seed=9)).wait()
    assert catalog.get_dataset("robots").segment_ids() == ["fresh"]
    assert _rows(pinned.view()) == expected  # the old dataset's snapshot, unchanged
    with pytest.raises(EntryExistsError, match="already exists"):
        catalog.create_dataset("robots")


def test_rename_carries_segments_and_keeps_old_slices(catalog: Catalog, robots: DatasetEntry,
                                                      recording_factory: RecordingFactory) -> None:
    pinned = rayform.Client(catalog).slices.create("robots", segments=["ep2"])
    expected, table = _rows(pinned.view()), robots.segment_table_arrow()
    ident = robots.id
    robots.set_name("fleet")
    assert robots.name == "fleet" and robots.id == ident
    assert catalog.dataset_names() == ["fleet"]
    with pytest.raises(EntryNotFoundError, match="renamed to 'fleet'"):
        catalog.get_dataset("robots")
    fleet = catalog.get_dataset("fleet")
    assert fleet.id == ident and fleet.segment_table_arrow().equals(table)
    assert _rows(fleet.filter_segments("ep2")) == expected
    assert _rows(pinned.view()) == expected
    fleet.register(recording_factory("ep3", seed=3)).wait()
    assert catalog.sql('SELECT count(*) AS n FROM fleet.segments').to_pylist() == [{"n": 4}]
    # and back: the old name was retired, so it is free
    back = catalog.rename_dataset("fleet", "robots")
    assert back.segment_ids() == ["ep0", "ep1", "ep2", "ep3"]
    assert catalog.dataset_names() == ["robots"]
    gc_catalog(catalog, grace_s=0)
    assert check_catalog(catalog).ok
    assert _rows(pinned.view()) == expected


def test_rename_refuses_a_taken_name(catalog: Catalog, robots: DatasetEntry) -> None:
    catalog.create_dataset("other")
    catalog.create_table("tab", pa.schema([("x", pa.int64())]))
    before = latest_version_number(catalog.store, "robots")
    with pytest.raises(EntryExistsError, match="dataset 'other' already exists"):
        robots.set_name("other")
    with pytest.raises(EntryExistsError, match="exists as a table"):
        robots.set_name("tab")
    with pytest.raises(EntryExistsError, match="already has that name"):
        robots.set_name("robots")
    assert latest_version_number(catalog.store, "robots") == before
    assert sorted(catalog.dataset_names()) == ["other", "robots"]


def test_a_crashed_rename_is_voided_by_the_next_writer(catalog: Catalog,
                                                       robots: DatasetEntry) -> None:
    """A pending snapshot whose commit point never came (the renamer died) reads as absent, and a
    writer settles it first, so a late tombstone can no longer land."""
    store = catalog.store
    header = load_version(store, "robots", 1, DatasetVersion)
    pending = header.model_copy(update={"renamed_from": RenameSource(name="robots", version=2)})
    assert store.create_exclusive(version_key("fleet", 1), dump_model(pending))
    assert catalog.dataset_names() == ["robots"]  # the folder without an entry file is nothing
    assert not dataset_state(store, "fleet").exists
    fleet = catalog.create_dataset("fleet")  # the writer voids the pending rename first
    assert fleet.segment_ids() == [] and fleet.snapshot_version == 2
    assert latest_version_number(store, "robots") == 2  # its slot 2 is taken by a copy
    with pytest.raises(EntryNotFoundError, match="rename that never completed"):
        fleet.at_version(1)
    assert catalog.get_dataset("robots").segment_ids() == ["ep0", "ep1", "ep2"]
    assert check_catalog(catalog).ok


def test_unregister_reports_what_it_removed(catalog: Catalog, robots: DatasetEntry,
                                            recording_factory: RecordingFactory) -> None:
    robots.register(recording_factory("ep0", seed=5), layer_name="extra").wait()
    robots.register(recording_factory("ep1", seed=6), layer_name="extra").wait()
    handle = robots.unregister(layers_to_drop="extra")  # that layer of every segment
    result = handle.wait()
    assert result.layers == {"ep0": ["extra"], "ep1": ["extra"]} and result.segment_ids == []
    assert result.snapshot_version == robots.snapshot_version == 4
    result = robots.unregister(segments_to_drop=["ep0", "ep2"]).wait()
    assert result.segment_ids == ["ep0", "ep2"]
    assert result.layers == {"ep0": ["base"], "ep2": ["base"]}
    assert robots.segment_ids() == ["ep1"]
    assert robots.at_version(4).segment_ids() == ["ep0", "ep1", "ep2"]
    with pytest.raises(ConfigError, match="nothing to drop"):
        robots.unregister(segments_to_drop=[], layers_to_drop=[])


def test_a_rename_racing_registrations_loses_none(catalog: Catalog, robots: DatasetEntry,
                                                  recording_factory: RecordingFactory) -> None:
    """Registrations into the old name either land before the rename (and move with it) or fail
    with EntryNotFoundError: none is lost in between."""
    import threading

    paths = [recording_factory(f"new{i}", seed=10 + i) for i in range(6)]
    landed: list[str] = []
    refused: list[str] = []
    writer = catalog.get_dataset("robots")

    def register_all() -> None:
        for path in paths:
            try:
                landed.extend(writer.register(path).wait().segment_ids)
            except EntryNotFoundError:
                refused.append(path.name)

    thread = threading.Thread(target=register_all)
    thread.start()
    robots.set_name("fleet")
    thread.join()
    assert len(landed) + len(refused) == len(paths)
    fleet = catalog.get_dataset("fleet")
    assert set(fleet.segment_ids()) == {"ep0", "ep1", "ep2", *landed}
    assert catalog.dataset_names() == ["fleet"]
