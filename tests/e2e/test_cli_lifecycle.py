"""``rayform datasets delete`` / ``rename`` and ``rayform unregister``: confirmation in a terminal,
``--yes`` for scripts, a refusal without either, and what each prints."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from rayform.catalog import Catalog, RecordingWriter
from rayform.cli import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _catalog(tmp_path: Path) -> str:
    cat = str(tmp_path / "cat")
    ds = Catalog.create(cat).create_dataset("robots")
    paths = []
    for i in range(3):
        with RecordingWriter(tmp_path / f"e{i}.rfr", recording_id=f"e{i}") as rec:
            rec.log_scalars("/joints", timelines={"frame_index": np.arange(4)},
                            values=np.zeros((4, 2)))
        paths.append(tmp_path / f"e{i}.rfr")
    ds.register(paths).wait()
    ds.register(paths[0], layer_name="labels").wait()
    return cat


def test_scripts_must_pass_yes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    cat = _catalog(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped, not a terminal
    for argv in (["datasets", "delete", "robots"], ["datasets", "rename", "robots", "fleet"],
                 ["unregister", "robots", "e1"]):
        assert main(["--catalog", cat, *argv]) == 2
        assert "needs confirmation: pass --yes" in capsys.readouterr().err
    assert Catalog.open(cat).get_dataset("robots").snapshot_version == 2


def test_a_terminal_is_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    cat = _catalog(tmp_path)
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    assert main(["--catalog", cat, "datasets", "delete", "robots"]) == 1
    err = capsys.readouterr().err
    assert "delete dataset 'robots' (3 segments, snapshot 2)? [y/N]" in err
    assert "cancelled; nothing was changed" in err
    assert Catalog.open(cat).dataset_names() == ["robots"]
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    assert main(["--catalog", cat, "datasets", "delete", "robots"]) == 0
    assert Catalog.open(cat).dataset_names() == []


def test_unregister_rename_and_delete_with_yes(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    cat = _catalog(tmp_path)
    assert main(["--catalog", cat, "unregister", "robots", "--layer", "labels", "--yes"]) == 0
    assert "e0: removed layer(s) labels\n" in capsys.readouterr().out
    assert main(["--catalog", cat, "unregister", "robots", "e1", "e2", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "e1: removed layer(s) base (left the dataset)" in out and "snapshot 4" in out
    assert main(["--catalog", cat, "unregister", "robots", "--yes"]) == 2
    assert "name the segments to remove, or --layer" in capsys.readouterr().err
    assert main(["--catalog", cat, "unregister", "robots", "e9", "--yes"]) == 1
    assert "segment 'e9' is not in the dataset" in capsys.readouterr().err

    assert main(["--catalog", cat, "datasets", "rename", "robots", "fleet", "--yes"]) == 0
    assert "renamed dataset 'robots' to 'fleet' (1 segments" in capsys.readouterr().out
    assert main(["--catalog", cat, "datasets", "--format", "csv"]) == 0
    assert capsys.readouterr().out == "dataset,segments,version\nfleet,1,1\n"
    assert main(["--catalog", cat, "datasets", "delete", "fleet", "-y"]) == 0
    assert main(["--catalog", cat, "datasets", "delete", "fleet", "-y"]) == 1
    assert "dataset 'fleet' was deleted (snapshot 2)" in capsys.readouterr().err
