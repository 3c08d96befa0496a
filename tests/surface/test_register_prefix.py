"""``register_prefix`` on an ``s3://`` prefix (Rerun's call): every recording below it, at any
depth, fetched through the catalog transports and registered in one commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from surface_data import write_episode
from surface_servers import S3Server

import rayform
from rayform.errors import ConfigError, CorruptMetadataError, OfflineError


def test_register_prefix_lists_an_s3_prefix_recursively(
        tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    s3_server.create_bucket("fleet")
    site = s3_server.root / "fleet" / "runs"
    (site / "day 1" / "cam").mkdir(parents=True)
    (site / ".trash").mkdir()
    write_episode(site / "ep0.rfr", "ep0", seed=0)
    write_episode(site / "day 1" / "cam" / "ep1.rfr", "ep1", seed=1)
    write_episode(site / ".trash" / "old.rfr", "old", seed=2)
    (site / "day 1" / "README.md").write_text("notes")
    ds = rayform.Catalog.create(tmp_path / "cat").create_dataset("robots")
    result = ds.register_prefix("s3://fleet/runs/").wait()
    assert sorted(result.segment_ids) == ["ep0", "ep1"]
    uris = {r.segment_id: r.layers["base"].source_uri for r in ds.segment_records()}
    assert uris == {"ep0": "s3://fleet/runs/ep0.rfr", "ep1": "s3://fleet/runs/day 1/cam/ep1.rfr"}
    with pytest.raises(ConfigError, match="no data sources to register below 's3://fleet/none'"):
        ds.register_prefix("s3://fleet/none")
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    with pytest.raises(OfflineError, match="forbids listing s3://fleet/runs"):
        ds.register_prefix("s3://fleet/runs")


def test_a_crafted_key_listing_registers_nothing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from rayform.storage._s3 import S3Transport

    monkeypatch.setattr(S3Transport, "list_keys_under",
                        lambda self: ["ok.rfr", "day/../../../etc/x.rrd"])
    ds = rayform.Catalog.create(tmp_path / "cat").create_dataset("robots")
    with pytest.raises(CorruptMetadataError, match=r"'day/\.\./\.\./\.\./etc/x\.rrd'.*'\.' or "
                                                   r"'\.\.'"):
        ds.register_prefix("s3://fleet/runs")
    assert ds.refresh().snapshot_version == 0
