"""Large catalogs: records read only when used, views over every segment carry no filter."""

from __future__ import annotations

from pathlib import Path

import pytest
from recording_factories import RecordingFactory

import rayform
from rayform.catalog import Catalog, DatasetEntry, _snapshot
from rayform.catalog._snapshot import RECORD, SegmentIndex, clear_cache


def _fresh_index(catalog: Catalog) -> SegmentIndex:
    clear_cache()
    entry = Catalog.open(catalog.url).get_dataset("robots")
    entry.segment_ids()
    return entry._snapshot.index  # type: ignore[union-attr]


def test_opening_reads_the_records_only_when_one_is_needed(catalog: Catalog,
                                                           robots: DatasetEntry) -> None:
    index = _fresh_index(catalog)
    assert RECORD not in index._table.column_names, "records stay on disk when opening"
    ranges = Catalog.open(catalog.url).get_dataset("robots").index_ranges_arrow()
    assert ranges.num_rows == 3 and RECORD not in index._table.column_names
    record = index.record("ep1")
    assert record is not None and record.segment_id == "ep1"
    assert index.table.column(RECORD).length() == 3
    assert index.record("ep1") == robots.segment_record("ep1")


def test_a_damaged_record_column_is_reported_when_read(catalog: Catalog, robots: DatasetEntry,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    index = _fresh_index(catalog)

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("truncated")

    monkeypatch.setattr(_snapshot.feather, "read_table", broken)
    with pytest.raises(rayform.errors.CorruptMetadataError, match="segment records"):
        index.record("ep0")


def test_a_filter_naming_every_segment_is_no_filter(robots: DatasetEntry) -> None:
    ids = robots.segment_ids()
    everything = robots.filter_segments([*ids, ids[0]])
    assert everything._segment_filter is None
    assert everything.segment_ids() == ids
    some = robots.filter_segments(ids[:2])
    assert some.segment_ids() == ids[:2]
    assert some.filter_segments(ids).segment_ids() == ids[:2], "a narrower view stays narrow"


def test_a_slice_validates_only_the_records_it_keeps(tmp_path: Path, catalog: Catalog,
                                                     recording_factory: RecordingFactory,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ds = catalog.create_dataset("many")
    ds.register([recording_factory(f"s{i}", seed=i, properties={"task": f"t{i % 3}"})
                 for i in range(6)]).wait()
    clear_cache()
    asked: list[str] = []
    original = SegmentIndex.record

    def counting(self: SegmentIndex, segment_id: str) -> object:
        asked.append(segment_id)
        return original(self, segment_id)

    monkeypatch.setattr(SegmentIndex, "record", counting)
    client = rayform.Client(catalog.url)
    made = client.slices.create("many", where='"property:task" = $t', params={"t": "t1"})
    assert made.segment_ids == ["s1", "s4"]
    assert sorted(set(asked)) == ["s1", "s4"]
