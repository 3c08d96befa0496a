"""The unmodified real Unitree episodes: quiet by default, and the partial download reported."""

from __future__ import annotations

import pytest

from rayform.catalog import DatasetEntry
from rayform.curation import curate

pytestmark = pytest.mark.realdata


def test_real_episodes_quiet(real_dataset: DatasetEntry) -> None:
    result = curate(real_dataset, video="full")
    assert result.at_least("warning").to_pylist() == []
    assert [v.verdict for v in result.verdicts] == ["ok", "ok"]
    assert result.exit_code("warning") == 0


def test_partial_download_reported(real_dataset: DatasetEntry) -> None:
    result = curate(real_dataset, video="off")
    coverage = result.coverage
    assert (coverage["declared"], coverage["registered"], coverage["readable"],
            coverage["checked"]) == (100, 2, 2, 2)
    [declared] = [r for r in result.findings.to_pylist() if r["check"] == "coverage.declared"]
    assert declared["segment"] is None and "2 of 100" in declared["message"]
    assert [v.segment for v in result.verdicts] == ["episode_000029", "episode_000030"]
    skipped = {c["id"]: c["reason"] for c in coverage["checks"] if not c["ran"]}
    assert "values.offset" in skipped and "needs at least 4" in skipped["values.offset"]
    assert "video.identical" in skipped  # --video off
