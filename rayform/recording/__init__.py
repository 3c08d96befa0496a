"""Recordings: rayform's native recording file (``.rfr``) — writer, reader, header, column names.

One Arrow IPC file per segment layer; column names follow Rerun's
``<entity_path>:<Archetype>:<component>`` convention (see :mod:`rayform.recording._columns`).
"""

from __future__ import annotations

from rayform.recording._file import (
    RECORDING_SUFFIX,
    RecordingHeader,
    is_recording_file,
    open_recording,
)
from rayform.recording._writer import RecordingWriter

__all__ = [
    "RECORDING_SUFFIX",
    "RecordingHeader",
    "RecordingWriter",
    "is_recording_file",
    "open_recording",
]
