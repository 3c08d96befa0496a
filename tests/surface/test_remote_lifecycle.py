"""The lifecycle on an ``s3://`` catalog: delete, rename and recreate are exclusive creates, as
every commit there; a second process sees each at once (entry files and listings are never read
from a stale cache while online), and pinned slices keep reading."""

from __future__ import annotations

from pathlib import Path

import pytest
from surface_data import write_episode

import rayform
from rayform.errors import EntryNotFoundError


def test_delete_rename_and_recreate_on_s3(s3_url: str, tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(s3_url)
    robots = catalog.create_dataset("robots")
    robots.register([write_episode(tmp_path / f"ep{i}.rfr", f"ep{i}", seed=i)
                     for i in range(2)]).wait()
    pinned = rayform.Client(catalog).slices.create("robots", segments=["ep1"])
    robots.set_name("fleet")
    other = rayform.Catalog.open(s3_url)  # another process's view
    assert other.dataset_names() == ["fleet"]
    assert other.get_dataset("fleet").segment_ids() == ["ep0", "ep1"]
    with pytest.raises(EntryNotFoundError, match="renamed to 'fleet'"):
        other.get_dataset("robots")
    other.delete_dataset("fleet")
    assert rayform.Catalog.open(s3_url).dataset_names() == []
    again = rayform.Catalog.open(s3_url).create_dataset("fleet")
    assert again.segment_ids() == []
    assert rayform.Client(s3_url).slices.get(pinned.id).view().segment_ids() == ["ep1"]
