"""catalog.sql over segment tables, index ranges, per-entity data and table entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datafusion
import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import EntryNotFoundError, QueryError, SchemaConflictError


def _rows(df: datafusion.DataFrame) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = df.to_arrow_table().to_pylist()
    return rows


def test_segments_with_parameters(robots: DatasetEntry) -> None:
    catalog = robots.catalog
    df = catalog.sql('SELECT rerun_segment_id, "property:task" FROM robots.segments '
                     'WHERE "property:success" = $ok ORDER BY rerun_segment_id',
                     param_values={"ok": True})
    assert _rows(df) == [{"rerun_segment_id": "ep0", "property:task": "task-0"},
                         {"rerun_segment_id": "ep2", "property:task": "task-2"}]
    df = catalog.sql("SELECT count(*) AS n FROM robots.segments WHERE \"property:site\" = $site "
                     "AND rerun_num_rows > $rows", param_values={"site": "lab-a", "rows": 0})
    assert _rows(df) == [{"n": 3}]
    # A parameter is a value, never SQL: injection text is just an unmatched string.
    df = catalog.sql('SELECT count(*) AS n FROM robots.segments WHERE "property:task" = $t',
                     param_values={"t": "x' OR '1'='1"})
    assert _rows(df) == [{"n": 0}]


def test_index_ranges_table(robots: DatasetEntry) -> None:
    df = robots.catalog.sql('SELECT rerun_segment_id, "frame_index:end" AS e '
                            'FROM robots.index_ranges WHERE "frame_index:end" > $n '
                            "ORDER BY rerun_segment_id", param_values={"n": 30})
    assert _rows(df) == [{"rerun_segment_id": "ep1", "e": 32}, {"rerun_segment_id": "ep2", "e": 35}]


def test_entity_tables(robots: DatasetEntry) -> None:
    catalog = robots.catalog
    assert _rows(catalog.sql('SELECT count(*) AS n FROM robots."/gripper"')) == [{"n": 33}]
    table = catalog.sql('SELECT * FROM robots."/gripper"').to_arrow_table()
    assert table.column_names == ["rerun_segment_id", "frame_index", "real_time", "elapsed",
                                  "/gripper:Scalars:scalars"]
    assert table.schema.field("/gripper:Scalars:scalars").type == pa.list_(pa.float32())
    df = catalog.sql('SELECT frame_index, "/gripper:Scalars:scalars"[1] AS g FROM robots."/gripper" '
                     "WHERE rerun_segment_id = $s AND frame_index BETWEEN $lo AND $hi "
                     "ORDER BY frame_index", param_values={"s": "ep1", "lo": 3, "hi": 6})
    assert [(r["frame_index"], round(r["g"], 4)) for r in _rows(df)] == [(3, 1.03), (6, 1.06)]
    static = _rows(catalog.sql('SELECT rerun_segment_id, frame_index, '
                               '"/robot/description:TextDocument:text" AS t '
                               'FROM robots."/robot/description" ORDER BY rerun_segment_id'))
    assert static == [{"rerun_segment_id": f"ep{i}", "frame_index": None, "t": ["arm7-urdf"]}
                      for i in range(3)]
    # /cam1 holds its temporal packets and its static codec row.
    cam = _rows(catalog.sql('SELECT count(*) AS n, count(frame_index) AS temporal, '
                            'count("/cam1:VideoStream:codec") AS codec FROM robots."/cam1" '
                            "WHERE rerun_segment_id = 'ep0'"))
    assert cam == [{"n": 11, "temporal": 10, "codec": 1}]
    joined = _rows(catalog.sql(
        'SELECT s."property:task" AS task, count(*) AS n FROM robots."/joints/position" j '
        "JOIN robots.segments s ON j.rerun_segment_id = s.rerun_segment_id "
        "GROUP BY s.\"property:task\" ORDER BY task"))
    assert joined == [{"task": "task-0", "n": 30}, {"task": "task-1", "n": 33},
                      {"task": "task-2", "n": 36}]


def test_sql_sees_new_registrations_and_datasets(robots: DatasetEntry,
                                                 recording_factory: RecordingFactory) -> None:
    catalog = robots.catalog
    count = 'SELECT count(*) AS n FROM robots.segments'
    assert _rows(catalog.sql(count)) == [{"n": 3}]
    robots.register(recording_factory("ep3", seed=3)).wait()
    assert _rows(catalog.sql(count)) == [{"n": 4}]
    catalog.create_dataset("later").register(recording_factory("x")).wait()
    assert _rows(catalog.sql("SELECT rerun_segment_id FROM later.segments")) == \
        [{"rerun_segment_id": "x"}]
    other = Catalog.open(catalog.url)
    assert _rows(other.sql(count)) == [{"n": 4}]
    assert isinstance(catalog.ctx, datafusion.SessionContext)


def test_table_entries(catalog: Catalog) -> None:
    schema = pa.schema([("segment", pa.string()), ("reward", pa.float64())])
    table = catalog.create_table("rewards", schema)
    assert _rows(catalog.sql("SELECT count(*) AS n FROM rewards")) == [{"n": 0}]
    table.append(pa.table({"segment": ["a", "b"], "reward": [1.0, 2.0]}, schema=schema))
    table.append(segment=["c"], reward=[3.5])
    table.append(pa.record_batch({"reward": [4], "segment": ["d"]}))  # reordered, cast
    df = catalog.sql("SELECT segment FROM rewards WHERE reward > $r ORDER BY segment",
                     param_values={"r": 1.5})
    assert [r["segment"] for r in _rows(df)] == ["b", "c", "d"]
    reopened = Catalog.open(catalog.url).get_table("rewards")
    assert reopened.to_arrow().num_rows == 4
    assert reopened.arrow_schema() == schema
    table.overwrite(pa.table({"segment": ["z"], "reward": [0.0]}, schema=schema))
    assert _rows(catalog.sql("SELECT * FROM rewards")) == [{"segment": "z", "reward": 0.0}]
    assert table.reader().to_arrow_table().num_rows == 1
    with pytest.raises(SchemaConflictError, match=r"table 'rewards'"):
        table.append(pa.table({"other": [1]}))
    with pytest.raises(SchemaConflictError, match=r"table 'rewards'"):
        table.append(pa.table({"segment": ["q"], "reward": ["not a number"]}))
    assert table.to_arrow().num_rows == 1
    with pytest.raises(EntryNotFoundError, match=r"no table 'nope'; tables: \['rewards'\]"):
        catalog.get_table("nope")


@pytest.mark.parametrize("query", [
    "SELEC * FROM robots.segments",
    "SELECT * FROM robots.nope",
    "SELECT * FROM nodataset.segments",
    'SELECT "no such column" FROM robots.segments',
    "SELECT * FROM robots.segments WHERE",
])
def test_malformed_sql_raises_query_error(robots: DatasetEntry, query: str) -> None:
    with pytest.raises(QueryError, match=r"SQL query .* failed") as info:
        robots.catalog.sql(query).to_arrow_table()
    assert isinstance(info.value, ValueError)
    assert info.value.__cause__ is not None


def test_missing_parameter_raises_query_error(robots: DatasetEntry) -> None:
    with pytest.raises(QueryError):
        robots.catalog.sql("SELECT * FROM robots.segments WHERE rerun_segment_id = $id",
                           param_values={"other": 1}).to_arrow_table()


def test_create_table_is_one_atomic_write(tmp_path: Path) -> None:
    """Creating a table writes only its entry file; a crash can never leave half a table."""
    cat = Catalog.create(tmp_path / "cat")
    schema = pa.schema([("episode", pa.string()), ("reward", pa.float64())])
    before = {p for p in (tmp_path / "cat").rglob("*") if p.is_file()}
    table = cat.create_table("rewards", schema)
    written = {p for p in (tmp_path / "cat").rglob("*") if p.is_file()} - before
    assert [p.name for p in written if ".listing" not in p.name] == ["entry.json"]
    assert table.to_arrow().num_rows == 0 and table.arrow_schema() == schema
    table.append(episode=["a"], reward=[1.5])
    assert cat.get_table("rewards").to_arrow().to_pylist() == [{"episode": "a", "reward": 1.5}]
