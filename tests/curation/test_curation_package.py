"""``rayform.curation``: its public surface, stable check ids, and no torch on import."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import rayform.curation as curation
from rayform.curation import all_checks
from rayform.curation._check import select_checks


def test_all_is_sorted_and_complete() -> None:
    exported = list(curation.__all__)
    assert exported == sorted(exported)
    public = {n for n, v in vars(curation).items() if not n.startswith("_")
              and not inspect.ismodule(v) and n != "annotations"}
    assert public == set(exported)


def test_check_ids_are_stable_and_documented() -> None:
    checks = all_checks()
    ids = [c.id for c in checks]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z]+\.[a-z_]+", i) for i in ids)
    assert all(c.detects and c.how and c.threshold for c in checks)
    assert all((c.run_segment is None) != (c.run_dataset is None) or c.id.startswith("coverage.")
               for c in checks)
    doc = (__import__("pathlib").Path(__file__).resolve().parents[2] / "docs/curation.md"
           ).read_text()
    assert all(f"`{i}`" in doc for i in ids), "every check id is in docs/curation.md"
    assert [c.id for c in select_checks(checks, ["series.*", "-series.spike"])] == \
        ["series.frozen", "series.tracking"]


def test_import_does_not_load_torch() -> None:
    code = ("import rayform.curation\nimport sys\n"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
