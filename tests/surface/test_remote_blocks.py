"""Remote reads verified block by block: block-hash objects written at registration, ranged reads
into a sparse cache file, no unverified byte used, old catalogs still read whole."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from surface_servers import S3Server, ServerLog, static_server

import rayform
from rayform.catalog import check_catalog
from rayform.catalog._metadata import LayerRecord
from rayform.errors import IntegrityError, RemoteError
from rayform.storage import _parts
from rayform.storage._block_hashes import BLOCK_BYTES, BlockHashes, hash_blocks
from rayform.storage._cache import ObjectCache
from rayform.storage._parts import PartPlan
from rayform.storage._remote import RemoteStore
from rayform.storage._sparse import VERIFIED, sparse_paths
from rayform.storage._store import object_key

FRAMES = 40
BLOB_BYTES = 20_000  # incompressible: each recording spans several 128 KiB blocks


def write_recordings(src: Path, count: int = 2, *, frames_of: tuple[int, ...] = ()
                     ) -> list[Path]:
    """``count`` recordings of :data:`FRAMES` frames (``frames_of[e]`` for recording ``e``)."""
    src.mkdir(parents=True, exist_ok=True)
    paths = []
    for e in range(count):
        rng = np.random.default_rng(e)
        frames = np.arange(frames_of[e] if e < len(frames_of) else FRAMES)
        path = src / f"ep{e}.rfr"
        with rayform.RecordingWriter(path, recording_id=f"ep{e}") as rec:
            rec.log_encoded_images("/cam0/rgb", timelines={"frame_index": frames},
                                   blobs=[rng.bytes(BLOB_BYTES) for _ in frames],
                                   media_type="image/jpeg")
            rec.log_scalars("/joints/position", timelines={"frame_index": frames},
                            values=rng.normal(size=(len(frames), 7)))
        paths.append(path)
    return paths


@pytest.fixture(autouse=True)
def blocks_however_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """These recordings are a few blocks: read them block by block all the same (by default an
    object that small is fetched and hashed whole)."""
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 0)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """``site/cat``: a local catalog, dataset ``robots`` with ep0 and ep1 (several blocks each)."""
    catalog = rayform.Catalog.create(tmp_path / "site" / "cat")
    catalog.create_dataset("robots").register(write_recordings(tmp_path / "src")).wait()
    return tmp_path / "site"


@pytest.fixture
def served(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[tuple[str, ServerLog]]:
    """``site`` on a TLS static server that answers ranged GETs."""
    with static_server(site, tls_dir=tmp_path / "tls") as server:
        assert server.ca_pem is not None
        monkeypatch.setenv("RAYFORM_CA_BUNDLE", str(server.ca_pem))
        server.log.serve_ranges = True
        yield f"{server.url}/cat", server.log


def layers(url: str | Path) -> list[LayerRecord]:
    records = rayform.Catalog.open(url).get_dataset("robots").segment_records()
    return [layer for r in records for layer in r.layers.values()]


def flip_byte(catalog_root: Path, digest: str, offset: int) -> None:
    path = catalog_root / object_key(digest)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def read_all(url: str) -> int:
    """Open every segment of ``robots`` (every recording file) and count the camera's rows."""
    view = rayform.Catalog.open(url).get_dataset("robots")
    return sum(len(view.open_segment(s).column("/cam0/rgb:EncodedImage:blob", "frame_index"))
               for s in view.segment_ids())


def store_of(url: str, cache_dir: Path, *, part_bytes: int = BLOCK_BYTES,
             connections: int = 1) -> RemoteStore:
    """A store reading ``url`` block by block (however small its objects), one block per request,
    one request at a time."""
    store = rayform.Catalog.open(url).store
    assert isinstance(store, RemoteStore)
    store = RemoteStore(store.transport, cache=ObjectCache(cache_dir), retry=store.retry,
                        parts=PartPlan(part_bytes=part_bytes, connections=connections,
                                       blocks_from_bytes=0))
    store.note_block_hashes({layer.object: layer.block_hashes for layer in layers(url)
                             if layer.block_hashes is not None})
    return store


def test_registration_stores_a_block_hash_object_per_layer_at_the_bound(site: Path) -> None:
    for layer in layers(site / "cat"):
        assert layer.block_hashes is not None
        raw = (site / "cat" / object_key(layer.block_hashes)).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == layer.block_hashes  # content-addressed
        listed = BlockHashes.from_bytes(raw, source="test")
        data = site / "cat" / object_key(layer.object)
        assert listed == hash_blocks(data)
        assert listed.size_bytes == layer.size_bytes and listed.num_blocks >= 4
        assert len(raw) / layer.size_bytes < 0.0005  # a few hundredths of a percent
    report = check_catalog(site / "cat")
    assert report.ok, report.summary()


def test_reads_are_ranged_and_verified_per_block(served: tuple[str, ServerLog],
                                                 cache_dir: Path) -> None:
    url, log = served
    assert read_all(url) == 2 * FRAMES  # small objects: one plain GET each, checked per block
    assert log.ranges == []
    sizes = {layer.object: layer.size_bytes for layer in layers(url)}
    big = layers(url)[0]
    store = store_of(url, cache_dir / "parts", connections=4)  # parts of one block
    path = store.object_path(big.object)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == big.object
    # The plain GET's first block kept, the others in ranges, each byte asked for once.
    assert min(first for first, _ in log.ranges) == BLOCK_BYTES
    assert sum(last - first + 1 for first, last in log.ranges) == big.size_bytes - BLOCK_BYTES
    cache = ObjectCache(cache_dir)
    for digest in sizes:
        path = cache.cached(digest)  # installed, and it hashes to its name
        assert path is not None
        data, record = sparse_paths(cache, digest)
        assert not data.exists() and not record.exists()


@pytest.mark.parametrize("where", ["first block", "last block"])
def test_a_flipped_byte_fails_the_first_read_naming_the_object(
        served: tuple[str, ServerLog], site: Path, cache_dir: Path, where: str) -> None:
    url, _ = served
    layer = layers(url)[0]
    offset = 10 if where == "first block" else layer.size_bytes - 10
    flip_byte(site / "cat", layer.object, offset)
    with pytest.raises(IntegrityError, match=layer.object) as err:
        read_all(url)
    assert f"block {offset // BLOCK_BYTES} " in str(err.value)
    cache = ObjectCache(cache_dir)
    assert not cache.path_of(layer.object).exists()  # nothing installed
    _, record = sparse_paths(cache, layer.object)
    marks = record.read_bytes() if record.exists() else b""
    assert len(marks) < offset // BLOCK_BYTES + 1 or marks[offset // BLOCK_BYTES] != VERIFIED[0]


def test_a_flipped_byte_fails_a_cached_re_read(served: tuple[str, ServerLog], site: Path,
                                                cache_dir: Path) -> None:
    """Half the object is verified in the sparse cache; the server's copy then changes in the
    other half: the re-read that fetches the rest refuses it."""
    url, _ = served
    layer = layers(url)[0]
    assert layer.block_hashes is not None
    hashes = BlockHashes.from_bytes((site / "cat" / object_key(layer.block_hashes)).read_bytes(),
                                    source="test")
    half = hashes.num_blocks // 2
    flip_byte(site / "cat", layer.object, half * BLOCK_BYTES + 5)
    with pytest.raises(IntegrityError, match=layer.object):
        store_of(url, cache_dir).object_path(layer.object)
    data, record = sparse_paths(ObjectCache(cache_dir), layer.object)
    assert record.read_bytes()[:half] == VERIFIED * half  # the good blocks before it were kept
    with pytest.raises(IntegrityError, match=layer.object):
        read_all(url)  # a fresh catalog reusing the sparse cache file
    # The cached blocks themselves damaged on disk: hashed again, dropped, fetched again.
    flip_byte(site / "cat", layer.object, half * BLOCK_BYTES + 5)  # the server is good again
    with data.open("r+b") as fh:
        fh.seek(3)
        fh.write(b"\xff\xff")
    assert read_all(url) == 2 * FRAMES
    path = ObjectCache(cache_dir).cached(layer.object)
    assert path is not None and hashlib.sha256(path.read_bytes()).hexdigest() == layer.object


def test_s3_a_flipped_byte_is_refused(s3_url: str, s3_server: S3Server, tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(s3_url)
    catalog.create_dataset("robots").register(write_recordings(tmp_path / "src")).wait()
    assert read_all(s3_url) == 2 * FRAMES  # through the registration's cache copies
    layer = layers(s3_url)[1]
    bucket, _, prefix = s3_url[len("s3://"):].partition("/")
    flip_byte(s3_server.root / bucket / prefix, layer.object, layer.size_bytes // 2)
    os.environ["RAYFORM_CACHE_DIR"] = str(tmp_path / "fresh-cache")  # monkeypatched per test
    with pytest.raises(IntegrityError, match=layer.object):
        read_all(s3_url)


def test_the_sparse_cache_is_reused(served: tuple[str, ServerLog], cache_dir: Path) -> None:
    url, log = served
    layer = layers(url)[0]
    store = store_of(url, cache_dir, connections=2)  # one block per request, one at a time
    transport = store.transport
    real = transport.open_range
    data_requests: list[int] = []

    def network_lost_after_three(key: str, start: int, stop: int | None, /) -> object:
        if key.endswith(layer.object) and stop is not None:
            data_requests.append(start)
            if len(data_requests) > 2:  # the plain GET's block and two ranges went through
                raise OSError("the network went away")  # not retried: the read fails here
        return real(key, start, stop)

    transport.open_range = network_lost_after_three  # type: ignore[method-assign,assignment]
    with pytest.raises(OSError, match="went away"):
        store.object_path(layer.object)
    _, record = sparse_paths(ObjectCache(cache_dir), layer.object)
    assert record.read_bytes()[:3] == VERIFIED * 3
    log.ranges.clear()
    path = store_of(url, cache_dir).object_path(layer.object)  # a new store: the file is reused
    assert hashlib.sha256(path.read_bytes()).hexdigest() == layer.object
    assert log.ranges and min(first for first, _ in log.ranges) == 3 * BLOCK_BYTES
    assert sum(last - first + 1 for first, last in log.ranges) == (layer.size_bytes
                                                                   - 3 * BLOCK_BYTES)
    assert read_all(url) == 2 * FRAMES  # the first epoch (the other recording fetched)
    # Second epoch: every block verified and installed, no data request at all.
    log.ranges.clear()
    before = len(log.object_gets())
    assert read_all(url) == 2 * FRAMES
    assert log.ranges == [] and len(log.object_gets()) == before


def test_an_old_catalog_without_block_hashes_reads_whole(tmp_path: Path, cache_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import rayform.catalog._registration as registration

    monkeypatch.setattr(registration, "store_block_hashes", lambda store, source, **_: None)
    catalog = rayform.Catalog.create(tmp_path / "site" / "cat")
    catalog.create_dataset("robots").register(write_recordings(tmp_path / "src")).wait()
    old = layers(tmp_path / "site" / "cat")
    assert all(layer.block_hashes is None for layer in old)
    # A record written before the key existed parses (the key is absent, not null).
    text = old[0].model_dump_json(exclude={"block_hashes"})
    assert "block_hashes" not in text
    assert LayerRecord.model_validate_json(text).block_hashes is None
    with static_server(tmp_path / "site", tls_dir=tmp_path / "tls") as server:
        assert server.ca_pem is not None
        monkeypatch.setenv("RAYFORM_CA_BUNDLE", str(server.ca_pem))
        server.log.serve_ranges = True
        url = f"{server.url}/cat"
        assert read_all(url) == 2 * FRAMES
        assert server.log.ranges == []  # whole GETs, hashed whole
        assert [server.log.gets_of(layer.object) for layer in old] == [1, 1]
        flip_byte(tmp_path / "site" / "cat", old[0].object, 7)
        monkeypatch.setenv("RAYFORM_CACHE_DIR", str(tmp_path / "fresh-cache"))
        with pytest.raises(RemoteError, match="altered in transit"):
            read_all(url)


CRASH_CHILD = r"""
import os, signal, sys
import rayform
from rayform.catalog import check_catalog
from rayform.storage import _sparse
from rayform.storage._cache import ObjectCache
from rayform.storage._parts import PartPlan
from rayform.storage._remote import RemoteStore

url, cache_dir, digest, blocks = sys.argv[1:5]
store = rayform.Catalog.open(url).store
store = RemoteStore(store.transport, cache=ObjectCache(__import__("pathlib").Path(cache_dir)),
                    retry=store.retry, parts=PartPlan(part_bytes=128 << 10, connections=1,
                                                      blocks_from_bytes=0))
store.note_block_hashes({digest: blocks})
real = _sparse._SparseFile.commit

def commit(self, block, data, *, what):
    if block == 3:  # half of the block's bytes reach the file, then the process dies
        start, _ = self.hashes.span(block)
        os.pwrite(self._fd, bytes(data[: len(data) // 2]), start)
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, block, data, what=what)

_sparse._SparseFile.commit = commit
store.object_path(digest)
"""


def test_a_crash_mid_download_leaves_no_unverified_block_marked(
        served: tuple[str, ServerLog], cache_dir: Path) -> None:
    url, _ = served
    layer = layers(url)[0]
    assert layer.block_hashes is not None
    child = subprocess.run([sys.executable, "-c", CRASH_CHILD, url, str(cache_dir), layer.object,
                            layer.block_hashes], env=os.environ.copy(), capture_output=True,
                           timeout=120, check=False)
    assert child.returncode == -9, child.stderr.decode()[-2000:]
    cache = ObjectCache(cache_dir)
    data, record = sparse_paths(cache, layer.object)
    assert not cache.path_of(layer.object).exists()
    marks = record.read_bytes()
    hashes = hash_blocks(data)
    good = store_of(url, cache_dir)._hashes_of(layer.block_hashes)
    assert marks[:3] == VERIFIED * 3 and VERIFIED not in marks[3:]  # the torn block 3 is not
    for block, mark in enumerate(marks):
        if mark == VERIFIED[0]:
            start, stop = good.span(block)
            assert hashes.digests[block * 32:(block + 1) * 32] == good.digests[
                block * 32:(block + 1) * 32]
            assert stop - start > 0
    # A mark whose bytes did not reach the disk (power lost after the mark): hashed again on the
    # next fetch, so it is fetched again rather than trusted.
    with data.open("r+b") as fh:
        fh.seek(BLOCK_BYTES + 1)
        fh.write(b"\x00\x00\x00")
    path = store_of(url, cache_dir).object_path(layer.object)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == layer.object
    assert not data.exists() and not record.exists()


def test_check_verifies_and_gc_keeps_the_block_hash_objects(site: Path) -> None:
    from rayform.catalog import gc_catalog

    root = site / "cat"
    lists = [layer.block_hashes for layer in layers(root)]
    assert all(lists)
    report = gc_catalog(root, grace_s=0)
    assert report.removed_objects == 0
    assert all((root / object_key(d)).exists() for d in lists if d)
    damaged = lists[0]
    assert damaged is not None
    flip_byte(root, damaged, 20)  # inside the digests
    report = check_catalog(root)
    assert not report.ok
    assert any(damaged in p.where for p in report.problems), report.summary()


def test_an_object_below_the_block_size_bound_is_fetched_whole_and_verified(
        served: tuple[str, ServerLog], site: Path, cache_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a recording this small is one plain GET, hashed whole: its block-hash object
    is never requested (one request per recording, not two), and an altered byte is still an
    :class:`IntegrityError` with nothing cached."""
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 1 << 30)
    monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "2")
    url, log = served
    good, bad = layers(url)
    assert good.block_hashes is not None and bad.block_hashes is not None
    flip_byte(site / "cat", bad.object, bad.size_bytes // 2)
    with pytest.raises(IntegrityError, match=bad.object) as err:
        read_all(url)
    assert "sha256" in str(err.value)
    cache = ObjectCache(cache_dir)
    assert not cache.path_of(bad.object).exists()
    assert not any(p.exists() for p in sparse_paths(cache, bad.object))
    path = cache.cached(good.object)  # read before the bad one, or fetched ahead of it
    if path is None:
        path = store_of(url, cache_dir).object_path(good.object)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == good.object
    assert log.gets_of(bad.block_hashes) == 0 and log.gets_of(good.block_hashes) == 0
    assert log.ranges == []  # whole objects, one plain GET each attempt


def _block_hash_objects(root: Path) -> set[str]:
    return {p.name for p in (root / "objects").rglob("*")
            if p.is_file() and p.read_bytes()[:8] == b"RFBLOCK1"}


def test_below_the_default_bound_registration_writes_no_block_hash_object(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recording under 32 MiB is fetched and verified whole by every remote reader: no
    block-hash object is written for it (one durable object per layer, not two)."""
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 4 * _parts.DEFAULT_PART_BYTES)
    root = tmp_path / "cat"
    rayform.Catalog.create(root).create_dataset("robots").register(
        write_recordings(tmp_path / "src")).wait()
    assert [layer.block_hashes for layer in layers(root)] == [None, None]
    assert _block_hash_objects(root) == set()
    report = check_catalog(root)
    assert report.ok, report.summary()


def test_only_a_layer_at_the_bound_has_block_hashes_and_both_read_remotely(
        tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the bound lowered between a small and a large recording: the large one has a
    block-hash object and is read block by block; the small one has none and is fetched and
    verified whole, even by a reader that reads every listed object block by block."""
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 4 * BLOCK_BYTES)
    root = tmp_path / "site" / "cat"
    rayform.Catalog.create(root).create_dataset("robots").register(
        write_recordings(tmp_path / "src", frames_of=(4, FRAMES))).wait()
    small, large = sorted(layers(root), key=lambda layer: layer.size_bytes)
    assert small.size_bytes < 4 * BLOCK_BYTES <= large.size_bytes
    assert small.block_hashes is None and large.block_hashes is not None
    assert _block_hash_objects(root) == {large.block_hashes}
    with static_server(tmp_path / "site", tls_dir=tmp_path / "tls") as server:
        assert server.ca_pem is not None
        monkeypatch.setenv("RAYFORM_CA_BUNDLE", str(server.ca_pem))
        server.log.serve_ranges = True
        url = f"{server.url}/cat"
        store = store_of(url, cache_dir, connections=4)  # parts of one block
        for layer in (small, large):
            path = store.object_path(layer.object)
            assert hashlib.sha256(path.read_bytes()).hexdigest() == layer.object
        assert server.log.gets_of(large.block_hashes) == 1
        # The large one in ranges after its first block; the small one one whole GET.
        assert sum(last - first + 1 for first, last in server.log.ranges) \
            == large.size_bytes - BLOCK_BYTES
        assert server.log.gets_of(small.object) == 1
        monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "2")
        flip_byte(root, small.object, small.size_bytes // 2)
        with pytest.raises(RemoteError, match="altered in transit"):
            store_of(url, cache_dir / "fresh").object_path(small.object)
