"""A rosbag2 folder's metadata.yaml is untrusted: listed files stay inside the folder, YAML
aliases (alias bombs) are refused, and a message_count beyond int64 does not break the dataset."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcap_sources import ROSBAG2_METADATA, write_ros2_mcap, write_rosbag2

from rayform.catalog import Catalog, check_catalog
from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError

pytest.importorskip("mcap_ros2")

_BOMB = "\n".join(["rosbag2_bagfile_information:", "  a: &a [\"lol\",\"lol\",\"lol\",\"lol\"]"]
                  + [f"  {chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},"
                     f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]"
                     for i in range(12)])


@pytest.mark.parametrize("listed", ["../other/other_0.mcap", "/ABS/other_0.mcap",
                                    "sub/../../other/other_0.mcap"])
def test_listed_files_outside_the_folder_are_refused(tmp_path: Path, catalog: Catalog,
                                                     listed: str) -> None:
    write_ros2_mcap_folder = tmp_path / "other"
    write_ros2_mcap_folder.mkdir()
    write_ros2_mcap(write_ros2_mcap_folder / "other_0.mcap", with_bad_schema=False)
    bag = tmp_path / "bag"
    bag.mkdir()
    name = listed.replace("/ABS", str(tmp_path))
    (bag / "metadata.yaml").write_text(ROSBAG2_METADATA.format(storage="mcap", name=name))
    with pytest.raises(FormatError, match="is not a file inside the bag folder"):
        catalog.create_dataset("x").register(bag)
    assert catalog.get_dataset("x").segment_ids() == []


def test_relative_file_paths_must_be_a_list_of_strings(tmp_path: Path, catalog: Catalog) -> None:
    write_rosbag2(tmp_path / "bag")
    meta = tmp_path / "bag" / "metadata.yaml"
    meta.write_text(meta.read_text().replace("    - bag_0.mcap", "    - {a: 1}"))
    with pytest.raises(FormatError, match="is not a file inside the bag folder"):
        catalog.create_dataset("x").register(tmp_path / "bag")


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path, catalog: Catalog) -> None:
    write_rosbag2(tmp_path / "bag")
    (tmp_path / "bag" / "metadata.yaml").write_text(_BOMB)
    assert len(_BOMB) < 1000
    started = time.monotonic()
    with pytest.raises(CorruptRecordingError, match="YAML aliases are not allowed"):
        catalog.create_dataset("x").register(tmp_path / "bag")
    assert time.monotonic() - started < 30


def test_message_count_beyond_int64_keeps_the_dataset_readable(tmp_path: Path,
                                                               catalog: Catalog) -> None:
    write_rosbag2(tmp_path / "bag")
    meta = tmp_path / "bag" / "metadata.yaml"
    meta.write_text(meta.read_text().replace("message_count: 66", f"message_count: {10**30}"))
    ds = catalog.create_dataset("x")
    with pytest.warns(ConversionWarning) as caught:
        ds.register(tmp_path / "bag")
    assert any("'message_count'" in str(w.message) and "stored as text" in str(w.message)
               for w in caught)
    row = ds.segment_table_arrow().to_pylist()[0]
    assert row["property:message_count"] == str(10**30)
    assert catalog.sql('SELECT count(*) AS n FROM x.segments').to_arrow_table().to_pylist() == [
        {"n": 1}]
    assert check_catalog(catalog).ok


def test_a_recording_property_beyond_int64_is_stored_as_text(tmp_path: Path,
                                                             catalog: Catalog) -> None:
    import numpy as np

    from rayform.catalog import RecordingWriter

    path = tmp_path / "big.rfr"
    with RecordingWriter(path, recording_id="big") as rec:
        rec.set_properties(count=10**30, small=-5)
        rec.log_scalars("/x", timelines={"frame_index": np.arange(3)}, values=np.ones((3, 1)))
    ds = catalog.create_dataset("x")
    with pytest.warns(ConversionWarning, match="property 'count' = 1000.* stored as text"):
        ds.register(path)
    row = ds.segment_table_arrow().to_pylist()[0]
    assert (row["property:count"], row["property:small"]) == (str(10**30), -5)
    assert check_catalog(catalog).ok


def test_a_stored_int_beyond_int64_reads_as_text_and_fails_record_validation() -> None:
    import pyarrow as pa
    from pydantic import TypeAdapter, ValidationError

    from rayform.catalog._metadata import PropertyValue
    from rayform.catalog._property_types import property_column

    assert property_column([1, 10**30], None).type == pa.string()
    assert property_column([1, 2], None).type == pa.int64()
    assert property_column([1, 10**30], pa.int64()).type == pa.string()  # a crafted snapshot
    with pytest.raises(ValidationError):
        TypeAdapter(PropertyValue).validate_python(10**30, strict=True)
