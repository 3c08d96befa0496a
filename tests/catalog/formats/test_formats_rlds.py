"""RLDS / TFDS builder folders: episodes as segments, values equal to protobuf's own parse of the
records (bit-exact floats and image bytes), timelines, properties, task text, damaged files."""

from __future__ import annotations

import json
import shutil
import struct
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rlds_sources import SyntheticEpisode, example_classes, masked_crc, write_rlds_builder

from rayform.catalog import Catalog
from rayform.cli import main
from rayform.errors import ConfigError, ConversionWarning, CorruptRecordingError, FormatError
from rayform.importers import _registry, find_importer, register_importer
from rayform.importers.rlds import RldsImporter
from rayform.importers.rlds._example import decode_varints

BRIDGE = "rlds-octo-bridge/bridge_dataset/1.0.0"
pytest.importorskip("google_crc32c")


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importers registered by a test are dropped after it."""
    monkeypatch.setattr(_registry, "_REGISTRY", list(_registry._REGISTRY))


def _records(path: Path) -> Iterator[bytes]:
    """TFRecord framing read the way TensorFlow's reader does, every CRC checked."""
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        length_bytes = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        assert struct.unpack("<I", data[pos + 8:pos + 12])[0] == masked_crc(length_bytes)
        payload = data[pos + 12:pos + 12 + length]
        assert struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])[0] == \
            masked_crc(payload)
        yield payload
        pos += 16 + length


def _rows(ds: object, segment: str, column: str) -> list[object]:
    seg = ds.open_segment(segment)  # type: ignore[attr-defined]
    return list(seg.column(column, "frame_index").values.to_pylist())


def _properties(ds: object) -> dict[str, dict[str, object]]:
    rows = ds.segment_table_arrow().to_pylist()  # type: ignore[attr-defined]
    return {r["rerun_segment_id"]: {k.removeprefix("property:"): v for k, v in r.items()
                                    if k.startswith("property:")} for r in rows}


@pytest.mark.realdata
def test_bridge_episodes_equal_protobufs_parse(realdata: Path, catalog: Catalog,
                                               own_registry: None) -> None:
    root = realdata / BRIDGE
    register_importer(RldsImporter(fps=5))
    ds = catalog.create_dataset("bridge")
    ds.register(root.parent)  # the dataset folder: its newest version folder is read
    info = json.loads((root / "dataset_info.json").read_text())
    expected = {s["name"]: sum(int(n) for n in s["shardLengths"]) for s in info["splits"]}
    ids = ds.segment_ids()
    assert expected == {"train": 25, "val": 25}
    assert ids == sorted([f"{split}_episode_{i:06d}" for split, n in expected.items()
                          for i in range(n)])
    assert ds.timelines == {"frame_index": "sequence", "timestamp": "duration"}
    props = _properties(ds)
    example = example_classes()["Example"]
    for split in ("train", "val"):
        shard = root / f"bridge_dataset-{split}.tfrecord-00000-of-00001"
        for index, record in enumerate(_records(shard)):
            msg = example.FromString(record)
            feature = msg.features.feature
            segment = f"{split}_episode_{index:06d}"
            steps = len(feature["steps/is_first"].int64_list.value)
            assert steps == 10
            action = np.array(feature["steps/action"].float_list.value, np.float32).reshape(10, 7)
            got = np.array(_rows(ds, segment, "/action:Scalars:scalars"), np.float32)
            assert got.tobytes() == action.tobytes()  # bit-exact
            state = np.array(feature["steps/observation/state"].float_list.value, np.float32)
            got = np.array(_rows(ds, segment, "/observation/state:Scalars:scalars"), np.float32)
            assert got.reshape(-1).tobytes() == state.tobytes()
            for cam in range(4):
                blobs = [r[0] for r in _rows(ds, segment,
                                             f"/observation/image_{cam}:EncodedImage:blob")]
                assert blobs == list(feature[f"steps/observation/image_{cam}"].bytes_list.value)
                assert blobs[0][:2] == b"\xff\xd8"
            firsts = [r[0] for r in _rows(ds, segment, "/is_first:Scalars:scalars")]
            assert firsts == [bool(v) for v in feature["steps/is_first"].int64_list.value]
            assert firsts == [True] + [False] * 9
            for name in ("is_last", "is_terminal"):
                assert [r[0] for r in _rows(ds, segment, f"/{name}:Scalars:scalars")] == \
                    [bool(v) for v in feature[f"steps/{name}"].int64_list.value]
            for name in ("reward", "discount"):
                values = np.array([r[0] for r in _rows(ds, segment, f"/{name}:Scalars:scalars")],
                                  np.float32)
                assert values.tobytes() == np.array(feature[f"steps/{name}"].float_list.value,
                                                    np.float32).tobytes()
            text = [t.decode() for t in feature["steps/language_instruction"].bytes_list.value]
            assert [r[0] for r in _rows(ds, segment, "/language_instruction:TextDocument:text")] \
                == text
            p = props[segment]
            assert p["task"] == text[0]
            assert p["file_path"] == \
                feature["episode_metadata/file_path"].bytes_list.value[0].decode()
            assert p["episode_id"] == feature["episode_metadata/episode_id"].int64_list.value[0]
            assert p["has_image_0"] is False  # as the file says (its images are present)
            assert (p["split"], p["length"], p["fps"], p["time_grid"]) == (split, 10, 5.0,
                                                                          "from_rate")
            seg = ds.open_segment(segment)
            index_ns = seg.column("/action:Scalars:scalars", "timestamp").index
            np.testing.assert_array_equal(index_ns, np.arange(10) * 200_000_000)


def test_examples_and_sequence_examples_register_with_declared_shapes_and_dtypes(
        tmp_path: Path, catalog: Catalog) -> None:
    episodes = [[SyntheticEpisode(4, 1), SyntheticEpisode(3, 2)], [SyntheticEpisode(5, 3)]]
    write_rlds_builder(tmp_path / "ex", {"train": episodes, "test": [[SyntheticEpisode(2, 9)]]})
    write_rlds_builder(tmp_path / "seq", {"train": episodes}, sequence=True)
    assert find_importer(tmp_path / "ex").name == "rlds"
    for name in ("ex", "seq"):
        ds = catalog.create_dataset(name)
        ds.register(tmp_path / name)
        assert ds.timelines == {"frame_index": "sequence"}  # no rate given, none declared
        flat = [e for shard in episodes for e in shard]
        for i, episode in enumerate(flat):
            segment = f"train_episode_{i:06d}"
            state = _rows(ds, segment, "/observation/state:Scalars:scalars")
            assert np.array(state, np.float32).tobytes() == \
                episode.steps["steps/observation/state"].reshape(episode.num_steps, 6).tobytes()
            counter = [r[0] for r in _rows(ds, segment, "/observation/counter:Scalars:scalars")]
            assert counter == episode.steps["steps/observation/counter"].tolist()  # int64 range
            blobs = [r[0] for r in _rows(ds, segment, "/observation/image:EncodedImage:blob")]
            assert blobs == episode.steps["steps/observation/image"]
            assert [r[0] for r in _rows(ds, segment, "/is_last:Scalars:scalars")] == \
                [False] * (episode.num_steps - 1) + [True]
            props = _properties(ds)[segment]
            assert props["time_grid"] == "frame_index_only"
            assert props["task"] == f"task {episode.seed % 2}"
            assert props["episode_id"] == episode.seed and props["has_language"] is True
        schema = {f.name: f.type for f in ds.schema().arrow}
        assert str(schema["/observation/state:Scalars:scalars"]) == "list<item: float>"
        assert str(schema["/observation/counter:Scalars:scalars"]) == "list<item: int64>"
        assert str(schema["/is_first:Scalars:scalars"]) == "list<item: bool>"
    assert catalog.get_dataset("ex").segment_ids()[-1] == "train_episode_000002"
    assert "test_episode_000000" in catalog.get_dataset("ex").segment_ids()


def test_splits_option_and_cli_fps(tmp_path: Path, catalog: Catalog, own_registry: None,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    write_rlds_builder(tmp_path / "b" / "1.0.0", {"train": [[SyntheticEpisode(3, 1)]],
                                                  "val": [[SyntheticEpisode(2, 2)]]})
    register_importer(RldsImporter(splits=["val"]))
    ds = catalog.create_dataset("only_val")
    ds.register(tmp_path / "b")
    assert ds.segment_ids() == ["val_episode_000000"]
    with pytest.raises(ConfigError, match=r"no split \['nope'\]"):
        register_importer(RldsImporter(splits=["nope"]))
        catalog.create_dataset("x").register(tmp_path / "b")
    register_importer(RldsImporter())  # --fps configures the RLDS importer found first
    assert main(["--catalog", catalog.url, "register", "cli", str(tmp_path / "b"), "--create",
                 "--fps", "4"]) == 0
    cli = catalog.get_dataset("cli")
    assert cli.timelines == {"frame_index": "sequence", "timestamp": "duration"}
    seg = cli.open_segment("train_episode_000000")
    np.testing.assert_array_equal(seg.column("/action:Scalars:scalars", "timestamp").index,
                                  [0, 250_000_000, 500_000_000])
    with pytest.raises(ConfigError, match="fps must be a positive number"):
        RldsImporter(fps=0)


def test_packed_varints_decode_like_protobuf() -> None:
    feature = example_classes()["Feature"]()
    values = [0, 1, -1, 127, 128, 300, 2**63 - 1, -(2**63), -12345678901234]
    feature.int64_list.value.extend(values)
    payload = feature.int64_list.SerializeToString()
    # Int64List: tag 0x0a, length varint, then the packed varints
    length_bytes = 1 if payload[1] < 0x80 else 2
    raw = np.frombuffer(payload[1 + length_bytes:], np.uint8)
    assert decode_varints(raw).tolist() == values


def _damaged(tmp_path: Path) -> tuple[Path, Path]:
    root = write_rlds_builder(tmp_path / "ds", {"train": [[SyntheticEpisode(4, 1),
                                                           SyntheticEpisode(3, 2)]]})
    return root, root / "toy_dataset-train.tfrecord-00000-of-00001"


@pytest.mark.parametrize(("damage", "message"), [
    ("truncate_data", r"record 1 at byte \d+: declares \d+ bytes but only \d+ remain"),
    ("truncate_header", r"record 2 at byte \d+: truncated header"),
    ("flip_data", r"record 0 at byte 0: the \d+ data bytes fail their CRC32C check"),
    ("flip_length", r"record 0 at byte 0: the length field fails its CRC32C check"),
    ("garbage", r"record 0: not a tf.train.Example"),
    ("extra_record", r"holds 3 records but .*dataset_info.json says 2"),
    ("missing_shard", r"missing shard of split 'train'"),
    ("bad_shape", r"feature 'steps/action' holds 28 values, not a whole number of steps"),
])
def test_damaged_builders_get_a_format_error_naming_the_file(tmp_path: Path, catalog: Catalog,
                                                             damage: str, message: str) -> None:
    root, shard = _damaged(tmp_path)
    data = bytearray(shard.read_bytes())
    if damage == "truncate_data":
        shard.write_bytes(data[:len(data) - 40])
    elif damage == "truncate_header":
        shard.write_bytes(data + b"\x01\x02\x03")
    elif damage == "flip_data":
        data[40] ^= 0x10
        shard.write_bytes(data)
    elif damage == "flip_length":
        data[2] ^= 0x01
        shard.write_bytes(data)
    elif damage == "garbage":
        from rlds_sources import write_tfrecord
        write_tfrecord(shard, [b"\x0a\xff\xff\xff\x7f" + b"\x00" * 8])
    elif damage == "extra_record":
        from rlds_sources import write_tfrecord
        write_tfrecord(shard, [SyntheticEpisode(2, i).example() for i in range(3)])
    elif damage == "missing_shard":
        shard.unlink()
    elif damage == "bad_shape":
        features = json.loads((root / "features.json").read_text())
        steps = features["featuresDict"]["features"]["steps"]["sequence"]["feature"]
        steps["featuresDict"]["features"]["action"]["tensor"]["shape"]["dimensions"] = ["3"]
        (root / "features.json").write_text(json.dumps(features))
    ds = catalog.create_dataset("x")
    with pytest.raises(FormatError, match=message) as info:
        ds.register(root)
    assert str(shard) in str(info.value) or damage == "bad_shape"
    assert ds.segment_ids() == []
    if damage.startswith(("truncate", "flip", "garbage")):
        assert isinstance(info.value, CorruptRecordingError)


def test_not_an_rlds_folder_and_missing_crc_package(tmp_path: Path, catalog: Catalog,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = _damaged(tmp_path)
    plain = tmp_path / "plain"
    shutil.copytree(root, plain)
    features = json.loads((plain / "features.json").read_text())
    del features["featuresDict"]["features"]["steps"]
    (plain / "features.json").write_text(json.dumps(features))
    with pytest.raises(FormatError, match="no 'steps' sequence"):
        catalog.create_dataset("plain").register(plain)
    monkeypatch.setitem(sys.modules, "google_crc32c", None)
    assert find_importer(root).name == "rlds"  # sniffing needs no optional package
    with pytest.raises(ImportError, match=r"pip install 'rayform\[rlds\]'"):
        catalog.create_dataset("x").register(root)


def test_episodes_are_streamed_one_record_at_a_time(tmp_path: Path) -> None:
    import tracemalloc

    episodes = [SyntheticEpisode(120, i) for i in range(30)]
    root = write_rlds_builder(tmp_path / "big", {"train": [episodes]})
    shard_bytes = (root / "toy_dataset-train.tfrecord-00000-of-00001").stat().st_size
    record_bytes = shard_bytes / len(episodes)
    out = tmp_path / "out"
    out.mkdir()
    tracemalloc.start()
    try:
        written = RldsImporter().convert(root, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(written) == 30
    assert peak < 8 * record_bytes < shard_bytes / 3  # a few records' worth, not the file


def test_mutated_records_with_valid_crcs_never_escape_as_raw_errors(tmp_path: Path) -> None:
    from rlds_sources import write_tfrecord

    good = SyntheticEpisode(3, 5).example()
    rng = np.random.default_rng(0)
    root = write_rlds_builder(tmp_path / "ds", {"train": [[SyntheticEpisode(3, 5)]]})
    shard = root / "toy_dataset-train.tfrecord-00000-of-00001"
    outcomes = {"ok": 0, "refused": 0}
    for trial in range(150):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        if trial % 5 == 0:
            data = data[:int(rng.integers(1, len(data)))]
        write_tfrecord(shard, [bytes(data)])
        out = tmp_path / f"out{trial}"
        out.mkdir()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConversionWarning)  # a feature lost: reported
                RldsImporter().convert(root, out)
            outcomes["ok"] += 1
        except FormatError:  # CorruptRecordingError and kin: named, never a raw traceback
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == 150


def test_an_importer_registered_in_a_with_block_is_taken_out_after_it(tmp_path: Path,
                                                                      catalog: Catalog) -> None:
    root = write_rlds_builder(tmp_path / "b", {"train": [[SyntheticEpisode(2, 1)]]})
    before = list(_registry._REGISTRY)
    with register_importer(RldsImporter(fps=4)) as importer:
        assert find_importer(root) is importer
        catalog.create_dataset("timed").register(root)
    assert before == _registry._REGISTRY and find_importer(root) is not importer
    catalog.create_dataset("untimed").register(root)
    assert catalog.get_dataset("timed").timelines == {"frame_index": "sequence",
                                                      "timestamp": "duration"}
    assert catalog.get_dataset("untimed").timelines == {"frame_index": "sequence"}
