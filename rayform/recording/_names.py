"""Validation of entry names, segment ids, layer names and entity paths.

Names never reach outside the catalog directory: path separators and ``..`` are refused.
"""

from __future__ import annotations

import re

from rayform.errors import InvalidNameError

MAX_ENTRY_NAME = 180
MAX_SEGMENT_ID = 255
_ENTRY_RE = re.compile(r"^[A-Za-z0-9_\-.: \[\]()]+$")
_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_\-.:@+=~ ]+$")


def _reject_traversal(kind: str, name: str, fix: str) -> None:
    if "/" in name or "\\" in name or name in (".", "..") or ".." in name or "\x00" in name:
        raise InvalidNameError(
            f"{kind} {name!r} contains a path separator or '..'; {fix}"
        )


def validate_entry_name(name: str) -> str:
    """Check a dataset or table name (Rerun's rules: ASCII, ≤ 180 chars, no separators)."""
    if not isinstance(name, str) or not name:
        raise InvalidNameError(f"entry name must be a non-empty string, got {name!r}")
    _reject_traversal("entry name", name, "use letters, digits, '_', '-', '.', ':' or spaces")
    if len(name) > MAX_ENTRY_NAME:
        raise InvalidNameError(
            f"entry name {name[:40]!r}… is {len(name)} characters; the limit is {MAX_ENTRY_NAME}"
        )
    if not _ENTRY_RE.match(name) or name.startswith((".", " ")):
        raise InvalidNameError(
            f"entry name {name!r} may only contain ASCII letters, digits, '_', '-', '.', ':', "
            "spaces and brackets, and must not start with '.' or a space"
        )
    return name


def validate_segment_id(segment_id: str) -> str:
    """Check a segment (recording) id."""
    if not isinstance(segment_id, str) or not segment_id:
        raise InvalidNameError(f"segment id must be a non-empty string, got {segment_id!r}")
    _reject_traversal("segment id", segment_id, "choose an id without '/', '\\' or '..'")
    if len(segment_id) > MAX_SEGMENT_ID or not _SEGMENT_RE.match(segment_id):
        raise InvalidNameError(
            f"segment id {segment_id!r} may only contain ASCII letters, digits and "
            "'_-.:@+=~ ' (at most 255 characters)"
        )
    return segment_id


def validate_layer_name(layer: str) -> str:
    """Check a layer name (same rules as segment ids)."""
    try:
        return validate_segment_id(layer)
    except InvalidNameError as err:
        raise InvalidNameError(str(err).replace("segment id", "layer name")) from None


def validate_entity_path(path: str) -> str:
    """Check an entity path: starts with '/', no ':' (it separates the component), no '..'."""
    if not isinstance(path, str) or not path.startswith("/") or ":" in path:
        raise InvalidNameError(
            f"entity path {path!r} must start with '/' and must not contain ':' "
            "(e.g. '/joints/position')"
        )
    if any(part in (".", "..") for part in path.split("/")):
        raise InvalidNameError(f"entity path {path!r} must not contain '.' or '..' parts")
    return path
