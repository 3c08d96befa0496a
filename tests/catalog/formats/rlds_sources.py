"""RLDS / TFDS builder folders written for the tests, with protobuf's own ``tf.train.Example``.

The messages are declared at run time from TensorFlow's ``example.proto`` / ``feature.proto``
field numbers (no TensorFlow, no generated code), so the tests compare rayform's wire parser
against protobuf's (upb) encoder and decoder. TFRecord framing follows TensorFlow's
``record_writer`` (masked CRC32C).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np


@cache
def example_classes() -> dict[str, Any]:
    """``Example``, ``SequenceExample`` … as protobuf message classes."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="rayform_test_example.proto",
                                             package="rayformtest", syntax="proto3")
    fd = descriptor_pb2.FieldDescriptorProto

    def message(name: str, *fields: tuple[str, int, int, int, str | None]) -> Any:
        msg = fdp.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = msg.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
        return msg

    rep, opt = fd.LABEL_REPEATED, fd.LABEL_OPTIONAL
    message("BytesList", ("value", 1, fd.TYPE_BYTES, rep, None))
    fl = message("FloatList", ("value", 1, fd.TYPE_FLOAT, rep, None))
    il = message("Int64List", ("value", 1, fd.TYPE_INT64, rep, None))
    for msg in (fl, il):
        msg.field[0].options.packed = True
    feature = message("Feature", ("bytes_list", 1, fd.TYPE_MESSAGE, opt, ".rayformtest.BytesList"),
                      ("float_list", 2, fd.TYPE_MESSAGE, opt, ".rayformtest.FloatList"),
                      ("int64_list", 3, fd.TYPE_MESSAGE, opt, ".rayformtest.Int64List"))
    feature.oneof_decl.add(name="kind")
    for f in feature.field:
        f.oneof_index = 0
    for name, value_type in (("Features", ".rayformtest.Feature"),
                             ("FeatureLists", ".rayformtest.FeatureList")):
        msg = message(name, ("feature" if name == "Features" else "feature_list", 1,
                             fd.TYPE_MESSAGE, rep, f".rayformtest.{name}.Entry"))
        entry = msg.nested_type.add(name="Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=fd.TYPE_STRING, label=opt)
        entry.field.add(name="value", number=2, type=fd.TYPE_MESSAGE, label=opt,
                        type_name=value_type)
    message("FeatureList", ("feature", 1, fd.TYPE_MESSAGE, rep, ".rayformtest.Feature"))
    message("Example", ("features", 1, fd.TYPE_MESSAGE, opt, ".rayformtest.Features"))
    message("SequenceExample", ("context", 1, fd.TYPE_MESSAGE, opt, ".rayformtest.Features"),
            ("feature_lists", 2, fd.TYPE_MESSAGE, opt, ".rayformtest.FeatureLists"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"rayformtest.{name}"))
            for name in ("Example", "SequenceExample", "Feature")}


def masked_crc(data: bytes) -> int:
    import google_crc32c

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_tfrecord(path: Path, records: list[bytes]) -> None:
    with path.open("wb") as fh:
        for data in records:
            length = struct.pack("<Q", len(data))
            fh.write(length + struct.pack("<I", masked_crc(length)) + data
                     + struct.pack("<I", masked_crc(data)))


def _fill(feature: Any, value: Any) -> None:
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        feature.bytes_list.value.extend(value)
        return
    array = np.asarray(value)
    if array.dtype.kind == "f":
        feature.float_list.value.extend(array.astype(np.float32).reshape(-1).tolist())
    else:
        feature.int64_list.value.extend(array.astype(np.int64).reshape(-1).tolist())


@dataclass
class SyntheticEpisode:
    """One episode's values, as written (``steps`` per step, stacked)."""

    num_steps: int
    seed: int
    steps: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        n = self.num_steps
        self.steps = {
            "steps/action": rng.normal(size=(n, 7)).astype(np.float32),
            "steps/observation/state": rng.normal(size=(n, 2, 3)).astype(np.float32),
            "steps/observation/counter": rng.integers(-2**62, 2**62, size=(n,)),
            "steps/observation/image": [_jpeg_like(self.seed * 100 + i) for i in range(n)],
            "steps/language_instruction": [f"task {self.seed % 2}".encode()] * n,
            "steps/reward": np.r_[np.zeros(n - 1), 1.0].astype(np.float32),
            "steps/discount": np.ones(n, np.float32),
            "steps/is_first": np.r_[1, np.zeros(n - 1)].astype(np.int64),
            "steps/is_last": np.r_[np.zeros(n - 1), 1].astype(np.int64),
            "steps/is_terminal": np.r_[np.zeros(n - 1), 1].astype(np.int64),
        }
        self.metadata = {"episode_metadata/file_path": [f"/data/ep{self.seed}.npy".encode()],
                         "episode_metadata/episode_id": np.array([self.seed]),
                         "episode_metadata/has_language": np.array([1])}

    def example(self) -> bytes:
        msg = example_classes()["Example"]()
        for key, value in {**self.steps, **self.metadata}.items():
            _fill(msg.features.feature[key], value)
        return bytes(msg.SerializeToString())

    def sequence_example(self) -> bytes:
        msg = example_classes()["SequenceExample"]()
        for key, value in self.metadata.items():
            _fill(msg.context.feature[key], value)
        for key, value in self.steps.items():
            feature_list = msg.feature_lists.feature_list[key]
            for step in range(self.num_steps):
                _fill(feature_list.feature.add(), value[step] if not isinstance(value, list)
                      else [value[step]])
        return bytes(msg.SerializeToString())


def _jpeg_like(seed: int) -> bytes:
    import io

    from PIL import Image

    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, size=(8, 8, 3), dtype=np.uint8)).save(out, "JPEG")
    return out.getvalue()


def _tensor(shape: list[int], dtype: str) -> dict[str, Any]:
    return {"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
            "tensor": {"shape": {"dimensions": [str(d) for d in shape]}, "dtype": dtype,
                       "encoding": "none"}}


def _dict(features: dict[str, Any]) -> dict[str, Any]:
    return {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "featuresDict": {"features": features}}


_STEP_FEATURES: dict[str, Any] = {
    "action": _tensor([7], "float32"),
    "observation": _dict({
        "state": _tensor([2, 3], "float32"),
        "counter": _tensor([], "int64"),
        "image": {"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
                  "image": {"shape": {"dimensions": ["8", "8", "3"]}, "dtype": "uint8",
                            "encodingFormat": "jpeg"}},
    }),
    "language_instruction": {
        "pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}},
    "reward": _tensor([], "float32"),
    "discount": _tensor([], "float32"),
    "is_first": _tensor([], "bool"),
    "is_last": _tensor([], "bool"),
    "is_terminal": _tensor([], "bool"),
}
FEATURES: dict[str, Any] = _dict({
    "steps": {"pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset",
              "sequence": {"feature": _dict(_STEP_FEATURES), "length": "-1"}},
    "episode_metadata": _dict({
        "file_path": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
                      "text": {}},
        "episode_id": _tensor([], "int32"),
        "has_language": _tensor([], "bool"),
    }),
})


def write_rlds_builder(root: Path, shards: dict[str, list[list[SyntheticEpisode]]], *,
                       sequence: bool = False, name: str = "toy_dataset") -> Path:
    """A builder folder ``root`` (``X.Y.Z`` layout not added); ``shards[split]`` is a list of
    shards, each a list of episodes."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "features.json").write_text(json.dumps(FEATURES))
    splits = []
    for split, episodes_per_shard in shards.items():
        total = len(episodes_per_shard)
        for i, episodes in enumerate(episodes_per_shard):
            records = [e.sequence_example() if sequence else e.example() for e in episodes]
            write_tfrecord(root / f"{name}-{split}.tfrecord-{i:05d}-of-{total:05d}", records)
        splits.append({"filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
                       "name": split, "shardLengths": [str(len(e)) for e in episodes_per_shard]})
    (root / "dataset_info.json").write_text(json.dumps({
        "fileFormat": "tfrecord", "name": name, "splits": splits, "version": "1.0.0"}))
    return root
