"""``register_prefix``: every recording file below a local folder or an ``s3://`` prefix.

As Rerun's ``register_prefix`` finds every ``.rrd`` below an object-store prefix, this finds
every file whose name ends in a suffix of a file format rayform registers (folder formats such as
LeRobot datasets are registered by their path). Listed names are untrusted: each key component
is checked before it becomes part of a URI, and hidden files and folders (``.staging`` …) are
skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from rayform._paths import component_problem
from rayform.errors import ConfigError, CorruptMetadataError, OfflineError, SourceNotFoundError
from rayform.storage._fetch import parse_source

RECORDING_SUFFIXES: Final = (".rrd", ".rfr", ".mcap", ".mp4")


def _is_recording(name: str) -> bool:
    return not name.startswith(".") and name.lower().endswith(RECORDING_SUFFIXES)


def recordings_under(prefix: str | os.PathLike[str]) -> list[str]:
    """The recording files below ``prefix``, sorted: local paths, or ``s3://`` URLs.

    Raises:
        SourceNotFoundError: a local prefix that is not a folder.
        ConfigError: an ``https://`` prefix (a static server cannot be listed) or another scheme.
        RemoteError, OfflineError: listing the bucket failed, or ``RAYFORM_OFFLINE=1``.
    """
    text = os.fspath(prefix)
    if text.startswith("s3://"):
        return _s3_recordings(text.rstrip("/"))
    if text.startswith(("https://", "http://")):
        raise ConfigError(f"register_prefix: {text!r} cannot be listed (a web server has no "
                          "listing); pass the recordings' URLs to register, or use s3://")
    source = parse_source(text)
    assert source.path is not None
    root = source.path
    if not root.is_dir():
        raise SourceNotFoundError(f"register_prefix: {root} is not a folder; give the folder "
                                  "holding the recordings (or register a file with register)")
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(str(Path(folder) / f) for f in files if _is_recording(f))
    return sorted(found)


def _s3_recordings(url: str) -> list[str]:
    from rayform.storage._cache import is_offline
    from rayform.storage._retry import RetryPolicy
    from rayform.storage._s3 import S3Transport

    if is_offline():
        raise OfflineError(f"RAYFORM_OFFLINE=1 forbids listing {url}/; unset it")
    policy = RetryPolicy.from_env()
    transport = S3Transport(url, retry=policy)
    keys = policy.run(transport.list_keys_under, what=f"list {url}/")
    found = []
    for key in keys:
        parts = key.split("/")
        for part in parts:
            problem = component_problem(part)
            if problem is not None:
                raise CorruptMetadataError(f"listing of {url}/: key {key[:120]!r}: a part "
                                           f"{problem}; refusing to register from it")
        if _is_recording(parts[-1]) and not any(p.startswith(".") for p in parts):
            found.append(f"{url}/{key}")
    return found


__all__ = ["RECORDING_SUFFIXES", "recordings_under"]
