"""HDF5 and ULog register without torch, and name their extra when h5py or pyulog is missing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hdf5_sources import write_aloha, write_robomimic

from rayform.catalog import Catalog
from rayform.importers import find_importer

REALDATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "realdata"
_REGISTER_WITHOUT_TORCH = textwrap.dedent("""
    import json, sys
    sys.modules["torch"] = None  # any `import torch` now raises ImportError
    from rayform.catalog import Catalog, ImportOptions

    sources = json.loads(sys.argv[1])
    catalog = Catalog.create(sys.argv[2])
    counts = {}
    for name, path in sources.items():
        dataset = catalog.create_dataset(name)
        options = ImportOptions(rate_hz=50) if name == "aloha" else None
        counts[name] = len(dataset.register(path, import_options=options).wait().segment_ids)
    loaded = sorted(m for m, mod in sys.modules.items()
                    if mod is not None and (m == "torch" or m.startswith("torch.")))
    print(json.dumps({"counts": counts, "torch_modules": loaded}))
""")


def test_hdf5_and_ulog_register_with_torch_blocked(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    write_aloha(tmp_path / "episode_0.hdf5", count=4)
    write_robomimic(tmp_path / "lift.hdf5", lengths={0: 3, 1: 4})
    sources = {"aloha": str(tmp_path / "episode_0.hdf5"), "robomimic": str(tmp_path / "lift.hdf5")}
    ulog = REALDATA / "px4-pyulog-ulog" / "sample_appended_multiple.ulg"
    have_ulog = ulog.is_file()
    if have_ulog:
        pytest.importorskip("pyulog")
        sources["ulog"] = str(ulog)
    proc = subprocess.run([sys.executable, "-c", _REGISTER_WITHOUT_TORCH, json.dumps(sources),
                           str(tmp_path / "catalog")], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["counts"] == {"aloha": 1, "robomimic": 2, **({"ulog": 1} if have_ulog else {})}
    assert result["torch_modules"] == []


@pytest.mark.parametrize(("filename", "head", "importer", "blocked", "extra"), [
    ("ep.hdf5", b"\x89HDF\r\n\x1a\n", "hdf5", "h5py", "hdf5"),
    ("flight.ulg", b"ULog\x01\x12\x35\x01", "ulog", "pyulog.core", "ulog"),
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
