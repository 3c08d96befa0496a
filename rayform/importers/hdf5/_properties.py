"""HDF5 attributes as segment properties (numbers, bools and text; arrays and long text left out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import numpy as np

from rayform.importers.hdf5._file import attributes
from rayform.recording._file import PropertyValue
from rayform.recording._writer import RecordingWriter

MAX_TEXT_PROPERTY: Final = 65536
"""Longer text attributes (robosuite's ``model_file`` XML) are not copied into properties."""


def property_value(value: Any) -> PropertyValue | None:
    """The property value of one attribute, or None when it is not a scalar number, bool or text."""
    if isinstance(value, np.ndarray):
        if value.size != 1 or value.dtype.kind not in "biufSU":
            return None
        value = value.reshape(-1)[0]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, bytes | np.bytes_):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, str) and len(value) <= MAX_TEXT_PROPERTY and "\x00" not in value:
        return value
    return None


def set_attribute_properties(rec: RecordingWriter, path: Path, node: Any, *, prefix: str,
                             skip: frozenset[str] = frozenset()) -> None:
    """Set ``<prefix><name>`` for every scalar attribute of ``node``."""
    for name, raw in attributes(path, node).items():
        if name in skip or not name or "\n" in name:
            continue
        value = property_value(raw)
        if value is not None:
            rec.set_property(prefix + name, value)
