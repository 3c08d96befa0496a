"""Valid ``.rrd`` columns that Rerun registers and reads, and rayform must too: an AnyValues
column of Arrow type ``null`` and a fixed-size list of non-nullable items with null rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from rayform.catalog import Catalog

pytest.importorskip("rerun")


def test_null_typed_any_values_column_registers_and_reads(catalog: Catalog, tmp_path: Path
                                                          ) -> None:
    import rerun as rr

    path = tmp_path / "nulls.rrd"
    rec = rr.RecordingStream("rayform-tests", recording_id="nulls")
    rec.save(path)
    for frame in (1, 2):
        rec.set_time("frame", sequence=frame)
        rec.log("/y", rr.AnyValues(n=pa.nulls(2)))
    rec.log("/y", rr.AnyValues(m=[1.0]))
    rec.flush()
    rec.disconnect()
    ds = catalog.create_dataset("odd")
    assert ds.register(path).wait().segment_ids == ["nulls"]
    assert ds.schema().field("/y:n").type == pa.list_(pa.null())
    table = ds.reader("frame").to_arrow_table()
    table.validate(full=True)
    assert table.column("/y:n").to_pylist() == [[None, None], [None, None]]
    assert table.column("/y:m").to_pylist() == [None, [1.0]]


def test_fixed_size_list_of_non_nullable_items_with_null_rows(catalog: Catalog, tmp_path: Path
                                                              ) -> None:
    import rerun as rr

    item = pa.field("item", pa.float32(), nullable=False)
    values = pa.array([[1.0, 2.0, 3.0], None, None], pa.list_(item, 3))
    path = tmp_path / "fsl.rrd"
    rec = rr.RecordingStream("rayform-tests", recording_id="fsl")
    rec.save(path)
    rec.send_columns("/p", indexes=[rr.TimeColumn("frame", sequence=[0, 1, 2])],
                     columns=rr.AnyValues.columns(v=values))
    rec.flush()
    rec.disconnect()
    ds = catalog.create_dataset("odd")
    assert ds.register(path).wait().segment_ids == ["fsl"]
    assert ds.schema().field("/p:v").type == pa.list_(pa.list_(item, 3))
    rows = ds.reader("frame").to_arrow_table().column("/p:v").to_pylist()
    assert rows == [[[1.0, 2.0, 3.0]], [None], [None]]
