"""Damaged HDF5 and ULog files: truncated or bit-flipped, each is refused with a FormatError that
names the file (or registers, where the damage hit only values), never a raw error or a crash."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hdf5_sources import write_aloha, write_robomimic

from rayform.catalog import Catalog
from rayform.errors import CorruptRecordingError, FormatError
from rayform.importers.hdf5 import Hdf5Importer
from rayform.importers.ulog import ULogImporter

h5py = pytest.importorskip("h5py")


def _convert_or_format_error(importer: object, path: Path, staging: Path) -> str:
    """``"ok"`` or ``"refused"``; anything else (a raw error) fails the test."""
    staging.mkdir(exist_ok=True)
    try:
        importer.convert(path, staging)  # type: ignore[attr-defined]
    except FormatError as err:
        assert str(path) in str(err)
        return "refused"
    return "ok"


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated_hdf5_is_refused_naming_the_file(tmp_path: Path, catalog: Catalog,
                                                   keep: float) -> None:
    src = tmp_path / "full.hdf5"
    write_robomimic(src, lengths={0: 20, 1: 20})
    data = src.read_bytes()
    cut = tmp_path / "cut.hdf5"
    cut.write_bytes(data[:int(len(data) * keep)])
    ds = catalog.create_dataset("x")
    with pytest.raises(FormatError, match=r"cut.hdf5: .*(truncated|damaged|signature)"):
        ds.register(cut)
    assert ds.segment_ids() == []


def test_a_file_named_h5_that_is_not_hdf5_says_so(tmp_path: Path, catalog: Catalog) -> None:
    (tmp_path / "notes.h5").write_bytes(b"hello, this is text\n" * 10)
    with pytest.raises(FormatError, match=r"notes.h5: not an HDF5 file"):
        catalog.create_dataset("x").register(tmp_path / "notes.h5")


def test_a_flipped_bit_in_a_compressed_chunk_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "demo.hdf5"
    write_robomimic(src, lengths={0: 400}, image=False)
    with h5py.File(src, "r") as f:
        offset = f["data/demo_0/states"].id.get_chunk_info(0).byte_offset
    data = bytearray(src.read_bytes())
    data[offset + 40] ^= 0xFF  # inside the deflate stream of the states' first chunk
    src.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordingError, match=r"demo.hdf5: dataset '/data/demo_0/states'"):
        Hdf5Importer().convert(src, tmp_path)


@pytest.mark.parametrize("layout", ["aloha", "robomimic"])
def test_flipped_bytes_anywhere_give_a_format_error_or_a_registration(tmp_path: Path,
                                                                      layout: str) -> None:
    src = tmp_path / "src.hdf5"
    if layout == "aloha":
        write_aloha(src, count=6)
    else:
        write_robomimic(src, lengths={0: 6, 1: 4})
    data = src.read_bytes()
    rng = np.random.default_rng(7)
    positions = sorted({*range(0, 2048, 97), *rng.integers(0, len(data), 24).tolist()})
    outcomes = []
    for i, at in enumerate(positions):
        damaged = bytearray(data)
        damaged[at] ^= 0x5A
        path = tmp_path / f"flip_{at}.hdf5"
        path.write_bytes(bytes(damaged))
        outcomes.append(_convert_or_format_error(Hdf5Importer(), path, tmp_path / f"out{i}"))
        path.unlink()
    assert "refused" in outcomes  # the metadata damage is noticed somewhere


# --------------------------------------------------------------------------------------- ULog
ULOG = "px4-pyulog-ulog/sample_appended_multiple.ulg"


@pytest.mark.realdata
@pytest.mark.parametrize("keep", [9, 500, 200_001, 486_000])
def test_truncated_ulog_is_refused_naming_where_it_ends(tmp_path: Path, realdata: Path,
                                                       catalog: Catalog, keep: int) -> None:
    pytest.importorskip("pyulog")
    data = (realdata / ULOG).read_bytes()
    cut = tmp_path / "cut.ulg"
    cut.write_bytes(data[:keep])
    ds = catalog.create_dataset("x")
    with pytest.raises(CorruptRecordingError,
                       match=r"cut.ulg: (truncated|not a readable|damaged or truncated)"):
        ds.register(cut)
    assert ds.segment_ids() == []


@pytest.mark.realdata
def test_flipped_bytes_in_a_ulog_give_a_format_error_or_a_registration(tmp_path: Path,
                                                                       realdata: Path) -> None:
    pytest.importorskip("pyulog")
    data = (realdata / ULOG).read_bytes()
    rng = np.random.default_rng(3)
    positions = sorted({0, 7, 100, *rng.integers(0, len(data), 3).tolist()})
    outcomes = []
    for i, at in enumerate(positions):
        damaged = bytearray(data)
        damaged[at] ^= 0xA5
        path = tmp_path / f"flip_{at}.ulg"
        path.write_bytes(bytes(damaged))
        outcomes.append(_convert_or_format_error(ULogImporter(), path, tmp_path / f"out{i}"))
        shutil.rmtree(tmp_path / f"out{i}")
        path.unlink()
    assert outcomes[0] == "refused"  # the magic bytes
