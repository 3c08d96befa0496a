"""CatalogClient: a Rerun script's catalog calls, served by an embedded catalog."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

import rayform
from rayform.catalog import Catalog, CatalogClient, DatasetEntry, TableEntry
from rayform.errors import CatalogNotFoundError, ConfigError, EntryExistsError, EntryNotFoundError


def test_a_rerun_style_script_runs_on_a_catalog_directory(
        tmp_path: Path, recording_factory: RecordingFactory) -> None:
    client = CatalogClient(tmp_path / "catalog", create=True)
    assert client.url == Catalog.open(tmp_path / "catalog").url
    dataset = client.create_dataset("robots")
    dataset.register([recording_factory(f"ep{i}", seed=i) for i in range(2)]).wait()
    assert client.create_dataset("robots", exist_ok=True).name == "robots"
    with pytest.raises(EntryExistsError):
        client.create_dataset("robots")
    table = client.create_table("notes", pa.schema([("segment", pa.string()), ("ok", pa.bool_())]))
    table.append(segment=["ep0", "ep1"], ok=[True, False])

    reopened = rayform.CatalogClient(str(tmp_path / "catalog"))  # as a Rerun script would
    found = reopened.get_dataset(name="robots")
    assert isinstance(found, DatasetEntry) and found.segment_ids() == ["ep0", "ep1"]
    assert reopened.get_dataset("robots").id == found.id
    assert reopened.get_dataset(id=found.id).name == "robots"
    assert isinstance(reopened.get_table(name="notes"), TableEntry)
    assert reopened.get_table(id=table.id).name == "notes"
    assert reopened.dataset_names() == ["robots"] and reopened.table_names() == ["notes"]
    assert reopened.entry_names() == ["robots", "notes"]
    assert [e.name for e in reopened.entries()] == ["robots", "notes"]
    assert [d.name for d in reopened.datasets(include_hidden=True)] == ["robots"]
    assert [t.name for t in reopened.tables()] == ["notes"]
    rows = reopened.ctx.sql("SELECT segment FROM notes WHERE ok").to_arrow_table()
    assert rows.column("segment").to_pylist() == ["ep0"]
    assert reopened.catalog.dataset_names() == ["robots"]


def test_what_an_embedded_catalog_refuses(tmp_path: Path, catalog: Catalog) -> None:
    client = CatalogClient(catalog.url)
    client.create_dataset("robots")
    with pytest.raises(ConfigError, match="exactly one of name= and id="):
        client.get_dataset()
    with pytest.raises(ConfigError, match="exactly one of name= and id="):
        client.get_table("x", id="y")
    with pytest.raises(EntryNotFoundError, match="no dataset with id 'nope'"):
        client.get_dataset(id="nope")
    with pytest.raises(LookupError):
        client.get_dataset("missing")
    with pytest.raises(ConfigError, match="stores tables inside the catalog"):
        client.create_table("t", pa.schema([("a", pa.int64())]), "s3://bucket/lance")
    with pytest.raises(CatalogNotFoundError, match="Rerun server URL"):
        CatalogClient("rerun+http://127.0.0.1:51234")
    with pytest.raises(ConfigError, match="takes no token"):
        CatalogClient(catalog.url, token="secret")
    with pytest.raises(CatalogNotFoundError):
        CatalogClient(tmp_path / "nowhere")
