"""One RLDS episode (one parsed record) written as a rayform recording.

``steps/<name>`` leaves become entities ``/<name>`` with one row per step: tensors as
``Scalars:scalars`` (the declared dtype, the declared shape flattened), images as
``EncodedImage`` (the encoded bytes as stored), text as ``TextDocument:text``. Leaves outside
``steps`` (``episode_metadata/*``) become segment properties.
"""

from __future__ import annotations

import json
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.errors import ConversionWarning, CorruptRecordingError
from rayform.importers._time_grid import (
    GRID_FROM_RATE,
    GRID_NONE,
    TIME_GRID_PROPERTY,
    grid_ns,
)
from rayform.importers.rlds._example import FeatureValue, ParsedExample
from rayform.importers.rlds._features import LeafSpec
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    ENCODED_IMAGE_MEDIA_TYPE,
    SCALARS,
    TASK_PROPERTY,
    TEXT_DOCUMENT,
)
from rayform.recording._file import PropertyValue
from rayform.recording._writer import RecordingWriter, TimelineLike, once_as_arrow

FRAME_INDEX: Final = "frame_index"
TIMESTAMP: Final = "timestamp"
TASK_LEAF: Final = "language_instruction"
_MEDIA_TYPES: Final = {"jpeg": "image/jpeg", "jpg": "image/jpeg", "png": "image/png"}


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeSource:
    """Where an episode came from, for its properties and for error messages."""

    dataset: str
    version: str
    split: str
    index: int
    shard: Path
    record: int

    @property
    def where(self) -> str:
        return f"{self.shard}: record {self.record}"


def write_episode(out: Path, segment_id: str, *, parsed: ParsedExample, leaves: list[LeafSpec],
                  source: EpisodeSource, rate_hz: float | None) -> Path:
    """Write the episode ``parsed`` as the recording ``out``.

    Raises:
        CorruptRecordingError: a feature's values do not fit its declared shape or type, or the
            step features disagree on the number of steps.
    """
    steps = {leaf.key: _step_values(parsed, leaf) for leaf in leaves if leaf.in_steps}
    present = {k: v for k, v in steps.items() if v is not None}
    missing = sorted(k for k, v in steps.items() if v is None)
    if missing:
        warnings.warn(f"{source.where}: features.json lists {missing} but the record has no "
                      "values for them; skipped", ConversionWarning, stacklevel=4)
    by_key = {leaf.key: leaf for leaf in leaves}
    num_steps = _num_steps(present, by_key, source)
    frames = np.arange(num_steps, dtype=np.int64)
    timelines: dict[str, TimelineLike] = {FRAME_INDEX: frames}
    if rate_hz is not None:
        timelines[TIMESTAMP] = grid_ns(frames, rate_hz).astype("timedelta64[ns]")
    timelines = once_as_arrow(timelines)
    with RecordingWriter(out, recording_id=segment_id, application_id="rlds") as rec:
        rec.set_properties(dataset=source.dataset, version=source.version, split=source.split,
                           episode_index=source.index, length=num_steps,
                           source_file=source.shard.name, source_record=source.record)
        rec.set_property(TIME_GRID_PROPERTY, GRID_NONE if rate_hz is None else GRID_FROM_RATE)
        if rate_hz is not None:
            rec.set_property("fps", rate_hz)
        for leaf in leaves:
            if not leaf.in_steps:
                _set_metadata(rec, leaf, parsed.features.get(leaf.key), source)
        for key, values in present.items():
            leaf = by_key[key]
            entity = "/" + leaf.name
            if leaf.kind == "tensor":
                array = _tensor(values, leaf, num_steps, source)
                rec.log_columns(entity, timelines=timelines, components={SCALARS: array})
            elif leaf.kind == "image":
                blobs = _blobs(values, leaf, num_steps, source)
                media = _MEDIA_TYPES.get((leaf.image_format or "").lower(),
                                         "application/octet-stream")
                rec.log_columns(entity, timelines=timelines, components={
                    ENCODED_IMAGE_BLOB: pa.array(blobs, pa.binary()),
                    ENCODED_IMAGE_MEDIA_TYPE: pa.array([_media_type(b, media) for b in blobs],
                                                       pa.string())})
            else:
                texts = _texts(values, leaf, num_steps, source)
                rec.log_columns(entity, timelines=timelines, components={TEXT_DOCUMENT: texts})
                if leaf.name == TASK_LEAF:
                    _set_task(rec, texts)
    return out


def _step_values(parsed: ParsedExample, leaf: LeafSpec) -> FeatureValue | list[FeatureValue] | None:
    if parsed.feature_lists is not None:
        found = parsed.feature_lists.get(leaf.key, parsed.feature_lists.get(leaf.name))
        if found is not None:
            return found
    return parsed.features.get(leaf.key)


def _count(values: FeatureValue) -> int:
    return len(values)


def _num_steps(present: dict[str, Any], by_key: dict[str, LeafSpec],
               source: EpisodeSource) -> int:
    counts: dict[str, int] = {}
    for key, values in present.items():
        leaf = by_key[key]
        if isinstance(values, list) and values and not isinstance(values[0], bytes):
            counts[key] = len(values)  # a SequenceExample feature list: one Feature per step
            continue
        size = 1 if leaf.kind != "tensor" else leaf.size
        if leaf.kind == "tensor" and leaf.encoding != "none":
            continue  # raw bytes: the count follows from the others
        if size is None or size == 0:
            continue
        n = _count(values)
        if n % size:
            raise CorruptRecordingError(
                f"{source.where}: feature {key!r} holds {n} values, not a whole number of steps "
                f"of shape {list(leaf.shape)}; the record is damaged or features.json does "
                "not describe it")
        counts[key] = n // size
    if not counts:
        raise CorruptRecordingError(f"{source.where}: no step feature with values; cannot tell "
                                    "how many steps the episode has")
    distinct = sorted(set(counts.values()))
    if distinct == [0]:
        raise CorruptRecordingError(f"{source.where}: the episode has no steps; a segment needs "
                                    "at least one row (drop the empty episode from the shard)")
    if len(distinct) > 1:
        detail = ", ".join(f"{k}: {v}" for k, v in list(counts.items())[:6])
        raise CorruptRecordingError(f"{source.where}: step features disagree on the number of "
                                    f"steps ({detail}); the record is damaged")
    return distinct[0]


def _flat(values: Any) -> Any:
    """A SequenceExample feature list (one Feature per step) joined into one Feature."""
    if isinstance(values, list) and values and not isinstance(values[0], bytes):
        if isinstance(values[0], list):
            return [b for v in values for b in v]
        return np.concatenate(values)
    return values


def _tensor(values: Any, leaf: LeafSpec, num_steps: int, source: EpisodeSource
            ) -> npt.NDArray[Any]:
    values = _flat(values)
    dtype = leaf.numpy_dtype
    if leaf.encoding != "none":
        if not isinstance(values, list):
            raise CorruptRecordingError(f"{source.where}: feature {leaf.key!r} is declared "
                                        f"{leaf.encoding}-encoded but holds numbers")
        try:
            raw = b"".join(zlib.decompress(v) if leaf.encoding == "zlib" else v for v in values)
        except zlib.error as err:
            raise CorruptRecordingError(f"{source.where}: feature {leaf.key!r}: {err}") from err
        if len(raw) % (dtype.itemsize * max(num_steps, 1)):
            raise CorruptRecordingError(f"{source.where}: feature {leaf.key!r} holds {len(raw)} "
                                        f"bytes, not {num_steps} steps of {dtype}")
        array: npt.NDArray[Any] = np.frombuffer(raw, dtype=dtype.newbyteorder("<"))
    elif isinstance(values, list):
        raise CorruptRecordingError(f"{source.where}: feature {leaf.key!r} is a {leaf.dtype} "
                                    "tensor but the record holds bytes")
    else:
        is_float = dtype.kind == "f"
        if is_float != (values.dtype.kind == "f") and len(values):
            raise CorruptRecordingError(
                f"{source.where}: feature {leaf.key!r} is declared {leaf.dtype} but the record "
                f"holds a {'float' if values.dtype.kind == 'f' else 'int64'} list")
        if dtype.kind == "b" and len(values) and (values.min() < 0 or values.max() > 1):
            raise CorruptRecordingError(f"{source.where}: bool feature {leaf.key!r} holds "
                                        "values other than 0 and 1")
        array = values.astype(dtype)
    return array.reshape(num_steps, -1) if num_steps else array.reshape(0, leaf.size or 0)


def _blobs(values: Any, leaf: LeafSpec, num_steps: int, source: EpisodeSource) -> list[bytes]:
    values = _flat(values)
    if not isinstance(values, list) or len(values) != num_steps:
        got = f"{len(values)} values" if isinstance(values, list) else "numbers"
        raise CorruptRecordingError(f"{source.where}: image feature {leaf.key!r} holds {got}, "
                                    f"expected one encoded image per step ({num_steps})")
    return values


def _texts(values: Any, leaf: LeafSpec, num_steps: int, source: EpisodeSource) -> pa.Array:
    values = _flat(values)
    if not isinstance(values, list):
        raise CorruptRecordingError(f"{source.where}: text feature {leaf.key!r} holds numbers")
    try:
        texts = [v.decode("utf-8") for v in values]
    except UnicodeDecodeError as err:
        raise CorruptRecordingError(f"{source.where}: text feature {leaf.key!r} is not UTF-8 "
                                    f"({err})") from err
    if num_steps == 0 or len(texts) % num_steps:
        raise CorruptRecordingError(f"{source.where}: text feature {leaf.key!r} holds "
                                    f"{len(texts)} strings for {num_steps} steps")
    per = len(texts) // num_steps
    rows = [texts[i * per:(i + 1) * per] for i in range(num_steps)]
    return pa.array(rows, pa.list_(pa.string()))


def _media_type(blob: bytes, declared: str) -> str:
    if blob.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if blob.startswith(b"\x89PNG"):
        return "image/png"
    return declared


def _set_task(rec: RecordingWriter, texts: pa.Array) -> None:
    seen = list(dict.fromkeys(t for row in texts.to_pylist() for t in row if t))
    if seen:
        rec.set_property(TASK_PROPERTY, seen[0])
        if len(seen) > 1:
            rec.set_property("tasks", json.dumps(seen))


def _set_metadata(rec: RecordingWriter, leaf: LeafSpec, values: FeatureValue | None,
                  source: EpisodeSource) -> None:
    if values is None:
        return
    if leaf.kind == "image":
        warnings.warn(f"{source.where}: episode-level image {leaf.key!r} is not kept (only "
                      "per-step images become entities)", ConversionWarning, stacklevel=5)
        return
    value: PropertyValue
    if isinstance(values, list):
        try:
            strings = [v.decode("utf-8") for v in values]
        except UnicodeDecodeError:
            strings = [v.hex() for v in values]
        value = strings[0] if len(strings) == 1 else json.dumps(strings)
    else:
        if leaf.kind != "tensor":
            return
        array = values.astype(leaf.numpy_dtype)
        items = array.tolist()
        value = items[0] if len(items) == 1 else json.dumps(items)
    rec.set_property(leaf.name, value)
