"""reader(): exact and latest-at alignment, using_index_values forms, and a Hypothesis check
of latest-at against a brute-force pure-Python reference."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording_factories import EPOCH_NS, FRAME_NS, RecordingFactory, joint_values

import rayform
from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import ColumnNotFoundError

JOINTS = "/joints/position:Scalars:scalars"
GRIPPER = "/gripper:Scalars:scalars"
CODEC = "/cam1:VideoStream:codec"
SAMPLE = "/cam1:VideoStream:sample"


def test_reader_without_fill_has_exact_matches_only(robots: DatasetEntry) -> None:
    table = robots.filter_segments("ep0").reader("frame_index").to_arrow_table()
    assert table.column_names[:2] == ["rerun_segment_id", "frame_index"]
    assert table.schema.field("frame_index").type == pa.int64()
    assert table.schema.field(JOINTS).type == pa.list_(pa.float64())
    assert table.column("frame_index").to_pylist() == list(range(30))
    gripper = table.column(GRIPPER).to_pylist()
    assert [i for i, g in enumerate(gripper) if g is not None] == list(range(0, 30, 3))
    samples = table.column(SAMPLE).to_pylist()
    assert [i for i, s in enumerate(samples) if s is not None] == list(range(1, 30, 3))
    assert table.column(CODEC).to_pylist() == [["h264"]] * 30  # static: every row
    np.testing.assert_array_equal(np.array(table.column(JOINTS).to_pylist()),
                                  joint_values(0, np.arange(30)))


def test_reader_fill_latest_at(robots: DatasetEntry) -> None:
    table = robots.reader("frame_index", fill_latest_at=True).to_arrow_table()
    assert table.column("rerun_segment_id").to_pylist() == \
        ["ep0"] * 30 + ["ep1"] * 33 + ["ep2"] * 36
    gripper = [g[0] if g else None for g in table.column(GRIPPER).to_pylist()]
    frames = table.column("frame_index").to_pylist()
    ids = table.column("rerun_segment_id").to_pylist()
    for seg, f, g in zip(ids, frames, gripper, strict=True):
        seed = int(seg[2:])
        assert g == pytest.approx(seed + (f - f % 3) / 100.0, rel=1e-6)
    samples = table.column(SAMPLE).to_pylist()
    assert samples[0] is None  # /cam1 starts at frame 1: nothing to fill from
    assert samples[30] is None  # ...and the fill never crosses into the next segment
    assert samples[1] == samples[2] == samples[3] != samples[4]


def test_reader_on_timestamp_timeline(robots: DatasetEntry) -> None:
    table = robots.filter_segments("ep1").filter_contents("/gripper").reader(
        "real_time").to_arrow_table()
    assert table.schema.field("real_time").type == pa.timestamp("ns")
    assert table.column("real_time").cast(pa.int64()).to_pylist() == \
        [EPOCH_NS + f * FRAME_NS for f in range(0, 33, 3)]
    assert table.column_names == ["rerun_segment_id", "real_time", "frame_index", "elapsed",
                                  GRIPPER]
    assert table.column("frame_index").to_pylist() == list(range(0, 33, 3))


def test_using_index_values_dict_array_table(robots: DatasetEntry) -> None:
    view = robots.filter_contents("/gripper")
    by_dict = view.reader("frame_index", fill_latest_at=True,
                          using_index_values={"ep1": np.array([4, 0, 100]), "nope": [1]}
                          ).to_arrow_table()
    assert by_dict.column("rerun_segment_id").to_pylist() == ["ep1"] * 3
    assert by_dict.column("frame_index").to_pylist() == [4, 0, 100]  # order kept
    assert [g[0] for g in by_dict.column(GRIPPER).to_pylist()] == \
        pytest.approx([1.03, 1.0, 1.30], rel=1e-6)
    exact = view.reader("frame_index", using_index_values={"ep1": [3, 4]}).to_arrow_table()
    assert exact.column(GRIPPER).to_pylist()[1] is None
    by_array = view.reader("frame_index", fill_latest_at=True,
                           using_index_values=np.array([-1, 28, 31, 34])).to_arrow_table()
    # A plain array goes to every segment whose range covers each value (ends 27, 30, 33).
    assert list(zip(by_array.column("rerun_segment_id").to_pylist(),
                    by_array.column("frame_index").to_pylist(), strict=True)) == \
        [("ep1", 28), ("ep2", 28), ("ep2", 31)]
    table = pa.table({"rerun_segment_id": ["ep2", "ep0"], "frame_index": [7, 8]})
    by_table = view.reader("frame_index", fill_latest_at=True, using_index_values=table)
    rows = by_table.to_arrow_table().to_pylist()
    assert [(r["rerun_segment_id"], r["frame_index"]) for r in rows] == [("ep0", 8), ("ep2", 7)]
    assert rows[1][GRIPPER] == [pytest.approx(2.06)]
    frame = robots.catalog.ctx.from_arrow(table)
    assert view.reader("frame_index", using_index_values=frame).to_arrow_table().num_rows == 2
    ts = view.reader("real_time", fill_latest_at=True, using_index_values={
        "ep0": np.array([EPOCH_NS + 5 * FRAME_NS], "datetime64[ns]")}).to_arrow_table()
    assert ts.column(GRIPPER).to_pylist() == [[pytest.approx(0.03)]]
    with pytest.raises(ColumnNotFoundError, match=r"needs a 'frame_index' column"):
        view.reader("frame_index", using_index_values=pa.table({"rerun_segment_id": ["ep0"]}))
    with pytest.raises(ColumnNotFoundError, match=r"unknown timeline 'clock'"):
        view.reader("clock")


def test_reader_of_empty_dataset(catalog: Catalog) -> None:
    ds = catalog.create_dataset("empty")
    assert ds.segment_ids() == []
    assert ds.segment_table_arrow().num_rows == 0
    assert ds.get_index_ranges().to_arrow_table().num_rows == 0
    assert ds.schema().component_columns() == []


def test_unknown_component_in_some_segments_is_null(catalog: Catalog,
                                                    recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("sparse")
    ds.register([recording_factory("a", num_frames=6),
                 recording_factory("b", num_frames=6, with_debug=False, with_video=False)]).wait()
    table = ds.reader("frame_index", fill_latest_at=True).to_arrow_table()
    ids = table.column("rerun_segment_id").to_pylist()
    debug = table.column("/debug/loss:Scalars:scalars").to_pylist()
    assert all(d is None for s, d in zip(ids, debug, strict=True) if s == "b")
    assert all(d is not None for s, d in zip(ids, debug, strict=True) if s == "a")


# ------------------------------------------------------------------------ Hypothesis
@dataclass(frozen=True)
class Stream:
    """One entity's rows in one segment, in log order: (index value, unique value)."""

    rows: tuple[tuple[int, int], ...]
    split: int  # logged as two blocks, at this row


SegmentSpec = dict[str, Stream | int]  # entity -> temporal stream, or a static value
ENTITIES = ("/a", "/b/c", "/d")

_stream = st.builds(
    Stream,
    rows=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 10**6)), min_size=1,
                  max_size=12).map(tuple),
    split=st.integers(0, 12),
)
_segment = st.dictionaries(st.sampled_from(ENTITIES), _stream | st.integers(0, 99), max_size=3)


def _write(path: Path, segment_id: str, spec: SegmentSpec) -> None:
    with rayform.RecordingWriter(path, recording_id=segment_id) as rec:
        rec.log_scalars("/anchor", timelines={"seq": [0], "ts": np.array([0], "datetime64[ns]")},
                        values=[-1])  # every segment has both timelines
        for entity, stream in spec.items():
            if isinstance(stream, int):
                rec.log_static(entity, components={"Scalars:scalars": np.array([stream], np.int64)})
                continue
            t = np.array([r[0] for r in stream.rows], np.int64)
            v = np.array([r[1] for r in stream.rows], np.int64)
            cut = min(stream.split, len(t))
            for lo, hi in ((0, cut), (cut, len(t))):
                if hi > lo:
                    rec.log_scalars(entity, timelines={
                        "seq": t[lo:hi], "ts": (t[lo:hi] * 1000).astype("datetime64[ns]")},
                        values=v[lo:hi])


def _reference(spec: SegmentSpec, entity: str, query: int, *, fill: bool) -> Any:
    """Brute force: the value of the last-logged row with the greatest index <= query."""
    found = _reference_row(spec, entity, query, fill=fill)
    return None if found is None else [found[1]]


def _reference_row(spec: SegmentSpec, entity: str, query: int, *, fill: bool
                   ) -> tuple[int | None, int] | None:
    """The (index, value) of the row :func:`_reference` picks; index None for a static value."""
    stream = spec.get(entity)
    if stream is None:
        return None
    if isinstance(stream, int):
        return None, stream
    best: tuple[int, int] | None = None
    for t, value in stream.rows:
        hit = t <= query if fill else t == query
        if hit and (best is None or t >= best[0]):
            best = (t, value)
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segments=st.lists(_segment, min_size=1, max_size=3),
       queries=st.lists(st.lists(st.integers(-2, 14), max_size=8), min_size=3, max_size=3)
       | st.none(),
       fill=st.booleans(), timeline=st.sampled_from(["seq", "ts"]))
def test_latest_at_matches_brute_force(segments: list[SegmentSpec],
                                       queries: list[list[int]] | None, fill: bool,
                                       timeline: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ids = [f"s{i}" for i in range(len(segments))]
        paths = []
        for sid, spec in zip(ids, segments, strict=True):
            paths.append(root / f"{sid}.rfr")
            _write(paths[-1], sid, spec)
        ds = Catalog.create(root / "cat").create_dataset("h")
        ds.register(paths).wait()
        view = ds.filter_contents("-/anchor")
        scale = 1000 if timeline == "ts" else 1
        given_values: dict[str, Any] | None = None
        if queries is not None:
            given_values = {}
            for sid, seg_values in zip(ids, queries, strict=False):
                arr = np.array(seg_values, np.int64) * scale
                given_values[sid] = arr.astype("datetime64[ns]") if timeline == "ts" else arr
        table = view.reader(timeline, fill_latest_at=fill,
                            using_index_values=given_values).to_arrow_table()

        expected: list[dict[str, Any]] = []
        columns = [c for c in view.schema().component_columns()]
        other = "seq" if timeline == "ts" else "ts"
        for i, (sid, spec) in enumerate(zip(ids, segments, strict=True)):
            if queries is None:
                temporal = {t for s in spec.values() if isinstance(s, Stream) for t, _ in s.rows}
                seg_queries = sorted(temporal)
            else:
                seg_queries = queries[i]
            for value in seg_queries:
                # The other timeline holds the largest of the picked rows' values on it
                # (ts = seq * 1000 on every row here), as Rerun's dataframe does.
                picked = [_reference_row(spec, col.split(":")[0], value, fill=fill)
                          for col in columns]
                times = [p[0] for p in picked if p is not None and p[0] is not None]
                other_scale = 1 if timeline == "ts" else 1000
                row: dict[str, Any] = {"rerun_segment_id": sid, timeline: value * scale,
                                       other: max(times) * other_scale if times else None}
                for col in columns:
                    row[col] = _reference(spec, col.split(":")[0], value, fill=fill)
                expected.append(row)
        for name in ("ts", "seq"):
            table = table.set_column(table.column_names.index(name), name,
                                     table.column(name).cast(pa.int64()))
        assert table.column_names == ["rerun_segment_id", timeline, other, *columns]
        assert table.to_pylist() == expected


def test_reader_gathers_variable_and_fixed_width_lists(catalog: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "lists.rfr"
    with rayform.RecordingWriter(path, recording_id="lists") as rec:
        rec.log_columns("/pts", timelines={"t": [10, 20, 30]}, components={
            "Points:xy": pa.array([[1.0, 2.0], [3.0], []], pa.list_(pa.float64())),
            "Label:text": pa.array(["a", "b", "c"]),
            "Vec:v": np.array([[1, 2], [3, 4], [5, 6]], np.int16),
        })
    ds = catalog.create_dataset("lists")
    ds.register(path).wait()
    table = ds.reader("t", fill_latest_at=True,
                      using_index_values={"lists": [5, 30, 10, 25, 10]}).to_arrow_table()
    assert table.column("/pts:Points:xy").to_pylist() == [None, [], [1.0, 2.0], [3.0], [1.0, 2.0]]
    assert table.column("/pts:Label:text").to_pylist() == [None, ["c"], ["a"], ["b"], ["a"]]
    assert table.column("/pts:Vec:v").to_pylist() == [None, [5, 6], [1, 2], [3, 4], [1, 2]]
    assert table.schema.field("/pts:Vec:v").type == pa.list_(pa.int16())
