"""Truncated and bit-flipped ROS bags get a rayform FormatError naming the file (or register
what they still hold, when a flip lands in a value): never a raw traceback, a hang or a crash,
and a refused bag leaves the catalog as it was."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pytest
from rosbag_sources import write_ros1_bag, write_rosbag2

from rayform.catalog import Catalog
from rayform.errors import ConversionWarning, FormatError

pytest.importorskip("rosbags")

Guard = Callable[[Path], AbstractContextManager[None]]
REALDATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "realdata"
HUSKY = REALDATA / "rosbag1-robot-localization" / "test1.bag"


def _register_or_refuse(catalog: Catalog, path: Path, name: str,
                        disk_unchanged: Guard) -> None:
    ds = catalog.create_dataset(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        try:
            with disk_unchanged(Path(catalog.url)):
                ds.register(path).wait()
        except FormatError as err:
            assert path.name in str(err) or path.parent.name in str(err), err
            assert ds.segment_ids() == []
            return
        except AssertionError:
            # registered: the guard saw the catalog change, as it must
            assert len(ds.segment_ids()) == 1


@pytest.fixture
def ros1_bag(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    return write_ros1_bag(tmp_path / "src" / "run.bag")


@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.6, 0.97])
def test_truncated_ros1_bag_is_refused_naming_it(tmp_path: Path, catalog: Catalog,
                                                  ros1_bag: Path, disk_unchanged: Guard,
                                                  fraction: float) -> None:
    data = ros1_bag.read_bytes()
    cut = tmp_path / "cut.bag"
    cut.write_bytes(data[: int(len(data) * fraction)])
    ds = catalog.create_dataset("x")
    with disk_unchanged(Path(catalog.url)), pytest.raises(FormatError, match=r"cut\.bag"):
        ds.register(cut)


def test_bit_flipped_ros1_bags_are_refused_or_registered(tmp_path: Path, catalog: Catalog,
                                                         ros1_bag: Path,
                                                         disk_unchanged: Guard) -> None:
    data = ros1_bag.read_bytes()
    rng = np.random.default_rng(7)
    for k, offset in enumerate(sorted(rng.choice(len(data), size=12, replace=False))):
        flipped = bytearray(data)
        flipped[offset] ^= 1 << int(rng.integers(8))
        path = tmp_path / f"flip{k}.bag"
        path.write_bytes(bytes(flipped))
        _register_or_refuse(catalog, path, f"f{k}", disk_unchanged)


@pytest.mark.skipif(not HUSKY.is_file(), reason="needs ../shared/realdata (rosbag1 sample)")
@pytest.mark.parametrize("where", ["truncated", "bz2 chunk flipped"])
def test_damaged_real_bz2_bag_is_refused_naming_it(tmp_path: Path, catalog: Catalog,
                                                   disk_unchanged: Guard, where: str) -> None:
    data = bytearray(HUSKY.read_bytes())
    if where == "truncated":
        data = data[: len(data) // 2]
    else:
        at = data.find(b"BZh91AY&SY") + 200  # inside the first bz2 chunk's compressed stream
        data[at] ^= 0x20
    path = tmp_path / "husky.bag"
    path.write_bytes(bytes(data))
    ds = catalog.create_dataset("x")
    with disk_unchanged(Path(catalog.url)), pytest.raises(FormatError, match=r"husky\.bag"):
        ds.register(path)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9])
def test_truncated_db3_is_refused_naming_it(tmp_path: Path, catalog: Catalog,
                                            disk_unchanged: Guard, fraction: float) -> None:
    folder = write_rosbag2(tmp_path / "bag", storage="sqlite3")
    db = next(folder.glob("*.db3"))
    data = db.read_bytes()
    db.write_bytes(data[: int(len(data) * fraction)])
    ds = catalog.create_dataset("x")
    with disk_unchanged(Path(catalog.url)), pytest.raises(FormatError, match=r"bag"):
        ds.register(folder)


def test_bit_flipped_db3_files_are_refused_or_registered(tmp_path: Path, catalog: Catalog,
                                                         disk_unchanged: Guard) -> None:
    folder = write_rosbag2(tmp_path / "src", storage="sqlite3")
    db = next(folder.glob("*.db3"))
    data = db.read_bytes()
    rng = np.random.default_rng(11)
    for k, offset in enumerate(sorted(rng.choice(len(data), size=12, replace=False))):
        flipped = bytearray(data)
        flipped[offset] ^= 1 << int(rng.integers(8))
        path = tmp_path / f"flip{k}.db3"
        path.write_bytes(bytes(flipped))
        _register_or_refuse(catalog, path, f"f{k}", disk_unchanged)


def test_a_db3_that_is_not_sqlite_is_refused_naming_it(tmp_path: Path, catalog: Catalog) -> None:
    path = tmp_path / "fake.db3"
    path.write_bytes(b"not a database at all" * 10)
    with pytest.raises(FormatError, match=r"fake\.db3: not a ROS 1 bag .* or a ROS 2 sqlite3"):
        catalog.create_dataset("x").register(path)
