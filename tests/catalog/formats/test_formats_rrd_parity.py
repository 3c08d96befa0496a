"""What a Rerun script expects of a catalog, on ``.rrd`` inputs written with rerun-sdk: the values
asserted here were read from rerun-sdk 0.41's own catalog server on the same recordings."""

from __future__ import annotations

from pathlib import Path

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
