"""Crafted remote catalogs (HTTPS and S3): nothing read from them may touch a file outside the
cache, however its digests and listed names are written.

Before digests were validated, a snapshot naming ``/path/to/victim`` as its segment index made
the cache hash that file, find it "corrupt" and delete it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from surface_servers import Https, S3Server

import rayform
from rayform.catalog._snapshot import clear_cache
from rayform.errors import CorruptMetadataError

PAYLOADS = ["absolute", "dotdot", "nul", "overlong"]


def disk_state_outside(root: Path, cache_dir: Path) -> dict[str, str]:
    """Every file below ``root`` but outside the cache, with a hash of its bytes."""
    state = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_relative_to(cache_dir):
            state[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


def _payload(kind: str, victim: Path, cache_dir: Path) -> str:
    return {
        "absolute": str(victim),
        "dotdot": os.path.relpath(victim, cache_dir / "objects" / "ab"),
        "nul": "a" * 32 + "\x00" + "b" * 31,
        "overlong": "c" * 300,
    }[kind]


def _craft_snapshot(root: Path, segment_index: str) -> None:
    snapshot = sorted((root / "entries" / "robots" / "versions").glob("*.json"))[-1]
    data = json.loads(snapshot.read_bytes())
    data["segment_index"] = segment_index
    snapshot.chmod(0o644)
    snapshot.write_text(json.dumps(data))


@pytest.mark.parametrize("kind", PAYLOADS)
def test_https_snapshot_digest_cannot_delete_a_local_file(
        https_catalog: Https, local_catalog: rayform.Catalog, tmp_path: Path, cache_dir: Path,
        kind: str) -> None:
    victim = _victim(tmp_path)
    _craft_snapshot(Path(local_catalog.url), _payload(kind, victim, cache_dir))
    clear_cache()
    before = disk_state_outside(tmp_path, cache_dir)
    with pytest.raises(CorruptMetadataError, match="key segment_index") as info:
        rayform.Catalog.open(https_catalog.url).get_dataset("robots").segment_ids()
    assert https_catalog.url in str(info.value)
    assert victim.read_text() == "precious\n"
    assert disk_state_outside(tmp_path, cache_dir) == before


@pytest.mark.parametrize("name", ["../../../../escape", "/abs", "a\x00b", "e" * 300])
def test_https_listing_names_cannot_leave_the_cache(https_catalog: Https,
                                                    local_catalog: rayform.Catalog,
                                                    tmp_path: Path, cache_dir: Path,
                                                    name: str) -> None:
    listing = Path(local_catalog.url) / "entries" / ".listing.json"
    listing.write_text(json.dumps({"format": "rayform-listing", "format_version": 1,
                                   "names": ["robots", name]}))
    before = disk_state_outside(tmp_path, cache_dir)
    with pytest.raises(CorruptMetadataError, match=r"\.listing\.json: invalid rayform-listing"):
        rayform.Catalog.open(https_catalog.url).dataset_names()
    assert disk_state_outside(tmp_path, cache_dir) == before
    assert not list(tmp_path.rglob("escape"))


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_s3_snapshot_digest_cannot_delete_a_local_file(
        s3_url: str, s3_server: S3Server, local_catalog: rayform.Catalog, tmp_path: Path,
        cache_dir: Path, kind: str) -> None:
    victim = _victim(tmp_path)
    root = Path(local_catalog.url)
    _craft_snapshot(root, _payload(kind, victim, cache_dir))
    bucket, _, prefix = s3_url[len("s3://"):].partition("/")
    shutil.copytree(root, s3_server.root / bucket / prefix, dirs_exist_ok=True)
    clear_cache()
    before = disk_state_outside(tmp_path, cache_dir)
    with pytest.raises(CorruptMetadataError, match="key segment_index"):
        rayform.Catalog.open(s3_url).get_dataset("robots").segment_ids()
    assert victim.read_text() == "precious\n"
    assert disk_state_outside(tmp_path, cache_dir) == before
