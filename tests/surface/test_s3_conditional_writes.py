"""S3 commits and conditional writes: on a server that honours ``If-None-Match`` the way AWS does
(moto in server mode), concurrent writers from two processes lose nothing; on one that ignores it
(``rclone serve s3``) commits are refused unless a single writer is declared."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from surface_data import write_episode
from surface_servers import S3Server

import rayform
from rayform.errors import UnsafeStoreError
from rayform.storage import RemoteStore
from rayform.storage._s3 import S3Transport

REPO = Path(__file__).resolve().parents[2]
WRITES_PER_PROCESS = 8


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server_mod = pytest.importorskip("moto.server", reason="pip install 'moto[server]' (rayform[dev])")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def moto_url(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    import boto3

    env = {"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAYFORM_S3_SINGLE_WRITER", raising=False)
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    bucket = f"moto-{len(client.list_buckets()['Buckets'])}"
    client.create_bucket(Bucket=bucket)
    client.close()
    return f"s3://{bucket}/team/catalog"


def _transport(catalog: rayform.Catalog) -> S3Transport:
    store = catalog.store
    assert isinstance(store, RemoteStore) and isinstance(store.transport, S3Transport)
    return store.transport


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import rayform
    url, folder = sys.argv[2], Path(sys.argv[3])
    dataset = rayform.Catalog.open(url).get_dataset("robots")
    for path in sorted(folder.glob("*.rfr")):
        dataset.register(path).wait()
    print("done")
""")


def test_concurrent_writers_on_a_server_with_conditional_writes_lose_nothing(
        moto_url: str, tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(moto_url)
    assert _transport(catalog).honours_conditional_writes()
    catalog.create_dataset("robots")
    folders = []
    for writer in range(2):
        folder = tmp_path / f"writer{writer}"
        folder.mkdir()
        for i in range(WRITES_PER_PROCESS):
            write_episode(folder / f"w{writer}e{i}.rfr", f"w{writer}e{i}", seed=i, num_frames=4)
        folders.append(folder)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(REPO), moto_url, str(folder)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for folder in folders]
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0 and out.strip() == "done", err[-2000:]
    robots = rayform.Catalog.open(moto_url).get_dataset("robots")
    assert len(robots.segment_ids()) == 2 * WRITES_PER_PROCESS
    assert robots.snapshot_version == 2 * WRITES_PER_PROCESS  # one commit each, none lost


def test_a_server_ignoring_if_none_match_is_refused(s3_url: str, s3_server: S3Server,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAYFORM_S3_SINGLE_WRITER")
    with pytest.raises(UnsafeStoreError, match=r"this S3 server ignores If-None-Match .* lose "
                                               r"registrations.*RAYFORM_S3_SINGLE_WRITER=1"):
        rayform.Catalog.create(s3_url)
    bucket = s3_url[len("s3://"):].partition("/")[0]
    left = [p for p in (s3_server.root / bucket).rglob("*") if p.is_file()]
    assert left == []  # no catalog.json, no probe key


def test_a_declared_single_writer_may_commit_there(s3_url: str, tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(s3_url)  # RAYFORM_S3_SINGLE_WRITER=1 (conftest)
    assert not _transport(catalog).honours_conditional_writes()
    robots = catalog.create_dataset("robots")
    robots.register(write_episode(tmp_path / "e0.rfr", "e0", seed=0, num_frames=4)).wait()
    assert catalog.store.create_exclusive("slices/x.json", b"1")
    assert not catalog.store.create_exclusive("slices/x.json", b"2")
    assert catalog.store.read_bytes("slices/x.json") == b"1"
    assert rayform.Catalog.open(s3_url).get_dataset("robots").segment_ids() == ["e0"]
