"""``rayform.ui``: its public surface, no torch on import, and a one-line hint without the extra."""

from __future__ import annotations

import inspect
import subprocess
import sys

import rayform.ui as ui


def test_all_is_sorted_and_complete() -> None:
    exported = list(ui.__all__)
    assert exported == sorted(exported)
    public = {n for n, v in vars(ui).items() if not n.startswith("_")
              and not inspect.ismodule(v) and n != "annotations"}
    assert public == set(exported)


def test_import_and_app_do_not_load_torch(tmp_path: object) -> None:
    code = ("import sys\nfrom rayform.catalog import Catalog\nfrom rayform.ui import create_app\n"
            f"create_app(Catalog.create({str(tmp_path)!r}))\n"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_web_stack_is_one_line_naming_the_extra() -> None:
    # starlette hidden: what `rayform ui` prints instead of a traceback
    code = ("import sys\nsys.modules['starlette'] = None\n"
            "from rayform.cli import main\n"
            "sys.exit(main(['--catalog', sys.argv[1], 'ui', '--no-browser']))")
    done = subprocess.run([sys.executable, "-c", code, "unused-catalog"], capture_output=True,
                          text=True)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "rayform ui" in lines[0] and "[ui]" in lines[0], done.stderr
