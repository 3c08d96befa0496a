"""A segment index file removed while a process still reads it (a cache or catalog cleaned under
a live process) is fetched once more, then reported as ObjectMissingError, never pyarrow's bare
FileNotFoundError."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._snapshot import SegmentIndex
from rayform.errors import CorruptMetadataError, ObjectMissingError


def _index_copy(robots: DatasetEntry, tmp_path: Path) -> tuple[SegmentIndex, Path, bytes]:
    """A copy of the robots dataset's segment index object, opened (records left on disk)."""
    catalog = Catalog.open(robots.catalog.url)
    for path in sorted((Path(catalog.url) / "objects").rglob("*")):
        if not path.is_file():
            continue
        try:
            SegmentIndex.read(path, source=str(path))
        except CorruptMetadataError:
            continue  # a recording, not an index
        data = path.read_bytes()
        copy = tmp_path / "index.arrow"
        copy.write_bytes(data)
        return SegmentIndex.read(copy, source="copy"), copy, data
    raise AssertionError("no segment index object found")


def test_records_of_a_vanished_index_are_fetched_once_more(robots: DatasetEntry,
                                                           tmp_path: Path) -> None:
    index, copy, data = _index_copy(robots, tmp_path)
    copy.unlink()
    fetched: list[int] = []

    def reopen() -> Path:
        fetched.append(1)
        copy.write_bytes(data)
        return copy

    index.refetch_with(reopen)
    assert index.table.num_rows == 3
    assert fetched == [1]


def test_an_index_that_vanishes_again_is_object_missing(robots: DatasetEntry,
                                                        tmp_path: Path) -> None:
    index, copy, _ = _index_copy(robots, tmp_path)
    copy.unlink()
    index.refetch_with(lambda: copy)  # the refetch finds nothing either
    with pytest.raises(ObjectMissingError, match="vanished while being read, twice"):
        index.table  # noqa: B018 (the property reads the records)
