"""LeRobot metadata of the wrong type is refused naming the file (not a raw TypeError, not wrong
data): tasks given as a string, tasks.jsonl lines of the wrong type, a 10 MB task, a path
template padding a field to a gigabyte, a shape that is not a number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from format_sources import write_lerobot_v21

from rayform.catalog import Catalog
from rayform.errors import FormatError


def _edit_jsonl(path: Path, edit: object) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        edit(row)  # type: ignore[operator]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _register_fails(catalog: Catalog, folder: Path, match: str) -> None:
    with pytest.raises(FormatError, match=match):
        catalog.create_dataset("x").register(folder)
    assert catalog.get_dataset("x").segment_ids() == []


def test_tasks_given_as_a_string_are_refused(tmp_path: Path, catalog: Catalog) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    _edit_jsonl(tmp_path / "ds" / "meta" / "episodes.jsonl",
                lambda row: row.__setitem__("tasks", "Pick"))
    _register_fails(catalog, tmp_path / "ds", r"episodes\.jsonl: episode 0: 'tasks' must be a list")


@pytest.mark.parametrize(("value", "match"), [
    ({"task_index": "0", "task": "pick"}, "needs an integer 'task_index'"),
    ({"task_index": 0, "task": ["pick"]}, "needs an integer 'task_index' and a string 'task'"),
    ({"task_index": 0, "task": "x" * (10 << 20)}, "task 0 is 10485760 characters"),
])
def test_tasks_jsonl_lines_are_typed_and_bounded(tmp_path: Path, catalog: Catalog,
                                                 value: dict[str, object], match: str) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    (tmp_path / "ds" / "meta" / "tasks.jsonl").write_text(json.dumps(value) + "\n")
    _register_fails(catalog, tmp_path / "ds", match)


def test_a_path_template_padding_to_a_gigabyte_is_refused(tmp_path: Path,
                                                          catalog: Catalog) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    info_path = tmp_path / "ds" / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["data_path"] = "data/chunk-{episode_chunk:03d}/episode_{episode_index:0999999999d}.parquet"
    info_path.write_text(json.dumps(info))
    _register_fails(catalog, tmp_path / "ds", "pads a field to 999999999 characters")


def test_a_wrong_typed_info_value_names_the_file(tmp_path: Path, catalog: Catalog) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    info_path = tmp_path / "ds" / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    feature = next(iter(info["features"]))
    info["features"][feature]["shape"] = [float("nan")]
    info_path.write_text(json.dumps(info))
    _register_fails(catalog, tmp_path / "ds", r"meta/info\.json holds a value of the wrong type")


def _edit_episode(folder: Path, edit: object) -> None:
    import pyarrow.parquet as pq

    path = next((folder / "data").rglob("episode_000000.parquet"))
    table = pq.read_table(path)
    pq.write_table(edit(table), path)  # type: ignore[operator]


def _replace(table: object, name: str, values: list[object]) -> object:
    import pyarrow as pa

    t = table  # a pyarrow.Table
    i = t.schema.get_field_index(name)  # type: ignore[attr-defined]
    return t.set_column(i, name, pa.array(values, t.schema.field(name).type))  # type: ignore


@pytest.mark.parametrize(("column", "values", "match"), [
    ("frame_index", [0, 1, 1, 3, 4], "'frame_index' 1 appears more than once"),
    ("timestamp", [0.0, 0.1, float("nan"), 0.3, 0.4], "'timestamp' is nan at frame 2"),
    ("timestamp", [0.0, 0.2, 0.1, 0.3, 0.4], "'timestamp' goes back from 0.2"),
    ("task_index", [0, 0, 7, 0, 0], "'task_index' 7 is not listed in meta/tasks"),
])
def test_contradictory_rows_are_refused_naming_the_file_and_column(
        tmp_path: Path, catalog: Catalog, column: str, values: list[object], match: str) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    _edit_episode(tmp_path / "ds", lambda t: _replace(t, column, values))
    _register_fails(catalog, tmp_path / "ds", r"episode_000000\.parquet: episode 0: " + match)


def test_a_declared_shape_the_rows_do_not_have_warns(tmp_path: Path, catalog: Catalog) -> None:
    from rayform.errors import ConversionWarning

    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    info_path = tmp_path / "ds" / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["features"]["observation.state"]["shape"] = [99]
    info["features"]["observation.state"].pop("names", None)
    info_path.write_text(json.dumps(info))
    ds = catalog.create_dataset("x")
    with pytest.warns(ConversionWarning, match=r"'observation.state': info.json declares shape "
                                               r"\[99\] \(99 values\) but its rows hold"):
        ds.register(tmp_path / "ds")
    assert ds.segment_ids() == ["episode_000000"]


def test_a_numeric_feature_declared_as_string_is_refused_naming_it(tmp_path: Path,
                                                                   catalog: Catalog) -> None:
    """Was pyarrow's ArrowNotImplementedError (no cast from a list of floats to utf8)."""
    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    info_path = tmp_path / "ds" / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["features"]["observation.state"]["dtype"] = "string"
    info_path.write_text(json.dumps(info))
    _register_fails(catalog, tmp_path / "ds", r"meta/info\.json: feature 'observation\.state' is "
                                              r"declared with dtype 'string', but its Parquet "
                                              r"column holds .*list.*; fix the feature's dtype")


def test_a_parquet_file_pyarrow_cannot_read_is_damaged_naming_it(tmp_path: Path,
                                                                 catalog: Catalog) -> None:
    """A bit flip in a Parquet footer that pyarrow answers with ArrowNotImplementedError
    ("Integers with more than 64 bits not implemented") is a damaged file, named."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from rayform.errors import CorruptRecordingError

    write_lerobot_v21(tmp_path / "ds", lengths={0: 5})
    path = next((tmp_path / "ds" / "data").rglob("episode_000000.parquet"))
    data = path.read_bytes()
    flipped = None
    for at in range(len(data) - 9, max(0, len(data) - 4000), -1):  # footer first
        for bit in range(8):
            candidate = bytearray(data)
            candidate[at] ^= 1 << bit
            try:
                pq.read_table(io.BytesIO(bytes(candidate)))
            except pa.ArrowNotImplementedError:
                flipped = bytes(candidate)
                break
            except Exception:  # other damage: not the case under test
                continue
        if flipped is not None:
            break
    if flipped is None:
        pytest.skip("no single bit flip of this footer gives ArrowNotImplementedError")
    path.write_bytes(flipped)
    with pytest.raises(CorruptRecordingError, match=r"episode_000000\.parquet: not a readable "
                                                    r"Parquet file"):
        catalog.create_dataset("x").register(tmp_path / "ds")
