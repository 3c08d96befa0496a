"""``rayform.torch.EpisodeDataset``: the Rayform guide's PyTorch dataset, read straight from a slice.

A map-style dataset over :class:`rayform.dataloader.RerunMapDataset`, so ``DataLoader(shuffle=True)``,
``DistributedSampler`` and forked or spawned workers all work. Observations are named by entity
path (``"cam0/rgb"`` is the entity ``/cam0/rgb``); each resolves to its column and decoder:

==================================== ============================= ========================
entity holds                         decoder                       sample value
==================================== ============================= ========================
``EncodedImage:blob``                ``ImageDecoder``              ``uint8 (3, H, W)``
``Image:buffer`` + ``Image:format``  ``RawImageDecoder``           stored dtype ``(3, H, W)``
``VideoStream:sample`` / video asset ``VideoFrameDecoder``         ``uint8 (3, H, W)``
``Scalars:scalars``                  ``NumericDecoder``            ``float32 (J,)``
``Transform3D:translation`` (+quat)  ``NumericDecoder``, converted ``float32 (3,)`` / ``(7,)``
``TextDocument:text``                ``TextDecoder``               ``str``
==================================== ============================= ========================

A numeric column may also be named in full, ``"<entity>:<Archetype>:<component>"`` (a PX4 ULog
field: ``"sensor_combined:ULog:gyro_rad"``); it is read with ``NumericDecoder``.

Cameras are always ``(3, H, W)``: grey images are repeated over the three channels and an alpha
channel is dropped. ``action`` is read at ``horizon`` instants from the sample time on
(``t, t + 1/fps, …``) and is ``float32 (horizon, J)``; with ``edge="pad"`` it comes with
``action_is_pad``. ``task`` is the task text: the recording's per-frame ``/task`` text stream when
it has one (LeRobot imports), else its ``task`` property, else ``""``. ``t_ns`` is the sample time
(``int64``, ns) and ``meta`` holds ``slice``, ``segment``, ``segment_version`` and ``site`` (the
segment property ``site``; ``""`` when a segment has none, so that the default collate works).

Order: index ``i`` of epoch ``e`` is sample ``order[i]`` of a permutation that depends only on the
slice, ``seed`` and ``e`` (``set_epoch``; shared with running workers, persistent ones included).
``seed=None`` keeps the natural order (segment by segment, in time).

Ranks: when ``torch.distributed`` is initialised, rank ``r`` of ``W`` owns the contiguous part
``order[r * m:(r + 1) * m]`` of each epoch (``m = num_samples // W``): ``len(dataset)`` is ``m``
and index ``i`` reads ``order[r * m + i]``, so a plain ``DataLoader(dataset, shuffle=True)`` and
iterating the dataset directly read disjoint, equal parts on every rank. A ``DistributedSampler``
shards the indices itself: it sees the whole epoch (``len == num_samples``) and the dataset then
does not shard again.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

try:  # the one message for a missing PyTorch
    import torch
except ImportError as _err:
    from rayform._optional import missing_message

    raise ImportError(missing_message("torch", extra="torch",
                                      feature="rayform.torch")) from _err
from torch.utils.data import Dataset, default_collate

from rayform._frames import canonical_frame, convert_pose
from rayform.catalog import Catalog, DatasetView, Slice
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    ImageDecoder,
    NumericDecoder,
    RerunMapDataset,
    SampleIndex,
)
from rayform.dataloader._config import EdgeMode, check_edge
from rayform.dataloader._empty_space import longest_segment, span_text
from rayform.dataloader._pipeline import IS_PAD_SUFFIX, META_KEY
from rayform.dataloader._sample_batch import DeferredSamples, SampleBatch
from rayform.dataloader._samplers import EpochSampler
from rayform.decoders import RawImageDecoder, TextDecoder
from rayform.errors import ColumnNotFoundError, ConfigError, OfflineError
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    FRAME_CONVENTION_PROPERTY,
    IMAGE_BUFFER,
    IMAGE_FORMAT,
    LOG_TIME_TIMELINE,
    SAMPLE_TIMELINE_PROPERTY,
    SCALARS,
    SITE_PROPERTY,
    TASK_PROPERTY,
    TEXT_DOCUMENT,
    TRANSFORM_QUATERNION,
    TRANSFORM_TRANSLATION,
    VIDEO_CODEC,
    VIDEO_FRAME_TIMESTAMP,
    VIDEO_SAMPLE,
    column_name,
)
from rayform.recording._declared import declared_property
from rayform.recording._file import PropertyValue

ACTION_KEY = "action"
ACTION_PAD_KEY = ACTION_KEY + IS_PAD_SUFFIX
TIME_KEY = "t_ns"
TASK_KEY = "task"
RESERVED_KEYS = (ACTION_KEY, ACTION_PAD_KEY, TIME_KEY, TASK_KEY, META_KEY)
_ITER_BATCH = 32
_FIRST_USE_BLOCK = 4096  # samples numbered at a time while ordering the read-ahead


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadOptions:
    """Less common settings of :class:`EpisodeDataset`.

    Attributes:
        timeline: the temporal timeline samples are drawn on. Default: the one the recordings
            declare in their ``sample_timeline`` property, else the dataset's only timestamp
            timeline (rerun-sdk's automatic ``log_time`` set aside when there is one other),
            else its only duration timeline.
        decode_threads: decode threads per process (``None``: the dataloader's default).
        tolerance_s: a grid instant reads a row stored up to this long after it, as LeRobot
            does (``1e-4`` s, its ``tolerance_s``): stored timestamps equal to grid instants up
            to float rounding then give the frame meant, not the one before it
            (:attr:`FixedRateSampling.tolerance_s`; ``0``: Rerun's exact latest-at).
    """

    timeline: str | None = None
    decode_threads: int | None = None
    tolerance_s: float = 1e-4


@dataclass(frozen=True, slots=True)
class _Entity:
    """How one observation (or the action) is read: its kind and the internal field keys."""

    name: str
    kind: str  # "image" | "numeric" | "pose" | "text"
    keys: tuple[str, ...]


class EpisodeDataset(Dataset[dict[str, Any]]):
    """Samples of a slice on a fixed-rate grid, shaped as in the Rayform guide.

    Args:
        slice_: the :class:`~rayform.catalog.Slice` to read (``client.slices.get("slc_…")``).
        obs: observation entity paths, e.g. ``["cam0/rgb", "wrist/rgb", "joints/position"]``.
        action: the entity whose future values form ``action`` (``None``: no action key).
        fps: sampling rate of the grid, in Hz.
        horizon: action chunk length (instants ``t + k / fps``, ``k < horizon``).
        frame: the coordinate convention pose-valued fields are returned in (``"ros"``,
            ``"opencv"``), converted from the ``frame_convention`` each recording declares.
        seed: seed of the epoch order (``None``: natural order).
        edge: ``"trim"`` (default): each segment's samples stop ``horizon - 1`` steps before its
            end, so that every action chunk lies inside it. ``"pad"``: every grid instant is a
            sample; action steps past the segment's end repeat its last value and are flagged in
            ``action_is_pad`` (``bool (horizon,)``), as LeRobot does.
        options: :class:`ReadOptions`.

    Raises:
        ConfigError: an unknown frame or observation kind, a non-temporal dataset, a reserved
            observation name, or a pose in a recording that declares no convention.
        ColumnNotFoundError: an observation or action entity the slice does not have.
    """

    def __init__(self, slice_: Slice, *, obs: Sequence[str], action: str | None = None,
                 fps: float, horizon: int = 1, frame: str = "ros", seed: int | None = 0,
                 edge: EdgeMode = "trim", options: ReadOptions | None = None) -> None:
        if not isinstance(slice_, Slice):
            raise TypeError(f"EpisodeDataset needs a rayform Slice (client.slices.get(id)), "
                            f"got {type(slice_).__name__}")
        if isinstance(obs, str):
            raise ConfigError(f"obs must be a list of entity paths, got the string {obs!r}; "
                              f"write obs=[{obs!r}]")
        if not isinstance(horizon, int) or horizon < 1:
            raise ConfigError(f"horizon must be an integer >= 1, got {horizon!r}")
        if not fps or fps <= 0:
            raise ConfigError(f"fps must be > 0, got {fps!r}")
        opts = options or ReadOptions()
        self.slice = slice_
        self.frame = canonical_frame(frame, what="frame")
        self.fps = float(fps)
        self.horizon = horizon
        self.seed = seed
        self.edge = check_edge(edge)
        # A remote slice's metadata files (at once) and recordings start downloading now, before
        # the catalog's own files are read (bounded read-ahead into the verified cache; a local
        # catalog ignores the hints). Safe before ``catalog.json`` is checked: objects are named
        # by the sha256 the slice's verified content lists, each checked on arrival, and the
        # metadata responses are parsed and checked by the reads below as usual.
        store = slice_.open_store()
        store.prefetch(o for s in slice_.segments for o in s.objects)
        catalog = Catalog(store)
        view = slice_.view(catalog)
        records = {r.segment_id: r for r in view.segment_records()}
        timeline = _temporal_timeline(view, opts.timeline, {
            sid: declared_property(r.properties, SAMPLE_TIMELINE_PROPERTY, segment=sid)
            for sid, r in records.items()})
        self.timeline = timeline
        fields: dict[str, Field] = {}
        self._obs = [self._resolve(view, name, timeline, fields, window=None) for name in obs]
        window = tuple(k / self.fps for k in range(horizon))
        self._action = (None if action is None
                        else self._resolve(view, action, timeline, fields, window=window))
        self._task_stream = column_name("/" + TASK_KEY, TEXT_DOCUMENT) in set(
            view.schema().component_columns())
        if self._task_stream:  # a per-frame task (LeRobot's task_index, as text)
            fields[TASK_KEY] = Field(column_name("/" + TASK_KEY, TEXT_DOCUMENT), TextDecoder())
        self._tasks = {sid: _text(declared_property(r.properties, TASK_PROPERTY, segment=sid))
                       for sid, r in records.items()}
        tr = slice_.time_range
        if tr is not None and tr.timeline != timeline:
            raise ConfigError(
                f"slice {slice_.id} limits time on {tr.timeline!r} but samples are drawn on "
                f"{timeline!r}; pass options=ReadOptions(timeline={tr.timeline!r}) or make "
                f"the slice with a TimeRange on {timeline!r}"
            )
        if self._action is not None and self.edge == "trim":
            _check_horizon(view, timeline, horizon=horizon, fps=self.fps)
        self._map = RerunMapDataset(DataSource(view, time_range=tr, excluded=slice_.excluded),
                                    timeline, fields,
                                    timeline_sampling=FixedRateSampling(
                                        rate_hz=self.fps, tolerance_s=opts.tolerance_s),
                                    decode_threads=opts.decode_threads, edge=self.edge,
                                    sample_metadata=True)
        self._sites = {sid: "" if r.properties.get(SITE_PROPERTY) is None
                       else str(r.properties[SITE_PROPERTY]) for sid, r in records.items()}
        has_pose = any(e.kind == "pose" for e in [*self._obs, *([self._action] if self._action
                                                                 else [])])
        self._conventions = ({sid: _declared_convention(sid, declared_property(
            r.properties, FRAME_CONVENTION_PROPERTY, segment=sid)) for sid, r in records.items()}
            if has_pose else {})
        # Shared memory: set_epoch reaches DataLoader workers that are already running.
        self._epoch = torch.zeros(1, dtype=torch.int64)
        self._epoch.share_memory_()  # type: ignore[no-untyped-call]
        # [rank, world_size, a DistributedSampler shards]: read in workers, where
        # torch.distributed is not initialised (spawn), and updated by the main process.
        self._ddp = torch.tensor([0, 1, 0], dtype=torch.int64)
        self._ddp.share_memory_()  # type: ignore[no-untyped-call]
        self._refresh_ranks()
        self._order_cache: tuple[int, npt.NDArray[np.int64]] | None = None
        # Now that the sample index is built, this epoch's order is known: the objects its
        # first samples read go to the front of the read-ahead started above (in slice order),
        # in the order they are first needed. A DataLoader that shuffles again reads another
        # order of the same objects: a hint only, consumed a block of samples at a time.
        objects = {s.segment_id: s.objects for s in slice_.segments}
        store.prefetch(self._objects_by_first_use(objects), first=True)

    # ------------------------------------------------------------------------ resolving
    def _resolve(self, view: DatasetView, name: str, timeline: str, fields: dict[str, Field],
                 *, window: tuple[float, ...] | None) -> _Entity:
        if not isinstance(name, str) or not name.strip("/"):
            raise ConfigError(f"observation names are entity paths like 'cam0/rgb', got {name!r}")
        key = name
        if window is not None:
            key = ACTION_KEY
        elif name in RESERVED_KEYS or key in fields:
            raise ConfigError(f"observation {name!r} is reserved or repeated; sample keys "
                              f"{list(RESERVED_KEYS)} are set by EpisodeDataset")
        entity = "/" + name.strip("/")
        columns = set(view.schema().component_columns())

        def has(component: str) -> bool:
            return column_name(entity, component) in columns

        if ":" in entity:  # a numeric column named in full, e.g. "sensor_combined:ULog:gyro_rad"
            if entity not in columns:
                raise ColumnNotFoundError(f"{name!r}: slice {self.slice.id} has no column "
                                          f"{entity}")
            fields[key] = Field(entity, NumericDecoder(), window=window)
            return _Entity(name=key, kind="numeric", keys=(key,))

        if has(ENCODED_IMAGE_BLOB):
            fields[key] = Field(column_name(entity, ENCODED_IMAGE_BLOB), ImageDecoder(),
                                window=window)
            return _Entity(name=key, kind="image", keys=(key,))
        if has(IMAGE_BUFFER) and has(IMAGE_FORMAT):  # raw pixels (HDF5, sensor_msgs/Image)
            fields[key] = Field(column_name(entity, IMAGE_BUFFER), RawImageDecoder(),
                                window=window)
            return _Entity(name=key, kind="image", keys=(key,))
        if has(VIDEO_SAMPLE) or has(VIDEO_FRAME_TIMESTAMP):
            from rayform.decoders import VideoFrameDecoder

            if has(VIDEO_SAMPLE):
                path = column_name(entity, VIDEO_SAMPLE)
                decoder = VideoFrameDecoder(codec=_stream_codec(view, entity, timeline))
            else:
                path = column_name(entity, VIDEO_FRAME_TIMESTAMP)
                decoder = VideoFrameDecoder()
            fields[key] = Field(path, decoder, window=window)
            return _Entity(name=key, kind="image", keys=(key,))
        if has(TRANSFORM_TRANSLATION):
            keys = [f"{key}#translation"]
            fields[keys[0]] = Field(column_name(entity, TRANSFORM_TRANSLATION), NumericDecoder(),
                                    window=window)
            if has(TRANSFORM_QUATERNION):
                keys.append(f"{key}#quaternion")
                fields[keys[1]] = Field(column_name(entity, TRANSFORM_QUATERNION),
                                        NumericDecoder(), window=window)
            return _Entity(name=key, kind="pose", keys=tuple(keys))
        if has(SCALARS):
            fields[key] = Field(column_name(entity, SCALARS), NumericDecoder(), window=window)
            return _Entity(name=key, kind="numeric", keys=(key,))
        if has(TEXT_DOCUMENT):
            fields[key] = Field(column_name(entity, TEXT_DOCUMENT), TextDecoder(), window=window)
            return _Entity(name=key, kind="text", keys=(key,))
        found = sorted(c for c in columns if c.startswith(entity + ":"))
        if found:
            raise ConfigError(
                f"{name!r}: entity {entity} holds {found}, none of which EpisodeDataset can "
                "decode (EncodedImage, Image, VideoStream, video asset, Scalars, Transform3D, "
                "TextDocument)"
            )
        entities = sorted({c.partition(":")[0].lstrip("/") for c in columns})
        raise ColumnNotFoundError(
            f"{name!r}: slice {self.slice.id} has no entity {entity}; entities: {entities}"
        )

    # ------------------------------------------------------------------------- ordering
    def set_epoch(self, epoch: int) -> None:
        """Select the order of epoch ``epoch`` (seen by running DataLoader workers too)."""
        self._epoch.fill_(int(epoch))

    @property
    def epoch(self) -> int:
        return int(self._epoch.item())

    def epoch_order(self) -> npt.NDArray[np.int64]:
        """The permutation of this epoch: index ``i`` reads the ``order[i]``-th sample."""
        epoch = self.epoch
        if self._order_cache is None or self._order_cache[0] != epoch:
            n = self.num_samples
            order = (np.arange(n, dtype=np.int64) if self.seed is None else
                     np.random.default_rng([self.seed, epoch]).permutation(n).astype(np.int64))
            self._order_cache = (epoch, order)
        return self._order_cache[1]

    def _objects_by_first_use(self, objects: dict[str, tuple[str, ...]]) -> Iterator[str]:
        """The objects of ``objects`` (segment id -> its objects) in the order this process's
        epoch first reads their segments (lazily: numbering as few samples as it yields)."""
        offset, n = self._shard_span()
        return _first_use(self._map.sample_index, self.epoch_order()[offset:offset + n], objects)

    # ------------------------------------------------------------------------- sharding
    def _refresh_ranks(self) -> None:
        """Record this process's rank and world size (in the main process, not in workers)."""
        from torch.utils.data import get_worker_info

        if get_worker_info() is None:
            rank, world = _rank_and_world()
            self._ddp[0], self._ddp[1] = rank, world

    def _rank_shard(self) -> tuple[int, int] | None:
        """``(rank, world)`` when indices address this rank's shard, else ``None``."""
        rank, world, sampler_shards = (int(v) for v in self._ddp.tolist())
        return None if world <= 1 or sampler_shards else (rank, world)

    def _shard_span(self) -> tuple[int, int]:
        """``(first epoch position, number of samples)`` that this process's indices address."""
        shard = self._rank_shard()
        if shard is None:
            return 0, self.num_samples
        per = self.num_samples // shard[1]
        return shard[0] * per, per

    @property
    def num_samples(self) -> int:
        """Samples in one epoch, all ranks together."""
        return len(self._map)

    # --------------------------------------------------------------------------- access
    def __len__(self) -> int:
        """This rank's samples: ``num_samples // world_size`` under ``torch.distributed``
        (``num_samples`` for a ``DistributedSampler``, which shards itself)."""
        self._refresh_ranks()
        if _asked_by_distributed_sampler():
            self._ddp[2] = 1
        return self._shard_span()[1]

    def __getitem__(self, idx: int) -> dict[str, Any]:
        return self.__getitems__([idx])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Read a batch of samples (DataLoader hands over whole batches).

        Raises:
            IndexError: an index outside ``[0, len)``.
            OfflineError: ``RAYFORM_OFFLINE=1`` and the slice was not pulled.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        offset, n = self._shard_span()
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            bad = int(idx[(idx < 0) | (idx >= n)][0])
            raise IndexError(f"sample index {bad} out of range for {n} samples")
        return self._read(idx + offset)

    def _read(self, epoch_positions: npt.NDArray[np.int64]) -> list[dict[str, Any]]:
        underlying = self.epoch_order()[epoch_positions]
        try:
            raw = self._map.__getitems__(underlying.tolist())
        except OfflineError as err:
            raise OfflineError(str(err).replace("rayform pull slc_…",
                                                f"rayform pull {self.slice.id}")) from err
        if isinstance(raw, SampleBatch) and raw.has_collated:
            whole = self._finish_whole(raw)
            if whole is not None:
                return whole
        samples = [self._finish(sample) for sample in raw]
        if not isinstance(raw, SampleBatch) or not raw.has_collated:
            return samples
        return SampleBatch(samples, partial(self._finish_batch, raw, samples))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """This process's shard of the epoch (disjoint across ``torch.distributed`` ranks)."""
        rank, world = _rank_and_world()
        per = self.num_samples // world
        mine = np.arange(rank * per, (rank + 1) * per, dtype=np.int64)
        for start in range(0, len(mine), _ITER_BATCH):
            yield from self._read(mine[start:start + _ITER_BATCH])

    def __repr__(self) -> str:
        keys = [e.name for e in self._obs]
        return (f"EpisodeDataset({self.slice.id}, obs={keys}, fps={self.fps:g}, "
                f"horizon={self.horizon}, frame={self.frame!r}, samples={len(self)})")

    # ---------------------------------------------------------------------------- shaping
    def _finish(self, raw: dict[str, Any]) -> dict[str, Any]:
        meta = raw[META_KEY]
        segment = meta["segment_id"]
        out: dict[str, Any] = {}
        for entity in self._obs:
            out[entity.name] = self._value(entity, raw, segment)
        if self._action is not None:
            out[ACTION_KEY] = self._value(self._action, raw, segment)
            if self.edge == "pad":
                out[ACTION_PAD_KEY] = raw[self._action.keys[0] + IS_PAD_SUFFIX]
        out[TASK_KEY] = self._task_of(raw, segment)
        out[TIME_KEY] = torch.tensor(int(meta["index_value"]), dtype=torch.int64)
        out[META_KEY] = self._meta_of(meta, segment)
        return out

    def _task_of(self, raw: dict[str, Any], segment: str) -> str:
        """A sample's task text: its task stream's value, else its segment's task."""
        task = raw.get(TASK_KEY) if self._task_stream else None
        return task if isinstance(task, str) else self._tasks.get(segment, "")

    def _meta_of(self, meta: dict[str, Any], segment: str) -> dict[str, Any]:
        """A sample's ``meta``: where it comes from, from the map sample's metadata."""
        return {"slice": self.slice.id, "segment": segment,
                "segment_version": meta["segment_version"], "site": self._sites.get(segment, "")}

    def _finish_batch(self, raw: SampleBatch, samples: list[dict[str, Any]],
                      keys: Collection[str] | None = None) -> dict[str, Any] | None:
        """``default_collate(samples)`` built from the map batch's collated tensors (no stack of
        the images); ``None`` where the samples need per-sample work (poses, missing data)."""
        batch = raw.collated()
        if batch is None or not samples:
            return None
        out: dict[str, Any] = {}
        for entity in [*self._obs, *([self._action] if self._action is not None else [])]:
            if entity.kind == "pose" or any(batch.get(k) is None for k in entity.keys):
                return None
            value = batch[entity.keys[0]]
            if entity.kind == "image":
                value = _three_channels(value)
            elif entity.kind == "numeric":
                value = value.to(torch.float32)
            out[entity.name] = value
        if self._action is not None and self.edge == "pad":
            out[ACTION_PAD_KEY] = batch[self._action.keys[0] + IS_PAD_SUFFIX]
        small = default_collate([{k: s[k] for k in (TASK_KEY, TIME_KEY, META_KEY)}
                                 for s in samples])
        out.update(small)
        return out if keys is None else {k: v for k, v in out.items() if k in keys}

    def _finish_whole(self, raw: SampleBatch) -> SampleBatch | None:
        """The samples and their batch shaped from the map batch's collated tensors at once:
        one conversion per field, each sample's tensors views of the batch's (what
        :meth:`_finish` makes sample by sample, and :meth:`_finish_batch` from them). ``None``
        where the batch needs per-sample work (poses, text, missing data)."""
        entities = [*self._obs, *([self._action] if self._action is not None else [])]
        if not len(raw) or any(e.kind not in ("image", "numeric") for e in entities):
            return None
        pad = self._action is not None and self.edge == "pad"
        wanted = {e.keys[0] for e in entities}
        if pad and self._action is not None:
            wanted.add(self._action.keys[0] + IS_PAD_SUFFIX)
        batch = raw.collated(wanted)  # the metadata and task columns are read per sample
        if batch is None or any(batch.get(e.keys[0]) is None for e in entities):
            return None
        out: dict[str, Any] = {}
        for entity in entities:
            value = batch[entity.keys[0]]
            out[entity.name] = _three_channels(value) if entity.kind == "image" \
                else value.to(torch.float32)
        if pad and self._action is not None:
            out[ACTION_PAD_KEY] = batch[self._action.keys[0] + IS_PAD_SUFFIX]
        metas = raw.values(META_KEY)  # the map batch's dicts are never made
        segments = [meta["segment_id"] for meta in metas]
        if self._task_stream:
            task_values = raw.values(TASK_KEY)
            segment_tasks = self._tasks
            tasks = [task if isinstance(task, str) else segment_tasks.get(segment, "")
                     for task, segment in zip(task_values, segments, strict=True)]
        else:  # the segments' tasks (what _task_of gives without a task stream)
            segment_tasks = self._tasks
            tasks = [segment_tasks.get(segment, "") for segment in segments]
        times = torch.tensor([int(meta["index_value"]) for meta in metas], dtype=torch.int64)
        sample_metas = [self._meta_of(meta, segment)
                        for meta, segment in zip(metas, segments, strict=True)]
        tensors = dict(out)
        out[TASK_KEY] = tasks
        out[TIME_KEY] = times
        out[META_KEY] = _collate_metas(sample_metas)
        return SampleBatch(DeferredSamples(size=len(metas), make=partial(
            _whole_samples, tensors, tasks, times, sample_metas)), partial(_same, out))

    def _value(self, entity: _Entity, raw: dict[str, Any], segment: str) -> Any:
        values = [raw.get(k) for k in entity.keys]
        parts = [p for p in values if p is not None]
        if len(parts) != len(values):
            return None
        if entity.kind == "image":
            return _three_channels(parts[0])
        if entity.kind == "numeric":
            return parts[0].to(torch.float32)
        if entity.kind == "text":
            return parts[0]
        pose = np.concatenate([p.numpy().astype(np.float64) for p in parts], axis=-1)
        converted = convert_pose(pose, self._conventions[segment], self.frame)
        return torch.from_numpy(converted.astype(np.float32))


def _check_horizon(view: DatasetView, timeline: str, *, horizon: int, fps: float) -> None:
    """Refuse an action chunk longer than every segment (it would leave no sample at all).

    Raises:
        ConfigError: ``(horizon - 1) / fps`` exceeds the longest segment on ``timeline``.
    """
    longest = longest_segment(view, timeline)
    chunk_ns = round((horizon - 1) / fps * 1e9)
    if longest is not None and chunk_ns > longest.span:
        frames = int(longest.span * fps / 1e9) + 1
        raise ConfigError(
            f"EpisodeDataset has no samples: horizon={horizon} at fps={fps:g} spans "
            f"{span_text(chunk_ns, temporal=True)} of actions, longer than the longest of the "
            f"{len(view.segment_ids())} segments, {longest.segment_id!r} "
            f"({span_text(longest.span, temporal=True)}, {frames} frames at {fps:g} fps); use "
            f"horizon <= {frames}, or edge='pad' to pad the chunks past each segment's end"
        )


def _first_use(index: SampleIndex, order: npt.NDArray[np.int64],
               objects: dict[str, tuple[str, ...]]) -> Iterator[str]:
    """Objects in the order the samples ``order`` first read their segments (see above)."""
    chunks = (order[start:start + _FIRST_USE_BLOCK]
              for start in range(0, len(order), _FIRST_USE_BLOCK))
    for segment_id in index.segments_in_first_use(chunks):
        yield from objects.get(segment_id, ())


def _collate_metas(metas: list[dict[str, Any]]) -> dict[str, Any]:
    """``default_collate(metas)`` of the samples' ``meta`` dicts: one list per key when every
    value is a string (what it makes of strings), built without its per-key type dispatch."""
    first = metas[0]
    if all(type(value) is str for meta in metas for value in meta.values()) \
            and all(meta.keys() == first.keys() for meta in metas):
        return {key: [meta[key] for meta in metas] for key in first}
    collated: dict[str, Any] = default_collate(metas)
    return collated


def _whole_samples(tensors: dict[str, torch.Tensor], tasks: list[str], times: torch.Tensor,
                   metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sample dicts of :meth:`EpisodeDataset._finish_whole`'s batch: each sample's tensors
    rows of the batch's (one unbind per key, made in C), its task, time and ``meta``."""
    keys = [*tensors, TASK_KEY, TIME_KEY, META_KEY]
    rows = zip(*(value.unbind(0) for value in tensors.values()), tasks, times.unbind(0), metas,
               strict=True)
    return [dict(zip(keys, row, strict=True)) for row in rows]


def _same(batch: dict[str, Any], keys: Collection[str] | None = None) -> dict[str, Any]:
    return dict(batch) if keys is None else {k: v for k, v in batch.items() if k in keys}


def _three_channels(image: torch.Tensor) -> torch.Tensor:
    """``uint8 (C, H, W)`` -> ``(3, H, W)``: grey (and grey + alpha) repeated, alpha dropped."""
    channels = image.shape[-3]
    if channels == 3:
        return image
    if channels in (1, 2):
        return image[..., :1, :, :].expand(*image.shape[:-3], 3, *image.shape[-2:]).contiguous()
    return image[..., :3, :, :].contiguous()


def _text(value: PropertyValue) -> str:
    return "" if value is None else str(value)


def _asked_by_distributed_sampler() -> bool:
    """Whether ``len(dataset)`` was called by a sampler that shards by rank itself.

    A ``DistributedSampler`` (or rayform's ``ResumableSampler``) shards the indices by rank and
    needs the length of the whole epoch; any other sampler (the ``RandomSampler`` of
    ``DataLoader(shuffle=True)``) needs this rank's share. torch offers no other way to tell
    them apart: such a sampler calls ``len(self.dataset)`` from its own methods, so the caller's
    frame holds it as ``self``.
    """
    from torch.utils.data.distributed import DistributedSampler

    caller = sys._getframe(2)  # 0: here, 1: __len__, 2: whoever called len()
    return isinstance(caller.f_locals.get("self"), DistributedSampler | EpochSampler)


def _rank_and_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _temporal_timeline(view: DatasetView, wanted: str | None,
                       declared: dict[str, PropertyValue]) -> str:
    """The timeline samples are drawn on: ``wanted``, else the one the recordings declare
    (property ``sample_timeline``), else the dataset's only timestamp (then duration) timeline,
    not counting rerun-sdk's ``log_time`` when there is one other."""
    timelines = view.timelines
    if wanted is not None:
        if timelines.get(wanted) not in ("timestamp", "duration"):
            raise ConfigError(
                f"ReadOptions.timeline {wanted!r} is not a timestamp or duration timeline of "
                f"dataset {view.name!r}; its timelines: {timelines}"
            )
        return wanted
    named = {str(v) for v in declared.values() if v is not None}
    if len(named) > 1:
        raise ConfigError(
            f"the segments of dataset {view.name!r} declare different sample timelines "
            f"({SAMPLE_TIMELINE_PROPERTY!r}: { {k: v for k, v in declared.items() if v} }); "
            "pick one with options=ReadOptions(timeline=…)"
        )
    if named:
        (name,) = named
        if timelines.get(name) not in ("timestamp", "duration"):
            raise ConfigError(
                f"dataset {view.name!r}: its recordings declare {SAMPLE_TIMELINE_PROPERTY}="
                f"{name!r}, which is not one of its timestamp or duration timelines {timelines}"
            )
        return name
    for kind in ("timestamp", "duration"):
        found = sorted(t for t, k in timelines.items() if k == kind)
        own = [t for t in found if t != LOG_TIME_TIMELINE]
        if len(found) == 1 or (len(own) == 1 and len(found) == 2):
            return own[0] if own else found[0]
        if len(found) > 1:
            hint = (f" ({LOG_TIME_TIMELINE!r} is when rerun-sdk logged each row, not the data's "
                    "own time)" if LOG_TIME_TIMELINE in found else "")
            raise ConfigError(
                f"dataset {view.name!r} has several {kind} timelines {found}{hint}; pick the one "
                f"samples are drawn on with options=ReadOptions(timeline={own[0]!r}), or declare "
                f"it in each recording as the property {SAMPLE_TIMELINE_PROPERTY!r} "
                f"(RecordingWriter.set_property({SAMPLE_TIMELINE_PROPERTY!r}, {own[0]!r}); "
                f"rerun-sdk: rec.send_property({SAMPLE_TIMELINE_PROPERTY!r}, "
                f"rr.AnyValues(text={own[0]!r})))"
            )
    raise ConfigError(
        f"EpisodeDataset samples at fps on a time axis, but dataset {view.name!r} has only "
        f"sequence timelines {sorted(timelines)}; use rayform.dataloader.RerunMapDataset"
    )


def _stream_codec(view: DatasetView, entity: str, timeline: str) -> str:
    column = column_name(entity, VIDEO_CODEC)
    for sid in view.segment_ids():
        seg = view.open_segment(sid)
        if seg.has_column(column):
            value = seg.column(column, timeline).values.to_pylist()[0]
            return str(value[0] if isinstance(value, list) else value)
    return "h264"


def _declared_convention(segment: str, value: object) -> str:
    if value is None:
        raise ConfigError(
            f"segment {segment!r} holds poses but declares no coordinate convention; set its "
            f"property {FRAME_CONVENTION_PROPERTY!r} to 'ros' or 'opencv' when recording it "
            f"(RecordingWriter.set_property({FRAME_CONVENTION_PROPERTY!r}, 'ros'); rerun-sdk: "
            f"rec.send_property({FRAME_CONVENTION_PROPERTY!r}, rr.AnyValues(text='ros')))"
        )
    return canonical_frame(value, what=f"segment {segment!r} property {FRAME_CONVENTION_PROPERTY!r}")


__all__ = ["EpisodeDataset", "ReadOptions"]
