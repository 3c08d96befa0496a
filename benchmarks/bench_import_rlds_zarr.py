"""Import benchmarks for RLDS / TFDS builder folders and Zarr replay buffers (issue 21).

Run ``python benchmarks/bench_import_rlds_zarr.py`` (``BENCH_QUICK=1`` for a seconds-long smoke
run). Both read the real samples of ``../shared/realdata`` (skipped when absent). Each part prints
registration throughput beside the reading library's own full read of the same data in the same
run, and the ratio (target >= 0.5, issue 21):

1. RLDS (Bridge, 64x64 JPEG cameras): ``rayform register`` of a builder folder against reading
   every TFRecord record, checking its CRC32Cs (google-crc32c) and parsing it with protobuf's own
   ``tf.train.Example`` (upb), which is what TensorFlow's reader does minus the tensors. Full
   mode repeats the 25 train episodes into a 500-episode shard.
2. Zarr (Diffusion Policy PushT, 96x96 float32 pixels): registering the first episodes against
   zarr-python reading the same rows of every ``data/`` array (one slice per array: decompressing
   each chunk once).

Every timed figure is the median of the repeats after one untimed run of the same work (full
mode): a process's first registration also pays one-time imports.

Under each, informational: the physical ceiling of a durable content-addressed import of that
source here, measured in the same run (``workload.store_ceiling``: every file the registration
left in the catalog written to a file of its own, hashed and fsynced), the registration's ratio
to it, and its ratio to the library read and that store done one after the other.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import workload as w

from rayform.catalog import Catalog

QUICK = w.QUICK
REPEATS = 1 if QUICK else 3
REALDATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata"
BRIDGE = REALDATA / "rlds-octo-bridge" / "bridge_dataset" / "1.0.0"
PUSHT = REALDATA / "zarr-diffusion-policy-pusht" / "pusht_cchi_v7_replay.zarr"
RLDS_COPIES = 1 if QUICK else 20
ZARR_EPISODES = 4 if QUICK else 40
report = w.report


# One untimed run of each side first: a process's first registration also pays one-time imports
# (pyarrow's first duration array imports pandas, ~0.9 s here) and fills caches that every later
# registration of the process finds, as the library's first read warms its own.
median_time = functools.partial(w.median_time, repeats=REPEATS, warmup=0 if QUICK else 1)


def _records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12:pos + 12 + length])
        pos += 16 + length
    return out


def _builder(work: Path) -> tuple[Path, int]:
    """A builder folder of ``25 * RLDS_COPIES`` Bridge episodes (one train shard)."""
    root = work / "bridge" / "1.0.0"
    root.mkdir(parents=True)
    shutil.copy(BRIDGE / "features.json", root / "features.json")
    records = _records(BRIDGE / "bridge_dataset-train.tfrecord-00000-of-00001") * RLDS_COPIES
    shard = root / "bridge_dataset-train.tfrecord-00000-of-00001"
    if RLDS_COPIES == 1:
        shutil.copy(BRIDGE / shard.name, shard)
    else:
        import google_crc32c

        def masked(b: bytes) -> int:
            c = google_crc32c.value(b)
            return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

        with shard.open("wb") as fh:
            for rec in records:
                head = struct.pack("<Q", len(rec))
                fh.write(head + struct.pack("<I", masked(head)) + rec
                         + struct.pack("<I", masked(rec)))
    info = json.loads((BRIDGE / "dataset_info.json").read_text())
    info["splits"] = [{**info["splits"][0], "shardLengths": [str(len(records))]}]
    (root / "dataset_info.json").write_text(json.dumps(info))
    return root, len(records)


def _example_class() -> type:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="bench_example.proto", package="bench",
                                             syntax="proto3")
    fd = descriptor_pb2.FieldDescriptorProto
    for name, ftype in (("BytesList", fd.TYPE_BYTES), ("FloatList", fd.TYPE_FLOAT),
                        ("Int64List", fd.TYPE_INT64)):
        msg = fdp.message_type.add(name=name)
        msg.field.add(name="value", number=1, type=ftype, label=fd.LABEL_REPEATED)
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (fname, tname) in enumerate((("bytes_list", "BytesList"),
                                            ("float_list", "FloatList"),
                                            ("int64_list", "Int64List")), 1):
        feature.field.add(name=fname, number=number, type=fd.TYPE_MESSAGE,
                          label=fd.LABEL_OPTIONAL, type_name=f".bench.{tname}", oneof_index=0)
    features = fdp.message_type.add(name="Features")
    features.field.add(name="feature", number=1, type=fd.TYPE_MESSAGE, label=fd.LABEL_REPEATED,
                       type_name=".bench.Features.Entry")
    entry = features.nested_type.add(name="Entry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=fd.TYPE_MESSAGE, label=fd.LABEL_OPTIONAL,
                    type_name=".bench.Feature")
    example = fdp.message_type.add(name="Example")
    example.field.add(name="features", number=1, type=fd.TYPE_MESSAGE, label=fd.LABEL_OPTIONAL,
                      type_name=".bench.Features")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls: type = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Example"))
    return cls


def bench_rlds(work: Path) -> None:
    try:
        import google.protobuf  # noqa: F401
        import google_crc32c
    except ImportError:
        print("  (skipped: pip install 'rayform[rlds]' protobuf)")
        return
    if not BRIDGE.is_dir():
        print(f"  (skipped: {BRIDGE} is absent)")
        return
    root, episodes = _builder(work)
    shard = root / "bridge_dataset-train.tfrecord-00000-of-00001"
    example = _example_class()

    def library_read() -> None:
        with shard.open("rb") as fh:
            while header := fh.read(12):
                (length,) = struct.unpack("<Q", header[:8])
                google_crc32c.value(header[:8])
                data = fh.read(length)
                fh.read(4)
                google_crc32c.value(data)
                example.FromString(data)

    counter = iter(range(1_000))
    roots: list[Path] = []

    def register() -> None:
        from rayform.importers import _registry
        from rayform.importers.rlds import RldsImporter

        saved = list(_registry._REGISTRY)
        _registry.register_importer(RldsImporter(fps=5))
        try:
            roots.append(work / f"rlds-catalog-{next(counter)}")
            catalog = Catalog.create(roots[-1])
            catalog.create_dataset("bridge").register(root.parent)
        finally:
            _registry._REGISTRY[:] = saved

    size_mb = shard.stat().st_size / 1e6
    library_s = median_time(library_read)
    registration_s = median_time(register)
    print(f"  {episodes} episodes, {size_mb:.1f} MB of TFRecord")
    report("RLDS register (episodes/s)", f"{episodes / registration_s:,.0f}",
           f"{episodes / library_s:,.0f}", library_s / registration_s, "target >= 0.50")
    w.report_ceiling("RLDS", units=episodes, unit="episodes/s", registration_s=registration_s,
                     library_s=library_s,
                     ceiling=w.store_ceiling(roots[-1], work, repeats=REPEATS))


def bench_zarr(work: Path) -> None:
    try:
        import zarr
    except ImportError:
        print("  (skipped: pip install 'rayform[zarr]')")
        return
    if not PUSHT.is_dir():
        print(f"  (skipped: {PUSHT} is absent)")
        return
    from rayform.importers import _registry
    from rayform.importers.zarr import ZarrImporter

    group = zarr.open_group(str(PUSHT), mode="r")
    rows = int(group["meta/episode_ends"][ZARR_EPISODES - 1])
    names = sorted(name for name, _ in group["data"].arrays())

    def library_read() -> None:
        for name in names:
            group[f"data/{name}"][0:rows]

    counter = iter(range(1_000))
    roots: list[Path] = []

    def register() -> None:
        saved = list(_registry._REGISTRY)
        _registry.register_importer(ZarrImporter(fps=10, episodes=range(ZARR_EPISODES)))
        try:
            roots.append(work / f"zarr-catalog-{next(counter)}")
            catalog = Catalog.create(roots[-1])
            catalog.create_dataset("pusht").register(PUSHT)
        finally:
            _registry._REGISTRY[:] = saved

    library_s = median_time(library_read)
    registration_s = median_time(register)
    print(f"  {ZARR_EPISODES} episodes, {rows} steps, {len(names)} arrays")
    report("Zarr register (steps/s)", f"{rows / registration_s:,.0f}", f"{rows / library_s:,.0f}",
           library_s / registration_s, "target >= 0.50")
    w.report_ceiling("Zarr", units=rows, unit="steps/s", registration_s=registration_s,
                     library_s=library_s,
                     ceiling=w.store_ceiling(roots[-1], work, repeats=REPEATS))


def main() -> int:
    print(f"bench_import_rlds_zarr ({'quick' if QUICK else 'full'}; {os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("1. RLDS")
        bench_rlds(work)
        print("2. Zarr")
        bench_zarr(work)
    return w.report_exit_code()


if __name__ == "__main__":
    sys.exit(main())
