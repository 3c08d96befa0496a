"""Differential test: rayform's ``RerunMapDataset`` against rerun-sdk 0.41's own, on the same .rrd.

Rerun's loader reads from a catalog server and needs ``rerun-sdk[catalog]``, which pins DataFusion
54 (rayform uses 55), so it runs in a separate virtual environment that this test builds once
(``$RAYFORM_RERUN_VENV``, default ``~/.cache/rayform-tests/rerun-0.41-catalog``) with
``pip install "rerun-sdk[catalog]==0.41.0"``. Torch comes from this environment through a path
entry (no second download; a CPU build stays a CPU build). rerun-sdk's ``ImageDecoder`` imports
``torchvision`` for ``pil_to_tensor`` alone; where torchvision is absent (rayform never installs
it) a stand-in that does what torchvision documents (the PIL pixels as uint8 ``(C, H, W)``) is put
on the worker's path. The server is the ``rerun server`` of that environment, on loopback.

The recordings are written by rerun-sdk (``rerun_recordings.py``): synthetic episodes and the real
Unitree G1 episodes of ``../shared/realdata``. Both loaders must agree on the sample count, the
segments and their trims, every index value, numeric values and JPEG pixels bit for bit, and
video frames (decoded by PyAV on both sides) pixel for pixel.

Skipped, with the reason, where the environment cannot be built (no package index) or the server
does not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rerun_recordings import G1_CAMERA, write_g1, write_synthetic

import rayform
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    ImageDecoder,
    NumericDecoder,
    RerunMapDataset,
    VideoFrameDecoder,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
RERUN_VERSION = "0.41.0"
VENV_ENV = "RAYFORM_RERUN_VENV"
REALDATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata"
WORKER = Path(__file__).with_name("rerun_reference_worker.py")
TORCHVISION_STAND_IN = '''"""pil_to_tensor as torchvision documents it: the pixels, uint8 (C, H, W)."""
import numpy as np
import torch


def pil_to_tensor(pic):
    array = np.array(pic, copy=True)
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()
'''

# (dataset, index, rate_hz, {key: (column, decoder, codec, window)})
CASES: dict[str, tuple[str, str, float | None, dict[str, tuple[str, str, str | None,
                                                                 list[float] | None]]]] = {
    "synthetic-frame": ("synthetic", "frame", None, {
        "joints": ("/joints:Scalars:scalars", "numeric", None, [-2, 0, 1]),
        "cam": ("/cam:EncodedImage:blob", "image", None, None),
        "video": ("/video:VideoStream:sample", "video", "h264", None)}),
    "synthetic-sim-time": ("synthetic", "sim_time", 15.0, {
        "joints": ("/joints:Scalars:scalars", "numeric", None, [0.0, 0.1, 0.25]),
        "cam": ("/cam:EncodedImage:blob", "image", None, None),
        "video": ("/video:VideoStream:sample", "video", "h264", None)}),
    "g1-frame-index": ("g1", "frame_index", None, {
        "state": ("/observation.state:Scalars:scalars", "numeric", None, None),
        "action": ("/action:Scalars:scalars", "numeric", None, [0, 4, 8]),
        "camera": (f"/{G1_CAMERA}:VideoStream:sample", "video", "av1", None)}),
    "g1-timestamp": ("g1", "timestamp", 10.0, {
        "state": ("/observation.state:Scalars:scalars", "numeric", None, None),
        "camera": (f"/{G1_CAMERA}:VideoStream:sample", "video", "av1", None)}),
}


@dataclass(frozen=True)
class RerunEnv:
    python: Path
    rerun: Path
    pythonpath: str


def _tail(text: str, lines: int = 4) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


@pytest.fixture(scope="session")
def rerun_env() -> RerunEnv:
    root = Path(os.environ.get(VENV_ENV) or Path.home() / ".cache" / "rayform-tests" /
                f"rerun-{RERUN_VERSION}-catalog").expanduser()
    python = root / "bin" / "python"
    check = [str(python), "-c", "import datafusion, rerun, rerun.catalog; "
             f"assert rerun.__version__ == {RERUN_VERSION!r}"]
    if not python.exists() or subprocess.run(check, capture_output=True).returncode != 0:
        made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)],
                              capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"cannot create a virtual environment at {root}: {_tail(made.stderr)}")
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"rerun-sdk[catalog]=={RERUN_VERSION}"],
            capture_output=True, text=True, timeout=1200)
        if installed.returncode != 0:
            pytest.skip(f"cannot install rerun-sdk[catalog]=={RERUN_VERSION} into {root} (it "
                        f"needs a package index): {_tail(installed.stderr)}")
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # Torch from this environment, after the venv's own packages (its datafusion 54 wins).
    (site / "zz_torch_from_rayform.pth").write_text(str(Path(torch.__file__).parents[1]) + "\n")
    stubs = root / "stand-ins"
    if subprocess.run([str(python), "-c", "import torchvision"], capture_output=True).returncode:
        target = stubs / "torchvision" / "transforms"
        target.mkdir(parents=True, exist_ok=True)
        (stubs / "torchvision" / "__init__.py").write_text('"""A stand-in (see the test)."""\n')
        (target / "__init__.py").write_text("")
        (target / "functional.py").write_text(TORCHVISION_STAND_IN)
    return RerunEnv(python=python, rerun=root / "bin" / "rerun", pythonpath=str(stubs))


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    pytest.importorskip("rerun")
    root = tmp_path_factory.mktemp("rrd")
    sets = {"synthetic": write_synthetic(root / "synthetic")}
    if (REALDATA / "unitree-g1-lerobot-v21").is_dir():
        sets["g1"] = write_g1(REALDATA, root / "g1")
    return sets


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(rerun_env: RerunEnv, recordings: dict[str, list[Path]],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    args = [str(rerun_env.rerun), "server", "--host", "127.0.0.1", "-p", str(port)]
    for name, paths in recordings.items():
        args += ["-d", f"{name}={paths[0].parent}"]
    with log.open("wb") as out:
        # Its own process group: `rerun` is a wrapper that starts the real server, which
        # terminating the wrapper alone would leave running.
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b"Ready for connections" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"rerun server did not start: {_tail(log.read_text())}")
            time.sleep(0.1)
        yield f"rerun+http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def ours(recordings: dict[str, list[Path]], tmp_path_factory: pytest.TempPathFactory
         ) -> rayform.Catalog:
    catalog = rayform.Catalog.create(tmp_path_factory.mktemp("rayform") / "catalog")
    for name, paths in recordings.items():
        catalog.create_dataset(name).register(paths).wait()
    return catalog


def _reference(env: RerunEnv, url: str, case: str, out: Path) -> dict[str, Any]:
    dataset, index, rate, fields = CASES[case]
    spec = {"index": index, "rate_hz": rate, "fields": {
        key: {"path": path, "decoder": decoder, "codec": codec, "window": window}
        for key, (path, decoder, codec, window) in fields.items()}}
    environ = dict(os.environ, PYTHONPATH=env.pythonpath, PYTHONWARNINGS="ignore")
    done = subprocess.run([str(env.python), str(WORKER), url, dataset, json.dumps(spec),
                           str(out)], capture_output=True, text=True, env=environ, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as saved:
        return {name: saved[name] for name in saved.files}


def _rayform(catalog: rayform.Catalog, case: str) -> RerunMapDataset:
    dataset, index, rate, spec = CASES[case]
    decoders = {"numeric": lambda c: NumericDecoder(), "image": lambda c: ImageDecoder(),
                "video": lambda c: VideoFrameDecoder(codec=c)}
    fields = {key: Field(path, decoders[decoder](codec),
                         window=None if window is None else tuple(window))
              for key, (path, decoder, codec, window) in spec.items()}
    return RerunMapDataset(DataSource(catalog.get_dataset(dataset)), index, fields,
                           timeline_sampling=None if rate is None else FixedRateSampling(rate))


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_samples_as_rerun_0_41(case: str, rerun_env: RerunEnv, server: str,
                                    ours: rayform.Catalog, recordings: dict[str, list[Path]],
                                    tmp_path: Path) -> None:
    if CASES[case][0] not in recordings:
        pytest.skip(f"real data folder {REALDATA} is absent")
    torch.set_num_threads(1)
    reference = _reference(rerun_env, server, case, tmp_path / "rerun.npz")
    meta = json.loads(str(reference["meta"]))
    data = _rayform(ours, case)
    assert len(data) == meta["num_samples"] > 0
    assert [[s.segment_id, s.index_start, s.index_end, s.num_samples]
            for s in data.sample_index.segments] == meta["segments"]  # same segments and trims
    _, values = data.sample_index.locate(np.arange(len(data)))
    keys = list(CASES[case][3])
    decoded = {key: sum(f"{i}/{key}" in reference for i in range(len(data))) for key in keys}
    print(case, len(data), "samples; values decoded by Rerun per field:", decoded)
    assert all(decoded.values()), decoded  # every field is compared on real values
    for i in range(len(data)):
        assert int(values[i]) == int(reference[f"{i}/index"])
        sample = data[i]
        for key in keys:
            theirs = reference.get(f"{i}/{key}")
            mine = sample[key]
            assert (mine is None) == (theirs is None), (i, key)
            if theirs is not None:
                assert mine.shape == theirs.shape and mine.dtype == torch.from_numpy(theirs).dtype
                assert np.array_equal(mine.numpy(), theirs), (case, i, key)
