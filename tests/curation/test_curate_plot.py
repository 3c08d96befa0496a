"""``rayform curate --plot DIR``: a valid PNG per flagged segment, none for clean ones, a row
of decoded frames around each video finding (none for numeric findings), and the one-line
install error without matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rayform.catalog import DatasetEntry
from rayform.cli import main
from rayform.curation import curate
from rayform.curation._plot import file_name, plot_findings, plot_segment, require_pyplot
from rayform.curation._plot_frames import MAX_FRAMES, decode_plan, plan_frames
from rayform.curation._series import load_series, numeric_columns

pytestmark = pytest.mark.realdata
PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_per_flagged_segment(defect_dataset: DatasetEntry, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    out = tmp_path / "plots"
    main(["--catalog", defect_dataset.catalog.url, "curate", "g1", "--video", "off",
          "--format", "json", "--plot", str(out)])
    capsys.readouterr()
    files = sorted(p.name for p in out.iterdir())
    assert "episode_000000.png" in files and "episode_000003.png" in files  # NaN, stuck
    assert "episode_000009.png" not in files and "episode_000010.png" not in files  # clean
    for name in files:
        data = (out / name).read_bytes()
        assert data.startswith(PNG)
        with Image.open(out / name) as image:
            image.verify()
    with Image.open(out / "episode_000000.png") as image:
        assert image.size[0] >= 600 and image.size[1] >= 200


def test_numeric_findings_plan_no_frames(defect_dataset: DatasetEntry) -> None:
    result = curate(defect_dataset, video="off", persist=False)
    findings = result.findings.to_pylist()
    flagged = {r["segment"] for r in findings}
    assert {"episode_000000", "episode_000003"} <= flagged
    columns = numeric_columns(defect_dataset)
    for sid in ("episode_000000", "episode_000003"):
        seg = load_series(defect_dataset, sid, columns)
        assert seg.video_timestamps  # the segment has a camera, yet no frame is planned
        assert plan_frames(seg, [r for r in findings if r["segment"] == sid]) == []


def test_plot_frames_for_a_video_finding(video_dataset: DatasetEntry, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    result = curate(video_dataset, checks=["video.*", "values.*"], video="sample",
                    persist=False)
    sid = "episode_000005"  # frozen from frame 100 to 129
    rows = [r for r in result.findings.to_pylist() if r["segment"] == sid]
    [frozen] = [r for r in rows if r["check"] == "video.identical"]
    seg = load_series(video_dataset, sid, numeric_columns(video_dataset))
    [plan] = plan_frames(seg, rows)
    start, end = frozen["start_row"], frozen["end_row"]
    assert plan.rows == (start - 1, start, end - 1, end) and len(plan.rows) == MAX_FRAMES
    assert plan.roles == ("before", "first", "last", "after")
    thumbs = decode_plan(seg, plan)
    assert [t.row for t in thumbs] == list(plan.rows)
    assert all(t.image is not None and t.image.ndim == 3 and t.image.shape[2] == 3
               for t in thumbs)
    first, last = (t.image for t in thumbs[1:3])
    assert first is not None and last is not None and np.array_equal(first, last)  # frozen

    [path] = plot_findings(video_dataset, result, tmp_path / "with", segments=[sid])
    assert path.read_bytes().startswith(PNG)
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        with_frames = image.size
    pyplot = require_pyplot()
    fig = plot_segment(pyplot, seg, rows, sid)
    assert sum(1 for ax in fig.axes if ax.images) == MAX_FRAMES
    pyplot.close(fig)
    numeric = [r for r in rows if not r["check"].startswith("video.")]
    fig = plot_segment(pyplot, seg, numeric, sid)
    assert not any(ax.images for ax in fig.axes)
    fig.savefig(tmp_path / "without.png", dpi=80)
    pyplot.close(fig)
    with Image.open(tmp_path / "without.png") as image:
        assert with_frames[0] == image.size[0] and with_frames[1] > image.size[1]


def test_plot_file_names_are_safe() -> None:
    assert file_name("episode_000001") == "episode_000001.png"
    for hostile in ("../../etc/passwd", "a/b", "..", ".hidden", "x" * 300):
        name = file_name(hostile)
        assert "/" not in name and name.startswith("segment-") and name.endswith(".png")


def test_plot_without_matplotlib(real_dataset: DatasetEntry, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    out = tmp_path / "plots"
    code = main(["--catalog", real_dataset.catalog.url, "curate", "g1", "--plot", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("rayform curate: error: rayform curate --plot needs the 'matplotlib' "
                          "package: pip install ")
    assert err.endswith("[plot]'\n") and err.count("\n") == 1  # one line
    assert not out.exists()
