"""Findings are recomputed only for new segment versions; an unreadable segment is a finding;
a slice run replaces only its own segments' findings."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from defects import REAL, build_dataset

from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._slices import create_slice
from rayform.curation import curate

pytestmark = pytest.mark.realdata
EPISODE = "data/chunk-000/episode_000001.parquet"


def _register(dataset: DatasetEntry, source: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset.register([str(source)], on_duplicate="replace").wait()


@pytest.fixture()
def dataset(tmp_path: Path) -> DatasetEntry:
    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")
    ds = Catalog.create(str(tmp_path / "catalog")).create_dataset("g1")
    _register(ds, build_dataset(tmp_path / "a", defects=False, trims=(0,)))
    return ds


def test_only_new_versions_recomputed(dataset: DatasetEntry, tmp_path: Path) -> None:
    first = curate(dataset, video="off")
    assert first.coverage["reused"] == 0 and first.at_least("warning").num_rows == 0
    changed = build_dataset(tmp_path / "b", defects=True, trims=(0,))  # episode 0: a NaN burst
    shutil.copyfile(tmp_path / "a/g1-defects" / EPISODE, changed / EPISODE)  # episode 1 as it was
    before = {r.segment_id: r.version for r in dataset.segment_records()}
    _register(dataset, changed)
    after = {r.segment_id: r.version for r in dataset.segment_records()}
    assert before["episode_000001"] == after["episode_000001"]
    assert before["episode_000000"] != after["episode_000000"]
    second = curate(dataset, video="off")
    assert second.coverage["reused"] == 1
    [nan] = [r for r in second.findings.to_pylist() if r["check"] == "values.nonfinite"]
    assert nan["segment"] == "episode_000000"
    assert nan["segment_version"] == after["episode_000000"]
    assert nan["dataset_version"] == dataset.snapshot_version


def test_unreadable_segment_is_a_finding(dataset: DatasetEntry) -> None:
    record = dataset.segment_record("episode_000001")
    path = dataset.catalog.store.object_path(record.layers["base"].object)
    path.unlink()
    result = curate(dataset, video="off", persist=False)
    [lost] = [r for r in result.findings.to_pylist() if r["check"] == "coverage.readable"]
    assert lost["segment"] == "episode_000001" and lost["severity"] == "error"
    assert result.verdict("episode_000001").verdict == "exclude"
    assert (result.coverage["registered"], result.coverage["readable"]) == (2, 1)


def test_slice_run_keeps_other_segments(dataset: DatasetEntry) -> None:
    whole = curate(dataset, video="off")
    catalog = dataset.catalog
    assert isinstance(catalog, Catalog)
    one = create_slice(catalog, dataset, segments=["episode_000000"])
    part = curate(one, video="off")
    assert [v.segment for v in part.verdicts] == ["episode_000000"]
    stored = dataset.findings()
    assert sorted(stored.column("segment").drop_null().unique().to_pylist()) == \
        sorted(whole.findings.column("segment").drop_null().unique().to_pylist())


def test_rate_per_stream(tmp_path: Path) -> None:
    from dataclasses import replace

    from defects import DEFECTS, slow_timestamps

    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")
    ds = Catalog.create(str(tmp_path / "catalog")).create_dataset("g1")
    slow = (replace(DEFECTS[0], inject=slow_timestamps),)  # episode 0's rows at 25 Hz
    _register(ds, build_dataset(tmp_path / "a", defects=slow, trims=(0,)))
    result = curate(ds, video="off", persist=False)
    rates = [r for r in result.findings.to_pylist() if r["check"] == "timing.rate"]
    # the rows are at 25 Hz; the camera's frames (its own stream) stay at the declared 30 Hz
    assert [(r["segment"], r["column"]) for r in rates] == [("episode_000000", None)]
    assert rates[0]["value"] == pytest.approx(25.0, rel=1e-3)
    assert rates[0]["baseline"] == pytest.approx(30.0)
