"""Terminal tables at 80, 120 and 200 columns: keys and numbers whole, cell text never markup."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cli_support import REPO
from test_cli_shell import _in_terminal

from rayform.catalog import Catalog, RecordingWriter
from rayform.cli._output import print_terminal_table, terminal_console, text_cell

G1 = REPO.parent / "shared" / "realdata" / "unitree-g1-lerobot-v21"
WIDTHS = (80, 120, 200)
_HIDDEN = re.compile(r"… (\d+) more columns?: --format csv")


def _rigid(kind: pa.DataType) -> bool:
    """Keys and numbers: what a terminal table must never cut or wrap."""
    return not (pa.types.is_string(kind) or pa.types.is_nested(kind))


def assert_whole(table: pa.Table, out: str, *, width: int) -> None:
    """Every line fits; every shown column's header and every key or number cell is there whole;
    the columns left out are counted in a note."""
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width, out
    words = set(out.split())
    hidden = _HIDDEN.search(out)
    shown = table.num_columns - (int(hidden[1]) if hidden else 0)
    assert shown >= 2, out
    for i, field in enumerate(table.schema):
        if i >= shown:
            assert field.name not in words, (field.name, out)
            continue
        assert field.name in words, (field.name, out)
        if _rigid(field.type):
            for value in table.column(i).to_pylist():
                cell = text_cell(value, terminal=True)
                assert cell in out, (field.name, cell, out)
                assert re.search(rf"(^|\s){re.escape(cell)}(\s|$)", out, re.MULTILINE), cell


def _render(table: pa.Table, width: int) -> str:
    buf = io.StringIO()
    print_terminal_table(table, terminal_console(buf, width=width))
    return buf.getvalue()


@pytest.fixture
def wide_catalog(tmp_path: Path) -> Catalog:
    """A dataset whose segment table has many property columns and long free text."""
    cat = Catalog.create(tmp_path / "cat")
    paths = []
    for i in range(3):
        path = tmp_path / f"r{i}.rfr"
        with RecordingWriter(path, recording_id=f"segment_with_a_long_id_{i:04d}") as rec:
            rec.set_properties(task="pick up the yellow bottle on the table and put it away " * 2,
                               operator=f"operator-{i}", site="lab-a", success=i % 2 == 0,
                               episode_index=10640 + 221 * i)
            rec.log_scalars("/joints/position", timelines={"frame_index": np.arange(5)},
                            values=np.full((5, 3), 1234.5678 * (i + 1)))
        paths.append(str(path))
    cat.create_dataset("wide").register(paths)
    return cat


@pytest.mark.parametrize("width", WIDTHS)
def test_segment_tables_keep_every_key_and_number_whole(wide_catalog: Catalog, width: int) -> None:
    table = wide_catalog.get_dataset("wide").segment_table_arrow()
    assert_whole(table, _render(table, width), width=width)


@pytest.mark.realdata
@pytest.mark.parametrize("width", WIDTHS)
def test_real_lerobot_segments_and_summaries_fit(tmp_path: Path, width: int) -> None:
    if not G1.is_dir():
        pytest.skip(f"real data not found at {G1}")
    cat = Catalog.create(tmp_path / "cat")
    with pytest.warns(Warning, match="partial LeRobot dataset"):
        cat.create_dataset("g1").register([str(G1)])
    segments = cat.get_dataset("g1").segment_table_arrow()
    assert_whole(segments, _render(segments, width), width=width)
    summary = cat.sql('SELECT "property:task" AS task, count(*) AS episodes, '
                      "sum(rerun_num_rows) AS rows, sum(rerun_size_bytes) AS bytes "
                      "FROM g1.segments GROUP BY 1").to_arrow_table()
    assert_whole(summary, _render(summary, width), width=width)


def test_nothing_fits_gives_one_block_per_row() -> None:
    table = pa.table({"a_rather_long_column_name": ["value_that_is_long_0001", "v2"],
                      "count_of_things_seen": [2082, 7]})
    out = _render(table, 30)
    assert "value_that_is_long_0001" in out and "2082" in out and "count_of_things_seen" in out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 30, out


def test_cell_text_and_headers_are_not_markup() -> None:
    table = pa.table({"timestamp[ns]": ["[bold]x[/bold]"], "n": [1]})
    buf = io.StringIO()
    console = terminal_console(buf, width=80)
    console._force_terminal = True  # styles on, as in a real terminal
    print_terminal_table(table, console)
    out = buf.getvalue()
    assert "timestamp[ns]" in out and "[bold]x[/bold]" in out
    assert "\x1b[1mx" not in out  # the cell was not made bold


@pytest.mark.parametrize("width", WIDTHS)
def test_stats_and_segments_in_a_pseudo_terminal(robots: str, width: int) -> None:
    segments = Catalog.open(robots).get_dataset("robots").segment_table_arrow()
    out = _in_terminal(["--catalog", robots, "segments", "robots"], columns=width)
    assert "rerun_segment_id" in out and "rerun_num_rows" in out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width, out
    for value in segments.column("rerun_segment_id").to_pylist():
        assert re.search(rf"(^|\s){value}\s", out), out
    out = _in_terminal(["--catalog", robots, "stats", "robots"], columns=width)
    # a table per column, headed by the column and its count; then min, max, mean, std at least
    assert re.search(r"^/joints/position:Scalars:scalars: 10 rows$", out, re.MULTILINE), out
    assert re.search(r"^dim\s+min\s+max\s+mean\s+std", out, re.MULTILINE), out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width, out

