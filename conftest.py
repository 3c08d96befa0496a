"""Executable documentation: every code block of README.md and docs/*.md runs as a test (sybil).

Each file runs top to bottom in a fresh folder with a fresh ``HOME`` (``RAYFORM_CATALOG`` and
``RAYFORM_CACHE_DIR`` at their defaults inside it, no display), the way a newcomer meets it:

- ``python`` blocks run in one namespace per file; README.md's run twice each, because re-running
  a block of the guide must work too;
- ``bash`` blocks run with ``bash -e -o pipefail``; ``rayform`` is the command of this checkout;
- ``sql`` blocks run against the file's catalog and must return rows;
- ``text`` and ``mermaid`` blocks are diagrams, not code (tests/docs checks that every block is
  one of these).

A block that cannot run here (it installs packages, needs a cluster or a bucket) is announced in
the rendered text by a line ``_Not run in CI: <why>._`` right above it; it is still syntax-checked
(``compile`` for Python, ``bash -n`` for shell).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import settings
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser

# Property tests run on shared, loaded CI machines: an example's wall time says nothing there.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")

ROOT = Path(__file__).resolve().parent
NOT_RUN = "_Not run in CI:"
BASH_TIMEOUT_S = 300
_SAVED = "__docs_saved_state__"


def is_not_run(example: Example) -> bool:
    """Whether the line right above the block (blank lines skipped) says it is not run."""
    before = example.document.text[:example.start].rstrip().splitlines()
    return bool(before) and before[-1].strip().startswith(NOT_RUN)


def _folder(example: Example) -> Path:
    return Path(example.namespace[_SAVED]["folder"])


def python_evaluator(*, repeat: int) -> Callable[[Example], None]:
    def evaluate(example: Example) -> None:
        source = "\n" * example.line + textwrap.dedent(example.parsed)
        code = compile(source, example.path, "exec", dont_inherit=True)
        if is_not_run(example):
            return
        for _ in range(repeat):
            exec(code, example.namespace)
    return evaluate


def bash_evaluator(example: Example) -> None:
    source = str(example.parsed)
    if is_not_run(example):
        subprocess.run(["bash", "-n", "-c", source], check=True, capture_output=True, text=True)
        return
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", source], cwd=_folder(example),
                          capture_output=True, text=True, timeout=BASH_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"bash block at {example.path}:{example.line} exited "
                             f"{proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def sql_evaluator(example: Example) -> None:
    if is_not_run(example):
        return
    from rayform import Client

    table = Client().catalog.sql(str(example.parsed)).to_arrow_table()
    assert table.num_rows > 0, f"SQL block at {example.path}:{example.line} returned no rows"


def _shim(folder: Path) -> Path:
    """A ``bin`` folder whose ``rayform`` runs this checkout's command with this interpreter."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    script = bin_dir / "rayform"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rayform.cli "$@"\n')
    script.chmod(0o755)
    return bin_dir


def setup(namespace: dict[str, Any]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="rayform-docs-"))
    home = folder / "home"
    work = folder / "work"
    home.mkdir()
    work.mkdir()
    namespace[_SAVED] = {"folder": str(work), "cwd": os.getcwd(), "environ": dict(os.environ)}
    for name in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "RAYFORM_OFFLINE", "DISPLAY",
                 "WAYLAND_DISPLAY"):
        os.environ.pop(name, None)
    os.environ.update({
        "HOME": str(home),
        "RAYFORM_CATALOG": str(home / ".local" / "share" / "rayform" / "catalog"),
        "RAYFORM_CACHE_DIR": str(home / ".cache" / "rayform"),
        "PATH": os.pathsep.join([str(_shim(folder)), str(Path(sys.executable).parent),
                                 os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    })
    os.chdir(work)


def teardown(namespace: dict[str, Any]) -> None:
    saved = namespace.pop(_SAVED)
    os.chdir(saved["cwd"])
    os.environ.clear()
    os.environ.update(saved["environ"])
    shutil.rmtree(Path(saved["folder"]).parent, ignore_errors=True)


def _sybil(patterns: list[str], *, python_repeat: int) -> Sybil:
    return Sybil(
        parsers=[CodeBlockParser("python", python_evaluator(repeat=python_repeat)),
                 CodeBlockParser("bash", bash_evaluator),
                 CodeBlockParser("sql", sql_evaluator)],
        patterns=patterns, setup=setup, teardown=teardown, path=".",
    )


pytest_collect_file = (_sybil(["README.md"], python_repeat=2)
                       + _sybil(["docs/*.md"], python_repeat=1)).pytest()
