"""Format benchmarks (issues 5, 21): registering sources, exporting, storing them compactly.

Run ``python benchmarks/bench_formats.py`` (``BENCH_QUICK=1`` for a seconds-long smoke run).
Each part prints the measured figure, the physical limit measured in the same run and the ratio:

1. ROS 2 MCAP registration (Odometry + JointState, CDR) against decoding the same messages with
   ``mcap-ros2-support`` and nothing else (every importer must at least decode each message).
   Target: >= 50 % of the bare decode rate.
2. LeRobot v2.1 registration (Parquet + MP4 per episode) against reading the Parquet files,
   demuxing the MP4s, hashing and copying their bytes (the least an import into a
   content-addressed catalog must do).
   Target: >= 50 % of that rate.
3. LeRobot v3.0 export of the same episodes at their own rate (videos remuxed) against copying
   the MP4 bytes and writing the Parquet rows. Target: >= 50 % of that rate.
4. Compact storage: for every compressed source in ``../shared/realdata``, its bytes, what
   registering it adds to a catalog and what the same recordings took uncompressed (format
   version 2). Target: catalog bytes <= 1.25 x source bytes. And the numeric dataloader over
   zstd-compressed recordings against the same recordings uncompressed, in the same run.
   Target: >= 0.9.
5. ROS 1 ``.bag`` and ROS 2 ``.db3`` registration against rosbags' own full read of the same
   bag (every message deserialised). Target: >= 50 % of that rate.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import workload as w

from rayform.catalog import Catalog

QUICK = w.QUICK
MCAP_MESSAGES = 2_000 if QUICK else 40_000
EPISODES = 3 if QUICK else 20
FRAMES = 60 if QUICK else 300
FPS = 30
REPEATS = 1 if QUICK else 3

ODOM = """std_msgs/Header header
string child_frame_id
geometry_msgs/PoseWithCovariance pose
geometry_msgs/TwistWithCovariance twist
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
================================================================================
MSG: geometry_msgs/PoseWithCovariance
geometry_msgs/Pose pose
float64[36] covariance
================================================================================
MSG: geometry_msgs/Pose
geometry_msgs/Point position
geometry_msgs/Quaternion orientation
================================================================================
MSG: geometry_msgs/Point
float64 x
float64 y
float64 z
================================================================================
MSG: geometry_msgs/Quaternion
float64 x
float64 y
float64 z
float64 w
================================================================================
MSG: geometry_msgs/TwistWithCovariance
geometry_msgs/Twist twist
float64[36] covariance
================================================================================
MSG: geometry_msgs/Twist
geometry_msgs/Vector3 linear
geometry_msgs/Vector3 angular
================================================================================
MSG: geometry_msgs/Vector3
float64 x
float64 y
float64 z"""
JOINTS = """std_msgs/Header header
string[] name
float64[] position
float64[] velocity
float64[] effort
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec"""


median_time = functools.partial(w.median_time, repeats=REPEATS)


report = w.report


# ------------------------------------------------------------------------------ 1. MCAP
def write_mcap(path: Path) -> None:
    from mcap_ros2.writer import Writer

    rng = np.random.default_rng(0)
    with path.open("wb") as fh:
        writer = Writer(fh)
        odom = writer.register_msgdef("nav_msgs/msg/Odometry", ODOM)
        joints = writer.register_msgdef("sensor_msgs/msg/JointState", JOINTS)
        vec = {"x": 0.1, "y": 0.2, "z": 0.3}
        for i in range(MCAP_MESSAGES // 2):
            t = 1_700_000_000_000_000_000 + i * 10_000_000
            header = {"stamp": {"sec": t // 10**9, "nanosec": t % 10**9}, "frame_id": "odom"}
            writer.write_message("/odom", odom, {
                "header": header, "child_frame_id": "base",
                "pose": {"pose": {"position": vec, "orientation": {"x": 0.0, "y": 0.0, "z": 0.0,
                                                                   "w": 1.0}},
                         "covariance": [0.0] * 36},
                "twist": {"twist": {"linear": vec, "angular": vec}, "covariance": [0.0] * 36}},
                log_time=t)
            writer.write_message("/joint_states", joints, {
                "header": header, "name": [f"j{k}" for k in range(7)],
                "position": rng.normal(size=7).tolist(), "velocity": [0.0] * 7, "effort": []},
                log_time=t + 1)
        writer.finish()


def bench_mcap(work: Path) -> None:
    try:
        from mcap.reader import make_reader
        from mcap_ros2.decoder import DecoderFactory
    except ImportError:
        print("  (skipped: pip install 'rayform[mcap]')")
        return
    source = work / "bench.mcap"
    write_mcap(source)

    def bare() -> None:
        with source.open("rb") as fh:
            for _ in make_reader(fh, decoder_factories=[DecoderFactory()]) \
                    .iter_decoded_messages():
                pass

    counter = iter(range(1_000))

    def register() -> None:
        catalog = Catalog.create(work / f"mcap-catalog-{next(counter)}")
        catalog.create_dataset("bag").register(source)

    limit = MCAP_MESSAGES / median_time(bare)
    measured = MCAP_MESSAGES / median_time(register)
    report("MCAP register (messages/s)", f"{measured:,.0f}", f"{limit:,.0f}", measured / limit,
           "target >= 0.50")


# --------------------------------------------------------------------------- 2./3. LeRobot
def write_lerobot(root: Path) -> list[Path]:
    from rayform.media._video_encode import write_video_mp4

    rng = np.random.default_rng(1)
    (root / "meta").mkdir(parents=True)
    videos = []
    yy, xx = np.mgrid[0:240, 0:320]
    for ep in range(EPISODES):
        n = FRAMES
        table = pa.table({
            "observation.state": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.normal(size=n * 7).astype(np.float32)), 7),
            "action": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.normal(size=n * 7).astype(np.float32)), 7),
            "timestamp": pa.array((np.arange(n) / FPS).astype(np.float32)),
            "frame_index": pa.array(np.arange(n, dtype=np.int64)),
            "episode_index": pa.array(np.full(n, ep, dtype=np.int64)),
            "index": pa.array(np.arange(ep * n, (ep + 1) * n, dtype=np.int64)),
            "task_index": pa.array(np.zeros(n, dtype=np.int64)),
        })
        data = root / f"data/chunk-000/episode_{ep:06d}.parquet"
        data.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, data)
        frames = np.stack([np.stack([(xx + i) % 256, (yy * 2 + ep) % 256, (xx + yy) % 256],
                                    axis=-1).astype(np.uint8) for i in range(n)])
        mp4 = root / f"videos/chunk-000/observation.images.cam/episode_{ep:06d}.mp4"
        mp4.parent.mkdir(parents=True, exist_ok=True)
        videos.append(write_video_mp4(mp4, frames, codec="h264", gop=2, fps=FPS))
    features = {
        "observation.state": {"dtype": "float32", "shape": [7], "names": None},
        "action": {"dtype": "float32", "shape": [7], "names": None},
        "observation.images.cam": {"dtype": "video", "shape": [240, 320, 3], "names": None},
        **{k: {"dtype": d, "shape": [1], "names": None} for k, d in (
            ("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"),
            ("index", "int64"), ("task_index", "int64"))},
    }
    (root / "meta/info.json").write_text(json.dumps({
        "codebase_version": "v2.1", "robot_type": "bench", "total_episodes": EPISODES,
        "fps": FPS, "chunks_size": 1000, "features": features,
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": ("videos/chunk-{episode_chunk:03d}/{video_key}/"
                       "episode_{episode_index:06d}.mp4")}))
    (root / "meta/tasks.jsonl").write_text('{"task_index": 0, "task": "bench"}\n')
    (root / "meta/episodes.jsonl").write_text("".join(
        json.dumps({"episode_index": e, "tasks": ["bench"], "length": FRAMES}) + "\n"
        for e in range(EPISODES)))
    return videos


def bench_lerobot(work: Path) -> None:
    try:
        import av
    except ImportError:
        print("  (skipped: pip install 'rayform[video]')")
        return
    from rayform.exporters import export_lerobot

    source = work / "lerobot"
    videos = write_lerobot(source)
    total = EPISODES * FRAMES
    counter = iter(range(1_000))

    def bare_import() -> None:
        out = work / f"copy-{next(counter)}"
        out.mkdir()
        for path in sorted((source / "data").rglob("*.parquet")):
            pq.read_table(path)
        for i, video in enumerate(videos):
            with av.open(str(video)) as container:
                for _ in container.demux(container.streams.video[0]):
                    pass
            hashlib.sha256(video.read_bytes()).hexdigest()
            shutil.copyfile(video, out / f"{i}.mp4")

    catalogs: list[Catalog] = []

    def register() -> None:
        catalog = Catalog.create(work / f"lr-catalog-{next(counter)}")
        catalog.create_dataset("lr").register(source)
        catalogs.append(catalog)

    limit = total / median_time(bare_import)
    measured = total / median_time(register)
    report("LeRobot register (frames/s)", f"{measured:,.0f}", f"{limit:,.0f}", measured / limit,
           "target >= 0.50")

    dataset = catalogs[-1].get_dataset("lr")

    def bare_export() -> None:
        out = work / f"bare-export-{next(counter)}"
        out.mkdir()
        for path in sorted((source / "data").rglob("*.parquet")):
            pq.write_table(pq.read_table(path), out / path.name)
        for i, video in enumerate(videos):
            shutil.copyfile(video, out / f"{i}.mp4")

    def export() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_lerobot(dataset, work / f"export-{next(counter)}", fps=FPS, progress=False)

    limit = total / median_time(bare_export)
    measured = total / median_time(export)
    report("LeRobot export, remuxed (frames/s)", f"{measured:,.0f}", f"{limit:,.0f}",
           measured / limit, "target >= 0.50")


# ------------------------------------------------------------------ 4. compact storage
# Every compressed source in ../shared/realdata with how it is compressed. Sources no importer
# of this build reads are listed as such; quick mode skips those over QUICK_MAX_BYTES.
REALDATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"
COMPRESSED_SOURCES = {
    "evo-nav2-turtlebot-mcap/nav2_turtlebot.mcap": "MCAP, zstd chunks",
    "rosbag2-test-bags/talker": "rosbag2 MCAP folder, zstd chunks",
    "rosbag1-robot-localization/test1.bag": "ROS 1 bag, bz2 chunks",
    "unitree-g1-lerobot-v21": "LeRobot v2.1, Parquet + AV1 MP4",
    "rlds-octo-bridge/bridge_dataset/1.0.0": "RLDS TFRecord, JPEG steps",
    "zarr-diffusion-policy-pusht/pusht_cchi_v7_replay.zarr": "Zarr v2, Blosc zstd",
}
QUICK_MAX_BYTES = 8 << 20
STORAGE_TARGET = 1.25


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def uncompressed_bytes(catalog_root: Path) -> int:
    """What the catalog's recordings take stored as before format version 3 (no compression):
    each recording object rewritten uncompressed into a byte counter, assets as they are."""
    total = 0
    for path in (catalog_root / "objects").rglob("*"):
        if not path.is_file():
            continue
        if path.read_bytes()[:6] != b"ARROW1":
            total += path.stat().st_size
            continue
        table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
        sink = pa.MockOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        total += sink.size()
    return total


def bench_storage(work: Path) -> None:
    from rayform.errors import FormatError

    if not REALDATA.is_dir():
        print("  (skipped: ../shared/realdata is absent)")
        return
    print(f"  {'source':<56} {'source B':>11} {'catalog B':>11} {'ratio':>6} "
          f"{'v2 B':>11} {'ratio':>6}")
    for rel, how in COMPRESSED_SOURCES.items():
        source = REALDATA / rel
        if not source.exists():
            print(f"  {rel:<56} (absent)")
            continue
        size = tree_bytes(source)
        if QUICK and size > QUICK_MAX_BYTES:
            print(f"  {rel:<56} {size:>11,} (quick mode: skipped, over {QUICK_MAX_BYTES:,} B)")
            continue
        root = work / f"storage-{len(list(work.glob('storage-*')))}"
        catalog = Catalog.create(root)
        dataset = catalog.create_dataset("d")
        empty = tree_bytes(root)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dataset.register(source).wait()
        except FormatError as err:  # no importer of this build reads it (LeRobot claims folders)
            print(f"  {rel:<56} {size:>11,} (not registered by this build: {str(err)[-60:]})")
            continue
        stored = tree_bytes(root) - empty
        before = uncompressed_bytes(root) + (stored - tree_bytes(root / "objects"))
        ratio = stored / size
        verdict = "met" if ratio <= STORAGE_TARGET else "MISSED"
        if verdict == "MISSED":
            w.MISSED.append(f"storage {rel}")
        print(f"  {rel:<56} {size:>11,} {stored:>11,} {ratio:>6.2f} {before:>11,} "
              f"{before / size:>6.2f}   target <= {STORAGE_TARGET}: {verdict}   ({how})")
    print("  (catalog B: what registering the source adds to the catalog directory, recordings, "
          "assets and metadata; v2 B: the same recordings stored uncompressed, as before format "
          "version 3)")


def bench_numeric_compressed(work: Path) -> None:
    """The numeric dataloader over compressed (format 3) and uncompressed recordings: each
    repeat opens the catalog afresh, so the first read of each segment (its decompression)
    is inside the figure, as it is for a training job."""
    try:
        import torch
        from torch.utils.data import DataLoader

        from rayform.dataloader import DataSource, NoShuffle, RerunIterableDataset
    except ImportError:
        print("  (skipped: pip install 'rayform[torch]')")
        return
    torch.set_num_threads(1)
    urls = {}
    for compress in (True, False):
        spec = w.Spec(compress=compress)
        urls[compress] = w.build(work / f"numeric-{compress}", spec).dataset.catalog.url

    def rate(compress: bool) -> float:
        dataset = Catalog.open(urls[compress]).get_dataset("standard")
        ds = RerunIterableDataset(DataSource(dataset), w.INDEX, w.numeric_fields(),
                                  timeline_sampling=w.SAMPLING, shuffle_strategy=NoShuffle(),
                                  decode_threads=1, batch_size=w.BATCH, fetch_block_size=1024)
        t0 = time.perf_counter()
        samples = sum(len(batch["state"]) for batch in DataLoader(ds, batch_size=None))
        return samples / (time.perf_counter() - t0)

    ratios, figures = [], []
    for _ in range(max(REPEATS, 3)):
        plain = rate(False)
        packed = rate(True)
        figures.append((packed, plain))
        ratios.append(packed / plain)
    packed = statistics.median(f[0] for f in figures)
    plain = statistics.median(f[1] for f in figures)
    report("numeric loader, zstd recordings (samples/s)", f"{packed:,.0f}", f"{plain:,.0f}",
           statistics.median(ratios), "target >= 0.90")
    print("  (limit: the same loader over the same recordings stored uncompressed, measured "
          "alternately in this run; ratio: median of per-repeat ratios)")


# ------------------------------------------------------------------ 5. ROS bags
def bench_rosbag(work: Path) -> None:
    """Registration of ROS bags against rosbags' own full read (every message deserialised)."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        print("  (skipped: pip install 'rayform[rosbag]')")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "catalog" / "formats"))
    from rosbag_sources import write_ros1_bag, write_rosbag2

    sources = {"synthetic ROS 1 .bag": write_ros1_bag(work / "synthetic.bag"),
               "synthetic ROS 2 .db3 folder": write_rosbag2(work / "synthetic_db3",
                                                            storage="sqlite3")}
    husky = REALDATA / "rosbag1-robot-localization" / "test1.bag"
    if husky.is_file():
        sources["real Husky test1.bag (bz2)"] = husky
    counter = iter(range(1_000))
    for name, source in sources.items():
        count = 0

        def bare(source: Path = source) -> None:
            nonlocal count
            count = 0
            with AnyReader([source], default_typestore=get_typestore(Stores.LATEST)) as reader:
                for connection, _, raw in reader.messages():
                    reader.deserialize(raw, connection.msgtype)
                    count += 1

        def register(source: Path = source) -> None:
            catalog = Catalog.create(work / f"rosbag-catalog-{next(counter)}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                catalog.create_dataset("bag").register(source).wait()

        bare_s = median_time(bare)
        register_s = median_time(register)
        report(f"{name} register (messages/s)", f"{count / register_s:,.0f}",
               f"{count / bare_s:,.0f}", bare_s / register_s, "target >= 0.50")
    print("  (limit: rosbags' AnyReader reading and deserialising every message of the same bag)")


def main() -> int:
    print(f"bench_formats ({'quick' if QUICK else 'full'}: {MCAP_MESSAGES} MCAP messages, "
          f"{EPISODES} LeRobot episodes x {FRAMES} frames)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("1. MCAP")
        bench_mcap(work)
        print("2./3. LeRobot")
        bench_lerobot(work)
        print("4. Compact storage: catalog bytes per compressed source in ../shared/realdata")
        bench_storage(work)
        bench_numeric_compressed(work)
        print("5. ROS 1 .bag and ROS 2 .db3")
        bench_rosbag(work)
    return w.report_exit_code()


if __name__ == "__main__":
    sys.exit(main())
