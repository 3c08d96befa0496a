"""Remote catalogs (HTTPS static server, S3) read through the same API as a local one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from surface_data import build_catalog, write_episode
from surface_servers import Https

import rayform
from rayform.catalog import index_catalog
from rayform.errors import CorruptMetadataError, ReadOnlyCatalogError, RemoteError
from rayform.recording._columns import LAST_UPDATED_AT, STORAGE_URLS
from rayform.storage import ObjectCache, RemoteStore, RetryPolicy
from rayform.storage._https import HttpTransport
from rayform.storage._parts import PartPlan
from rayform.storage._s3 import S3Transport

JOINTS = "/joints/position:Scalars:scalars"
CAM = "/cam0/rgb:EncodedImage:blob"


def assert_same_data(remote: rayform.DatasetView, local: rayform.DatasetView) -> None:
    assert remote.segment_ids() == local.segment_ids() == ["ep0", "ep1", "ep2"]
    assert [r.version for r in remote.segment_records()] == \
        [r.version for r in local.segment_records()]
    assert remote.reader_arrow("frame_index").equals(local.reader_arrow("frame_index"))
    assert remote.get_index_ranges().to_arrow_table().equals(
        local.get_index_ranges().to_arrow_table())
    for sid in local.segment_ids():
        for col in (JOINTS, CAM):
            r = remote.open_segment(sid).column(col, "real_time")
            ll = local.open_segment(sid).column(col, "real_time")
            assert (r.index == ll.index).all()
            assert r.values.equals(ll.values)
    where = [STORAGE_URLS, LAST_UPDATED_AT]  # where and when it was registered differ
    seg_remote = remote.segment_table_arrow().drop_columns(where)
    seg_local = local.segment_table_arrow().drop_columns(where)
    assert seg_remote.equals(seg_local)


def test_https_catalog_reads_like_the_local_one(https_catalog: Https,
                                                local_catalog: rayform.Catalog) -> None:
    remote = rayform.Catalog.open(https_catalog.url)
    assert remote.url == https_catalog.url
    assert remote.dataset_names() == ["robots"]
    assert_same_data(remote.get_dataset("robots"), local_catalog.get_dataset("robots"))
    urls = remote.get_dataset("robots").segment_table_arrow().column(STORAGE_URLS).to_pylist()
    assert all(u.startswith(https_catalog.url + "/objects/") for row in urls for u in row)
    sql = remote.sql('SELECT rerun_segment_id FROM robots.segments WHERE "property:site" = $s '
                     "ORDER BY rerun_segment_id", {"s": "lab-a"}).to_arrow_table()
    assert sql.column(0).to_pylist() == ["ep0", "ep2"]


def test_https_catalog_is_read_only(https_catalog: Https) -> None:
    remote = rayform.Catalog.open(https_catalog.url)
    with pytest.raises(ReadOnlyCatalogError, match="read-only"):
        remote.create_dataset("more")
    with pytest.raises(ReadOnlyCatalogError):
        rayform.Client(remote).slices.create("robots")


def test_second_read_comes_from_the_cache(https_catalog: Https, cache_dir: Path) -> None:
    first = rayform.Catalog.open(https_catalog.url).get_dataset("robots")
    first.reader_arrow("frame_index")
    fetched = len(https_catalog.log.object_gets())
    recordings = [r.layers["base"].object for r in first.segment_records()]
    assert [https_catalog.log.gets_of(d) for d in recordings] == [1, 1, 1]
    assert len(list((cache_dir / "objects").rglob("*"))) > 3
    again = rayform.Catalog.open(https_catalog.url).get_dataset("robots")  # new store, new process
    again.reader_arrow("frame_index")
    assert len(https_catalog.log.object_gets()) == fetched
    snapshot_gets = [p for p in https_catalog.log.gets if "/versions/0" in p]
    assert len(snapshot_gets) == 1  # immutable snapshots are fetched once


def test_untrusted_certificate_is_a_clear_error(https_catalog: Https,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAYFORM_CA_BUNDLE")
    monkeypatch.setenv("SSL_CERT_FILE", str(Path(__file__)))  # trusts nothing
    with pytest.raises(RemoteError, match="RAYFORM_CA_BUNDLE"):
        rayform.Catalog.open(https_catalog.url)


def test_catalog_without_listings_says_how_to_fix_it(https_catalog: Https,
                                                     local_catalog: rayform.Catalog) -> None:
    root = Path(local_catalog.url)
    for listing in root.rglob(".listing.json"):
        listing.unlink()
    with pytest.raises(CorruptMetadataError, match="rayform index"):
        rayform.Catalog.open(https_catalog.url).dataset_names()
    assert index_catalog(root) >= 4
    assert rayform.Catalog.open(https_catalog.url).dataset_names() == ["robots"]


def test_listings_follow_new_entries(https_catalog: Https, local_catalog: rayform.Catalog,
                                     tmp_path: Path) -> None:
    local_catalog.create_dataset("more")
    ds = local_catalog.get_dataset("robots")
    v1 = ds.snapshot_version
    ds.register(write_episode(tmp_path / "ep9.rfr", "ep9", seed=9)).wait()
    remote = rayform.Catalog.open(https_catalog.url)
    assert remote.dataset_names() == ["more", "robots"]
    robots = remote.get_dataset("robots")
    assert robots.snapshot_version == v1 + 1
    assert "ep9" in robots.segment_ids()


def test_s3_catalog_is_written_and_read_like_a_local_one(s3_url: str, tmp_path: Path,
                                                         local_catalog: rayform.Catalog,
                                                         cache_dir: Path) -> None:
    build_catalog(s3_url, tmp_path / "src-s3")
    shutil.rmtree(cache_dir)  # read back over the network, not from what registration cached
    remote = rayform.Catalog.open(s3_url)
    assert remote.url == s3_url
    assert remote.dataset_names() == ["robots"]
    assert_same_data(remote.get_dataset("robots"), local_catalog.get_dataset("robots"))


def test_s3_exclusive_create_and_tables(s3_url: str) -> None:
    catalog = rayform.Catalog.create(s3_url)
    assert catalog.store.create_exclusive("slices/x.json", b"1")
    assert not catalog.store.create_exclusive("slices/x.json", b"2")
    assert catalog.store.read_bytes("slices/x.json") == b"1"
    table = catalog.create_table("notes", pa.schema([("a", pa.int64())]))
    assert table is not None
    assert rayform.Catalog.open(s3_url).table_names() == ["notes"]


def test_listings_stay_complete_under_concurrent_writers(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from rayform.storage._listing import decode_listing

    catalog = rayform.Catalog.create(tmp_path / "cat")
    names = [f"ds{i}" for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: rayform.Catalog.open(tmp_path / "cat").create_dataset(n), names))
    raw = (tmp_path / "cat" / "entries" / ".listing.json").read_bytes()
    assert decode_listing(raw, source="entries") == sorted(names)
    assert catalog.dataset_names() == sorted(names)


def test_s3_objects_larger_than_a_part_come_in_ranged_parts(s3_url: str, tmp_path: Path,
                                                            cache_dir: Path) -> None:
    """Against a real S3 server (ranges, Content-Range): every object is rebuilt from parts of
    ``part_bytes`` (the first from a plain GET) and verified whole."""
    catalog = build_catalog(s3_url, tmp_path / "src-s3")
    records = catalog.get_dataset("robots").segment_records()
    objects = {layer.object: layer.size_bytes for r in records for layer in r.layers.values()}
    shutil.rmtree(cache_dir)
    transport = S3Transport(s3_url, retry=RetryPolicy.from_env())
    asked: list[tuple[int, int | None]] = []
    real_open_range = transport.open_range

    def open_range(key: str, start: int, stop: int | None, /) -> object:
        asked.append((start, stop))
        return real_open_range(key, start, stop)

    transport.open_range = open_range  # type: ignore[method-assign,assignment]
    part = 4096
    store = RemoteStore(transport, cache=ObjectCache(cache_dir), parts=PartPlan(
        part_bytes=part, connections=3))
    for digest, size in objects.items():
        assert size > 2 * part
        assert store.object_path(digest).stat().st_size == size
    assert len(asked) == sum(-(-size // part) for size in objects.values())
    assert asked.count((0, None)) == len(objects)


def test_https_objects_larger_than_a_part_come_in_ranged_parts(https_catalog: Https,
                                                               tmp_path: Path) -> None:
    """Against a web server that answers ranges (Accept-Ranges, 206, Content-Range): objects
    are rebuilt from a plain GET's first part and ranged parts, and verified whole."""
    catalog = rayform.Catalog.open(https_catalog.url)
    records = catalog.get_dataset("robots").segment_records()
    objects = {layer.object: layer.size_bytes for r in records for layer in r.layers.values()}
    https_catalog.log.serve_ranges = True
    part = 4096
    store = RemoteStore(HttpTransport(https_catalog.url, retry=RetryPolicy.from_env()),
                        cache=ObjectCache(tmp_path / "cache"),
                        parts=PartPlan(part_bytes=part, connections=3))
    for digest, size in objects.items():
        assert size > 2 * part
        assert store.object_path(digest).stat().st_size == size
    assert len(https_catalog.log.ranges) == sum(-(-size // part) - 1 for size in objects.values())
    assert all(https_catalog.log.gets_of(d) == -(-size // part) for d, size in objects.items())
