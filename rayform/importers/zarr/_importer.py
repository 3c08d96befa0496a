"""Register a Zarr replay buffer (Diffusion Policy, UMI): one segment per episode."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.errors import (
    ConfigError,
    ConversionWarning,
    CorruptRecordingError,
    FormatError,
    RayformError,
)
from rayform.importers._base import Importer
from rayform.importers._options import ImportOptions
from rayform.importers._time_grid import (
    GRID_FROM_RATE,
    GRID_NONE,
    GRID_SOURCE,
    TIME_GRID_PROPERTY,
    check_rate_hz,
    grid_ns,
)
from rayform.importers.ros._messages import IMAGE_FORMAT_TYPE
from rayform.importers.zarr._store import (
    READ_ERRORS,
    RowReader,
    data_arrays,
    episode_ends,
    is_replay_buffer,
    open_replay_buffer,
)
from rayform.recording._columns import IMAGE_BUFFER, IMAGE_FORMAT, SCALARS
from rayform.recording._file import PropertyValue
from rayform.recording._writer import RecordingWriter, TimelineLike, once_as_arrow

FRAME_INDEX: Final = "frame_index"
TIMESTAMP: Final = "timestamp"
_MAX_BINARY: Final = 2**31 - 1
_TIMESTAMP_ARRAY: Final = "timestamp"
_EPOCH_S: Final = 1e8  # seconds: timestamps above this are wall-clock (epoch) times
# Rerun's ColorModel and ChannelDatatype codes (the Image archetype's format struct).
_COLOR_MODELS: Final = {1: 1, 3: 2, 4: 3}
_CHANNEL_TYPES: Final = {"uint8": 6, "int8": 7, "uint16": 8, "int16": 9, "uint32": 10,
                         "int32": 11, "uint64": 12, "int64": 13, "float16": 33, "float32": 34,
                         "float64": 35}


class ZarrImporter(Importer):
    """Reads Zarr replay buffers (v2 and v3 stores; a folder or a ``.zip``).

    Each episode (the rows between two ``meta/episode_ends``) becomes the segment
    ``episode_<n:06d>``; each array ``data/<name>`` becomes the entity ``/<name>`` with one row
    per step, its values flattened into ``Scalars:scalars`` at the stored dtype. Arrays of images
    stored as pixels (``(T, H, W, C)`` with 1, 3 or 4 channels; PushT's ``img`` is float32)
    become raw images, as HDF5's raw cameras do: ``Image:buffer`` (each frame's ``H × W × C``
    values, little-endian) and the static ``Image:format`` (width, height, colour model, channel
    type, as Rerun's ``Image`` archetype names them), which ``RawImageDecoder`` reads;
    ``image_dtype`` stores them at another dtype when every value converts exactly. A
    ``data/timestamp`` array (seconds) becomes the ``timestamp`` timeline; otherwise ``fps``
    gives one on the exact grid ``frame_index * round(1e9 / fps)``.
    Episodes are read in order, each chunk decompressed once, the next episode read (on a
    thread of its own) while one is written: at most two episodes' rows are held.

    Args:
        fps: the step rate (Diffusion Policy's stores declare none; PushT runs at 10 Hz).
        image_dtype: ``{array name: dtype}`` to store pixel arrays at, e.g. ``{"img": "uint8"}``.
        episodes: the episode numbers to register (default: all).
    """

    name = "zarr"
    options_read = frozenset({"rate_hz"})

    def __init__(self, *, fps: float | None = None, image_dtype: Mapping[str, str] | None = None,
                 episodes: Sequence[int] | None = None) -> None:
        self.fps = check_rate_hz(fps, what="ZarrImporter")
        self.image_dtype: dict[str, np.dtype[Any]] = {}
        for key, dtype in (image_dtype or {}).items():
            try:
                self.image_dtype[key] = np.dtype(dtype)
            except TypeError as err:
                raise ConfigError(f"ZarrImporter: image_dtype[{key!r}] = {dtype!r} is not a "
                                  "numpy dtype") from err
            if self.image_dtype[key].name not in _CHANNEL_TYPES:
                raise ConfigError(f"ZarrImporter: image_dtype[{key!r}] must be one of "
                                  f"{sorted(_CHANNEL_TYPES)}, got {dtype!r}")
        self.episodes = None if episodes is None else [int(e) for e in episodes]

    def configured(self, options: ImportOptions) -> Importer:
        """This importer at ``options.rate_hz`` (``rayform register --fps``), when given."""
        if options.rate_hz is None:
            return self
        return ZarrImporter(fps=options.rate_hz, episodes=self.episodes,
                            image_dtype={key: d.name for key, d in self.image_dtype.items()})

    def sniff(self, path: Path) -> bool:
        return is_replay_buffer(path)

    def convert(self, path: Path, staging: Path) -> list[Path]:
        caught: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                return self._convert(path, staging)
        except RayformError:
            raise
        except READ_ERRORS as err:  # zarr's errors on damaged metadata, wherever they surface
            raise CorruptRecordingError(f"{path}: the Zarr store cannot be read ({err!r}); "
                                        "it is damaged or incomplete") from err
        finally:
            _report(caught, path)  # outside the recording context

    def _convert(self, path: Path, staging: Path) -> list[Path]:
        outputs: list[Path] = []
        with open_replay_buffer(path) as group:
            arrays = data_arrays(group, path)
            num_rows = int(next(iter(arrays.values())).shape[0])
            ends = episode_ends(group, path, num_rows)
            unknown = sorted(set(self.image_dtype) - set(arrays))
            if unknown:
                raise ConfigError(f"{path}: image_dtype names {unknown}, which data/ does not "
                                  f"hold; arrays: {sorted(arrays)}")
            chosen = range(len(ends)) if self.episodes is None else self.episodes
            bad = [e for e in chosen if not 0 <= e < len(ends)]
            if bad:
                raise ConfigError(f"{path}: episodes {bad[:5]} out of range; the store holds "
                                  f"{len(ends)} episodes")
            readers = {name: RowReader(a, name=name, path=path) for name, a in arrays.items()}
            images = {name: _image_format(a, name) for name, a in arrays.items()}
            meta = _episode_metadata(group, len(ends))
            starts = np.concatenate(([0], ends[:-1]))
            plan = [int(e) for e in chosen]
            ahead = _run_ends(plan, ends)

            def rows_of(i: int) -> dict[str, npt.NDArray[Any]]:
                first, stop = int(starts[plan[i]]), int(ends[plan[i]])
                return {name: reader.take(first, stop, ahead=ahead[i])
                        for name, reader in readers.items()}

            # The next episode is read while one is written: zarr's decompression and the
            # writer's compression, hashing and fsync each free the GIL, and a reader's rows
            # stay as they are until its second read after them.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rayform-zarr") as pool:
                pending = pool.submit(rows_of, 0) if plan else None
                for i, episode in enumerate(plan):
                    assert pending is not None
                    rows = pending.result()
                    pending = pool.submit(rows_of, i + 1) if i + 1 < len(plan) else None
                    segment_id = f"episode_{episode:06d}"
                    out = staging / f"{segment_id}.rfr"
                    self._write(out, segment_id, path, episode, int(starts[episode]), rows,
                                images, meta)
                    outputs.append(out)
        return outputs

    def _write(self, out: Path, segment_id: str, path: Path, episode: int, start: int,
               arrays: dict[str, npt.NDArray[Any]],
               images: dict[str, dict[str, int | None] | None],
               meta: dict[str, list[PropertyValue]]) -> None:
        length = len(next(iter(arrays.values())))
        frames = np.arange(length, dtype=np.int64)
        timelines: dict[str, TimelineLike] = {FRAME_INDEX: frames}
        grid = GRID_NONE
        if _TIMESTAMP_ARRAY in arrays:
            timelines[TIMESTAMP] = _source_times(arrays[_TIMESTAMP_ARRAY], path)
            grid = GRID_SOURCE
        elif self.fps is not None:
            timelines[TIMESTAMP] = grid_ns(frames, self.fps).astype("timedelta64[ns]")
            grid = GRID_FROM_RATE
        timelines = once_as_arrow(timelines)
        with RecordingWriter(out, recording_id=segment_id, application_id="zarr") as rec:
            rec.set_properties(episode_index=episode, length=length, source_store=path.name,
                               source_first_row=start)
            rec.set_property(TIME_GRID_PROPERTY, grid)
            if self.fps is not None:
                rec.set_property("fps", self.fps)
            for name, values in meta.items():
                rec.set_property(name, values[episode])
            for name, rows in arrays.items():
                fmt = images[name]
                if fmt is not None and name in self.image_dtype:
                    rows = _converted(rows, self.image_dtype[name], name, path)
                    fmt = {**fmt, "channel_datatype": _CHANNEL_TYPES[rows.dtype.name]}
                entity = "/" + name
                if fmt is None:
                    rec.log_columns(entity, timelines=timelines,
                                    components={SCALARS: _flat_rows(rows)})
                    continue
                rec.log_columns(entity, timelines=timelines,
                                components={IMAGE_BUFFER: _pixel_rows(rows, name, path)})
                rec.log_static(entity, components={
                    IMAGE_FORMAT: pa.array([[fmt]], pa.list_(IMAGE_FORMAT_TYPE))})


def _run_ends(plan: list[int], ends: npt.NDArray[np.int64]) -> list[int]:
    """For each planned episode, the end row of the run of consecutive episodes it starts
    (the rows a reader may read ahead to: the next taken, in order)."""
    out = [0] * len(plan)
    for i in range(len(plan) - 1, -1, -1):
        follows = i + 1 < len(plan) and plan[i + 1] == plan[i] + 1
        out[i] = out[i + 1] if follows else int(ends[plan[i]])
    return out


def _report(caught: list[warnings.WarningMessage], path: Path) -> None:
    """Warnings raised while reading, again: zarr's own (a damaged store's metadata) as
    :class:`ConversionWarning` naming the store."""
    for w in caught:
        if issubclass(w.category, ConversionWarning) or not w.category.__module__.startswith(
                ("zarr", "numcodecs")):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        else:
            warnings.warn(f"{path}: zarr: {w.message}", ConversionWarning, stacklevel=4)


def _image_format(array: Any, name: str) -> dict[str, int | None] | None:
    """Rerun's ``Image:format`` for a ``(T, H, W, C)`` pixel array, else ``None``."""
    if array.ndim != 4 or int(array.shape[-1]) not in _COLOR_MODELS:
        return None
    dtype = np.dtype(array.dtype)
    if dtype.name not in _CHANNEL_TYPES:
        return None
    return {"width": int(array.shape[2]), "height": int(array.shape[1]), "pixel_format": None,
            "color_model": _COLOR_MODELS[int(array.shape[-1])],
            "channel_datatype": _CHANNEL_TYPES[dtype.name]}


def _converted(rows: npt.NDArray[Any], dtype: np.dtype[Any], name: str, path: Path
               ) -> npt.NDArray[Any]:
    converted = rows.astype(dtype)
    same = np.array_equal(converted.astype(rows.dtype), rows) if len(rows) else True
    if not same:
        raise FormatError(f"{path}: data/{name} does not convert exactly to {dtype.name} (it "
                          "holds values outside its range or fractions); drop image_dtype for "
                          f"{name!r} to keep {rows.dtype.name}")
    return converted


def _flat_rows(rows: npt.NDArray[Any]) -> pa.Array:
    n = len(rows)
    width = math.prod(rows.shape[1:])  # not -1: an empty episode's rows have no size to divide
    flat = np.ascontiguousarray(rows).reshape(n, width) if rows.ndim != 1 else rows[:, None]
    width = flat.shape[1]
    offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(flat.reshape(-1)))


def _pixel_rows(rows: npt.NDArray[Any], name: str, path: Path) -> pa.Array:
    """``Image:buffer`` rows: each frame's ``(H, W, C)`` values as little-endian bytes, the
    layout HDF5's raw cameras and ``sensor_msgs/Image`` have (no copy when already so)."""
    little = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("<"))
    count = len(little)
    frame = little[0].nbytes if count else 0
    if count * frame > _MAX_BINARY:
        raise FormatError(f"{path}: data/{name} holds {count * frame} bytes of frames in one "
                          f"episode; rayform stores at most {_MAX_BINARY} bytes of one camera "
                          "per segment")
    offsets = np.arange(0, (count + 1) * frame, frame, dtype=np.int32) if count else \
        np.zeros(1, np.int32)
    buffers = pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets),
                                                         pa.py_buffer(little.reshape(-1))])
    return pa.ListArray.from_arrays(pa.array(np.arange(count + 1, dtype=np.int32)), buffers)


def _source_times(seconds: npt.NDArray[Any], path: Path) -> npt.NDArray[Any]:
    values = np.asarray(seconds, dtype=np.float64).reshape(len(seconds), -1)[:, 0]
    if not np.all(np.isfinite(values)):
        raise FormatError(f"{path}: data/timestamp holds non-finite values")
    ns = np.rint(values * 1e9).astype(np.int64)
    if len(values) and float(np.median(values)) > _EPOCH_S:
        return ns.astype("datetime64[ns]")
    return ns.astype("timedelta64[ns]")


def _episode_metadata(group: Any, num_episodes: int) -> dict[str, list[PropertyValue]]:
    """``meta/<name>`` arrays with one value per episode, as properties (``episode_ends`` aside)."""
    out: dict[str, list[PropertyValue]] = {}
    for name, array in sorted(group["meta"].arrays()):
        if name == "episode_ends" or array.shape[:1] != (num_episodes,) or array.ndim > 2 \
                or (array.ndim == 2 and array.shape[1] != 1):
            continue
        values = np.asarray(array[:]).reshape(num_episodes)
        if values.dtype.kind in "biuf":
            out[name] = values.tolist()
        elif values.dtype.kind in "USO":
            out[name] = [str(v) for v in values]
    attrs = dict(group.attrs)
    for key, value in attrs.items():
        if isinstance(value, str | int | float | bool):
            out[f"attr_{key}"] = [value] * num_episodes
        elif value is not None:
            out[f"attr_{key}"] = [json.dumps(value)] * num_episodes
    return out
