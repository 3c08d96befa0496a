"""Schema widening across ``.rrd`` segments, as Rerun's catalog does it: compatible schemas merge
at registration, narrower segments read as nulls; incompatible changes are still refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import SchemaConflictError

pytest.importorskip("rerun")

STRUCT_AB = pa.struct([("a", pa.int64()), ("b", pa.float64())])
STRUCT_ABC = pa.struct([("a", pa.int64()), ("b", pa.float64()), ("c", pa.string())])
ITEMS_NON_NULL = pa.list_(pa.field("item", pa.float64(), nullable=False))
ITEMS_NULLABLE = pa.list_(pa.float64())
VECTOR_NON_NULL = pa.list_(pa.field("item", pa.float64(), nullable=False), 2)


def write_columns(path: Path, recording_id: str, values: pa.Array, *, entity: str = "/x",
                  extra: Callable[[Any], None] | None = None) -> Path:
    """A recording with ``values`` (one row per frame) as AnyValues component ``v``."""
    import rerun as rr

    rec = rr.RecordingStream("rayform-tests", recording_id=recording_id)
    rec.save(path)
    rec.send_columns(entity, indexes=[rr.TimeColumn("frame", sequence=range(len(values)))],
                     columns=rr.AnyValues.columns(v=values))
    if extra is not None:
        extra(rec)
    rec.flush()
    rec.disconnect()
    return path


def register_two(catalog: Catalog, tmp_path: Path, first: pa.Array, second: pa.Array
                 ) -> DatasetEntry:
    ds = catalog.create_dataset("widen")
    ds.register(write_columns(tmp_path / "s1.rrd", "s1", first)).wait()
    ds.register(write_columns(tmp_path / "s2.rrd", "s2", second)).wait()
    return ds


def test_struct_missing_a_field_merges_and_reads_null(catalog: Catalog, tmp_path: Path) -> None:
    ds = register_two(catalog, tmp_path,
                      pa.array([{"a": 1, "b": 2.0}] * 2, STRUCT_AB),
                      pa.array([{"a": 3, "b": 4.0, "c": "z"}] * 2, STRUCT_ABC))
    column = ds.schema().field("/x:v")
    assert column.type.value_type.names == ["a", "b", "c"]
    table = ds.reader("frame").to_arrow_table().sort_by("rerun_segment_id")
    rows = table.column("/x:v").to_pylist()
    assert rows[0] == [{"a": 1, "b": 2.0, "c": None}]
    assert rows[-1] == [{"a": 3, "b": 4.0, "c": "z"}]
    # SQL (the entity's table) and the data plane see the dataset's type too.
    sql = catalog.sql('SELECT rerun_segment_id, "/x:v" FROM widen."/x" '
                      "ORDER BY rerun_segment_id").to_arrow_table()
    assert sql.schema.field("/x:v").type == column.type
    assert sql.column("/x:v").to_pylist()[0] == [{"a": 1, "b": 2.0, "c": None}]
    rows_s1 = ds.open_segment("s1").column("/x:v", "frame").values
    assert rows_s1.type == column.type and rows_s1.to_pylist()[0] == [{"a": 1, "b": 2.0, "c": None}]


def test_wider_first_then_narrower_also_merges(catalog: Catalog, tmp_path: Path) -> None:
    ds = register_two(catalog, tmp_path,
                      pa.array([{"a": 3, "b": 4.0, "c": "z"}], STRUCT_ABC),
                      pa.array([{"a": 1, "b": 2.0}], STRUCT_AB))
    assert ds.schema().field("/x:v").type.value_type.names == ["a", "b", "c"]
    values = ds.open_segment("s2").column("/x:v", "frame").values.to_pylist()
    assert values == [[{"a": 1, "b": 2.0, "c": None}]]


def test_non_null_and_nullable_list_items_merge(catalog: Catalog, tmp_path: Path) -> None:
    ds = register_two(catalog, tmp_path,
                      pa.array([[[1.0, 2.0]]], pa.list_(ITEMS_NON_NULL)),
                      pa.array([[[3.0, None]]], pa.list_(ITEMS_NULLABLE)))
    inner = ds.schema().field("/x:v").type.value_type
    assert inner.value_field.nullable
    table = ds.reader("frame").to_arrow_table().sort_by("rerun_segment_id")
    assert table.column("/x:v").to_pylist() == [[[1.0, 2.0]], [[3.0, None]]]


def test_list_of_structs_missing_a_field_merges(catalog: Catalog, tmp_path: Path) -> None:
    ds = register_two(catalog, tmp_path,
                      pa.array([[[{"a": 1, "b": 2.0}]]], pa.list_(pa.list_(STRUCT_AB))),
                      pa.array([[[{"a": 3, "b": 4.0, "c": "z"}]]], pa.list_(pa.list_(STRUCT_ABC))))
    table = ds.reader("frame").to_arrow_table().sort_by("rerun_segment_id")
    assert table.column("/x:v").to_pylist() == [[[{"a": 1, "b": 2.0, "c": None}]],
                                                [[{"a": 3, "b": 4.0, "c": "z"}]]]


def test_one_registration_of_both_merges(catalog: Catalog, tmp_path: Path) -> None:
    ds = catalog.create_dataset("both")
    paths = [write_columns(tmp_path / "s1.rrd", "s1", pa.array([{"a": 1, "b": 2.0}], STRUCT_AB)),
             write_columns(tmp_path / "s2.rrd", "s2",
                           pa.array([{"a": 3, "b": 4.0, "c": "z"}], STRUCT_ABC))]
    assert ds.register(paths).wait().segment_ids == ["s1", "s2"]
    assert ds.schema().field("/x:v").type.value_type.names == ["a", "b", "c"]


def test_dataloader_reads_segments_of_a_widened_column(catalog: Catalog, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset

    ds = register_two(catalog, tmp_path,
                      pa.array([[1.0, 2.0], [3.0, 4.0]], VECTOR_NON_NULL),
                      pa.array([[5.0, 6.0], [7.0, 8.0]], pa.list_(pa.float64(), 2)))
    assert ds.schema().field("/x:v").type == pa.list_(pa.list_(pa.float64(), 2))
    data = RerunMapDataset(DataSource(ds), "frame", {"v": Field("/x:v", NumericDecoder())})
    values = sorted(tuple(data[i]["v"].reshape(-1).tolist()) for i in range(len(data)))
    assert values == [(1.0, 2.0), (3.0, 4.0), (5.0, 6.0), (7.0, 8.0)]


def test_exporters_see_the_merged_type(catalog: Catalog, tmp_path: Path) -> None:
    from rayform.exporters import export_rrd

    ds = register_two(catalog, tmp_path,
                      pa.array([{"a": 1, "b": 2.0}], STRUCT_AB),
                      pa.array([{"a": 3, "b": 4.0, "c": "z"}], STRUCT_ABC))
    export_rrd(ds, "s1", tmp_path / "s1-out.rrd")
    again = catalog.create_dataset("again")
    again.register(tmp_path / "s1-out.rrd").wait()
    assert again.schema().field("/x:v").type.value_type.names == ["a", "b", "c"]
    rows = again.reader("frame").to_arrow_table().column("/x:v").to_pylist()
    assert rows == [[{"a": 1, "b": 2.0, "c": None}]]


@pytest.mark.parametrize(("first", "second"), [
    (pa.array([1.0], pa.float32()), pa.array([1.0], pa.float64())),
    (pa.array([1], pa.int32()), pa.array([1], pa.int64())),
    (pa.array([[1.0, 2.0, 3.0]], pa.list_(pa.float32(), 3)),
     pa.array([[1.0, 2.0, 3.0, 4.0]], pa.list_(pa.float32(), 4))),
    (pa.array(["a"]).dictionary_encode(), pa.array([1]).dictionary_encode()),
    (pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
     pa.array([[("k", 1.0)]], pa.map_(pa.string(), pa.float64()))),
    (pa.array([{"a": 1, "b": 2.0}], STRUCT_AB),
     pa.array([{"a": 1.5, "b": 2.0}], pa.struct([("a", pa.float64()), ("b", pa.float64())]))),
], ids=["float-double", "int32-int64", "fixed-size-length", "dictionary-values", "map-values",
        "struct-field-type"])
def test_incompatible_changes_are_refused(catalog: Catalog, tmp_path: Path, first: pa.Array,
                                          second: pa.Array) -> None:
    ds = catalog.create_dataset("strict")
    ds.register(write_columns(tmp_path / "s1.rrd", "s1", first)).wait()
    with pytest.raises(SchemaConflictError, match=r"schema.*'/x:v'|'/x:v'.*schema") as info:
        ds.register(write_columns(tmp_path / "s2.rrd", "s2", second)).wait()
    assert isinstance(info.value, ValueError)
    assert ds.refresh().segment_ids() == ["s1"]


def test_schema_gaps_and_cli_show_which_segments_lack_what(
        catalog: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import rerun as rr

    from rayform.catalog import schema_gaps
    from rayform.cli import main

    def extra(rec: Any) -> None:
        rec.send_columns("/only_in_s2", indexes=[rr.TimeColumn("frame", sequence=[0])],
                         columns=rr.Scalars.columns(scalars=[1.0]))

    ds = catalog.create_dataset("gaps")
    ds.register(write_columns(tmp_path / "s1.rrd", "s1",
                              pa.array([{"a": 1, "b": 2.0}], STRUCT_AB))).wait()
    ds.register(write_columns(tmp_path / "s2.rrd", "s2",
                              pa.array([{"a": 3, "b": 4.0, "c": "z"}], STRUCT_ABC),
                              extra=extra)).wait()
    gaps = schema_gaps(ds)
    assert gaps["/x:v"].narrower == ("s1",) and gaps["/x:v"].missing == ()
    assert gaps["/only_in_s2:Scalars:scalars"].missing == ("s1",)
    assert set(gaps) == {"/x:v", "/only_in_s2:Scalars:scalars"}
    capsys.readouterr()
    assert main(["--catalog", catalog.url, "schema", "gaps"]) == 0
    out = capsys.readouterr().out
    assert "narrower in s1" in out and "missing in s1" in out
