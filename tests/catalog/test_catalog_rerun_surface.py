"""Rerun catalog calls rayform answers too: ``register_prefix``, ``TableEntry.to_arrow_reader``,
and registration errors in Rerun's words (``register([])``: tests/catalog/test_catalog_bad_input.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

from rayform.catalog import Catalog
from rayform.errors import ConfigError, SourceNotFoundError


def test_register_prefix_registers_every_recording_below_a_folder(
        catalog: Catalog, recording_factory: RecordingFactory, tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "day1" / "deep").mkdir(parents=True)
    (root / "day1" / "empty").mkdir()
    (root / ".hidden").mkdir()
    for i, folder in enumerate([root, root / "day1", root / "day1" / "deep", root / ".hidden"]):
        recording_factory(f"ep{i}").rename(folder / f"ep{i}.rfr")
    (root / "day1" / "notes.txt").write_text("not a recording")
    ds = catalog.create_dataset("robots")
    result = ds.register_prefix(root.as_uri()).wait()  # file:// URI, as Rerun scripts pass
    assert sorted(result.segment_ids) == ["ep0", "ep1", "ep2"]
    assert ds.segment_ids() == ["ep0", "ep1", "ep2"] and ds.snapshot_version == 1
    relayered = ds.register_prefix(str(root / "day1"), layer_name="again").wait()
    assert sorted(relayered.segment_ids) == ["ep1", "ep2"]
    with pytest.raises(ValueError, match="no data sources to register below"):
        ds.register_prefix(str(root / "day1" / "empty"))
    with pytest.raises(SourceNotFoundError, match="is not a folder"):
        ds.register_prefix(str(root / "ep0.rfr"))
    with pytest.raises(ConfigError, match="cannot be listed"):
        ds.register_prefix("https://example.com/recordings/")


def test_table_to_arrow_reader_streams_each_part(catalog: Catalog) -> None:
    table = catalog.create_table("episodes", pa.schema([("id", pa.int64()), ("ok", pa.bool_())]))
    assert table.to_arrow_reader().read_all().num_rows == 0
    table.append(id=[1, 2], ok=[True, False])
    table.append(pa.table({"id": [3], "ok": [True]}))
    reader = table.to_arrow_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema == table.arrow_schema()
    batches = list(reader)
    assert [b.num_rows for b in batches] == [2, 1]
    assert pa.Table.from_batches(batches).to_pydict() == {"id": [1, 2, 3],
                                                         "ok": [True, False, True]}


def test_registration_errors_say_what_rerun_says(catalog: Catalog,
                                                 recording_factory: RecordingFactory) -> None:
    ds = catalog.create_dataset("d")
    one = recording_factory("ep0")
    with pytest.raises(ValueError, match="must be the same length"):
        ds.register([one], layer_name=["a", "b"])
    twin = recording_factory("ep0")
    with pytest.raises(ValueError, match=rf"duplicate segment layers in request.*{one.name}.*"
                                         rf"{twin.name}"):
        ds.register([one, twin])
