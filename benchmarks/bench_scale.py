"""Catalog scale benchmark: 1k, 10k and 100k segments (quick mode: 1k and 10k), projected to 1M.

Run ``python benchmarks/bench_scale.py`` (``BENCH_QUICK=1`` for the small sizes). Full mode exits
1 when a target is missed.

The synthetic catalog: eight template recordings of the standard workload's numeric streams
(0.4 s of joint positions and action deltas at 100 Hz) are stored once; every segment is a layer
pointing at one of them with its own id and properties (``task``, ``success``), committed in one
registration. Every size is measured in a fresh process, so that its peak RSS is its own:

- time to first batch: ``Catalog.open`` → dataset → ``RerunIterableDataset`` (state + 16-step
  action window, ``SampleShuffle``) → the first batch of 32 (first, before anything is cached);
- open: ``Catalog.open`` + ``get_dataset`` + ``segment_ids()`` (metadata caches cleared);
- ``get_index_ranges()`` to Arrow; ``SampleIndex.build``; a slice with a property filter
  (``client.slices.create(where='"property:task" = $task')``).

Each step prints its time per size, its growth per 10× more segments (1 is constant, 10 linear,
100 quadratic) and the process's peak RSS; memory per segment is the RSS growth between the two
largest sizes. Target: time to first batch <= 2 s at 100k segments (full mode); no step grows
faster than linearly (growth <= 15 per 10×).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import workload as w

import rayform
from rayform.catalog import Catalog
from rayform.catalog._registration import PreparedLayer, prepare_layer

SIZES = (1_000, 10_000) if w.QUICK else (1_000, 10_000, 100_000)
TEMPLATES = 8
ROWS = 40
FIRST_BATCH_TARGET_S = 2.0
GROWTH_LIMIT = 15.0
STEPS = ("first_batch", "open", "index_ranges", "sample_index", "slice")


def write_template(path: Path, k: int) -> Path:
    t = (w.EPOCH_NS + np.arange(ROWS, dtype=np.int64) * (10**9 // w.STATE_HZ)
         ).astype("datetime64[ns]")
    rng = np.random.default_rng(k)
    with rayform.RecordingWriter(path, recording_id=f"template{k}") as rec:
        rec.log_scalars("/joints/position", timelines={w.INDEX: t},
                        values=rng.normal(size=(ROWS, w.JOINTS)).astype(np.float32))
        rec.log_scalars("/action/delta", timelines={w.INDEX: t},
                        values=rng.normal(size=(ROWS, w.JOINTS)).astype(np.float32))
    return path


def build(root: Path, num_segments: int) -> str:
    """A catalog whose dataset ``many`` has ``num_segments`` segments; returns its URL."""
    catalog = Catalog.create(root / f"catalog-{num_segments}")
    dataset = catalog.create_dataset("many")
    templates = [prepare_layer(catalog.store, write_template(root / f"t{k}.rfr", k),
                               source_uri=f"template{k}", layer_name="base")
                 for k in range(TEMPLATES)]
    layers = []
    for i in range(num_segments):
        t = templates[i % TEMPLATES]
        props = {"task": f"task-{i % 7}", "success": i % 3 == 0}
        layers.append(PreparedLayer(segment_id=f"seg{i:07d}", layer_name="base",
                                    layer=t.layer.model_copy(update={"properties": props}),
                                    timelines=t.timelines, schema=t.schema))
    dataset.register_prepared(layers)
    return catalog.url


MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {bench_dir!r})
import workload as w
from torch.utils.data import DataLoader
import rayform
from rayform.catalog import Catalog
from rayform.catalog._snapshot import clear_cache
from rayform.dataloader import DataSource, RerunIterableDataset, SampleIndex, SampleShuffle

url, n = sys.argv[1], int(sys.argv[2])
out = {{}}
t0 = time.perf_counter()
ds = Catalog.open(url).get_dataset("many")
it = RerunIterableDataset(DataSource(ds), w.INDEX, w.numeric_fields(),
                          timeline_sampling=w.SAMPLING, shuffle_strategy=SampleShuffle())
batch = next(iter(DataLoader(it, batch_size=w.BATCH)))
out["first_batch"] = time.perf_counter() - t0
assert len(batch["state"]) == w.BATCH


def best(fn):
    times = []
    for _ in range(3):
        clear_cache()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[1]


def open_ids():
    entry = Catalog.open(url).get_dataset("many")
    assert len(entry.segment_ids()) == n


out["open"] = best(open_ids)
out["index_ranges"] = best(lambda: ds.get_index_ranges().to_arrow_table())
out["sample_index"] = best(lambda: SampleIndex.build(DataSource(ds), w.INDEX, w.numeric_fields(),
                                                     timeline_sampling=w.SAMPLING))
client = rayform.Client(url)
expected = sum(1 for i in range(n) if i % 7 == 3)
out["slice"] = best(lambda: client.slices.create("many", where='"property:task" = $task',
                                                 params={{"task": "task-3"}}))
assert len(client.slices.create("many", where='"property:task" = $task',
                                params={{"task": "task-3"}}).segment_ids) == expected
out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def measure(url: str, num_segments: int) -> dict[str, float]:
    code = MEASURE.format(bench_dir=str(Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", code, url, str(num_segments)],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"measuring {num_segments} segments failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    verdicts = w.Verdicts(f"catalog scale benchmark: {', '.join(f'{n:,}' for n in SIZES)} "
                          "segments, each measured in a fresh process")
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="rayform-bench-scale-") as tmp:
        for n in SIZES:
            t0 = time.perf_counter()
            url = build(Path(tmp), n)
            built = time.perf_counter() - t0
            results[n] = measure(url, n)
            print(f"  {n:>9,} segments: built and committed in {built:.1f} s; peak RSS "
                  f"{results[n]['rss_mib']:,.0f} MiB")
    print(f"  {'step (seconds)':<16}" + "".join(f"{n:>12,}" for n in SIZES)
          + "   growth per 10x   projected 1M")
    largest, previous = SIZES[-1], SIZES[-2]
    for step in STEPS:
        times = [results[n][step] for n in SIZES]
        growth = results[largest][step] / max(results[previous][step], 1e-9)
        growth *= 10 / (largest / previous) if largest != 10 * previous else 1.0
        projected = results[largest][step] * growth ** np.log10(1_000_000 / largest)
        print(f"  {step:<16}" + "".join(f"{t:>12.3f}" for t in times)
              + f"   {growth:>14.1f}   {projected:>10.1f} s")
    for step in STEPS:
        growth = results[largest][step] / max(results[previous][step], 1e-9)
        verdicts.line(f"{step}: growth per 10x ({previous:,} -> {largest:,})", growth,
                      "x", None, target=GROWTH_LIMIT, higher_is_better=False, digits=1,
                      rss_mib=results[largest]["rss_mib"])
    verdicts.line(f"time to first batch at {largest:,} segments (ms)",
                  results[largest]["first_batch"] * 1e3, "ms", None,
                  target=FIRST_BATCH_TARGET_S * 1e3, higher_is_better=False,
                  rss_mib=results[largest]["rss_mib"])
    per_segment = (results[largest]["rss_mib"] - results[previous]["rss_mib"]) * 1024**2 \
        / (largest - previous)
    print(f"  memory per segment: {per_segment:,.0f} B (peak RSS growth {previous:,} -> "
          f"{largest:,})")
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
