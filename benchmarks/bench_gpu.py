"""GPU-fed benchmark: the standard workload feeding a small model on CUDA, and host-core scaling.

Run ``python benchmarks/bench_gpu.py`` (``BENCH_QUICK=1`` for a short run). Two parts:

1. **GPU-fed** (skipped, with the reason printed, when CUDA is not available): state, the action
   window and the H.264 camera as ``yuv420p`` (``VideoFrameDecoder(output_format="yuv420p")``,
   ``Yuv420Collator``) through ``DataLoader(pin_memory=True)``; each step copies the batch with
   ``non_blocking=True``, converts YUV→RGB on the GPU and runs a forward and backward pass of a
   small convolutional model. Printed: samples/s and the fraction of the step time spent waiting
   for the next batch (target <= 5 %).
2. **Host-core scaling**: the JPEG standard sample (state, action window, JPEG camera) through
   the iterable dataset on 1, 2, 4, … cores (a child process pinned with ``sched_setaffinity``,
   ``taskset``'s call), ``num_workers=0`` with decode threads = cores and ``num_workers=cores``
   (persistent) with ``PooledBatchCollator`` and the default decode threads (the cores shared
   among the workers), with samples/s and efficiency per core (samples/s per core over the
   1-core figure), start-up included, and again counted from the first batch on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import workload as w
from torch.utils.data import DataLoader

from rayform.dataloader import DataSource, Field, RerunIterableDataset, SampleShuffle

STEPS = 20 if w.QUICK else 200
WARMUP_STEPS = 3 if w.QUICK else 20
SCALING_SAMPLES = 256 if w.QUICK else 2048


# ------------------------------------------------------------------------------ 1. GPU-fed
def gpu_fed(verdicts: w.Verdicts, workload: w.Workload, device: torch.device) -> None:
    from rayform.decoders import VideoFrameDecoder, Yuv420Collator

    fields = {**w.numeric_fields(),
              "video": Field(w.VIDEO, VideoFrameDecoder(output_format="yuv420p"))}
    ds = RerunIterableDataset(DataSource(workload.dataset), w.INDEX, fields,
                              timeline_sampling=w.SAMPLING, shuffle_strategy=SampleShuffle())
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 5, stride=4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(), torch.nn.Linear(32 * 16 + w.JOINTS, w.ACTION_STEPS * w.JOINTS),
    ).to(device)
    head = model[:4]
    tail = model[4]
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4)
    waited = stepped = 0.0
    samples = steps = 0
    epoch = 0
    while steps < STEPS + WARMUP_STEPS:
        ds.set_epoch(epoch)
        loader = iter(DataLoader(ds, batch_size=w.BATCH, pin_memory=device.type == "cuda",
                                 collate_fn=Yuv420Collator()))
        while steps < STEPS + WARMUP_STEPS:
            t0 = time.perf_counter()
            try:
                batch = next(loader)
            except StopIteration:
                break
            t1 = time.perf_counter()
            rgb = batch["video"].to(device, non_blocking=True).to_rgb().float() / 255
            state = batch["state"].to(device, non_blocking=True).float()
            action = batch["action"].to(device, non_blocking=True).float()
            features = torch.cat([head(rgb), state], dim=1)
            loss = torch.nn.functional.mse_loss(tail(features), action.flatten(1))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            t2 = time.perf_counter()
            steps += 1
            if steps > WARMUP_STEPS:
                waited += t1 - t0
                stepped += t2 - t0
                samples += len(action)
        epoch += 1
    verdicts.line("GPU-fed samples/s (yuv420p, pinned, non_blocking)", samples / stepped,
                  "samples/s", None, how=f"{device}; {STEPS} steps")
    verdicts.line("fraction of the step waiting for data (%)", 100 * waited / stepped, "%",
                  None, target=5.0, higher_is_better=False, digits=1)


# -------------------------------------------------------------------------- 2. core scaling
SCALING = """
import json, os, sys, time
sys.path.insert(0, {bench_dir!r})
cores = int(sys.argv[1]); workers = int(sys.argv[2])
os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cores]))
import torch
torch.set_num_threads(1)
from pathlib import Path
import workload as w
from torch.utils.data import DataLoader
from rayform.dataloader import DataSource, PooledBatchCollator, RerunIterableDataset, SampleShuffle
wl = w.load(Path(sys.argv[3]), w.Spec())
ds = RerunIterableDataset(DataSource(wl.dataset), w.INDEX, w.jpeg_fields(),
                          timeline_sampling=w.SAMPLING, shuffle_strategy=SampleShuffle(),
                          decode_threads=None if workers else cores)
n = first_n = 0
t0 = time.perf_counter()
collate = PooledBatchCollator() if workers else None
loader = DataLoader(ds, batch_size=w.BATCH, num_workers=workers, collate_fn=collate,
                    persistent_workers=workers > 0)
while n < {samples}:
    for batch in loader:
        n += len(batch["state"])
        if not first_n:
            first_n, t_first = n, time.perf_counter()
        if n >= {samples}:
            break
t_end = time.perf_counter()
print(json.dumps({{"rate": n / (t_end - t0), "steady": (n - first_n) / (t_end - t_first),
                  "first_s": t_first - t0}}))
"""


def scaling(verdicts: w.Verdicts, root: Path) -> None:
    available = w.cores()
    counts = [c for c in (1, 2, 4, 8, 16, 32, 64) if c <= available]
    code = SCALING.format(bench_dir=str(Path(__file__).parent), samples=SCALING_SAMPLES)
    print(f"2. host-core scaling, JPEG standard sample, iterable SampleShuffle, cores "
          f"{counts} of {available}")
    base: dict[str, float] = {}
    for cores in counts:
        for label, workers in (("num_workers=0", 0), ("num_workers=cores, pooled", cores)):
            if cores == 1 and workers:
                workers = 1
            done = subprocess.run([sys.executable, "-c", code, str(cores), str(workers),
                                   str(root)], capture_output=True, text=True, timeout=1800,
                                  env={**os.environ})
            if done.returncode:
                raise RuntimeError(f"scaling run on {cores} cores failed:\n{done.stderr[-2000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            rate, steady = got["rate"], got["steady"]
            base.setdefault(label, rate)
            base.setdefault(label + " steady", steady)
            efficiency = rate / cores / base[label]
            print(f"  {cores:>3} cores, {label:<18} {rate:>10,.0f} samples/s   "
                  f"{rate / cores:>8,.0f} per core   efficiency {efficiency:5.2f}   "
                  f"(after the first batch, at {got['first_s'] * 1e3:,.0f} ms: {steady:,.0f}/s, "
                  f"efficiency {steady / cores / base[label + ' steady']:.2f})")


def main() -> int:
    torch.set_num_threads(1)
    verdicts = w.Verdicts("GPU-fed benchmark and host-core scaling")
    with tempfile.TemporaryDirectory(prefix="rayform-bench-gpu-") as tmp:
        if not torch.cuda.is_available():
            print(f"1. GPU-fed: skipped: CUDA is not available (torch {torch.__version__}, "
                  f"built with CUDA {torch.version.cuda}); run on a machine with a GPU")
        else:
            print("1. GPU-fed: state, action window, H.264 camera as yuv420p")
            gpu_fed(verdicts, w.load(Path(tmp) / "video", w.Spec(video=True)),
                    torch.device("cuda"))
        os.environ.setdefault("BENCH_CACHE", str(Path(tmp) / "cache"))
        w.load(Path(tmp) / "jpeg", w.Spec())  # built once here; the children reuse BENCH_CACHE
        scaling(verdicts, Path(tmp) / "child")
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
