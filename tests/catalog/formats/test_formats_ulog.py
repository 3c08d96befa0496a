"""PX4 ULog logs (the real ones in ../shared/realdata) register with pyulog's own values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rayform.catalog import Catalog
from rayform.importers.ulog import entity_base, field_component, field_groups

pyulog = pytest.importorskip("pyulog")

pytestmark = pytest.mark.realdata
APPENDED = "px4-pyulog-ulog/sample_appended_multiple.ulg"
SAMPLE = "px4-pyulog-ulog/sample.ulg"


def test_field_names_group_into_entities() -> None:
    groups = field_groups(["timestamp", "gyro_rad[0]", "gyro_rad[2]", "gyro_rad[1]", "x",
                           "_padding0", "esc[0].esc_rpm", "esc[1].esc_rpm", "esc[0]._padding0[1]",
                           "previous.lat", "previous._padding0[0]"])
    assert groups == {"gyro_rad": ["gyro_rad[0]", "gyro_rad[1]", "gyro_rad[2]"], "x": ["x"],
                      "esc/0/esc_rpm": ["esc[0].esc_rpm"], "esc/1/esc_rpm": ["esc[1].esc_rpm"],
                      "previous.lat": ["previous.lat"]}
    assert entity_base("sensor_combined", 0) == "/sensor_combined"
    assert entity_base("actuator_outputs", 1) == "/actuator_outputs_1"


def test_every_topic_instance_and_field_equals_pyulog(realdata: Path, catalog: Catalog) -> None:
    path = realdata / APPENDED
    log = pyulog.ULog(str(path))
    ds = catalog.create_dataset("px4")
    assert ds.register(path).wait().segment_ids == ["sample_appended_multiple"]
    assert ds.timelines == {"timestamp": "duration"}
    seg = ds.open_segment("sample_appended_multiple")
    instances = {(d.name, d.multi_id) for d in log.data_list}
    assert ("actuator_outputs", 1) in instances  # a multi-instance topic
    checked = 0
    for data in log.data_list:
        base = entity_base(data.name, data.multi_id)
        for suffix, names in field_groups(data.data).items():
            got = seg.column(f"{base}:{field_component(suffix)}", "timestamp")
            np.testing.assert_array_equal(got.index, data.data["timestamp"].astype(np.int64) * 1000)
            truth = np.stack([data.data[n] for n in names], axis=1)
            values = got.values.flatten().to_numpy(zero_copy_only=False)
            assert values.dtype == truth.dtype
            assert values.tobytes() == truth.tobytes()  # bit-exact, row-major as logged
            checked += 1
    assert checked > 100
    record = ds.segment_record("sample_appended_multiple")
    props = record.properties
    assert props["info:ver_hw"] == "PX4FMU_V4PRO"
    assert props["info:sys_name"] == "PX4"
    params = {k[len("param:"):]: v for k, v in props.items() if k.startswith("param:")}
    assert params == log.initial_parameters
    assert json.loads(props["appended_offsets"]) == [434369, 451825, 469281]
    assert props["start_timestamp_us"] == log.start_timestamp
    crash = seg.column("/info_multiple/hardfault_plain:TextDocument:text", "timestamp")
    assert crash.is_static and "Begin Fault Log" in crash.values[0].as_py()[0]
    text = seg.column("/logged_messages:TextDocument:text", "timestamp")
    assert [t[0] for t in text.values.to_pylist()] == [m.message for m in log.logged_messages]


def test_changed_parameters_dropouts_and_messages(realdata: Path, catalog: Catalog) -> None:
    path = realdata / SAMPLE
    log = pyulog.ULog(str(path))
    ds = catalog.create_dataset("px4")
    ds.register(path)
    seg = ds.open_segment("sample")
    props = ds.segment_record("sample").properties
    assert props["dropouts"] == len(log.dropouts) == 4
    assert props["dropout_ms"] == sum(d.duration for d in log.dropouts)
    assert len(log.changed_parameters) == 6
    for stamp, name, value in log.changed_parameters:
        got = seg.column(f"/changed_parameters/{name}:Scalars:scalars", "timestamp")
        row = list(got.index).index(stamp * 1000)
        assert got.values[row].as_py() == [value]
    levels = seg.column("/logged_messages/level:Scalars:scalars", "timestamp")
    assert [v[0] for v in levels.values.to_pylist()] == [m.log_level for m in log.logged_messages]
    imu = seg.column("/sensor_combined:ULog:gyro_rad", "timestamp")
    assert len(imu.index) == 17070


def test_several_logs_register_as_one_segment_each(realdata: Path, catalog: Catalog,
                                                   tmp_path: Path) -> None:
    ds = catalog.create_dataset("px4")
    copy = tmp_path / "second_flight.ulg"
    copy.write_bytes((realdata / APPENDED).read_bytes())
    ids = ds.register([realdata / APPENDED, copy]).wait().segment_ids
    assert sorted(ids) == ["sample_appended_multiple", "second_flight"]


def test_padding_inside_nested_fields_is_dropped(realdata: Path, catalog: Catalog) -> None:
    path = realdata / "px4-pyulog-ulog/sample_log_small.ulg"
    nested = [f.field_name for d in pyulog.ULog(str(path)).data_list
              for f in d.field_data if "._padding" in f.field_name]
    assert nested  # e.g. position_setpoint_triplet's previous._padding0, heartbeats[0]._padding0
    ds = catalog.create_dataset("px4")
    ds.register(path)
    columns = ds.schema().component_columns()
    assert not [c for c in columns if "_padding" in c]
    assert "/telemetry_status:ULog:heartbeats/0/system_id" in columns
    assert "/position_setpoint_triplet:ULog:previous.lat" in columns
