"""``register`` takes remote recordings, as Rerun's does: ``https://`` and ``s3://`` file URLs.

The recordings are served by a real TLS static server and ``rclone serve s3``; they are fetched
through the catalog transports (retried, hashed while written) and registered like local files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from surface_servers import DroppingProxy, S3Server, static_server

import rayform
from rayform.catalog import DatasetEntry
from rayform.cli import main
from rayform.errors import OfflineError, RemoteError, SourceNotFoundError
from rayform.ray._ingest import _prepare_source
from rayform.storage._fetch import fetch_file


def write_rrd(path: Path, recording_id: str) -> Path:
    """A small ``.rrd`` written by rerun-sdk: 40 frames of scalars on a sequence timeline."""
    rr = pytest.importorskip("rerun")
    rec = rr.RecordingStream("rayform-tests", recording_id=recording_id)
    rec.save(path)
    frames = np.arange(40)
    rec.send_columns("/joints", indexes=[rr.TimeColumn("frame", sequence=frames)],
                     columns=rr.Scalars.columns(scalars=np.sin(frames / 7.0)))
    rec.flush()
    rec.disconnect()
    return path


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """``tmp_path/site/rec/`` holding ``ep0.rrd`` and ``ep 1.rrd`` (a space, quoted in URLs)."""
    folder = tmp_path / "site" / "rec"
    folder.mkdir(parents=True)
    write_rrd(folder / "ep0.rrd", "ep0")
    write_rrd(folder / "ep 1.rrd", "ep1")
    return folder


def fresh_dataset(root: Path) -> DatasetEntry:
    return rayform.Catalog.create(root).create_dataset("robots")


def layer_objects(ds: DatasetEntry) -> dict[str, str]:
    return {r.segment_id: r.layers["base"].object for r in ds.segment_records()}


def source_uris(ds: DatasetEntry) -> dict[str, str]:
    return {r.segment_id: r.layers["base"].source_uri for r in ds.segment_records()}


def test_https_recordings_register_like_local_files(tmp_path: Path, sources: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    local = fresh_dataset(tmp_path / "local")
    local.register(sorted(sources.iterdir())).wait()
    with static_server(tmp_path / "site", tls_dir=tmp_path / "tls") as server:
        assert server.ca_pem is not None
        monkeypatch.setenv("RAYFORM_CA_BUNDLE", str(server.ca_pem))
        urls = [f"{server.url}/rec/ep0.rrd", f"{server.url}/rec/ep%201.rrd"]
        remote = fresh_dataset(tmp_path / "remote")
        result = remote.register(urls).wait()
        gets = list(server.log.gets)
    assert result.segment_ids == ["ep0", "ep1"]
    assert layer_objects(remote) == layer_objects(local)  # the same converted bytes
    assert source_uris(remote) == {"ep0": urls[0], "ep1": urls[1]}
    assert sorted(gets) == ["/rec/ep%201.rrd", "/rec/ep0.rrd"]  # one GET each, streamed
    assert not list((tmp_path / "remote" / ".staging").glob("*/*"))


def test_s3_recordings_survive_dropped_connections(tmp_path: Path, sources: Path,
                                                   s3_server: S3Server,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    s3_server.create_bucket("raw")
    shutil.copytree(sources, s3_server.root / "raw" / "sources")
    big = s3_server.root / "raw" / "sources" / "ep0.rrd"
    assert big.stat().st_size > 4096  # the proxy cuts after 4 KiB
    proxy = DroppingProxy(int(s3_server.endpoint.rsplit(":", 1)[1]), marker=b"/sources/")
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "3")
        ds = fresh_dataset(tmp_path / "cat")
        proxy.drop_next = 2  # two cut bodies, then a whole one
        ds.register("s3://raw/sources/ep0.rrd").wait()
        assert proxy.dropped == 2
        assert source_uris(ds) == {"ep0": "s3://raw/sources/ep0.rrd"}
        proxy.drop_next = 100
        with pytest.raises(RemoteError, match=r"s3://raw/sources/ep 1\.rrd.*after 3 attempt"):
            ds.register(["s3://raw/sources/ep 1.rrd"])
        assert ds.refresh().segment_ids() == ["ep0"]  # nothing committed
    finally:
        proxy.close()
    local = fresh_dataset(tmp_path / "local")
    local.register(sources / "ep0.rrd").wait()
    assert layer_objects(ds) == layer_objects(local)


def test_missing_and_offline_sources(tmp_path: Path, sources: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ds = fresh_dataset(tmp_path / "cat")
    with static_server(tmp_path / "site", tls_dir=None) as server:
        with pytest.raises(SourceNotFoundError, match=r"/rec/nope\.rrd: no such file"):
            ds.register([sources / "ep0.rrd", f"{server.url}/rec/nope.rrd"])
        assert ds.refresh().segment_ids() == []  # all or nothing
        monkeypatch.setenv("RAYFORM_OFFLINE", "1")
        with pytest.raises(OfflineError, match="RAYFORM_OFFLINE=1 forbids downloading"):
            ds.register(f"{server.url}/rec/ep0.rrd")


def test_fetch_file_hashes_what_it_writes(tmp_path: Path, sources: Path) -> None:
    import hashlib

    with static_server(tmp_path / "site", tls_dir=None) as server:
        fetched = fetch_file(f"{server.url}/rec/ep%201.rrd", tmp_path / "out")
    data = (sources / "ep 1.rrd").read_bytes()
    assert fetched.path == tmp_path / "out" / "ep 1.rrd"
    assert fetched.path.read_bytes() == data
    assert (fetched.sha256, fetched.size_bytes) == (hashlib.sha256(data).hexdigest(), len(data))


def test_cli_and_ray_ingest_register_urls(tmp_path: Path, sources: Path) -> None:
    cat = str(tmp_path / "cat")
    assert main(["--catalog", cat, "init"]) == 0
    with static_server(tmp_path / "site", tls_dir=None) as server:
        url = f"{server.url}/rec/ep0.rrd"
        assert main(["--catalog", cat, "register", "robots", url, "--create"]) == 0
        prepared = _prepare_source(cat, f"{server.url}/rec/ep%201.rrd", "base")
    ds = rayform.Catalog.open(cat).get_dataset("robots")
    assert source_uris(ds) == {"ep0": url}
    assert [p.segment_id for p in prepared] == ["ep1"] and prepared[0].is_stored
    assert prepared[0].layer.source_uri.endswith("/rec/ep%201.rrd")
