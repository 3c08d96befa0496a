"""Versioned JSON documents: strict pydantic parsing whose errors name the file, key and version.

Every metadata file rayform writes (catalog, entries, snapshots, slices, listings) is a JSON object
with a ``format`` tag and a ``format_version``; this is the one place that reads and writes them.
"""

from __future__ import annotations

import json
from typing import Final, TypeVar

from pydantic import BaseModel, ValidationError

from rayform.errors import CorruptMetadataError

FORMAT_VERSION: Final = 1

_Model = TypeVar("_Model", bound=BaseModel)


def parse_model(model: type[_Model], raw: bytes, *, source: str) -> _Model:
    """Parse ``raw`` JSON as ``model``; errors name the file, the key and the format version.

    Raises:
        CorruptMetadataError: not JSON, a foreign file, an unsupported format version, or a
            missing / mistyped key.
    """
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CorruptMetadataError(
            f"{source}: metadata is not valid JSON (damaged or truncated file): {err}"
        ) from err
    if not isinstance(payload, dict):
        raise CorruptMetadataError(f"{source}: metadata must be a JSON object, got {type(payload).__name__}")
    expected = model.model_fields["format"].annotation.__args__[0]  # type: ignore[union-attr]
    if payload.get("format") != expected:
        raise CorruptMetadataError(
            f"{source}: not a {expected} file (format={payload.get('format')!r}); "
            "is this directory a rayform catalog?"
        )
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise CorruptMetadataError(
            f"{source}: format_version {version!r} is not supported (this rayform reads "
            f"{FORMAT_VERSION}); upgrade rayform"
        )
    try:
        return model.model_validate(payload)
    except ValidationError as err:
        problems = "; ".join(
            f"key {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5]
        )
        raise CorruptMetadataError(
            f"{source}: invalid {expected} (format_version {version}): {problems}"
        ) from err


def dump_model(model: BaseModel) -> bytes:
    return model.model_dump_json().encode()
