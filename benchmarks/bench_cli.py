"""Start-up of the ``rayform`` command: ``--version``, ``--help`` and an argument error.

Run ``python benchmarks/bench_cli.py`` (``BENCH_QUICK=1`` for fewer runs). Each case is run as a
fresh process; the figure is its CPU time (user + system, from ``os.wait4``), the median of the
runs. The limit is the same interpreter doing nothing (``python -c pass``) in the same run: what
any Python command costs. Target: at most 0.3 s CPU per case (the catalog and DataFusion are not
imported for these; ``tests/e2e/test_cli_startup.py`` checks that by module, not by a timer).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICK = os.environ.get("BENCH_QUICK") == "1"
RUNS = 3 if QUICK else 15
TARGET_CPU_S = 0.3
CASES = {
    "--version": ["-m", "rayform.cli", "--version"],
    "--help": ["-m", "rayform.cli", "--help"],
    "segments (no dataset: argument error)": ["-m", "rayform.cli", "segments"],
    "sql --help": ["-m", "rayform.cli", "sql", "--help"],
}


def cpu_seconds(args: list[str]) -> float:
    """CPU time (user + system) of ``python ARGS`` as a fresh child process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime


def median_cpu(args: list[str]) -> float:
    return statistics.median(cpu_seconds(args) for _ in range(RUNS))


def main() -> None:
    print(f"rayform command start-up, CPU seconds (median of {RUNS} fresh processes, "
          f"{os.cpu_count()} cores{'; quick mode' if QUICK else ''})")
    bare = median_cpu(["-c", "pass"])
    print(f"  limit: python -c pass                      {bare:6.3f} s")
    worst = 0.0
    for name, args in CASES.items():
        spent = median_cpu(args)
        worst = max(worst, spent)
        print(f"  rayform {name:<36} {spent:6.3f} s  ({spent / bare:4.1f}x the bare interpreter)")
    verdict = "meets" if worst <= TARGET_CPU_S else "MISSES"
    print(f"  slowest case {worst:.3f} s {verdict} the target of {TARGET_CPU_S} s CPU")


if __name__ == "__main__":
    main()
