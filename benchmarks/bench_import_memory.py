"""Peak memory of registering a source larger than a memory budget (issue 21: "memory bounded on a
file larger than RAM allows for a whole-file read").

Run ``python benchmarks/bench_import_memory.py`` (``BENCH_QUICK=1``: 50 MB sources, a few
seconds; ``BENCH_SOURCE_MB=N`` sets the size). Two synthetic sources of about the same size are
written (full mode: 2 GB each, which with their catalogs needs about 8 GB of free disk under
``$TMPDIR``):

1. a robomimic-style HDF5 file, many demos in one file (low-dimensional obs, actions, an
   84x84 camera);
2. a Diffusion Policy-style Zarr replay buffer (``data/`` arrays chunked across episode
   boundaries, zstd-compressed, ``meta/episode_ends``).

Each is registered in a fresh child process, which first registers a tiny source of the same
kind (so every library the importer pulls in is loaded), then resets its peak RSS
(``/proc/self/clear_refs``) and registers the big one. Both importers read and write one
episode at a time, so the peak RSS must not grow with the source: the target is
``peak <= 400 MiB + 25% of the source`` (400 MiB for the interpreter, numpy, pyarrow, h5py/zarr
and the catalog). The growth over the warmed-up process is printed beside an episode's bytes,
the unit the streaming promise is about, and per segment: what grows with the source is the
segment count (each pending segment's entity index is held until the registration commits,
about 0.1 MiB a segment with the allocators' share), not its bytes. The figure is the child's
peak; the line's ``rss`` column is this (generating) process's, as in every benchmark.
Measured 2026-12-02 (2 cores, load ~7): 1.9 GB robomimic file, 455 demos: 248 MiB (budget 878);
1.9 GB Zarr store, 455 episodes: 252 MiB (budget 868).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import workload as w

QUICK = w.QUICK
SOURCE_MB = int(os.environ.get("BENCH_SOURCE_MB", "50" if QUICK else "2000"))
FIXED_MIB = 400
SHARE = 0.25
FRAMES = 200  # steps per episode (demo)
IMAGE = (84, 84, 3)
MIB = 1 << 20

CHILD = r"""
import json, sys, tempfile
from pathlib import Path
from rayform.catalog import Catalog, ImportOptions

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(key)

small, big, work = (Path(p) for p in sys.argv[1:4])
options = ImportOptions(rate_hz=10) if big.suffix == ".zarr" else None
Catalog.create(work / "warm").create_dataset("d").register(small, import_options=options)
base = status("VmRSS")
try:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    reset = True
except OSError:
    reset = False
Catalog.create(work / "big").create_dataset("d").register(big, import_options=options)
print(json.dumps({"base_mib": base, "peak_mib": status("VmHWM"), "reset": reset}))
"""


def episode_bytes(frames: int) -> int:
    """Bytes of one synthetic episode: camera frames plus the low-dimensional arrays."""
    return frames * (int(np.prod(IMAGE)) + 8 * (7 + 1 + 1 + 45 + 2 * (3 + 4 + 7 + 10)))


def write_robomimic(path: Path, demos: int) -> None:
    import h5py

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1,
                                             "env_kwargs": {"control_freq": 20}})
        for n in range(demos):
            demo = data.create_group(f"demo_{n}")
            demo.attrs["num_samples"] = FRAMES
            demo["actions"] = rng.uniform(-1, 1, (FRAMES, 7))
            demo["rewards"] = np.zeros(FRAMES)
            demo["dones"] = np.zeros(FRAMES, np.int64)
            demo["states"] = rng.standard_normal((FRAMES, 45))
            for key, width in (("robot0_eef_pos", 3), ("robot0_eef_quat", 4),
                               ("robot0_joint_pos", 7), ("object", 10)):
                demo[f"obs/{key}"] = rng.standard_normal((FRAMES, width))
                demo[f"next_obs/{key}"] = rng.standard_normal((FRAMES, width))
            demo["obs/agentview_image"] = rng.integers(0, 255, (FRAMES, *IMAGE), np.uint8)


def write_replay_buffer(path: Path, episodes: int) -> None:
    import zarr

    rng = np.random.default_rng(1)
    rows = episodes * FRAMES
    root = zarr.open_group(str(path), mode="w")
    chunk = 3 * FRAMES // 2  # chunks straddle episode boundaries, as Diffusion Policy's do
    img = root.create_array("data/img", shape=(rows, *IMAGE), dtype="uint8",
                            chunks=(chunk, *IMAGE))
    state = root.create_array("data/state", shape=(rows, 45), dtype="float64",
                              chunks=(chunk, 45))
    action = root.create_array("data/action", shape=(rows, 7), dtype="float64",
                               chunks=(chunk, 7))
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        img[start:start + n] = rng.integers(0, 255, (n, *IMAGE), np.uint8)
        state[start:start + n] = rng.standard_normal((n, 45))
        action[start:start + n] = rng.uniform(-1, 1, (n, 7))
    ends = root.create_array("meta/episode_ends", shape=(episodes,), dtype="int64")
    ends[:] = np.arange(1, episodes + 1) * FRAMES


def source_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(small: Path, big: Path, work: Path) -> dict[str, Any]:
    """Register ``big`` in a child process (warmed up on ``small``): its peak and base RSS."""
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHILD, str(small), str(big), str(work)],
                          capture_output=True, text=True, timeout=3600, env=env)
    if done.returncode:
        raise RuntimeError(f"registering {big} failed:\n{done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def bench(name: str, work: Path, write: Any, suffix: str, episodes: int) -> None:
    small, big = work / f"small{suffix}", work / f"big{suffix}"
    write(small, 2)
    write(big, episodes)
    size = source_bytes(big)
    got = measure(small, big, work / f"catalogs{suffix}")
    budget = FIXED_MIB + SHARE * size / MIB
    growth = got["peak_mib"] - got["base_mib"]
    episode = episode_bytes(FRAMES) / MIB
    print(f"  {episodes} episodes of {episode:,.1f} MiB, source {size / MIB:,.0f} MiB; "
          f"child base RSS {got['base_mib']:,.0f} MiB after a warm-up registration"
          + ("" if got["reset"] else " (peak not resettable here: the peak includes warm-up)"))
    w.report(f"{name} peak RSS (MiB)", f"{got['peak_mib']:,.0f}", f"{budget:,.0f}",
             got["peak_mib"] / budget, f"target <= 1 ({FIXED_MIB} MiB + {SHARE:.0%} of source)")
    print(f"  {'':<44} (growth over the warmed-up child: {growth:,.0f} MiB = "
          f"{growth / episode:,.1f} episodes' bytes, {growth * MIB / size:.1%} of the source, "
          f"{growth * 1024 / episodes:,.0f} KiB per segment)")


def main() -> int:
    print(f"bench_import_memory ({'quick' if QUICK else 'full'}: {SOURCE_MB} MB sources)")
    episodes = max(4, round(SOURCE_MB * 1e6 / episode_bytes(FRAMES)))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            import h5py  # noqa: F401
        except ImportError:
            print("1. HDF5 (skipped: pip install 'rayform[hdf5]')")
        else:
            print("1. HDF5, robomimic-style (one file, many demos)")
            bench("robomimic HDF5", work, write_robomimic, ".hdf5", episodes)
        try:
            import zarr  # noqa: F401
        except ImportError:
            print("2. Zarr (skipped: pip install 'rayform[zarr]')")
        else:
            print("2. Zarr replay buffer (Diffusion Policy-style)")
            bench("Zarr replay buffer", work, write_replay_buffer, ".zarr", episodes)
    return w.report_exit_code()


if __name__ == "__main__":
    sys.exit(main())
