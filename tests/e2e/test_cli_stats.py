"""Readable statistics: a row per dimension with its joint name, 4 significant digits, short reprs,
named plot axes with the legend clear of the data."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cli_support import REPO

from rayform.catalog import Catalog, RecordingWriter, compute_statistics
from rayform.cli import main

G1 = REPO.parent / "shared" / "realdata" / "unitree-g1-lerobot-v21"
JOINTS = ("shoulder", "elbow", "wrist")


@pytest.fixture
def named(tmp_path: Path) -> str:
    """Dataset 'arm': a 3-joint column named by a static SeriesLines:names, values 1/3 …"""
    cat = tmp_path / "cat"
    paths = []
    for i in range(2):
        path = tmp_path / f"r{i}.rfr"
        with RecordingWriter(path, recording_id=f"r{i}") as rec:
            rec.log_scalars("/arm", timelines={"frame_index": np.arange(4)},
                            values=np.arange(12.0).reshape(4, 3) / 3 + i)
            rec.log_static("/arm", components={"SeriesLines:names": pa.array([list(JOINTS)])})
        paths.append(str(path))
    Catalog.create(cat).create_dataset("arm").register(paths)
    return str(cat)


def test_a_row_per_dimension_named_and_rounded_in_every_format(
        named: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--catalog", named, "stats", "arm", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["column"], r["dim"], r["name"], r["count"]) for r in rows] == [
        ("/arm:Scalars:scalars", d, JOINTS[d], 8) for d in range(3)]
    values = np.concatenate([np.arange(12.0).reshape(4, 3) / 3 + i for i in range(2)])
    assert rows[1]["mean"] == float(f"{values[:, 1].mean():.4g}") == 2.333
    assert rows[0]["std"] == float(f"{values[:, 0].std():.4g}") == 1.225  # sqrt(1.5)
    assert main(["--catalog", named, "stats", "arm", "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["name"] for r in table] == list(JOINTS) and table[0]["std"] == "1.225"
    assert main(["--catalog", named, "stats", "arm"]) == 0  # piped: a table per column
    out = capsys.readouterr().out
    assert out.startswith("/arm:Scalars:scalars: 8 rows\n")
    assert "| shoulder |" in out and "| 1.225 " in out and "1.2247" not in out
    assert main(["--catalog", named, "stats", "arm", "--format", "json", "--digits", "0"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert exact[0]["std"] == float(values[:, 0].std())


def test_statistics_have_a_short_repr(named: str) -> None:
    stats = compute_statistics(Catalog.open(named).get_dataset("arm"))
    assert stats.dimension_names == {"/arm:Scalars:scalars": JOINTS}
    assert repr(stats) == ("DatasetStatistics(dataset='arm', snapshot_version=1, columns="
                           "{'/arm:Scalars:scalars': 3}, segments=2, quantile_levels="
                           "(0.01, 0.1, 0.5, 0.9, 0.99))")
    assert repr(stats.overall["/arm:Scalars:scalars"]) == (
        "ColumnStatistics(column='/arm:Scalars:scalars', count=8, dims=3, "
        "quantiles=[q01, q10, q50, q90, q99])")


def test_the_plot_names_its_axes_and_keeps_the_legend_off_the_data(named: str) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    from rayform.cli._plot import statistics_figure

    fig = statistics_figure(compute_statistics(Catalog.open(named).get_dataset("arm")), pyplot)
    try:
        fig.canvas.draw()
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.get_xticklabels()] == list(JOINTS)
        (legend,) = fig.legends
        assert not legend.get_window_extent().overlaps(ax.get_window_extent())
        assert "min–max" in [t.get_text() for t in legend.get_texts()]
    finally:
        pyplot.close(fig)


@pytest.mark.realdata
def test_real_lerobot_joint_names_label_the_rows(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    if not G1.is_dir():
        pytest.skip(f"real data not found at {G1}")
    cat = Catalog.create(tmp_path / "cat")
    with pytest.warns(Warning, match="partial LeRobot dataset"):
        cat.create_dataset("g1").register([str(G1)])
    names = json.loads((G1 / "meta" / "info.json").read_text())["features"][
        "observation.state"]["names"]
    flat = names[0] if isinstance(names[0], list) else names  # this sample nests them: [[...]]
    assert main(["--catalog", str(tmp_path / "cat"), "stats", "g1", "--column",
                 "/observation.state:Scalars:scalars", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == flat and len(flat) == 26
    assert {r["count"] for r in rows} == {221 + 277}
