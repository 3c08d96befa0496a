"""HDF5 files register episode by episode: ALOHA/ACT, the robomimic family, declared mappings.

The fixtures (hdf5_sources.py) follow the layouts' own sources: ACT's record_sim_episodes.py and
ALOHA's record_episodes.py; robomimic's docs, "Dataset structure" (LIBERO, RoboCasa additions).
Every value is compared with what h5py itself returns from the same file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hdf5_sources import ALOHA_CAMERAS, write_aloha, write_robomimic

from rayform.catalog import Catalog, ImportOptions
from rayform.catalog._slices import create_slice
from rayform.errors import ConfigError, CorruptRecordingError, FormatError

h5py = pytest.importorskip("h5py")

FORMAT = {"width": 32, "height": 24, "pixel_format": None, "color_model": 2,
          "channel_datatype": 6}


def _h5(path: Path, name: str) -> np.ndarray:
    with h5py.File(path, "r") as f:
        return np.asarray(f[name][()])


def _rows(seg: object, column: str, timeline: str = "frame_index") -> tuple[np.ndarray, list]:
    got = seg.column(column, timeline)  # type: ignore[attr-defined]
    return got.index, got.values.to_pylist()


# ------------------------------------------------------------------------------------ ALOHA
def test_aloha_episode_values_equal_h5py_and_land_on_the_frame_grid(tmp_path: Path,
                                                                    catalog: Catalog) -> None:
    src = tmp_path / "episode_3.hdf5"
    write_aloha(src, count=12)
    ds = catalog.create_dataset("aloha")
    ids = ds.register(src, import_options=ImportOptions(rate_hz=50)).wait().segment_ids
    assert ids == ["episode_3"]
    seg = ds.open_segment("episode_3")
    for name in ("observations/qpos", "observations/qvel", "observations/effort", "action"):
        index, values = _rows(seg, f"/{name}:Scalars:scalars")
        truth = _h5(src, name)
        np.testing.assert_array_equal(index, np.arange(12))
        got = np.asarray(values, dtype=truth.dtype)
        assert got.tobytes() == truth.tobytes()  # bit-exact, dtype kept
    assert seg.column("/observations/effort:Scalars:scalars", "frame_index").values.type \
        .value_type == "float"
    for cam in ALOHA_CAMERAS:
        _, buffers = _rows(seg, f"/observations/images/{cam}:Image:buffer")
        truth = _h5(src, f"observations/images/{cam}")
        assert [b[0] for b in buffers] == [frame.tobytes() for frame in truth]
        _, formats = _rows(seg, f"/observations/images/{cam}:Image:format")
        assert formats[0] == [FORMAT]
    stamps = seg.column("/action:Scalars:scalars", "timestamp").index
    np.testing.assert_array_equal(stamps, np.arange(12) * 20_000_000)  # exactly 1/50 s apart
    record = ds.segment_record("episode_3")
    assert record.properties["sim"] is True
    assert record.properties["layout"] == "aloha"
    assert record.properties["rate_hz"] == 50.0
    assert record.properties["num_frames"] == 12
    assert record.properties["time_grid"].startswith("exact: timestamp = frame_index x 20000000 ns")


def test_aloha_without_a_rate_has_frame_index_only_and_says_so(tmp_path: Path,
                                                               catalog: Catalog) -> None:
    write_aloha(tmp_path / "episode_0.hdf5", count=5)
    ds = catalog.create_dataset("aloha")
    ds.register(tmp_path / "episode_0.hdf5")
    assert ds.timelines == {"frame_index": "sequence"}
    assert ds.segment_record("episode_0").properties["time_grid"].startswith("none:")


def test_aloha_jpeg_rows_keep_their_bytes_without_the_padding(tmp_path: Path,
                                                              catalog: Catalog) -> None:
    pytest.importorskip("PIL")
    src = tmp_path / "episode_1.hdf5"
    write_aloha(src, count=6, compress=True, sim=False)
    lengths = _h5(src, "compress_len").astype(int)
    ds = catalog.create_dataset("aloha")
    ds.register(src)
    seg = ds.open_segment("episode_1")
    for cam in ALOHA_CAMERAS:
        padded = _h5(src, f"observations/images/{cam}")
        _, blobs = _rows(seg, f"/observations/images/{cam}:EncodedImage:blob")
        row = [i for i, ls in enumerate(lengths) if [len(b[0]) for b in blobs] == list(ls)]
        assert len(row) == 1  # the lengths are exactly one camera's compress_len row
        assert [b[0] for b in blobs] == [padded[i, :n].tobytes()
                                         for i, n in enumerate(lengths[row[0]])]
        _, types = _rows(seg, f"/observations/images/{cam}:EncodedImage:media_type")
        assert types[0] == ["image/jpeg"]
    assert not seg.has_column("/compress_len:Scalars:scalars")
    assert ds.segment_record("episode_1").properties["compress"] is True


def test_aloha_jpeg_rows_that_disagree_with_compress_len_are_refused(tmp_path: Path,
                                                                     catalog: Catalog) -> None:
    pytest.importorskip("PIL")
    src = tmp_path / "episode_2.hdf5"
    write_aloha(src, count=4, compress=True)
    with h5py.File(src, "r+") as f:
        f["compress_len"][0, 1] += 5
        f["compress_len"][1, 1] += 5
    ds = catalog.create_dataset("aloha")
    with pytest.raises(CorruptRecordingError, match=r"episode_2.hdf5.*compress_len"):
        ds.register(src)
    assert ds.segment_ids() == []


# --------------------------------------------------------------------------------- robomimic
def test_robomimic_demos_become_segments_with_values_rate_and_splits(tmp_path: Path,
                                                                     catalog: Catalog) -> None:
    src = tmp_path / "lift_ph.hdf5"
    truth = write_robomimic(src, lengths={0: 5, 2: 7, 10: 3},
                            masks={"train": [0, 10], "valid": [2]})
    ds = catalog.create_dataset("lift")
    ids = ds.register(src).wait().segment_ids
    assert sorted(ids) == ["lift_ph_demo_0", "lift_ph_demo_10", "lift_ph_demo_2"]
    assert ds.segment_ids() == sorted(ids)
    for n, arrays in truth.items():
        seg = ds.open_segment(f"lift_ph_demo_{n}")
        for key, values in arrays.items():
            column = f"/{key}:Image:buffer" if key.endswith("_image") else f"/{key}:Scalars:scalars"
            index, rows = _rows(seg, column)
            np.testing.assert_array_equal(index, np.arange(len(values)))  # episode boundaries
            on_disk = _h5(src, f"data/demo_{n}/{key}")
            if key.endswith("_image"):
                assert [r[0] for r in rows] == [frame.tobytes() for frame in on_disk]
            else:
                assert np.asarray(rows, on_disk.dtype).reshape(on_disk.shape).tobytes() == \
                    on_disk.tobytes()
        stamps = seg.column("/actions:Scalars:scalars", "timestamp").index
        np.testing.assert_array_equal(stamps, np.arange(len(arrays["actions"])) * 50_000_000)
        props = ds.segment_record(f"lift_ph_demo_{n}").properties
        assert props["num_samples"] == len(arrays["actions"])
        assert props["demo_index"] == n
        assert props["rate_hz"] == 20.0  # env_args.env_kwargs.control_freq
        assert "control_freq" in props["time_grid"]
        assert props["env_name"] == "Lift"
        assert json.loads(props["env_args"])["env_kwargs"]["robots"] == ["Panda"]
        assert props["dataset_total"] == 15
        assert "model_file" not in props
        assert props["mask/train"] is (n in (0, 10))
        assert props["mask/valid"] is (n == 2)
    train = create_slice(catalog, ds, where='"property:mask/train"')
    assert sorted(s.segment_id for s in train.segments) == ["lift_ph_demo_0", "lift_ph_demo_10"]


def test_libero_and_robocasa_language_becomes_the_task(tmp_path: Path, catalog: Catalog) -> None:
    write_robomimic(tmp_path / "libero.hdf5", lengths={0: 3, 1: 3},
                    libero_task="put the black bowl on the plate", image=False)
    write_robomimic(tmp_path / "robocasa.hdf5", lengths={0: 3, 1: 3}, image=False,
                    robocasa_lang={1: "open the microwave door"})
    ds = catalog.create_dataset("lang")
    ds.register([tmp_path / "libero.hdf5", tmp_path / "robocasa.hdf5"])
    tasks = {r.segment_id: r.properties.get("task") for r in ds.segment_records()}
    assert tasks == {"libero_demo_0": "put the black bowl on the plate",
                     "libero_demo_1": "put the black bowl on the plate",
                     "robocasa_demo_0": None, "robocasa_demo_1": "open the microwave door"}


def test_given_rate_wins_over_control_freq_and_none_without_either(tmp_path: Path,
                                                                   catalog: Catalog) -> None:
    write_robomimic(tmp_path / "a.hdf5", lengths={0: 4}, image=False)
    write_robomimic(tmp_path / "b.hdf5", lengths={0: 4}, image=False, control_freq=None)
    fast = catalog.create_dataset("fast")
    fast.register(tmp_path / "a.hdf5", import_options=ImportOptions(rate_hz=30))
    seg = fast.open_segment("a_demo_0")
    np.testing.assert_array_equal(seg.column("/actions:Scalars:scalars", "timestamp").index,
                                  np.arange(4) * 33_333_333)  # FixedRateSampling's step at 30 Hz
    plain = catalog.create_dataset("plain")
    plain.register(tmp_path / "b.hdf5")
    assert plain.timelines == {"frame_index": "sequence"}


def test_num_samples_that_disagree_with_the_actions_are_refused(tmp_path: Path,
                                                                catalog: Catalog) -> None:
    src = tmp_path / "bad.hdf5"
    write_robomimic(src, lengths={0: 4}, image=False)
    with h5py.File(src, "r+") as f:
        f["data/demo_0"].attrs["num_samples"] = 9
    with pytest.raises(CorruptRecordingError, match=r"bad.hdf5: data/demo_0 declares "
                                                    r"num_samples=9 but its actions have 4 rows"):
        catalog.create_dataset("x").register(src)


# ----------------------------------------------------------------------------- mapping files
def _lab_file(path: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    out = {}
    with h5py.File(path, "w") as f:
        for k, count in enumerate((4, 6)):
            g = f.create_group(f"episodes/run{k + 1}")
            g.attrs["instruction"] = f"stack block {k}"
            g.attrs["operator"] = "ana"
            out[f"run{k + 1}/q"] = rng.standard_normal((count, 6)).astype(np.float32)
            out[f"run{k + 1}/t"] = np.cumsum(rng.uniform(0.01, 0.02, count))
            out[f"run{k + 1}/cam"] = rng.integers(0, 255, (count, 4, 5, 3), dtype=np.uint8)
            for name in ("q", "t", "cam"):
                g.create_dataset(name, data=out[f"run{k + 1}/{name}"])
    return out


def test_a_mapping_file_registers_a_labs_own_layout(tmp_path: Path, catalog: Catalog) -> None:
    pytest.importorskip("yaml")
    truth = _lab_file(tmp_path / "lab.h5")
    mapping = tmp_path / "lab.yaml"
    mapping.write_text(
        "format: rayform-hdf5-mapping\n"
        "format_version: 1\n"
        "episodes: {groups: /episodes/*}\n"
        "task_attribute: instruction\n"
        "properties: {robot: ur5}\n"
        "datasets:\n"
        "  q: {entity: /joints/position, timestamp: {dataset: t, unit: s}}\n"
        "  cam: {entity: /cam/front, kind: image, rate_hz: 10}\n")
    ds = catalog.create_dataset("lab")
    ids = ds.register(tmp_path / "lab.h5",
                      import_options=ImportOptions(hdf5_mapping=mapping)).wait().segment_ids
    assert ids == ["lab_episodes_run1", "lab_episodes_run2"]
    for k, sid in enumerate(ids):
        seg = ds.open_segment(sid)
        q = seg.column("/joints/position:Scalars:scalars", "timestamp")
        np.testing.assert_array_equal(q.index, np.round(truth[f"run{k + 1}/t"] * 1e9))
        assert np.asarray(q.values.to_pylist(), np.float32).tobytes() == \
            truth[f"run{k + 1}/q"].tobytes()
        cam = seg.column("/cam/front:Image:buffer", "timestamp")
        np.testing.assert_array_equal(cam.index, np.arange(len(cam.index)) * 100_000_000)
        assert [r[0] for r in cam.values.to_pylist()] == \
            [f.tobytes() for f in truth[f"run{k + 1}/cam"]]
        props = ds.segment_record(sid).properties
        assert props["task"] == f"stack block {k}"
        assert props["robot"] == "ur5"
        assert props["operator"] == "ana"
        assert "timestamps from 't'" in props["time_grid"]


def test_a_json_mapping_with_episode_ends_splits_concatenated_rows(tmp_path: Path,
                                                                   catalog: Catalog) -> None:
    values = np.arange(30, dtype=np.int32).reshape(10, 3)
    with h5py.File(tmp_path / "buffer.hdf5", "w") as f:
        f["data/state"] = values
        f["meta/episode_ends"] = np.asarray([4, 10], np.int64)
    mapping = tmp_path / "buffer.json"
    mapping.write_text(json.dumps({
        "format": "rayform-hdf5-mapping", "format_version": 1, "rate_hz": 10,
        "episodes": {"ends": "meta/episode_ends"},
        "datasets": {"data/state": {"entity": "/state"}}}))
    ds = catalog.create_dataset("buf")
    ds.register(tmp_path / "buffer.hdf5", import_options=ImportOptions(hdf5_mapping=mapping))
    assert ds.segment_ids() == ["buffer_episode_000000", "buffer_episode_000001"]
    first = ds.open_segment("buffer_episode_000000").column("/state:Scalars:scalars",
                                                             "frame_index")
    second = ds.open_segment("buffer_episode_000001").column("/state:Scalars:scalars",
                                                              "timestamp")
    assert first.values.to_pylist() == values[:4].tolist()
    assert second.values.to_pylist() == values[4:].tolist()
    np.testing.assert_array_equal(second.index, np.arange(6) * 100_000_000)


def test_a_mapping_with_an_episode_axis(tmp_path: Path, catalog: Catalog) -> None:
    values = np.random.default_rng(1).standard_normal((3, 5, 2))
    with h5py.File(tmp_path / "stack.h5", "w") as f:
        f["obs"] = values
    mapping = tmp_path / "m.json"
    mapping.write_text(json.dumps({"format": "rayform-hdf5-mapping", "format_version": 1,
                                   "episodes": {"axis": 0},
                                   "datasets": {"obs": {"entity": "/obs"}}}))
    ds = catalog.create_dataset("stack")
    ds.register(tmp_path / "stack.h5", import_options=ImportOptions(hdf5_mapping=mapping))
    assert len(ds.segment_ids()) == 3
    got = ds.open_segment("stack_episode_000002").column("/obs:Scalars:scalars", "frame_index")
    assert np.asarray(got.values.to_pylist()).tobytes() == values[2].tobytes()


@pytest.mark.parametrize(("text", "match"), [
    ('{"format": "rayform-hdf5-mapping", "format_version": 1, "datasets": {}}',
     r"key datasets"),
    ('{"format": "rayform-hdf5-mapping", "format_version": 1, '
     '"datasets": {"q": {"entity": "joints"}}}', r"key datasets.q.entity"),
    ('{"format": "rayform-hdf5-mapping", "format_version": 1, "rate_hz": -3, '
     '"datasets": {"q": {"entity": "/q"}}}', r"key rate_hz"),
    ('{"format": "rayform-hdf5-mapping", "format_version": 1, "episodes": {"axis": 0, '
     '"ends": "e"}, "datasets": {"q": {"entity": "/q"}}}', r"key episodes"),
    ('{"format": "rayform-hdf5-mapping", "format_version": 2, "datasets": {}}',
     r"format_version 2 is not supported"),
    ('{"format_version": 1}', r"needs format: rayform-hdf5-mapping"),
    ("{not json", r"not valid JSON"),
])
def test_a_bad_mapping_file_names_the_file_and_the_key(tmp_path: Path, catalog: Catalog,
                                                       text: str, match: str) -> None:
    write_aloha(tmp_path / "ep.hdf5", count=2)
    mapping = tmp_path / "bad.json"
    mapping.write_text(text)
    ds = catalog.create_dataset("x")
    with pytest.raises(ConfigError, match=rf"HDF5 mapping file .*bad.json: .*{match}"):
        ds.register(tmp_path / "ep.hdf5", import_options=ImportOptions(hdf5_mapping=mapping))
    assert ds.segment_ids() == []


def test_an_unknown_layout_points_to_mapping_files(tmp_path: Path, catalog: Catalog) -> None:
    with h5py.File(tmp_path / "odd.h5", "w") as f:
        f["signals/a"] = np.zeros(3)
    with pytest.raises(FormatError, match=r"odd.h5: an HDF5 layout rayform does not know "
                                          r"\(top level: \['signals'\]\).*--mapping"):
        catalog.create_dataset("x").register(tmp_path / "odd.h5")


# ------------------------------------------------------------------------------------ options
def test_options_no_source_reads_are_refused(tmp_path: Path, catalog: Catalog) -> None:
    from recording_factories import RobotEpisode, write_robot_episode

    write_robot_episode(tmp_path / "ep.rfr", RobotEpisode(recording_id="ep", num_frames=3))
    ds = catalog.create_dataset("x")
    with pytest.raises(ConfigError, match=r"\['rate_hz'\] apply to none of the sources' "
                                          r"formats \(\['rayform'\]\)"):
        ds.register(tmp_path / "ep.rfr", import_options=ImportOptions(rate_hz=30))
    assert ds.segment_ids() == []


@pytest.mark.parametrize("rate", [0, -1.0, float("nan"), float("inf"), True, "30"])
def test_import_options_refuse_a_bad_rate(rate: object) -> None:
    with pytest.raises(ConfigError, match="rate_hz must be a finite rate > 0"):
        ImportOptions(rate_hz=rate)  # type: ignore[arg-type]


def test_cli_register_takes_fps_and_mapping(tmp_path: Path, catalog: Catalog) -> None:
    from rayform.cli import main

    _lab_file(tmp_path / "lab.h5")
    mapping = tmp_path / "lab.json"
    mapping.write_text(json.dumps({"format": "rayform-hdf5-mapping", "format_version": 1,
                                   "episodes": {"groups": "episodes/*"},
                                   "datasets": {"q": {"entity": "/q"}}}))
    write_aloha(tmp_path / "episode_0.hdf5", count=3)
    url = str(catalog.url)
    assert main(["register", "--catalog", url, "lab", str(tmp_path / "lab.h5"), "--create",
                 "--mapping", str(mapping), "--fps", "25"]) == 0
    assert main(["register", "--catalog", url, "aloha", str(tmp_path / "episode_0.hdf5"),
                 "--create", "--fps", "25"]) == 0
    lab = Catalog.open(url).get_dataset("lab")
    assert lab.segment_ids() == ["lab_episodes_run1", "lab_episodes_run2"]
    np.testing.assert_array_equal(
        lab.open_segment("lab_episodes_run1").column("/q:Scalars:scalars", "timestamp").index,
        np.arange(4) * 40_000_000)
    assert Catalog.open(url).get_dataset("aloha").segment_record("episode_0") \
        .properties["rate_hz"] == 25.0


def test_every_sample_of_the_rerun_grid_gets_its_own_frame(tmp_path: Path,
                                                           catalog: Catalog) -> None:
    pytest.importorskip("torch")
    from rayform.dataloader import (
        DataSource,
        Field,
        FixedRateSampling,
        NumericDecoder,
        RerunMapDataset,
    )

    truth = write_robomimic(tmp_path / "grid.hdf5", lengths={0: 97}, image=False)
    ds = catalog.create_dataset("grid")
    ds.register(tmp_path / "grid.hdf5", import_options=ImportOptions(rate_hz=30))
    train = RerunMapDataset(DataSource(ds), "timestamp",
                            {"a": Field("/actions:Scalars:scalars", decode=NumericDecoder())},
                            timeline_sampling=FixedRateSampling(rate_hz=30))
    assert len(train) == 97
    got = np.stack([train[k]["a"].numpy() for k in range(97)])
    np.testing.assert_array_equal(got, truth[0]["actions"])  # sample k is frame k, none shifted


def test_demos_stream_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each demo's datasets are read only after the previous demo's recording is written, so a
    file of many demos never sits in memory whole."""
    from rayform.importers.hdf5 import Hdf5Importer, _robomimic
    from rayform.recording._writer import RecordingWriter

    write_robomimic(tmp_path / "many.hdf5", lengths={n: 5 for n in range(6)}, image=False)
    events: list[str] = []
    read = _robomimic.read_dataset
    close = RecordingWriter.close

    def reading(path: Path, dataset: object) -> np.ndarray:
        events.append("read " + dataset.name.split("/")[2])  # type: ignore[attr-defined]
        return read(path, dataset)

    def closing(self: RecordingWriter) -> Path:
        events.append("close " + self.path.stem.rsplit("_", 2)[-2] + "_"
                      + self.path.stem.rsplit("_", 1)[-1])
        return close(self)

    monkeypatch.setattr(_robomimic, "read_dataset", reading)
    monkeypatch.setattr(RecordingWriter, "close", closing)
    out = tmp_path / "out"
    out.mkdir()
    assert len(Hdf5Importer().convert(tmp_path / "many.hdf5", out)) == 6
    demos = [e.split()[1] for e in events if e.startswith("close")]
    assert demos == [f"demo_{n}" for n in range(6)]
    for n in range(1, 6):  # demo n is read only after demo n-1 was written
        first_read = events.index(f"read demo_{n}")
        assert first_read > events.index(f"close demo_{n - 1}")
        assert f"read demo_{n - 1}" not in events[first_read:]


def test_rayform_schema_shows_a_raw_camera_s_frame_shape(tmp_path: Path, catalog: Catalog,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """``rayform schema`` reads a raw camera's ``Image:format``: height × width × channels and
    the datatype beside ``list<binary>`` (the numeric vectors keep their widths)."""
    from rayform.cli import main
    from rayform.recording._image_format import describe_image_format

    write_aloha(tmp_path / "episode_0.hdf5", height=24, width=32)
    catalog.create_dataset("aloha").register([tmp_path / "episode_0.hdf5"])
    assert main(["--catalog", str(tmp_path / "catalog"), "schema", "aloha", "--format", "json"]) == 0
    rows = {r["column"]: r["type"] for r in json.loads(capsys.readouterr().out)}
    for cam in ALOHA_CAMERAS:
        assert rows[f"/observations/images/{cam}:Image:buffer"] == \
            "list<binary> (24×32×3 uint8, RGB)"
    assert rows["/observations/qpos:Scalars:scalars"].endswith("[14]")
    assert describe_image_format({**FORMAT, "color_model": 4, "channel_datatype": 34}) == \
        "24×32×3 float32, BGR"
    assert describe_image_format({**FORMAT, "pixel_format": 26}) == "24×32 pixel_format 26"
    assert describe_image_format({**FORMAT, "width": 0}) is None
    assert describe_image_format({**FORMAT, "color_model": 99}) is None
