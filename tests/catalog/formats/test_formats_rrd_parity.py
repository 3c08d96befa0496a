"""What a Rerun script expects of a catalog, on ``.rrd`` inputs written with rerun-sdk: the values
asserted here were read from rerun-sdk 0.41's own catalog server on the same recordings."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from rayform.catalog import Catalog, DatasetEntry

pytest.importorskip("rerun")

S = 1_000_000_000


@pytest.fixture
def two_timelines(catalog: Catalog, tmp_path: Path) -> DatasetEntry:
    """/a on frames 0-2, /b on frames 1-3 with other ``t`` values, /c on frame 4 only (no ``t``),
    /d on ``t`` only."""
    import rerun as rr

    path = tmp_path / "tl.rrd"
    rec = rr.RecordingStream("rayform-tests", recording_id="s1")
    rec.save(path)
    rec.send_columns("/a", indexes=[rr.TimeColumn("frame", sequence=[0, 1, 2]),
                                    rr.TimeColumn("t", duration=[10.0, 11.0, 12.0])],
                     columns=rr.Scalars.columns(scalars=[1.0, 2.0, 3.0]))
    rec.send_columns("/b", indexes=[rr.TimeColumn("frame", sequence=[1, 2, 3]),
                                    rr.TimeColumn("t", duration=[20.0, 5.0, 22.0])],
                     columns=rr.Scalars.columns(scalars=[4.0, 5.0, 6.0]))
    rec.send_columns("/c", indexes=[rr.TimeColumn("frame", sequence=[4])],
                     columns=rr.Scalars.columns(scalars=[7.0]))
    rec.send_columns("/d", indexes=[rr.TimeColumn("t", duration=[30.0])],
                     columns=rr.Scalars.columns(scalars=[8.0]))
    rec.flush()
    rec.disconnect()
    ds = catalog.create_dataset("tl")
    ds.register(path).wait()
    return ds


def _ns(values: list[int | None]) -> list[int | None]:
    return [None if v is None else v * S for v in values]


@pytest.mark.parametrize(("index", "latest", "other", "expected"), [
    ("frame", False, "t", _ns([10, 20, 12, 22, None])),
    ("frame", True, "t", _ns([10, 20, 12, 22, 22])),
    ("t", False, "frame", [2, 0, 1, 2, 1, 3, None]),
    ("t", True, "frame", [2, 2, 2, 2, 2, 3, 3]),
])
def test_reader_includes_the_other_timelines(two_timelines: DatasetEntry, index: str,
                                             latest: bool, other: str,
                                             expected: list[int | None]) -> None:
    table = two_timelines.reader(index, fill_latest_at=latest).to_arrow_table()
    assert table.column_names[:3] == ["rerun_segment_id", index, other]
    values = table.column(other)
    if other == "t":
        values = values.cast("int64")
    assert values.to_pylist() == expected


def test_schema_iterates_rerun_column_descriptors(catalog: Catalog, tmp_path: Path) -> None:
    import rerun as rr

    from rayform.catalog import ComponentColumnDescriptor, IndexColumnDescriptor

    path = tmp_path / "desc.rrd"
    rec = rr.RecordingStream("rayform-tests", recording_id="d1")
    rec.save(path)
    rec.log("/cam", rr.VideoStream(codec=rr.VideoCodec.H264), static=True)
    rec.send_columns("/a", indexes=[rr.TimeColumn("frame", sequence=[0, 1])],
                     columns=rr.Scalars.columns(scalars=[1.0, 2.0]))
    rec.send_columns("/x", indexes=[rr.TimeColumn("frame", sequence=[0])],
                     columns=rr.AnyValues.columns(v=[1.0]))
    rec.flush()
    rec.disconnect()
    ds = catalog.create_dataset("desc")
    ds.register(path).wait()
    schema = ds.schema()
    columns = list(schema)
    assert [type(c) for c in columns[:1]] == [IndexColumnDescriptor]
    assert [(c.name, c.is_static) for c in columns if isinstance(c, IndexColumnDescriptor)] == \
        [("frame", False)]
    by_name = {c.name: c for c in columns if isinstance(c, ComponentColumnDescriptor)}
    scalars = by_name["/a:Scalars:scalars"]
    assert (scalars.entity_path, scalars.component, scalars.archetype, scalars.is_static,
            scalars.is_property) == ("/a", "Scalars:scalars", "rerun.archetypes.Scalars",
                                     False, False)
    codec = by_name["/cam:VideoStream:codec"]
    assert codec.is_static and codec.archetype == "rerun.archetypes.VideoStream"
    any_value = by_name["/x:v"]
    assert (any_value.entity_path, any_value.component, any_value.archetype) == ("/x", "v", None)
    assert [c.name for c in schema] == schema.column_names()
    # Equal when the columns are; a new column makes them differ.
    assert schema == catalog.get_dataset("desc").schema()
    other = catalog.create_dataset("other")
    other.register(path).wait()
    assert other.schema() == schema
    assert ds.filter_contents("/a").schema() != schema


def write_properties(path: Path, recording_id: str, **values: object) -> Path:
    """A recording whose ``/__properties/meta`` holds ``values`` (rr.AnyValues; pass pyarrow
    arrays for types rerun-sdk's per-process type registry would coerce)."""
    import rerun as rr

    rec = rr.RecordingStream("rayform-tests", recording_id=recording_id)
    rec.save(path)
    rec.send_property("meta", rr.AnyValues(**values))  # type: ignore[arg-type]
    rec.send_columns("/a", indexes=[rr.TimeColumn("frame", sequence=[0])],
                     columns=rr.Scalars.columns(scalars=[1.0]))
    rec.flush()
    rec.disconnect()
    return path


def test_rrd_properties_keep_their_arrow_type(catalog: Catalog, tmp_path: Path) -> None:
    ds = catalog.create_dataset("props")
    ds.register(write_properties(tmp_path / "p.rrd", "p1", test=[1.0, 2.0, 3.0], n=3,
                                 ratio=0.5, name="x")).wait()
    table = ds.segment_table().to_arrow_table()
    assert table.schema.field("property:meta:test").type == pa.list_(pa.float64())
    assert table.column("property:meta:test").to_pylist() == [[1.0, 2.0, 3.0]]
    assert table.schema.field("property:meta:n").type == pa.int64()
    assert table.schema.field("property:meta:ratio").type == pa.float64()
    assert table.schema.field("property:RecordingInfo:start_time").type == pa.int64()
    sql = catalog.sql('SELECT "property:meta:n" * 2 AS n2, "property:meta:ratio" + 1 AS r, '
                      '"property:meta:test"[2] AS second FROM props.segments').to_arrow_table()
    assert sql.to_pylist() == [{"n2": 6, "r": 1.5, "second": 2.0}]


def test_one_and_several_values_merge_to_a_list(catalog: Catalog, tmp_path: Path) -> None:
    ds = catalog.create_dataset("props")
    ds.register([write_properties(tmp_path / "a.rrd", "a", test=[1.0]),
                 write_properties(tmp_path / "b.rrd", "b", test=[1.0, 2.0])]).wait()
    ds.register(write_properties(tmp_path / "c.rrd", "c",
                                 test=pa.array([4], pa.int64()))).wait()  # int64 widens
    table = ds.segment_table().to_arrow_table().sort_by("rerun_segment_id")
    assert str(table.schema.field("property:meta:test").type) == "list<item: double>"
    assert table.column("property:meta:test").to_pylist() == [[1.0], [1.0, 2.0], [4.0]]


def test_conflicting_property_types_are_refused(catalog: Catalog, tmp_path: Path) -> None:
    from rayform.errors import SchemaConflictError

    ds = catalog.create_dataset("props")
    ds.register(write_properties(tmp_path / "a.rrd", "a", n=3)).wait()
    before = ds.segment_table().to_arrow_table()
    with pytest.raises(SchemaConflictError, match=r"property 'meta:n'.*schema") as info:
        ds.register(write_properties(tmp_path / "b.rrd", "b", n=pa.array(["three"]))).wait()
    assert isinstance(info.value, ValueError)
    # Also inside one registration; the segment table has no row of either refused source.
    with pytest.raises(SchemaConflictError, match=r"property 'meta:n'"):
        ds.register([write_properties(tmp_path / "c.rrd", "c", n=4),
                     write_properties(tmp_path / "d.rrd", "d", n=pa.array([True]))]).wait()
    assert ds.refresh().segment_table().to_arrow_table().equals(before)


def test_exported_rrd_keeps_typed_properties(catalog: Catalog, tmp_path: Path) -> None:
    from rayform.exporters import export_rrd

    ds = catalog.create_dataset("props")
    ds.register(write_properties(tmp_path / "p.rrd", "p1", test=[1.0, 2.0, 3.0], n=3)).wait()
    export_rrd(ds, "p1", tmp_path / "out.rrd")
    again = catalog.create_dataset("again")
    again.register(tmp_path / "out.rrd").wait()
    row = again.segment_table().to_arrow_table().to_pylist()[0]
    assert row["property:meta:test"] == [1.0, 2.0, 3.0] and row["property:meta:n"] == 3
