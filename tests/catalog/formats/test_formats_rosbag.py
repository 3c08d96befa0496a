"""ROS 1 ``.bag`` and ROS 2 sqlite3 bags register with the MCAP importer's columns: the same
messages in a ``.bag``, a ``.db3`` and an MCAP file register equal; values equal what rosbags
reads; split bags; undecodable or short bags refused naming them."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from rosbag_sources import COUNT, truth, write_ros1_bag, write_rosbag2

from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError

pytest.importorskip("rosbags")
pytest.importorskip("mcap_ros2")

REALDATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "realdata"
HUSKY = REALDATA / "rosbag1-robot-localization" / "test1.bag"
SQLITE_BAGS = REALDATA / "rosbag2-sqlite3-test-bags"
# A ROS 1 bag holds raw (unmapped) messages as ROS 1 bytes, a ROS 2 bag as CDR.
RAW_COLUMNS = frozenset({"/fix:McapMessage:data", "/fix:McapSchema:data",
                         "/fix:McapSchema:encoding", "/fix:McapChannel:message_encoding"})


def _register(catalog: Catalog, name: str, path: Path) -> DatasetEntry:
    ds = catalog.create_dataset(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        ds.register(path).wait()
    return ds


def _rows(ds: DatasetEntry, *, drop: frozenset[str] = frozenset()) -> pa.Table:
    table = ds.reader("log_time").to_arrow_table()
    keep = sorted(c for c in table.column_names if c not in drop and c != "rerun_segment_id")
    return table.select(keep).sort_by("log_time")


@pytest.fixture
def three_formats(tmp_path: Path, catalog: Catalog) -> dict[str, DatasetEntry]:
    sources = {"bag": write_ros1_bag(tmp_path / "run.bag"),
               "db3": write_rosbag2(tmp_path / "run_db3", storage="sqlite3"),
               "mcap": write_rosbag2(tmp_path / "run_mcap", storage="mcap")}
    return {name: _register(catalog, name, path) for name, path in sources.items()}


@pytest.mark.parametrize("fmt", ["bag", "db3"])
def test_the_same_messages_register_equal_in_bag_db3_and_mcap(
        three_formats: dict[str, DatasetEntry], fmt: str) -> None:
    mcap, other = three_formats["mcap"], three_formats[fmt]
    drop = RAW_COLUMNS if fmt == "bag" else frozenset()
    assert sorted(other.schema().component_columns()) == sorted(mcap.schema().component_columns())
    assert other.timelines == mcap.timelines == {
        "log_time": "timestamp", "publish_time": "timestamp", "header_time": "timestamp"}
    got, expected = _rows(other, drop=drop), _rows(mcap, drop=drop)
    assert got.num_rows == expected.num_rows > 0
    assert got.equals(expected)


def test_values_and_timelines_are_what_was_written(three_formats: dict[str, DatasetEntry]
                                                   ) -> None:
    written = truth()
    for ds in three_formats.values():
        seg = ds.open_segment(ds.segment_ids()[0])
        accel = seg.column("/imu:Imu:linear_acceleration", "log_time")
        np.testing.assert_array_equal(accel.index, written.log_ns["/imu"])
        np.testing.assert_array_equal(np.stack(accel.values.to_pylist()), written.accel)
        header = seg.column("/imu:Imu:linear_acceleration", "header_time")
        np.testing.assert_array_equal(np.sort(header.index), written.header_ns)
        blobs = seg.column("/cam/compressed:EncodedImage:blob", "log_time")
        assert len(blobs) == COUNT // 4
        assert blobs.values[1].as_py()[0].endswith(b"\xff\xd9\x04")
        text = seg.column("/chatter:TextDocument:text", "log_time")
        assert [v[0] for v in text.values.to_pylist()][:2] == ["hello 0", "hello 4"]


def test_raw_ros1_messages_keep_the_bag_bytes_and_definition(tmp_path: Path,
                                                             catalog: Catalog) -> None:
    from rosbags.highlevel import AnyReader

    path = write_ros1_bag(tmp_path / "run.bag")
    ds = catalog.create_dataset("bag")
    with pytest.warns(ConversionWarning, match=r"run\.bag: topic '/fix' \(sensor_msgs/msg/NavSatFix\) "
                      "has no typed mapping; kept as raw bytes"):
        ds.register(path).wait()
    with AnyReader([path]) as reader:
        raw = [data for c, _, data in reader.messages() if c.topic == "/fix"]
        msgdef = next(c.msgdef.data for c in reader.connections if c.topic == "/fix")
    seg = ds.open_segment("run")
    stored = seg.column("/fix:McapMessage:data", "log_time").values.to_pylist()
    assert [v[0] for v in stored] == raw
    table = ds.reader("log_time").to_arrow_table()
    static = {c: table.column(c).drop_null()[0].as_py() for c in
              ("/fix:McapSchema:encoding", "/fix:McapChannel:message_encoding",
               "/fix:McapSchema:data")}
    assert static == {"/fix:McapSchema:encoding": ["ros1msg"],
                      "/fix:McapChannel:message_encoding": ["ros1"],
                      "/fix:McapSchema:data": [msgdef]}


@pytest.mark.skipif(not HUSKY.is_file(), reason="needs ../shared/realdata (rosbag1 sample)")
def test_real_husky_bag_values_equal_what_rosbags_reads(catalog: Catalog) -> None:
    from rosbags.highlevel import AnyReader

    ds = _register(catalog, "husky", HUSKY)
    assert ds.segment_ids() == ["test1"]
    log: dict[str, list[int]] = {}
    accel, odom, fix = [], [], []
    with AnyReader([HUSKY]) as reader:
        for connection, t, raw in reader.messages():
            log.setdefault(connection.topic, []).append(t)
            if connection.topic == "/imu/data":
                a = reader.deserialize(raw, connection.msgtype).linear_acceleration
                accel.append([a.x, a.y, a.z])
            elif connection.topic == "/husky_velocity_controller/odom":
                msg = reader.deserialize(raw, connection.msgtype)
                odom.append(msg.pose.covariance)
            else:
                fix.append(raw)
    seg = ds.open_segment("test1")
    got = seg.column("/imu/data:Imu:linear_acceleration", "log_time")
    assert len(got) == 11_865
    np.testing.assert_array_equal(got.index, np.asarray(log["/imu/data"], dtype=np.int64))
    np.testing.assert_array_equal(np.stack(got.values.to_pylist()), np.asarray(accel))
    cov = seg.column("/husky_velocity_controller/odom:Odometry:pose_covariance", "log_time")
    np.testing.assert_array_equal(np.stack(cov.values.to_pylist()), np.stack(odom))
    raw = seg.column("/fix:McapMessage:data", "log_time").values.to_pylist()
    assert [r[0] for r in raw] == fix
    row = ds.segment_table_arrow().to_pylist()[0]
    assert row["property:frame_convention"] == "ros"
    assert row["property:rosbag_format"] == 1


@pytest.mark.skipif(not SQLITE_BAGS.is_dir(), reason="needs ../shared/realdata (sqlite3 bags)")
def test_real_split_sqlite3_bag_registers_all_five_files(catalog: Catalog) -> None:
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    bag = SQLITE_BAGS / "wbag"
    ds = _register(catalog, "wbag", bag)
    assert ds.segment_ids() == ["wbag"]
    texts: dict[str, list[str]] = {}
    with AnyReader([bag], default_typestore=get_typestore(Stores.LATEST)) as reader:
        for connection, _, raw in reader.messages():
            texts.setdefault(connection.topic, []).append(
                reader.deserialize(raw, connection.msgtype).data)
    seg = ds.open_segment("wbag")
    assert sum(len(v) for v in texts.values()) == 6_074
    for topic, values in texts.items():
        stored = seg.column(f"/{topic}:TextDocument:text", "log_time").values.to_pylist()
        assert sorted(v[0] for v in stored) == sorted(values), topic


@pytest.mark.skipif(not SQLITE_BAGS.is_dir(), reason="needs ../shared/realdata (sqlite3 bags)")
def test_real_sqlite3_bag_of_custom_types_keeps_them_raw_with_their_definitions(
        catalog: Catalog) -> None:
    from rosbags.highlevel import AnyReader

    bag = SQLITE_BAGS / "cdr_test"
    ds = catalog.create_dataset("cdr")
    with pytest.warns(ConversionWarning) as caught:
        ds.register(bag).wait()
    assert sorted(str(w.message).split(" has ")[0] for w in caught) == [
        f"{bag}: topic '/array_topic' (test_msgs/msg/Arrays)",
        f"{bag}: topic '/test_topic' (test_msgs/msg/BasicTypes)"]
    with AnyReader([bag]) as reader:
        raw = [data for c, _, data in reader.messages() if c.topic == "/array_topic"]
        msgdef = next(c.msgdef.data for c in reader.connections if c.topic == "/array_topic")
    table = ds.reader("log_time").to_arrow_table()
    stored = table.column("/array_topic:McapMessage:data").drop_null().to_pylist()
    assert [v[0] for v in stored] == raw
    assert table.column("/array_topic:McapSchema:data").drop_null()[0].as_py() == [msgdef]


# ------------------------------------------------------------------------ refused, named
def _retype_without_definitions(folder: Path, topic: str, msgtype: str) -> None:
    """The bag as an old rosbag2 wrote it (no embedded definitions), one topic of a type
    nobody has the definition of."""
    db = next(folder.glob("*.db3"))
    with sqlite3.connect(db) as con:
        old = con.execute("SELECT type FROM topics WHERE name = ?", (topic,)).fetchone()[0]
        con.execute("UPDATE topics SET type = ? WHERE name = ?", (msgtype, topic))
        con.execute("DELETE FROM message_definitions")
    meta = folder / "metadata.yaml"
    meta.write_text(meta.read_text().replace(f"type: {old}", f"type: {msgtype}", 1))


def test_a_bag_whose_messages_cannot_be_decoded_is_refused_with_its_name(
        tmp_path: Path, catalog: Catalog) -> None:
    folder = write_rosbag2(tmp_path / "secret_bag", storage="sqlite3")
    _retype_without_definitions(folder, "/imu", "my_msgs/msg/Secret")
    ds = catalog.create_dataset("x")
    with pytest.raises(FormatError, match=r"secret_bag: topic '/imu' holds 'my_msgs/msg/Secret' "
                       r"messages whose definition is neither embedded in the bag nor known"):
        ds.register(folder)
    assert ds.segment_ids() == []


def test_a_bag_that_yields_fewer_messages_than_it_counts_is_refused(tmp_path: Path,
                                                                    catalog: Catalog) -> None:
    folder = write_rosbag2(tmp_path / "short_bag", storage="sqlite3")
    db = next(folder.glob("*.db3"))
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM messages WHERE topic_id = "
                    "(SELECT id FROM topics WHERE name = '/odom')")
    ds = catalog.create_dataset("x")
    with pytest.raises(CorruptRecordingError, match=r"short_bag: the bag's index counts 40 "
                       r"'nav_msgs/msg/Odometry' messages on topic '/odom' but rosbags reads 0"):
        ds.register(folder)
    assert ds.segment_ids() == []


@pytest.mark.parametrize("entry", ["../outside.db3", "/etc/passwd", "sub/../../x.db3",
                                   "C:\\\\bags\\\\x.db3", "link.db3"])
@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_relative_file_paths_leaving_the_folder_are_refused(tmp_path: Path, catalog: Catalog,
                                                            entry: str, storage: str) -> None:
    """One check for every bag folder, whichever importer reads it."""
    folder = write_rosbag2(tmp_path / "bag", storage=storage)
    outside = tmp_path / "outside.db3"
    outside.write_bytes(next(folder.glob("*.db3" if storage == "sqlite3" else "*.mcap"))
                        .read_bytes())
    (folder / "link.db3").symlink_to(outside)
    meta = folder / "metadata.yaml"
    text = meta.read_text()
    listed = next(line for line in text.splitlines() if line.strip().startswith("- bag"))
    meta.write_text(text.replace(listed, listed.split("-")[0] + f"- '{entry}'"))
    with pytest.raises(FormatError, match=r"relative_file_paths entry .* (is not a file inside "
                       r"the bag folder|resolves outside the bag folder)"):
        catalog.create_dataset("x").register(folder)


def test_yaml_aliases_in_bag_metadata_are_refused(tmp_path: Path, catalog: Catalog) -> None:
    folder = write_rosbag2(tmp_path / "bag", storage="sqlite3")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True))
    meta = folder / "metadata.yaml"
    meta.write_text(bomb + meta.read_text())
    with pytest.raises(CorruptRecordingError, match=r"metadata\.yaml: not valid YAML: .*aliases "
                       "are not allowed"):
        catalog.create_dataset("x").register(folder)


def test_an_image_shorter_than_its_header_says_is_refused_naming_the_bag(
        tmp_path: Path, catalog: Catalog) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    t = store.types
    image = t["sensor_msgs/msg/Image"](
        header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=1, nanosec=0),
                                        frame_id="cam"),
        height=4, width=4, encoding="rgb8", is_bigendian=0, step=16,  # 16 > 4 * 3: padded rows
        data=np.zeros(20, dtype=np.uint8))  # but 20 bytes where 4 rows of 16 are due
    with Writer(tmp_path / "short_image", version=9, storage_plugin=StoragePlugin.SQLITE3) as bag:
        connection = bag.add_connection("/cam", "sensor_msgs/msg/Image", typestore=store)
        bag.write(connection, 1, bytes(store.serialize_cdr(image, "sensor_msgs/msg/Image")))
    ds = catalog.create_dataset("x")
    with pytest.raises(CorruptRecordingError, match=r"short_image: topic '/cam' "
                       r"\(sensor_msgs/msg/Image\): messages inconsistent with their type"):
        ds.register(tmp_path / "short_image")
    assert ds.segment_ids() == []
