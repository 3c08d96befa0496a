"""HDF5 and PX4 ULog registration against the reading library's own full read of the same file.

Run ``python benchmarks/bench_import_hdf5_ulog.py`` (``BENCH_QUICK=1`` for a seconds-long run).
Each part prints the registration rate, the limit measured in the same run and the ratio:

1. robomimic (many demos per file: low-dimensional obs, actions, an 84x84 camera) registered
   into a fresh catalog, against h5py reading every dataset of every demo (what any importer
   must at least do). Target: >= 0.5.
2. ALOHA/ACT (one file per episode, 14 joints, two raw cameras) likewise.
3. PX4 ULog (the real ``sample.ulg`` of ../shared/realdata, 69 s of flight) registered, against
   ``pyulog.ULog`` parsing the file. Target: >= 0.5.

Figures are bytes of source per second (the HDF5 limits read the same bytes the importer does). Each
is the median of the repeats after one untimed run of the same work (full mode): a process's
first registration also pays one-time imports.
Under each, informational: the physical ceiling of a durable content-addressed import of that
source here, measured in the same run (``workload.store_ceiling``: every file the registration
left in the catalog written to a file of its own, hashed and fsynced), the registration's ratio
to it, and its ratio to the library read and that store done one after the other.
"""

from __future__ import annotations

import functools
import sys
import tempfile
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import workload as w

from rayform.catalog import Catalog, ImportOptions

QUICK = w.QUICK
DEMOS = 4 if QUICK else 50
DEMO_FRAMES = 40 if QUICK else 200
ALOHA_EPISODES = 2 if QUICK else 10
ALOHA_FRAMES = 20 if QUICK else 400
ALOHA_SIZE = (96, 128) if QUICK else (480, 640)
REPEATS = 1 if QUICK else 3
ULOG = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "px4-pyulog-ulog" / \
    "sample.ulg"


_NUMBERS = count()


# One untimed run of each side first: a process's first registration also pays one-time imports
# (pyarrow's first duration array imports pandas, ~0.9 s here) and fills caches that every later
# registration of the process finds, as the library's first read warms its own.
median_time = functools.partial(w.median_time, repeats=REPEATS, warmup=0 if QUICK else 1)


def write_robomimic(path: Path, h5py: Any) -> None:
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = '{"env_name": "Lift", "type": 1, "env_kwargs": {"control_freq": 20}}'
        for n in range(DEMOS):
            demo = data.create_group(f"demo_{n}")
            demo.attrs["num_samples"] = DEMO_FRAMES
            demo["actions"] = rng.uniform(-1, 1, (DEMO_FRAMES, 7))
            demo["rewards"] = np.zeros(DEMO_FRAMES)
            demo["dones"] = np.zeros(DEMO_FRAMES, np.int64)
            demo["states"] = rng.standard_normal((DEMO_FRAMES, 45))
            for key, width in (("robot0_eef_pos", 3), ("robot0_eef_quat", 4),
                               ("robot0_joint_pos", 7), ("object", 10)):
                demo[f"obs/{key}"] = rng.standard_normal((DEMO_FRAMES, width))
                demo[f"next_obs/{key}"] = rng.standard_normal((DEMO_FRAMES, width))
            demo["obs/agentview_image"] = rng.integers(0, 255, (DEMO_FRAMES, 84, 84, 3), np.uint8)


def write_aloha(path: Path, h5py: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    height, width = ALOHA_SIZE
    with h5py.File(path, "w") as root:
        root.attrs["sim"] = True
        for name in ("observations/qpos", "observations/qvel", "action"):
            root[name] = rng.standard_normal((ALOHA_FRAMES, 14))
        for cam in ("top", "angle"):
            root.create_dataset(f"observations/images/{cam}", chunks=(1, height, width, 3),
                                data=rng.integers(0, 255, (ALOHA_FRAMES, height, width, 3),
                                                  np.uint8))


def read_everything(paths: list[Path], h5py: Any) -> None:
    """Every dataset of every file read in full with h5py."""
    for path in paths:
        with h5py.File(path, "r") as f:
            def visit(_: str, node: Any) -> None:
                if isinstance(node, h5py.Dataset):
                    node[()]
            f.visititems(visit)


def bench_registration(name: str, work: Path, sources: list[Path], bare: Callable[[], object],
                       options: ImportOptions | None = None) -> None:
    size = sum(p.stat().st_size for p in sources)

    roots: list[Path] = []

    def register() -> None:
        roots.append(work / f"catalog-{next(_NUMBERS)}")
        catalog = Catalog.create(roots[-1])
        catalog.create_dataset("d").register(sources, import_options=options)

    library_s = median_time(bare)
    registration_s = median_time(register)
    w.report(f"{name} register (MB/s of source)", f"{size / registration_s / 1e6:,.1f}",
             f"{size / library_s / 1e6:,.1f}", library_s / registration_s, "target >= 0.50")
    ceiling = w.store_ceiling(roots[-1], work, repeats=REPEATS)
    w.report_ceiling(name, units=size / 1e6, unit="MB/s of source",
                     registration_s=registration_s, library_s=library_s, ceiling=ceiling)


def main() -> int:
    print(f"bench_import_hdf5_ulog ({'quick' if QUICK else 'full'}: {DEMOS} robomimic demos x "
          f"{DEMO_FRAMES} frames, {ALOHA_EPISODES} ALOHA episodes x {ALOHA_FRAMES} frames at "
          f"{ALOHA_SIZE[1]}x{ALOHA_SIZE[0]})")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            import h5py
        except ImportError:
            print("  (HDF5 skipped: pip install 'rayform[hdf5]')")
        else:
            print("1. robomimic (h5py full read as the limit)")
            lift = work / "lift.hdf5"
            write_robomimic(lift, h5py)
            bench_registration("robomimic", work, [lift], lambda: read_everything([lift], h5py))
            print("2. ALOHA/ACT")
            episodes = [work / f"episode_{i}.hdf5" for i in range(ALOHA_EPISODES)]
            for i, path in enumerate(episodes):
                write_aloha(path, h5py, i)
            bench_registration("ALOHA", work, episodes, lambda: read_everything(episodes, h5py),
                               ImportOptions(rate_hz=50))
        print("3. PX4 ULog (pyulog's parse as the limit)")
        try:
            import pyulog
        except ImportError:
            print("  (skipped: pip install 'rayform[ulog]')")
        else:
            if ULOG.is_file():
                bench_registration("ULog sample.ulg", work, [ULOG],
                                   lambda: pyulog.ULog(str(ULOG)))
            else:
                print(f"  (skipped: {ULOG} is absent)")
    return w.report_exit_code()


if __name__ == "__main__":
    sys.exit(main())
