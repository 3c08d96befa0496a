"""Saved slices for the slices page, and the page's one write: a slice from the current filter."""

from __future__ import annotations

from typing import Any

from rayform.catalog import Catalog, Slice
from rayform.catalog._slices import create_slice, list_slices
from rayform.errors import ConfigError


def slice_json(found: Slice) -> dict[str, Any]:
    """A slice's id, definition and pinned segment versions."""
    out = found.to_dict()
    out.pop("catalog", None)
    out["num_segments"] = len(found)
    return out


def all_slices(catalog: Catalog) -> list[dict[str, Any]]:
    """Every saved slice, newest first."""
    found = sorted(list_slices(catalog), key=lambda s: (-s.created_at_ns, s.id))
    return [slice_json(s) for s in found]


def slice_from_filter(catalog: Catalog, body: Any) -> Slice:
    """Create a slice from ``{"dataset": NAME, "where": SQL or null, "name": TEXT or null}``.

    Raises:
        ConfigError: the body is not such an object.
        QueryError: the filter is not valid SQL over the segment table.
        EntryNotFoundError: no such dataset.
    """
    if not isinstance(body, dict) or set(body) - {"dataset", "where", "name"}:
        raise ConfigError('expected a JSON object {"dataset": NAME, "where": SQL, "name": TEXT}')
    dataset, where, name = body.get("dataset"), body.get("where"), body.get("name")
    if not isinstance(dataset, str):
        raise ConfigError(f"dataset must be a dataset name, got {dataset!r}")
    for key, value in (("where", where), ("name", name)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{key} must be text or null, got {value!r}")
    return create_slice(catalog, dataset, where=where or None, name=name or None)
