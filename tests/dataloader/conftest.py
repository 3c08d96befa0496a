"""Fixtures for the dataloader tests: small deterministic catalogs (read-only once written)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from dataloader_factories import Episode, make_dataset

from rayform.catalog import DatasetEntry


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def robots(tmp_path_factory: pytest.TempPathFactory) -> tuple[DatasetEntry, list[Episode]]:
    """Three episodes (30, 34, 38 frames) with joints, a sparse gripper, a camera and video."""
    return make_dataset(tmp_path_factory.mktemp("robots"), with_video=True)


@pytest.fixture(scope="session")
def robots_dataset(robots: tuple[DatasetEntry, list[Episode]]) -> DatasetEntry:
    return robots[0]


@pytest.fixture(scope="session")
def robots_episodes(robots: tuple[DatasetEntry, list[Episode]]) -> list[Episode]:
    return robots[1]


@pytest.fixture
def fresh_dataset(tmp_path: Path) -> tuple[DatasetEntry, list[Episode]]:
    """A private copy for tests that register more segments."""
    return make_dataset(tmp_path, num_episodes=2)
