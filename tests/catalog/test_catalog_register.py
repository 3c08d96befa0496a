"""Registration, layers, on_duplicate, unregister, the segment table and segment versions."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from recording_factories import EPOCH_NS, FRAME_NS, RecordingFactory

import rayform
from rayform.catalog import (
    Catalog,
    DatasetEntry,
    OnDuplicate,
    RegistrationResult,
    SegmentRegistrationResult,
)
from rayform.errors import ConfigError, DuplicateSegmentError, EntryNotFoundError
from rayform.recording._file import open_recording

JOINTS = "/joints/position:Scalars:scalars"


def _joint_rows(ds: rayform.DatasetView, segment_id: str) -> list[list[float]]:
    rows: list[list[float]] = ds.open_segment(segment_id).column(JOINTS, "frame_index").values \
        .to_pylist()
    return rows


def test_register_returns_handle_and_segments(robots: DatasetEntry) -> None:
    assert robots.segment_ids() == ["ep0", "ep1", "ep2"]
    assert robots.snapshot_version == 1
    assert robots.timelines == {"frame_index": "sequence", "real_time": "timestamp",
                                "elapsed": "duration"}
    reopened = Catalog.open(robots.catalog.url).get_dataset("robots")
    assert reopened.segment_ids() == ["ep0", "ep1", "ep2"]


def test_handle_wait_and_iter_results(catalog: Catalog, recording_factory: RecordingFactory
                                      ) -> None:
    ds = catalog.create_dataset("d")
    sources = [recording_factory("b"), recording_factory("a")]
    handle = ds.register([sources[0], sources[1].as_uri()])
    assert handle.wait() == RegistrationResult(segment_ids=["b", "a"])
    results = list(handle.iter_results())
    assert [(r.uri, r.segment_id, r.error, r.is_success) for r in results] == [
        (str(sources[0]), "b", None, True), (sources[1].as_uri(), "a", None, True)]
    assert all(isinstance(r, SegmentRegistrationResult) for r in results)
    assert ds.segment_ids() == ["a", "b"]


def test_segment_table_columns_types_and_values(robots: DatasetEntry,
                                                recording_factory: RecordingFactory) -> None:
    before_ns = time.time_ns()
    table = robots.segment_table().to_arrow_table()
    assert table.schema.names == [
        "rerun_segment_id", "rerun_layer_names", "rerun_storage_urls", "rerun_last_updated_at",
        "rerun_num_rows", "rerun_size_bytes", "rayform_segment_version",
        "property:episode", "property:robot", "property:score", "property:site",
        "property:success", "property:task",
        "frame_index:start", "frame_index:end", "real_time:start", "real_time:end",
        "elapsed:start", "elapsed:end",
    ]
    types = {f.name: f.type for f in table.schema}
    assert types["rerun_segment_id"] == pa.string()
    assert types["rerun_layer_names"] == pa.list_(pa.string())
    assert types["rerun_storage_urls"] == pa.list_(pa.string())
    assert types["rerun_last_updated_at"] == pa.timestamp("ns")
    assert types["rerun_num_rows"] == pa.uint64()
    assert types["rerun_size_bytes"] == pa.uint64()
    assert types["rayform_segment_version"] == pa.string()
    assert types["property:episode"] == pa.int64()
    assert types["property:score"] == pa.float64()
    assert types["property:success"] == pa.bool_()
    assert types["property:task"] == pa.string()
    assert types["frame_index:start"] == pa.int64()
    assert types["real_time:start"] == pa.timestamp("ns")
    assert types["elapsed:end"] == pa.duration("ns")

    rows = table.to_pylist()
    assert [r["rerun_segment_id"] for r in rows] == ["ep0", "ep1", "ep2"]
    assert [r["rerun_layer_names"] for r in rows] == [["base"]] * 3
    assert [r["property:success"] for r in rows] == [True, False, True]
    assert [r["property:episode"] for r in rows] == [0, 1, 2]
    assert [r["property:score"] for r in rows] == [0.0, 0.25, 0.5]
    assert [r["frame_index:end"] for r in rows] == [29, 32, 35]
    ints = table.select(["real_time:start", "real_time:end", "elapsed:end"]).cast(pa.schema([
        ("real_time:start", pa.int64()), ("real_time:end", pa.int64()),
        ("elapsed:end", pa.int64())])).to_pylist()
    assert ints[1] == {"real_time:start": EPOCH_NS, "real_time:end": EPOCH_NS + 32 * FRAME_NS,
                       "elapsed:end": 32 * FRAME_NS}
    for i, row in enumerate(rows):
        (url,) = row["rerun_storage_urls"]
        stored = Path(url)
        assert stored.is_file()
        source = recording_factory(f"ep{i}", seed=i, num_frames=30 + 3 * i)
        assert stored.read_bytes() == source.read_bytes()  # deterministic writer, same bytes
        assert row["rerun_size_bytes"] == source.stat().st_size
        assert row["rerun_num_rows"] == open_recording(source)[1].num_rows
        assert len(row["rayform_segment_version"]) == 16
        assert row["rerun_last_updated_at"] is not None
    last = table.column("rerun_last_updated_at").cast(pa.int64()).to_pylist()
    assert all(0 < ns <= before_ns for ns in last)


def test_properties_with_mixed_and_missing_values(catalog: Catalog,
                                                  recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("mixed")
    ds.register([recording_factory("a", seed=0, properties={"weight": 2, "note": "x"}),
                 recording_factory("b", seed=1, properties={"weight": 2.5}),
                 recording_factory("c", seed=2, properties={"weight": None})]).wait()
    table = ds.segment_table_arrow()
    assert table.schema.field("property:weight").type == pa.float64()
    assert table.column("property:weight").to_pylist() == [2.0, 2.5, None]
    assert table.column("property:note").to_pylist() == ["x", None, None]


def test_layers_merge_columns_and_properties(catalog: Catalog, tmp_path: Path,
                                             recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("layered")
    ds.register(recording_factory("ep0", num_frames=10)).wait()
    base_version = ds.segment_record("ep0").version
    extra = tmp_path / "annotations.rfr"
    with rayform.RecordingWriter(extra, recording_id="ep0") as rec:
        rec.set_properties(annotator="bob", task="relabelled")
        rec.log_scalars("/annotations/phase", timelines={"frame_index": [0, 5]}, values=[1, 2])
    result = ds.register(extra, layer_name="annotations").wait()
    assert result.segment_ids == ["ep0"]
    row = ds.segment_table_arrow().to_pylist()[0]
    assert row["rerun_layer_names"] == ["annotations", "base"]
    assert len(row["rerun_storage_urls"]) == 2
    assert row["property:annotator"] == "bob"
    assert row["property:task"] == "task-0"  # 'base' sorts after 'annotations' and wins
    assert ds.segment_record("ep0").version != base_version
    assert "/annotations/phase" in ds.schema().entity_paths()
    aligned = ds.reader("frame_index", fill_latest_at=True).to_arrow_table()
    phase = aligned.column("/annotations/phase:Scalars:scalars").to_pylist()
    assert phase[:6] == [[1]] * 5 + [[2]]
    assert aligned.column(JOINTS).null_count == 0

    ds.unregister(segments_to_drop="ep0", layers_to_drop="annotations")
    assert ds.segment_table_arrow().column("rerun_layer_names").to_pylist() == [["base"]]
    assert ds.segment_record("ep0").version == base_version  # content-derived


def test_layer_names_per_source(catalog: Catalog, recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("d")
    ds.register([recording_factory("a"), recording_factory("a", seed=4)],
                layer_name=["base", "extra"]).wait()
    assert ds.segment_table_arrow().column("rerun_layer_names").to_pylist() == \
        [["base", "extra"]]


def test_on_duplicate_error_skip_replace(catalog: Catalog,
                                         recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("dup")
    first = recording_factory("ep0", seed=0)
    ds.register(first).wait()
    version = ds.segment_record("ep0").version
    changed = recording_factory("ep0", seed=5)
    with pytest.raises(DuplicateSegmentError, match=r"'ep0' layer 'base'.*on_duplicate='replace'"):
        ds.register(changed)
    # Rerun lists a skipped segment among the registration's segment ids.
    assert ds.register(changed, on_duplicate="skip").wait().segment_ids == ["ep0"]
    assert ds.snapshot_version == 1
    assert ds.segment_record("ep0").version == version
    assert _joint_rows(ds, "ep0")[0][0] == 0.0
    updated_at = ds.segment_record("ep0").last_updated_at_ns
    assert ds.register(changed, on_duplicate=OnDuplicate.REPLACE).wait().segment_ids == ["ep0"]
    assert ds.segment_record("ep0").version != version
    assert ds.segment_record("ep0").last_updated_at_ns > updated_at
    assert _joint_rows(ds, "ep0")[0][0] == 5000.0


def test_duplicate_within_one_registration(catalog: Catalog,
                                           recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("dup")
    with pytest.raises(DuplicateSegmentError, match=r"appears twice"):
        ds.register([recording_factory("x"), recording_factory("x", seed=1)])
    assert ds.segment_ids() == []


def test_segment_version_is_content_derived(tmp_path: Path,
                                            recording_factory: RecordingFactory) -> None:
    a = Catalog.create(tmp_path / "a").create_dataset("d")
    b = Catalog.create(tmp_path / "b").create_dataset("d")
    a.register(recording_factory("ep", seed=1)).wait()
    b.register(recording_factory("ep", seed=1)).wait()  # same bytes, other catalog, other time
    assert a.segment_record("ep").version == b.segment_record("ep").version
    b.register(recording_factory("ep", seed=1), on_duplicate="replace").wait()
    assert a.segment_record("ep").version == b.segment_record("ep").version
    b.register(recording_factory("ep", seed=2), on_duplicate="replace").wait()
    assert a.segment_record("ep").version != b.segment_record("ep").version
    versions = b.segment_table_arrow().column("rayform_segment_version").to_pylist()
    assert versions == [b.segment_record("ep").version]


def test_old_snapshots_still_read_old_data(catalog: Catalog,
                                           recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("d")
    ds.register(recording_factory("ep", seed=1)).wait()
    old_number = ds.snapshot_version
    ds.register(recording_factory("ep", seed=2), on_duplicate="replace").wait()
    ds.register(recording_factory("new", seed=3)).wait()
    old = ds.at_version(old_number)
    assert old.segment_ids() == ["ep"]
    assert _joint_rows(old, "ep")[0][0] == 1000.0
    assert _joint_rows(ds, "ep")[0][0] == 2000.0
    table = old.reader("frame_index", fill_latest_at=True).to_arrow_table()
    assert table.column(JOINTS).to_pylist()[0][0] == 1000.0
    with pytest.raises(EntryNotFoundError, match=r"no snapshot 99; committed snapshots are 1\.\.3"):
        ds.at_version(99)


def test_unregister(robots: DatasetEntry) -> None:
    robots.unregister(segments_to_drop=["ep0", "ep2"])
    assert robots.segment_ids() == ["ep1"]
    assert Catalog.open(robots.catalog.url).get_dataset("robots").segment_ids() == ["ep1"]
    assert robots.at_version(1).segment_ids() == ["ep0", "ep1", "ep2"]


def test_refresh_sees_other_handles(robots: DatasetEntry,
                                    recording_factory: RecordingFactory) -> None:
    other = Catalog.open(robots.catalog.url).get_dataset("robots")
    other.register(recording_factory("ep9", seed=9)).wait()
    assert robots.segment_ids() == ["ep0", "ep1", "ep2"]  # pinned until refreshed
    assert robots.refresh().segment_ids() == ["ep0", "ep1", "ep2", "ep9"]


def test_objects_are_shared_between_datasets(catalog: Catalog,
                                             recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep", seed=1)
    catalog.create_dataset("one").register(path).wait()
    catalog.create_dataset("two").register(path).wait()
    objects = [p for p in (Path(catalog.url) / "objects").rglob("*")
               if p.is_file() and p.read_bytes() == path.read_bytes()]
    assert len(objects) == 1  # one copy of the recording (besides each snapshot's index)
    url_one = catalog.get_dataset("one").segment_table_arrow()["rerun_storage_urls"].to_pylist()
    url_two = catalog.get_dataset("two").segment_table_arrow()["rerun_storage_urls"].to_pylist()
    assert url_one == url_two == [[str(objects[0])]]


def test_catalog_entries(catalog: Catalog) -> None:
    catalog.create_dataset("b")
    catalog.create_dataset("a")
    catalog.create_table("t", pa.schema([("x", pa.int64())]))
    assert catalog.dataset_names() == ["a", "b"]
    assert catalog.table_names() == ["t"]
    assert [d.name for d in catalog.datasets()] == ["a", "b"]
    assert catalog.create_dataset("a", exist_ok=True).id == catalog.get_dataset("a").id
    assert np.all([len(d.id) == 32 for d in catalog.datasets()])


def test_unregister_nothing_commits_nothing(tmp_path: Path) -> None:
    from rayform.catalog import RecordingWriter

    ds = Catalog.create(tmp_path / "cat").create_dataset("d")
    with RecordingWriter(tmp_path / "a.rfr", recording_id="a") as rec:
        rec.log_scalars("/x", timelines={"i": np.arange(3)}, values=np.arange(3.0))
    ds.register([str(tmp_path / "a.rfr")]).wait()
    before = ds.snapshot_version
    with pytest.raises(ConfigError, match="nothing to drop"):  # Rerun: invalid argument
        ds.unregister(segments_to_drop=[])
    result = ds.unregister(layers_to_drop="no-such-layer").wait()  # matches nothing
    assert result.segment_ids == [] and result.snapshot_version is None
    assert ds.refresh().snapshot_version == before and ds.segment_ids() == ["a"]


def test_shared_asset_is_hashed_and_copied_once(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Many episodes pointing into one video file (LeRobot v3.0) store and verify it once."""
    from rayform.catalog import RecordingWriter, _registration
    from rayform.storage._local import LocalStore

    video = tmp_path / "shared.mp4"
    video.write_bytes(bytes(range(256)) * 4096)  # 1 MiB stand-in; only hashed and copied here
    paths = []
    for i in range(4):
        with RecordingWriter(tmp_path / f"ep{i}.rfr", recording_id=f"ep{i}") as rec:
            rec.log_video_asset("/cam", video, timelines={"frame_index": np.arange(3) + 3 * i},
                                frame_timestamps_ns=np.arange(3) * 33_333_333 + i * 10**8,
                                is_keyframe=[True, False, False])
        paths.append(str(tmp_path / f"ep{i}.rfr"))
    hashed: list[Path] = []
    copied: list[Path] = []
    real_hash, real_put = _registration.sha256_file, LocalStore.put_object
    monkeypatch.setattr(_registration, "_verified", {})
    monkeypatch.setattr(_registration, "sha256_file",
                        lambda p: hashed.append(p) or real_hash(p))
    monkeypatch.setattr(LocalStore, "put_object",
                        lambda self, src: copied.append(src) or real_put(self, src))
    ds = Catalog.create(tmp_path / "cat").create_dataset("v3")
    ds.register(paths).wait()
    digests = {d for r in ds.segment_records() for layer in r.layers.values() for d in layer.assets}
    assert len(digests) == 1
    digest = digests.pop()
    assert sum(p.name == digest for p in hashed) == 1
    assert sum(p.name == digest for p in copied) <= 2  # two store threads may race once
    assert sum(p.suffix == ".rfr" for p in copied) == 4
    stored = ds.open_segment("ep3").asset_path(digest)
    assert stored.read_bytes() == video.read_bytes()


def test_register_takes_file_uris_as_rerun_scripts_pass_them(
        catalog: Catalog, recording_factory: RecordingFactory, tmp_path: Path) -> None:
    plain = recording_factory("a")
    spaced = tmp_path / "with space é"
    spaced.mkdir()
    moved = recording_factory("b").rename(spaced / "b.rfr")
    ds = catalog.create_dataset("d")
    result = ds.register([plain.as_uri(), moved.as_uri()]).wait()
    assert result.segment_ids == ["a", "b"]
    assert "%20" in moved.as_uri()
    assert {r.segment_id: r.layers["base"].source_uri for r in ds.segment_records()} == \
        {"a": str(plain.resolve()), "b": str(moved.resolve())}
    by_path = catalog.create_dataset("by_path")
    by_path.register(recording_uri=[str(plain), moved]).wait()  # Rerun's keyword, plain paths
    assert _joint_rows(ds, "b") == _joint_rows(by_path, "b") and _joint_rows(ds, "b")
    assert [r.layers["base"].object for r in ds.segment_records()] == \
        [r.layers["base"].object for r in by_path.segment_records()]


@pytest.mark.parametrize("uri", ["gs://bucket/x.rrd", "rerun+http://host/x.rrd",
                                 "file://otherhost/x.rrd", "https://host/folder/",
                                 "https://host/x.rrd?X-Amz-Signature=1"])
def test_unsupported_source_uris_are_refused(catalog: Catalog, uri: str) -> None:
    from rayform.errors import ConfigError

    ds = catalog.create_dataset("d")
    with pytest.raises(ConfigError, match=re.escape(repr(uri))):
        ds.register([uri])
    assert ds.segment_ids() == []


@pytest.mark.parametrize("problem", ["missing", "schema", "duplicate", "unknown-format"])
def test_every_registration_error_is_a_value_error(robots: DatasetEntry, tmp_path: Path,
                                                   recording_factory: RecordingFactory,
                                                   problem: str) -> None:
    """What a Rerun script catches around ``register(...).wait()``; a type conflict says
    "schema" as Rerun's message does."""
    source = tmp_path / "bad.rfr"
    if problem == "schema":
        with rayform.RecordingWriter(source, recording_id="bad") as rec:
            rec.log_scalars("/joints/position", timelines={"frame_index": [0]},
                            values=np.zeros((1, 7), np.float32))
    elif problem == "duplicate":
        source = recording_factory("ep0")
    elif problem == "unknown-format":
        source.write_text("not a recording")
    with pytest.raises(ValueError) as info:
        robots.register(source).wait()
    if problem == "schema":
        assert "schema" in str(info.value)
    assert robots.refresh().segment_ids() == ["ep0", "ep1", "ep2"]
