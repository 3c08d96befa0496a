"""Fixtures: the defect datasets (copies of the real Unitree episodes, numeric and video
defects) and the real episodes."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from defects import REAL, build_dataset
from video_defects import build_video_dataset

from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import ConversionWarning


def _register(root: Path, source: Path) -> DatasetEntry:
    catalog = Catalog.create(str(root / "catalog"))
    dataset = catalog.create_dataset("g1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # the real folder is a partial download
        dataset.register([str(source)]).wait()
    return dataset


@pytest.fixture(scope="module")
def defect_dataset(tmp_path_factory: pytest.TempPathFactory) -> DatasetEntry:
    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")
    root = tmp_path_factory.mktemp("defects")
    return _register(root, build_dataset(root))


@pytest.fixture(scope="session")
def video_dataset(tmp_path_factory: pytest.TempPathFactory) -> DatasetEntry:
    """Shared by the video check and plot tests (built once per run)."""
    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")
    root = tmp_path_factory.mktemp("video")
    return _register(root, build_video_dataset(root))


@pytest.fixture()
def real_dataset(tmp_path: Path) -> DatasetEntry:
    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")
    return _register(tmp_path, REAL)
