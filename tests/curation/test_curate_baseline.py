"""``--baseline``: drift of the real Unitree episodes' copies against the real ones: nothing on
an unmodified copy; a shifted dimension, a unit change, a lost and a new column, each named."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from defects import REAL, STATE_COLUMN, real_copy

from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._slices import create_slice
from rayform.cli import main
from rayform.curation import curate
from rayform.errors import ConversionWarning

pytestmark = pytest.mark.realdata


def _register(catalog: Catalog, name: str, folder: Path) -> DatasetEntry:
    dataset = catalog.create_dataset(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # a partial download (2 of 100)
        dataset.register([str(folder)]).wait()
    return dataset


def _modify(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    cols["observation.state"][:, 0] += 0.3                # shifted
    cols["observation.state"][:, 10] *= 180 / np.pi      # degrees where radians were
    del cols["action"]                                   # lost
    cols["observation.effort"] = np.zeros((len(cols["index"]), 3), dtype=np.float32)  # new
    return cols


def _features(features: dict[str, Any]) -> None:
    features.pop("action")
    features["observation.effort"] = {"dtype": "float32", "shape": [3], "names": None}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")
    root = tmp_path_factory.mktemp("baseline")
    catalog = Catalog.create(str(root / "catalog"))
    _register(catalog, "g1", REAL)
    _register(catalog, "copy", real_copy(root / "a"))
    _register(catalog, "modified", real_copy(root / "b", _modify, features=_features))
    return catalog


def _drift(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["check"].startswith("drift.")]


def test_unmodified_copy_has_no_drift(catalog: Catalog) -> None:
    result = curate(catalog.get_dataset("copy"), baseline=catalog.get_dataset("g1"),
                    video="off", persist=False)
    assert _drift(result.findings.to_pylist()) == []
    ran = {c["id"]: c["ran"] for c in result.coverage["checks"]}
    assert ran["drift.shift"] and ran["drift.scale"] and ran["drift.columns"]


def test_drift_named_per_column_and_dimension(catalog: Catalog) -> None:
    result = curate(catalog.get_dataset("modified"), baseline=catalog.get_dataset("g1"),
                    video="off", persist=False)
    found = {(r["check"], r["severity"], r["column"], tuple(r["dims"] or ()))
             for r in _drift(result.findings.to_pylist())}
    assert found == {
        ("drift.shift", "warning", STATE_COLUMN, (0,)),
        ("drift.scale", "error", STATE_COLUMN, (10,)),
        ("drift.columns", "warning", "/action:Scalars:scalars", ()),
        ("drift.columns", "warning", "/action:SeriesLines:names", ()),
        ("drift.columns", "info", "/observation.effort:Scalars:scalars", ()),
    }
    [scaled] = [r for r in result.findings.to_pylist() if r["check"] == "drift.scale"]
    assert scaled["value"] == pytest.approx(180 / np.pi, rel=0.05)
    assert scaled["dim_names"] == ["kRightElbow"]
    assert result.verdicts and result.exit_code("error") == 1


def test_without_baseline_drift_is_skipped(catalog: Catalog) -> None:
    result = curate(catalog.get_dataset("modified"), video="off", persist=False)
    assert _drift(result.findings.to_pylist()) == []
    reasons = {c["id"]: c["reason"] for c in result.coverage["checks"]}
    assert "--baseline" in reasons["drift.shift"]


def test_cli_baseline_slice(catalog: Catalog, capsys: pytest.CaptureFixture[str]) -> None:
    base = create_slice(catalog, "g1", segments=["episode_000029", "episode_000030"],
                        name="base")
    code = main(["--catalog", catalog.url, "curate", "modified", "--baseline", base.id,
                 "--checks", "drift.*", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert {(f["check"], tuple(f["dims"] or ())) for f in out["findings"]
            if f["column"] == STATE_COLUMN} == {("drift.shift", (0,)), ("drift.scale", (10,))}
    assert main(["--catalog", catalog.url, "curate", "copy", "--baseline", "g1", "--checks",
                 "drift.*", "--fail-on", "warning"]) == 0
