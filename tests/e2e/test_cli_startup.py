"""``rayform --version``, ``--help`` and argument errors answer without the catalog or DataFusion
(their CPU time is measured in ``benchmarks/bench_cli.py``; here, by the modules they load)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_support import env_with_checkout

PROBE = """\
import json, sys
from rayform.cli import main
code = 0
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"datafusion", "pyarrow", "numpy",
                "torch", "rich"} or m.startswith(("rayform.catalog", "rayform.client")))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


@pytest.mark.parametrize(("args", "code"), [
    (["--version"], 0),
    (["--help"], 0),
    ([], 0),
    (["sql", "--help"], 0),
    (["segments"], 2),  # the dataset argument is missing
    (["segmnts"], 2),
    (["stats", "demo", "--limit", "-1"], 2),
])
def test_quick_answers_load_neither_the_catalog_nor_datafusion(args: list[str], code: int) -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          env=env_with_checkout(), timeout=120, check=False)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == code, proc.stderr
    assert report["loaded"] == [], f"rayform {' '.join(args)} imported {report['loaded'][:8]}"


def test_import_rayform_is_light_and_its_names_load_on_use() -> None:
    code = ("import sys, rayform\n"
            "assert 'datafusion' not in sys.modules and 'rayform.catalog' not in sys.modules\n"
            "from rayform import Catalog\n"
            "assert rayform.Catalog is Catalog and 'datafusion' in sys.modules\n"
            "assert rayform.Client.__name__ == 'Client'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env_with_checkout(), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
