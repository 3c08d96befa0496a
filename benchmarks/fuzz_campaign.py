"""The long fuzz campaign: many seeded importer mutations of ../shared/realdata and every hostile
SQL statement, each run in a child process, printed as counts by outcome.

Outcomes (see tests/fuzz/fuzz_harness.py): ``error`` (a clear rayform error), ``identical``
(accepted, same data), ``warned`` (accepted with other data and a ConversionWarning saying so),
``changed`` (accepted with other data: byte mutations of formats without
payload checksums only), ``other`` (a failure: raw exception, crash, time bound, or wrong-typed
metadata accepted with other data). Exits 1 if any case is ``other``.

    python benchmarks/fuzz_campaign.py            # 400 importer cases in 8 children
    BENCH_QUICK=1 python benchmarks/fuzz_campaign.py   # 20 cases
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))

from fuzz_harness import HOSTILE_SQL, run_child


def main() -> int:
    quick = os.environ.get("BENCH_QUICK") == "1"
    children, per_child = (1, 20) if quick else (8, 50)
    started = time.monotonic()
    results = []
    for seed in range(children):
        results += run_child("importers", seed=1000 + seed, count=per_child, timeout_s=3600)
    results += run_child("sql", seed=0, count=len(HOSTILE_SQL), timeout_s=600)
    elapsed = time.monotonic() - started
    by = Counter((str(r["source"]), str(r["mutation"]), str(r["outcome"])) for r in results)
    print(f"fuzz campaign: {len(results)} cases in {elapsed:.0f} s on {os.cpu_count()} cores")
    outcomes = ("error", "identical", "warned", "changed", "other")
    print(f"{'source':10} {'mutation':11} " + " ".join(f"{o:>9}" for o in outcomes))
    for source, mutation in sorted({(s, m) for s, m, _ in by}):
        counts = [by[(source, mutation, o)] for o in outcomes]
        print(f"{source:10} {mutation:11} " + " ".join(f"{c:9}" for c in counts))
    totals = Counter(str(r["outcome"]) for r in results)
    print("total:", dict(sorted(totals.items())))
    for r in results:
        if r["outcome"] == "other":
            print(f"OTHER {r['source']} {r['mutation']} {r['what']}: {r['detail']}")
    return 1 if totals["other"] else 0


if __name__ == "__main__":
    sys.exit(main())
