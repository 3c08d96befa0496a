"""The ALOHA / ACT layout: one HDF5 file per episode.

As ACT's ``record_sim_episodes.py`` and ALOHA's ``record_episodes.py`` write it::

    /observations/qpos       (T, 14)           joint positions
    /observations/qvel       (T, 14)
    /observations/effort     (T, 14)           (real robots)
    /observations/images/<cam>  uint8 (T, 480, 640, 3), or with root attribute ``compress``
                             uint8 (T, L): each row a JPEG zero-padded to the longest one
    /action                  (T, 14)
    /base_action             (T, 2)            (mobile ALOHA)
    /compress_len            (cameras, T)      each JPEG's length (with ``compress``)
    attrs: sim, compress

Every dataset with ``T`` rows becomes the entity of its own path (``/observations/qpos``,
``/observations/images/cam_high``); root attributes become segment properties. The file stores no
rate: with ``rate_hz`` given (``--fps``; ACT records at 50 Hz) the segment also gets a
``timestamp`` timeline on the exact frame grid.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers.hdf5._columns import log_array, resolve_kind
from rayform.importers.hdf5._file import read_dataset, reading
from rayform.importers.hdf5._properties import set_attribute_properties
from rayform.importers.hdf5._timing import describe_grid, frame_timelines
from rayform.recording._writer import RecordingWriter

ACTION = "action"
OBSERVATIONS = "observations"
IMAGES = "observations/images"
COMPRESS_LEN = "compress_len"


def is_aloha(file: Any) -> bool:
    """True for a file with ``/observations`` (a group) and ``/action`` (a dataset)."""
    h5py = _h5py()
    return isinstance(file.get(OBSERVATIONS), h5py.Group) and \
        isinstance(file.get(ACTION), h5py.Dataset)


def write_aloha(file: Any, path: Path, staging: Path, *, rate_hz: float | None,
                rate_source: str) -> list[Path]:
    """Write the episode in ``file`` (the ALOHA layout) as one recording."""
    with reading(path, "listing its datasets"):
        datasets = _datasets(file)
        count = int(file[ACTION].shape[0]) if file[ACTION].shape else 0
    if count == 0:
        raise FormatError(f"{path}: /action has no rows; an ALOHA episode has one per timestep")
    segment_id = segment_id_from_name(path.stem)
    out = staging / f"{segment_id}.rfr"
    timelines = frame_timelines(count, rate_hz)
    compressed = _compressed(file, path)
    with RecordingWriter(out, recording_id=segment_id, application_id="hdf5") as rec:
        rec.set_properties(source_file=path.name, layout="aloha", num_frames=count)
        set_attribute_properties(rec, path, file, prefix="")
        describe_grid(rec, rate_hz, rate_source=rate_source)
        lengths = _compress_lengths(file, path)
        for name, dataset in datasets:
            where = f"{path}: dataset /{name}"
            if name == COMPRESS_LEN:
                continue
            if not dataset.shape or dataset.shape[0] != count:
                warnings.warn(f"{where} has shape {dataset.shape}, not {count} rows like /action; "
                              "it is not registered", ConversionWarning, stacklevel=6)
                continue
            values = read_dataset(path, dataset)
            kind = "encoded_image" if name.startswith(IMAGES + "/") and values.ndim == 2 \
                and values.dtype == np.uint8 and (compressed or _looks_encoded(values)) \
                else resolve_kind(values, "auto")
            logged = log_array(rec, "/" + name, values, timelines=timelines, kind=kind,
                               where=where)
            if logged == "encoded_image" and lengths is not None:
                _check_lengths(values, lengths, where)
    return [out]


def _datasets(file: Any) -> list[tuple[str, Any]]:
    h5py = _h5py()
    found: list[tuple[str, Any]] = []

    def visit(name: str, node: Any) -> None:
        if isinstance(node, h5py.Dataset):
            found.append((name, node))

    file.visititems(visit)
    return sorted(found, key=lambda item: item[0])


def _compressed(file: Any, path: Path) -> bool:
    with reading(path, "root attribute 'compress'"):
        value = file.attrs.get("compress", False)
    return bool(np.asarray(value).reshape(-1)[0]) if np.asarray(value).size else False


def _looks_encoded(values: npt.NDArray[Any]) -> bool:
    return len(values) > 0 and values[0, :3].tobytes() == b"\xff\xd8\xff"


def _compress_lengths(file: Any, path: Path) -> npt.NDArray[np.int64] | None:
    dataset = file.get(COMPRESS_LEN)
    if dataset is None:
        return None
    lengths = read_dataset(path, dataset)
    return lengths.astype(np.int64) if lengths.ndim == 2 else None


def _check_lengths(values: npt.NDArray[np.uint8], lengths: npt.NDArray[np.int64],
                   where: str) -> None:
    """The JPEG lengths found by their end markers must be one camera row of ``compress_len``
    (its rows follow the recorder's camera list, whose order the file does not keep)."""
    found = np.asarray([_encoded_length(row) for row in values], dtype=np.int64)
    if lengths.shape[1] != len(found) or not (lengths == found[None, :]).all(axis=1).any():
        raise CorruptRecordingError(
            f"{where}: the JPEG lengths of its rows match no row of /{COMPRESS_LEN}; the images "
            "are truncated or damaged")


def _encoded_length(row: npt.NDArray[np.uint8]) -> int:
    blob = row.tobytes()
    end = blob.rfind(b"\xff\xd9")
    return end + 2 if end >= 0 else len(blob.rstrip(b"\x00"))


def _h5py() -> Any:
    from rayform.importers.hdf5._file import h5py_module

    return h5py_module()
