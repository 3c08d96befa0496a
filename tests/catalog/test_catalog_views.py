"""Index ranges, schema, segment and content filters, and pickled views."""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
import pytest
from recording_factories import EPOCH_NS, FRAME_NS, RecordingFactory

from rayform.catalog import DatasetEntry, DatasetView
from rayform.errors import ColumnNotFoundError, ConfigError, SegmentNotFoundError


def _ranges(view: DatasetView) -> list[dict[str, Any]]:
    table = view.get_index_ranges().to_arrow_table()
    rows: list[dict[str, Any]] = table.cast(pa.schema([
        (n, pa.string() if n == "rerun_segment_id" else pa.int64())
        for n in table.column_names])).to_pylist()
    return rows


def test_index_ranges_columns_types_values(robots: DatasetEntry) -> None:
    table = robots.get_index_ranges().to_arrow_table()
    assert table.schema == pa.schema([
        ("rerun_segment_id", pa.string()),
        ("frame_index:start", pa.int64()), ("frame_index:end", pa.int64()),
        ("real_time:start", pa.timestamp("ns")), ("real_time:end", pa.timestamp("ns")),
        ("elapsed:start", pa.duration("ns")), ("elapsed:end", pa.duration("ns")),
    ])
    rows = _ranges(robots)
    assert rows[2] == {"rerun_segment_id": "ep2", "frame_index:start": 0, "frame_index:end": 35,
                       "real_time:start": EPOCH_NS, "real_time:end": EPOCH_NS + 35 * FRAME_NS,
                       "elapsed:start": 0, "elapsed:end": 35 * FRAME_NS}


def test_index_ranges_follow_content_filters(robots: DatasetEntry) -> None:
    video = robots.filter_contents(["/cam1/**"])
    rows = _ranges(video)
    # /cam1 starts at frame 1, steps by 3 and has no elapsed timeline.
    assert [(r["frame_index:start"], r["frame_index:end"]) for r in rows] == \
        [(1, 28), (1, 31), (1, 34)]
    assert {r["elapsed:start"] for r in rows} == {None}
    gripper = _ranges(robots.filter_contents("/gripper"))
    assert [r["frame_index:end"] for r in gripper] == [27, 30, 33]
    no_joints = robots.filter_contents(["/**", "-/joints/**", "-/debug/**"])
    assert {r["elapsed:start"] for r in _ranges(no_joints)} == {None}


def test_schema(robots: DatasetEntry) -> None:
    schema = robots.schema()
    assert schema.index_columns() == ["frame_index", "real_time", "elapsed"]
    assert sorted(schema.component_columns()) == sorted([
        "/joints/position:Scalars:scalars", "/gripper:Scalars:scalars",
        "/cam0/rgb:EncodedImage:blob", "/cam0/rgb:EncodedImage:media_type",
        "/cam1:VideoStream:sample", "/cam1:VideoStream:is_keyframe", "/cam1:VideoStream:codec",
        "/debug/loss:Scalars:scalars", "/robot/description:TextDocument:text"])
    assert schema.column_names()[:3] == ["frame_index", "real_time", "elapsed"]
    assert schema.entity_paths() == ["/cam0/rgb", "/cam1", "/debug/loss", "/gripper",
                                     "/joints/position", "/robot/description"]
    assert schema.archetypes() == ["EncodedImage", "Scalars", "TextDocument", "VideoStream"]
    assert schema.column_for("/cam1", "sample") == "/cam1:VideoStream:sample"
    assert schema.column_for("/cam1", "VideoStream:is_keyframe") == \
        "/cam1:VideoStream:is_keyframe"
    assert schema.column_for("/cam1", "blob") is None
    assert schema.field("/gripper:Scalars:scalars").type == pa.list_(pa.float32())
    assert schema.timeline_kind("real_time") == "timestamp"
    assert robots.arrow_schema() == schema.arrow
    with pytest.raises(ColumnNotFoundError, match=r"unknown column '/gripper:Nope'.*did you mean"):
        schema.field("/gripper:Nope")
    with pytest.raises(ColumnNotFoundError, match=r"unknown timeline 'clock'.*'elapsed'"):
        schema.timeline_kind("clock")


def test_filter_contents(robots: DatasetEntry) -> None:
    cams = robots.filter_contents(["/cam0/**", "/cam1"])
    assert cams.schema().entity_paths() == ["/cam0/rgb", "/cam1"]
    assert cams.schema().index_columns() == ["frame_index", "real_time", "elapsed"]
    no_debug = robots.filter_contents("-/debug/**")
    assert "/debug/loss" not in no_debug.schema().entity_paths()
    assert len(no_debug.schema().entity_paths()) == 5
    both = robots.filter_contents(["/**", "-/cam*", "-/debug/**"])
    assert both.schema().entity_paths() == ["/gripper", "/joints/position", "/robot/description"]
    # Filters compose with segment filters, in either order.
    view = robots.filter_segments(["ep1"]).filter_contents("/gripper")
    assert view.segment_ids() == ["ep1"]
    assert view.filter_segments(["ep1", "ep2"]).schema().entity_paths() == ["/gripper"]
    with pytest.raises(ConfigError, match=r"content filter 'cam0/\*\*'"):
        robots.filter_contents("cam0/**")


def test_filter_segments_forms(robots: DatasetEntry) -> None:
    assert robots.filter_segments(["ep2", "ep0"]).segment_ids() == ["ep0", "ep2"]
    assert robots.filter_segments("ep1").segment_ids() == ["ep1"]
    with pytest.raises(SegmentNotFoundError, match=r"filter_segments: dataset 'robots' "
                                                   r"\(snapshot 1\) has no segment\(s\) \['missing'\]"):
        robots.filter_segments(["ep1", "missing"])
    assert robots.filter_segments([]).segment_ids() == []
    # Narrowing only: a filtered view cannot widen again.
    assert robots.filter_segments(["ep0", "ep1"]).filter_segments(["ep1", "ep2"]).segment_ids() \
        == ["ep1"]
    successes = robots.segment_table().filter("\"property:success\"")
    assert robots.filter_segments(successes).segment_ids() == ["ep0", "ep2"]
    by_sql = robots.catalog.sql(
        'SELECT rerun_segment_id FROM robots.segments WHERE "property:episode" >= $lo',
        param_values={"lo": 1})
    assert robots.filter_segments(by_sql).segment_ids() == ["ep1", "ep2"]
    table = pa.table({"rerun_segment_id": ["ep2"]})
    assert robots.filter_segments(table).segment_ids() == ["ep2"]
    view = robots.filter_segments(["ep1"])
    assert view.segment_table_arrow().column("rerun_segment_id").to_pylist() == ["ep1"]
    assert view.get_index_ranges().to_arrow_table().num_rows == 1
    with pytest.raises(ColumnNotFoundError, match=r"needs a 'rerun_segment_id' column"):
        robots.filter_segments(robots.catalog.sql("SELECT 1 AS x"))


def test_views_pickle_pinned_to_their_snapshot(robots: DatasetEntry,
                                               recording_factory: RecordingFactory) -> None:
    view = robots.filter_segments(["ep0", "ep2"]).filter_contents("/joints/**")
    payload = pickle.dumps(view)
    assert len(payload) < 2_000  # configuration only, no data or metadata snapshot
    robots.register(recording_factory("ep3", seed=3)).wait()
    robots.register(recording_factory("ep0", seed=7), on_duplicate="replace").wait()
    restored = pickle.loads(payload)
    assert isinstance(restored, DatasetView)
    assert restored.snapshot_version == 1
    assert restored.segment_ids() == ["ep0", "ep2"]
    assert restored.schema().entity_paths() == ["/joints/position"]
    rows = restored.reader("frame_index").to_arrow_table()
    assert rows.column("/joints/position:Scalars:scalars").to_pylist()[0][0] == 0.0
    entry = pickle.loads(pickle.dumps(robots))
    assert isinstance(entry, DatasetEntry)
    assert entry.segment_ids() == ["ep0", "ep1", "ep2", "ep3"]
    assert entry.id == robots.id
    old = pickle.loads(pickle.dumps(robots.at_version(1)))
    assert old.segment_ids() == ["ep0", "ep1", "ep2"]


@pytest.mark.parametrize("contents", [None, ["/cam1/**"], ["/**", "-/joints/**"], ["/nothing"]])
def test_columnar_tables_match_the_records(robots: DatasetEntry, contents: list[str] | None
                                           ) -> None:
    from rayform.catalog._schema import ContentFilter
    from rayform.catalog._tables import index_ranges_table, segment_table

    view = robots.filter_segments(["ep0", "ep2"])
    content_filter = None if contents is None else ContentFilter.parse(contents)
    if contents is not None:
        view = view.filter_contents(contents)
    records = view.segment_records()
    expected_ranges = index_ranges_table(records, view.timelines, content_filter)  # type: ignore[arg-type]
    assert view.index_ranges_arrow().equals(expected_ranges)
    expected_table = segment_table(records, view.timelines,  # type: ignore[arg-type]
                                   content_filter, view._object_url)
    assert view.segment_table_arrow().equals(expected_table)
