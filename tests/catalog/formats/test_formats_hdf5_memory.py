"""Registering a robomimic HDF5 file streams its demos: peak memory does not grow with the file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

_MIB = 1 << 20
_DEMOS, _FRAMES, _IMAGE = 24, 200, (84, 84, 3)  # 24 demos of 4.3 MiB: a 100 MiB file
# A child registers a 2-demo file first (every library the importer uses is then loaded), resets
# its peak RSS (VmHWM) and registers the big file; it prints how far the peak rose above the RSS
# it had before the big registration.
_REGISTER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from rayform.catalog import Catalog

    def status(key):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(key)

    small, big, work = (Path(p) for p in sys.argv[1:4])
    Catalog.create(work / "warm").create_dataset("d").register(small)
    base = status("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # the peak then also covers the (small) warm-up registration
    ids = Catalog.create(work / "big").create_dataset("d").register(big).wait().segment_ids
    print(json.dumps({"growth": status("VmHWM") - base, "segments": len(ids)}))
""")


def _write(path: Path, demos: int) -> None:
    """robomimic's layout ("Dataset structure" in its documentation), uncompressed."""
    import h5py

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1,
                                             "env_kwargs": {"control_freq": 20}})
        for n in range(demos):
            demo = data.create_group(f"demo_{n}")
            demo.attrs["num_samples"] = _FRAMES
            demo["actions"] = rng.uniform(-1, 1, (_FRAMES, 7))
            demo["obs/robot0_eef_pos"] = rng.standard_normal((_FRAMES, 3))
            demo["obs/agentview_image"] = rng.integers(0, 255, (_FRAMES, *_IMAGE), np.uint8)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
def test_registering_a_100_mib_file_holds_about_one_demo(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    small, big = tmp_path / "small.hdf5", tmp_path / "big.hdf5"
    _write(small, 2)
    _write(big, _DEMOS)
    size = big.stat().st_size
    assert size > 95 * _MIB
    proc = subprocess.run([sys.executable, "-c", _REGISTER, str(small), str(big),
                           str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["segments"] == _DEMOS
    # Streaming holds a few demos' worth (about 4 MiB each, read, converted and written);
    # reading the whole file would add at least its 100 MiB.
    assert result["growth"] < size * 0.4, (result["growth"] / _MIB, size / _MIB)
