"""Segment ids derived from source names (file stems, folder names, episode numbers)."""

from __future__ import annotations

import re

from rayform.recording._names import MAX_SEGMENT_ID, validate_segment_id

_UNSAFE = re.compile(r"[^A-Za-z0-9_\-.:@+=~]+")


def segment_id_from_name(name: str) -> str:
    """A valid segment id made from ``name``: unsafe characters become ``_``.

    ``segment_id_from_name("run 1/cam.mp4") == "run_1_cam.mp4"``; an empty result becomes
    ``"segment"``.
    """
    text = _UNSAFE.sub("_", name).strip("_ ")
    while ".." in text:
        text = text.replace("..", "_")
    text = text[:MAX_SEGMENT_ID] or "segment"
    return validate_segment_id(text)
