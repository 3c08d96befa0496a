"""Factory fixtures for catalog tests: small, deterministic synthetic robot recordings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from recording_factories import RecordingFactory, RobotEpisode, disk_state, write_robot_episode

from rayform.catalog import Catalog, DatasetEntry


@pytest.fixture
def recording_factory(tmp_path: Path) -> RecordingFactory:
    """``make(recording_id, seed=…, num_frames=…, …) -> Path`` writing into ``tmp_path/src``."""
    src = tmp_path / "src"
    counter = iter(range(1_000_000))

    def make(recording_id: str, *, filename: str | None = None, **kwargs: Any) -> Path:
        name = filename or f"{recording_id}-{next(counter)}.rfr"
        return write_robot_episode(src / name, RobotEpisode(recording_id=recording_id, **kwargs))

    return make


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog.create(tmp_path / "catalog")


@pytest.fixture
def robots(catalog: Catalog, recording_factory: RecordingFactory) -> DatasetEntry:
    """Dataset ``robots`` with three episodes ``ep0``, ``ep1``, ``ep2`` (seeds 0, 1, 2)."""
    ds = catalog.create_dataset("robots")
    paths = [recording_factory(f"ep{i}", seed=i, num_frames=30 + 3 * i) for i in range(3)]
    ds.register(paths).wait()
    return ds


@pytest.fixture
def disk_unchanged() -> Callable[[Path], AbstractContextManager[None]]:
    """``with disk_unchanged(root): ...`` asserts every file and folder below ``root`` is the
    same (names and bytes) after the block as before it."""

    @contextmanager
    def guard(root: Path) -> Iterator[None]:
        before = disk_state(root)
        yield
        after = disk_state(root)
        assert after == before, {
            "added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)),
            "changed": sorted(k for k in after if k in before and after[k] != before[k]),
        }

    return guard
