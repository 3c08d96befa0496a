"""Fixtures for the format importer/exporter tests: the real-data folder and small helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

REALDATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "realdata"


@pytest.fixture(scope="session")
def realdata() -> Path:
    """``../shared/realdata`` next to the repository (skips when absent)."""
    if not REALDATA.is_dir():
        pytest.skip(f"real data folder {REALDATA} is absent")
    return REALDATA.resolve()
