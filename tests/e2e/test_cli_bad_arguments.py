"""Bad argument values are usage errors naming the option, never raw tracebacks: counts beyond
int64, a non-finite frame rate, a catalog that is a regular file or has an unknown scheme."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import RunCli


@pytest.mark.parametrize(("args", "message"), [
    (["segments", "demo", "--limit", "100000000000000000000"], "must be at most"),
    (["segments", "demo", "--limit", "1e20"], "expected a whole number"),
    (["export", "lerobot", "demo", "out", "--fps", "inf"], "must be a finite number above 0"),
    (["export", "lerobot", "demo", "out", "--fps", "nan"], "must be a finite number above 0"),
    (["sql", "--timeout", "-1", "SELECT 1"], "must be a finite number above 0"),
])
def test_bad_values_are_usage_errors(run_cli: RunCli, tmp_path: Path, args: list[str],
                                     message: str) -> None:
    done = run_cli("--catalog", str(tmp_path), *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_catalog_that_is_a_file_says_so(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    done = run_cli("--catalog", str(tmp_path / "notes.txt"), "datasets")
    assert done.returncode != 0 and "it is a file, not a catalog directory" in done.stderr


def test_an_unknown_url_scheme_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    done = run_cli("--catalog", "ftp://host/x", "datasets")
    assert done.returncode != 0 and "scheme 'ftp' is not supported" in done.stderr
    assert not Path("ftp:").exists()
