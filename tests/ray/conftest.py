"""Fixtures for rayform.ray: one local Ray cluster per session and small synthetic episodes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_episodes import NUM_EPISODES, write_episode

from rayform.catalog import Catalog


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A local 2-CPU Ray cluster shared by every test of the session (skips without Ray)."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def episode_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four episodes of 60–90 frames (written once per session)."""
    root = tmp_path_factory.mktemp("episodes")
    return [write_episode(root / f"ep{i}.rfr", f"ep{i}", seed=i, num_frames=60 + 10 * i)
            for i in range(NUM_EPISODES)]


@pytest.fixture
def make_catalog(tmp_path: Path) -> Callable[[], Catalog]:
    """``make_catalog()`` -> a new empty catalog below ``tmp_path``."""
    counter = iter(range(1000))

    def make() -> Catalog:
        return Catalog.create(tmp_path / f"catalog{next(counter)}")

    return make
