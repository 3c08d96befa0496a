"""Importers load without their optional packages and say which extra to install when used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from format_sources import write_lerobot_v21

from rayform.catalog import Catalog
from rayform.importers import find_importer


def test_format_modules_import_without_optional_packages_or_torch() -> None:
    code = (
        "import sys\n"
        "for name in ('rerun', 'mcap', 'mcap_ros2', 'rosbags', 'av', 'yaml', 'PIL', 'torch', 'zarr',\n"
        "             'numcodecs', 'google_crc32c', 'h5py', 'pyulog'):\n"
        "    sys.modules[name] = None\n"
        "import rayform.importers.rrd, rayform.importers.mcap, rayform.importers.lerobot\n"
        "import rayform.importers.rlds, rayform.importers.zarr, rayform.importers.rosbag\n"
        "import rayform.importers.mp4, rayform.importers.hdf5, rayform.importers.ulog\n"
        "import rayform.exporters\n"
        "from rayform.importers._registry import _REGISTRY\n"
        "print(sorted(i.name for i in _REGISTRY))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == ("['hdf5', 'lerobot', 'mcap', 'mp4', 'rayform', 'rlds', 'rosbag', 'rrd', "
                           "'ulog', 'zarr']")


@pytest.mark.parametrize(("filename", "head", "importer", "blocked", "extra"), [
    ("run.mcap", b"\x89MCAP0\r\n", "mcap", "mcap.reader", "mcap"),
    ("rec.rrd", b"RRF2", "rrd", "rerun.chunk", "rerun"),
    ("clip.mp4", b"\x00\x00\x00\x18ftypisom", "mp4", "av", "video"),
    ("run.bag", b"#ROSBAG V2.0\n", "rosbag", "rosbags.highlevel", "rosbag"),
    ("run.db3", b"SQLite format 3\x00", "rosbag", "rosbags.highlevel", "rosbag"),
])
def test_missing_package_is_named_only_when_used(tmp_path: Path, catalog: Catalog,
                                                 monkeypatch: pytest.MonkeyPatch, filename: str,
                                                 head: bytes, importer: str, blocked: str,
                                                 extra: str) -> None:
    path = tmp_path / filename
    path.write_bytes(head + b"\x00" * 64)
    monkeypatch.setitem(sys.modules, blocked, None)
    assert find_importer(path).name == importer  # sniffing needs no optional package
    ds = catalog.create_dataset("x")
    with pytest.raises(ImportError, match=rf"pip install 'rayform\[{extra}\]'"):
        ds.register(path)
    assert ds.segment_ids() == []


def test_lerobot_without_video_needs_no_optional_package(tmp_path: Path, catalog: Catalog,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 4}, video=False)
    monkeypatch.setitem(sys.modules, "av", None)
    ds = catalog.create_dataset("x")
    assert ds.register(tmp_path / "ds").wait().segment_ids == ["episode_000000"]
