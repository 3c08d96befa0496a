"""``rayform curate --plot DIR``: a valid PNG per flagged segment, none for clean ones, and the
one-line install error without matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rayform.catalog import DatasetEntry
from rayform.cli import main
from rayform.curation._plot import file_name

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
