"""``bookkeeping.stats``: the statistics a LeRobot dataset stores (kept at registration as
properties) against those recomputed from its rows: quiet on the real Unitree episodes, each
tampered figure named by column and dimension, ``meta/stats.json`` compared when complete."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from defects import ACTION_COLUMN, REAL, STATE_COLUMN, real_copy

from rayform.catalog import Catalog, DatasetEntry
from rayform.curation import curate
from rayform.errors import ConversionWarning

pytestmark = pytest.mark.realdata
CHECK = ["bookkeeping.*stats"]


def _register(root: Path, folder: Path) -> DatasetEntry:
    catalog = Catalog.create(str(root / "catalog"))
    dataset = catalog.create_dataset("g1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # a partial download (2 of 100)
        dataset.register([str(folder)]).wait()
    return dataset


@pytest.fixture()
def need_real() -> None:
    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")


def _rows(result: Any) -> list[dict[str, Any]]:
    return [r for r in result.findings.to_pylist() if r["check"].endswith("stats")]


def test_real_stored_stats_kept_and_agree(tmp_path: Path, need_real: None) -> None:
    dataset = _register(tmp_path, REAL)
    props = dataset.segment_record("episode_000029").properties
    assert props["source_stats:action:count"] == 221
    assert len(props["source_stats:observation.state:mean"]) == 26  # type: ignore[arg-type]
    assert _rows(curate(dataset, checks=CHECK, video="off", persist=False)) == []


def _tamper(stats: dict[int, dict[str, Any]]) -> None:
    stats[29]["observation.state"]["mean"][3] += 0.01
    stats[29]["observation.state"]["max"][5] += 0.001
    stats[30]["action"]["count"] = [270]
    stats[30]["observation.images.cam_high"]["mean"] = "not numbers"  # visual: not kept


def test_tampered_stats_named(tmp_path: Path, need_real: None) -> None:
    dataset = _register(tmp_path, real_copy(tmp_path / "src", stats=_tamper))
    found = {(r["segment"], r["column"], tuple(r["dims"]), r["message"].split(" of ")[0])
             for r in _rows(curate(dataset, checks=CHECK, video="off", persist=False))}
    assert found == {
        ("episode_000029", STATE_COLUMN, (3,), "the source's stored episode mean"),
        ("episode_000029", STATE_COLUMN, (5,), "the source's stored episode max"),
        ("episode_000030", ACTION_COLUMN, (), "the source's stored episode count"),
    }
    [mean] = [r for r in _rows(curate(dataset, checks=CHECK, video="off", persist=False))
              if r["dims"] == [3]]
    assert mean["dim_names"] == ["kLeftElbow"] and mean["severity"] == "warning"
    assert mean["baseline"] - mean["value"] == pytest.approx(0.01, abs=1e-5)


def test_malformed_stats_dropped_with_a_warning(tmp_path: Path, need_real: None) -> None:
    def bad(stats: dict[int, dict[str, Any]]) -> None:
        stats[29]["action"]["min"] = [1.0, "x"]
        stats[30]["observation.state"]["std"] = [0.0] * 3

    folder = real_copy(tmp_path / "src", stats=bad)
    catalog = Catalog.create(str(tmp_path / "catalog"))
    dataset = catalog.create_dataset("g1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset.register([str(folder)]).wait()
    messages = [str(w.message) for w in caught]
    assert any("'min' of feature 'action' is not 26 number(s)" in m for m in messages)
    assert "source_stats:action:min" not in dataset.segment_record("episode_000029").properties
    assert _rows(curate(dataset, checks=CHECK, video="off", persist=False)) == []


def _dataset_stats(folder: Path, tamper: bool) -> None:
    info = json.loads((folder / "meta/info.json").read_text())
    info["total_episodes"] = 2  # complete: stats.json covers exactly what is registered
    (folder / "meta/info.json").write_text(json.dumps(info))
    state = np.concatenate([np.stack(pq.read_table(p).column("observation.state").to_pylist())
                            for p in sorted((folder / "data").rglob("*.parquet"))])
    figures = {"min": state.min(0).tolist(), "max": state.max(0).tolist(),
               "mean": state.mean(0).tolist(), "std": state.std(0).tolist(),
               "count": [len(state)]}
    if tamper:
        figures["std"][12] *= 1.5
    (folder / "meta/stats.json").write_text(json.dumps({"observation.state": figures}))


@pytest.mark.parametrize("tamper", [False, True])
def test_dataset_stats_json(tmp_path: Path, need_real: None, tamper: bool) -> None:
    folder = real_copy(tmp_path / "src")
    _dataset_stats(folder, tamper)
    rows = _rows(curate(_register(tmp_path, folder), checks=CHECK, video="off", persist=False))
    if not tamper:
        assert rows == []
        return
    [row] = rows
    assert (row["check"], row["segment"], row["column"], row["dims"], row["severity"]) == \
        ("bookkeeping.dataset_stats", None, STATE_COLUMN, [12], "error")
    assert "meta/stats.json" in row["message"] and "std" in row["message"]


def test_partial_dataset_stats_not_compared(tmp_path: Path, need_real: None) -> None:
    folder = real_copy(tmp_path / "src")
    _dataset_stats(folder, True)
    info = json.loads((folder / "meta/info.json").read_text())
    info["total_episodes"] = 100
    (folder / "meta/info.json").write_text(json.dumps(info))
    [row] = _rows(curate(_register(tmp_path, folder), checks=CHECK, video="off",
                         persist=False))
    assert row["severity"] == "info" and "not compared" in row["message"]
