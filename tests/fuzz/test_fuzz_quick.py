"""The quick fuzz run of CI: importer mutations of the real recordings and hostile SQL, each in a
child process, every case a clear rayform error or accepted (identical data, or other data for a
byte mutation of a format without checksums); nothing else. ``benchmarks/fuzz_campaign.py``
runs the long campaign."""

from __future__ import annotations

from collections import Counter

import pytest
from fuzz_harness import HOSTILE_SQL, REALDATA, run_child

ALLOWED = {"error", "identical", "warned", "changed"}


def _report(results: list[dict[str, object]]) -> str:
    return "\n".join(f"{r['source']} {r['mutation']} {r['what']}: {r['detail']}"
                     for r in results if r["outcome"] not in ALLOWED)


@pytest.mark.timeout(300)
def test_importer_fuzz_cases_end_in_rayform_errors_or_accepted_data() -> None:
    if not REALDATA.is_dir():
        pytest.skip(f"{REALDATA} is absent: the fuzz suite mutates its recordings")
    results = run_child("importers", seed=0, count=20, timeout_s=280)
    assert len(results) == 20
    assert not _report(results), _report(results)
    counts = Counter(str(r["outcome"]) for r in results)
    assert counts["error"] >= 5  # the mutations reach the checks, not only harmless bytes


@pytest.mark.timeout(300)
def test_hostile_sql_is_refused_or_runs_never_crashes() -> None:
    results = run_child("sql", seed=0, count=len(HOSTILE_SQL), timeout_s=280)
    assert len(results) == len(HOSTILE_SQL)
    assert not _report(results), _report(results)
