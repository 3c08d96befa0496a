"""HDF5 files in a layout declared by a mapping file (see ``_mapping_file``): episodes by group,
by end rows or by axis, each declared dataset logged on its entity."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers.hdf5._columns import log_array
from rayform.importers.hdf5._file import attribute_text, h5py_module, read_dataset, reading
from rayform.importers.hdf5._mapping_file import UNIT_NS, DatasetSpec, Hdf5Mapping
from rayform.importers.hdf5._properties import set_attribute_properties
from rayform.importers.hdf5._timing import (
    FRAME_INDEX,
    RATE_PROPERTY,
    TIME_GRID_PROPERTY,
    TIMESTAMP,
    grid_step_ns,
    scaled_ns,
)
from rayform.recording._columns import TASK_PROPERTY
from rayform.recording._writer import RecordingWriter, TimelineLike

Reader = Callable[[str], "npt.NDArray[Any] | None"]


@dataclass(frozen=True, slots=True)
class _Episode:
    """One episode: its segment id suffix, the node whose attributes it takes, how it reads."""

    name: str
    node: Any
    read: Reader


def write_mapped(file: Any, path: Path, staging: Path, mapping: Hdf5Mapping, *,
                 rate_hz: float | None) -> list[Path]:
    """One recording per declared episode, written one episode at a time."""
    outputs = []
    for episode in _episodes(file, path, mapping):
        segment_id = segment_id_from_name(f"{path.stem}_{episode.name}" if episode.name
                                          else path.stem)
        out = staging / f"{segment_id}.rfr"
        with RecordingWriter(out, recording_id=segment_id, application_id="hdf5") as rec:
            rec.set_properties(source_file=path.name, layout="mapping")
            if episode.name:
                rec.set_property("episode", episode.name)
            for key, value in mapping.properties.items():
                rec.set_property(key, value)
            if episode.node is not file:
                set_attribute_properties(rec, path, episode.node, prefix="")
            if mapping.task_attribute is not None:
                task = attribute_text(path, episode.node, mapping.task_attribute) \
                    or attribute_text(path, file, mapping.task_attribute)
                if task:
                    rec.set_property(TASK_PROPERTY, task)
            grids = _write_datasets(rec, path, episode, mapping, rate_hz)
            if not grids:
                raise FormatError(f"{path}: episode {episode.name or '(the file)'} holds none of "
                                  "the datasets the mapping file declares")
            rates = {r for r in grids.values() if isinstance(r, float)}
            if len(rates) == 1:
                rec.set_property(RATE_PROPERTY, rates.pop())
            rec.set_property(TIME_GRID_PROPERTY, "; ".join(
                f"{key}: {_describe(how)}" for key, how in sorted(grids.items())))
        outputs.append(out)
    if not outputs:
        raise FormatError(f"{path}: the mapping file's episodes match nothing in the file")
    return outputs


def _write_datasets(rec: RecordingWriter, path: Path, episode: _Episode, mapping: Hdf5Mapping,
                    rate_hz: float | None) -> dict[str, float | str | None]:
    grids: dict[str, float | str | None] = {}
    for key, spec in mapping.datasets.items():
        where = f"{path}: {episode.name + ': ' if episode.name else ''}dataset {key!r}"
        values = episode.read(key)
        if values is None:
            warnings.warn(f"{where} is missing; the episode is registered without it",
                          ConversionWarning, stacklevel=6)
            continue
        if values.ndim == 0:
            raise FormatError(f"{where}: a scalar, not one row per frame")
        timelines, grids[key] = _timelines(len(values), spec, mapping, episode, rate_hz, where)
        lengths = episode.read(spec.lengths) if spec.lengths is not None else None
        log_array(rec, spec.entity, values, timelines=timelines, kind=spec.kind, where=where,
                  lengths=lengths)
    return grids


def _timelines(count: int, spec: DatasetSpec, mapping: Hdf5Mapping, episode: _Episode,
               rate_hz: float | None, where: str
               ) -> tuple[dict[str, TimelineLike], float | str | None]:
    index = np.arange(count, dtype=np.int64)
    timelines: dict[str, TimelineLike] = {FRAME_INDEX: index}
    stamp = mapping.timestamp_of(spec)
    if stamp is not None:
        raw = episode.read(stamp.dataset)
        if raw is None or raw.reshape(-1).shape != (count,) or raw.dtype.kind not in "iuf":
            raise FormatError(f"{where}: its timestamps {stamp.dataset!r} must be one number per "
                              f"row ({count}), got "
                              f"{'nothing' if raw is None else f'{raw.dtype} {raw.shape}'}")
        ns = scaled_ns(raw.reshape(-1), UNIT_NS[stamp.unit])
        timelines[TIMESTAMP] = ns.astype("timedelta64[ns]" if stamp.kind == "duration"
                                         else "datetime64[ns]")
        return timelines, f"timestamps from {stamp.dataset!r} ({stamp.unit}, {stamp.kind})"
    rate = mapping.rate_of(spec, rate_hz)
    if rate is None:
        return timelines, None
    timelines[TIMESTAMP] = (index * grid_step_ns(rate)).astype("timedelta64[ns]")
    return timelines, float(rate)


def _describe(how: float | str | None) -> str:
    if how is None:
        return "frame_index only (no rate or timestamps declared)"
    if isinstance(how, float):
        return f"exact grid timestamp = frame_index x {grid_step_ns(how)} ns ({how:g} Hz)"
    return how


def _episodes(file: Any, path: Path, mapping: Hdf5Mapping) -> Iterator[_Episode]:
    spec = mapping.episodes
    h5py = h5py_module()
    if spec.groups is not None:
        pattern = "/" + spec.groups.strip("/")
        for name, group in _groups_matching(file, path, pattern, h5py):
            yield _Episode(name=name, node=group, read=partial(_read_whole, path, group, h5py))
        return
    if spec.ends is not None:
        ends = _ends(file, path, spec.ends, h5py)
        start = 0
        for k, end in enumerate(ends.tolist()):
            yield _Episode(name=f"episode_{k:06d}", node=file,
                           read=partial(_read_rows, path, file, h5py, start, end))
            start = end
        return
    if spec.axis is not None:
        axis = spec.axis
        counts = {_dataset(file, path, key, h5py).shape[axis] for key in mapping.datasets
                  if _has_axis(file, key, axis, h5py)}
        if len(counts) != 1:
            raise FormatError(f"{path}: the mapped datasets disagree on the number of episodes "
                              f"along axis {axis} ({sorted(counts)})")
        for k in range(counts.pop()):
            yield _Episode(name=f"episode_{k:06d}", node=file,
                           read=partial(_read_axis, path, file, h5py, axis, k))
        return
    yield _Episode(name="", node=file, read=partial(_read_whole, path, file, h5py))


def _groups_matching(file: Any, path: Path, pattern: str, h5py: Any) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []

    def visit(name: str, node: Any) -> None:
        if isinstance(node, h5py.Group) and PurePosixPath("/" + name).match(pattern):
            found.append((name.replace("/", "_"), node))

    with reading(path, f"listing the groups matching {pattern!r}"):
        file.visititems(visit)
    return sorted(found, key=lambda item: _natural(item[0]))


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _dataset(node: Any, path: Path, key: str, h5py: Any) -> Any:
    with reading(path, f"dataset {key!r} of {node.name!r}"):
        found = node.get(key.strip("/") if node.name == "/" else key)
    if not isinstance(found, h5py.Dataset):
        raise FormatError(f"{path}: the mapping file names {key!r}, which is "
                          f"{'missing' if found is None else 'not a dataset'} in {node.name!r}")
    return found


def _read_whole(path: Path, node: Any, h5py: Any, key: str) -> npt.NDArray[Any] | None:
    with reading(path, f"dataset {key!r} of {node.name!r}"):
        found = node.get(key)
    if found is None:
        return None
    if not isinstance(found, h5py.Dataset):
        raise FormatError(f"{path}: {key!r} in {node.name!r} is a group, not a dataset")
    return read_dataset(path, found)


def _read_rows(path: Path, file: Any, h5py: Any, start: int, stop: int, key: str
               ) -> npt.NDArray[Any] | None:
    dataset = _dataset(file, path, key, h5py)
    if dataset.shape and dataset.shape[0] < stop:
        raise CorruptRecordingError(f"{path}: dataset {key!r} has {dataset.shape[0]} rows but "
                                    f"the episode ends say {stop}")
    with reading(path, f"dataset {key!r} rows {start}:{stop}"):
        return np.asarray(dataset[start:stop])


def _read_axis(path: Path, file: Any, h5py: Any, axis: int, episode: int, key: str
               ) -> npt.NDArray[Any] | None:
    dataset = _dataset(file, path, key, h5py)
    with reading(path, f"dataset {key!r} episode {episode}"):
        return np.asarray(dataset[episode] if axis == 0 else dataset[:, episode])


def _has_axis(file: Any, key: str, axis: int, h5py: Any) -> bool:
    found = file.get(key)
    return isinstance(found, h5py.Dataset) and len(found.shape) > axis


def _ends(file: Any, path: Path, key: str, h5py: Any) -> npt.NDArray[np.int64]:
    values = read_dataset(path, _dataset(file, path, key, h5py)).reshape(-1)
    if values.dtype.kind not in "iu" or (values.size and (values[0] < 0 or
                                                          (np.diff(values) < 0).any())):
        raise FormatError(f"{path}: episode ends {key!r} must be non-decreasing non-negative "
                          f"integers, got {values.dtype} {values[:5].tolist()}")
    return values.astype(np.int64)
