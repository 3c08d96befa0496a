"""PyTorch datasets over a rayform catalog, API-compatible with ``rerun.experimental.dataloader``.

A Rerun training script ports by changing its imports and the catalog it opens::

    from rayform.catalog import Catalog
    from rayform.dataloader import (DataSource, Field, NumericDecoder, ImageDecoder,
                                    RerunIterableDataset, BlockShuffle)

    dataset = Catalog.open("/data/catalog").get_dataset("robots")
    ds = RerunIterableDataset(
        DataSource(dataset), "frame_index",
        {"state": Field("/joints/position:Scalars:scalars", NumericDecoder()),
         "action": Field("/action:Scalars:scalars", NumericDecoder(), window=tuple(range(16))),
         "image": Field("/cam0/rgb:EncodedImage:blob", ImageDecoder())},
        shuffle_strategy=BlockShuffle(buffer_size=2048))

Reproducible epochs: :class:`Manifest` (``generate``, ``shuffle``, ``write_parquet`` /
``from_parquet``) replayed with ``RerunIterableDataset.from_manifest``. Cheaper worker batches:
``DataLoader(collate_fn=PooledBatchCollator())``. Spans: :func:`tracing_scope`, :func:`with_tracing`
(OpenTelemetry when installed).

Beyond Rerun: ``edge="pad"`` (clamped windows with ``<key>_is_pad`` masks), ``sample_metadata=True``
(segment id and version, index value), mid-epoch resume (``state_dict`` / ``load_state_dict``,
:class:`ResumableSampler`), :class:`StableOrder` (the same sequence for any number of workers and
ranks), weighted mixing of several sources (:class:`MixtureDataset`, :class:`WeightedMixSampler`).
Workers may be forked or spawned; the per-sample path never runs a DataFusion query.
"""

from __future__ import annotations

from typing import Any

try:  # the one message for a missing PyTorch, before any module of this package needs it
    import torch  # noqa: F401
except ImportError as _err:
    from rayform._optional import missing_message

    raise ImportError(missing_message("torch", extra="torch", feature="rayform.dataloader")) from _err

from rayform._tracing import tracing_scope, with_tracing
from rayform.dataloader._config import DataSource, EdgeMode, Field
from rayform.dataloader._iterable_dataset import RerunIterableDataset
from rayform.dataloader._manifest import Manifest
from rayform.dataloader._manifest_format import ManifestMeta
from rayform.dataloader._map_dataset import RerunMapDataset
from rayform.dataloader._mixing import MixtureDataset, WeightedMixSampler
from rayform.dataloader._pooled_collator import PooledBatchCollator
from rayform.dataloader._sample_index import FixedRateSampling, SampleIndex, SegmentMetadata
from rayform.dataloader._samplers import EpochSampler, ResumableSampler
from rayform.dataloader._shuffle import (
    BlockShuffle,
    NoShuffle,
    SampleShuffle,
    ShuffleBuffer,
    ShuffleStrategy,
)
from rayform.dataloader._stable_order import StableOrder
from rayform.decoders import (
    ColumnDecoder,
    DecodeRequest,
    FieldBatch,
    ImageDecoder,
    IndexValue,
    NumericDecoder,
    RequestArrays,
)

_VIDEO_NAMES = ("VideoFrameDecoder", "Yuv420Collator", "Yuv420Frame")


def __getattr__(name: str) -> Any:
    # The video names import PyAV; like Rerun's package, load them on first use.
    if name in _VIDEO_NAMES:
        from rayform import decoders

        return getattr(decoders, name)
    raise AttributeError(f"module 'rayform.dataloader' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "BlockShuffle",
    "ColumnDecoder",
    "DataSource",
    "DecodeRequest",
    "EdgeMode",
    "EpochSampler",
    "Field",
    "FieldBatch",
    "FixedRateSampling",
    "ImageDecoder",
    "IndexValue",
    "Manifest",
    "ManifestMeta",
    "MixtureDataset",
    "NoShuffle",
    "NumericDecoder",
    "PooledBatchCollator",
    "RequestArrays",
    "RerunIterableDataset",
    "RerunMapDataset",
    "ResumableSampler",
    "SampleIndex",
    "SampleShuffle",
    "SegmentMetadata",
    "ShuffleBuffer",
    "ShuffleStrategy",
    "StableOrder",
    "VideoFrameDecoder",
    "WeightedMixSampler",
    "Yuv420Collator",
    "Yuv420Frame",
    "tracing_scope",
    "with_tracing",
]
