"""PooledBatchCollator: a ``collate_fn`` whose worker batches reuse shared-memory slots (Rerun 0.41).

In the main process (``num_workers=0``) it collates like ``default_collate``, leaf by leaf. Inside
a DataLoader worker, every numeric leaf (tensors, numpy arrays, numbers, and the planes of
:class:`~rayform.decoders.Yuv420Frame`) is stacked straight into one of the worker's reusable
slots (see ``_batch_slots``), so moving decoded images to the main process costs a small message
instead of a fresh shared-memory segment per tensor; a rayform map batch's images are decoded
straight into a slot the collator lends the decoders (no copy at all), and channels-last batches
travel as the bytes they are in memory. Other leaves (strings, e.g. sample metadata) go through
``default_collate``.

Samples may be nested dicts, lists and tuples (collated to lists, as ``default_collate`` does);
every sample of a batch must have the same
structure, and each numeric leaf one shape and dtype. A ``None`` (missing data) is an error:
the iterable dataset skips such samples; filter them before collating a map dataset's batches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from numbers import Number
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from rayform._tracing import tracing_scope
from rayform.dataloader._batch_slots import (
    PooledLeaf,
    Slot,
    SlotPool,
    WireBatch,
    receiver_counters,
)
from rayform.dataloader._block_columns import inverse_order, memory_order
from rayform.dataloader._sample_batch import SampleBatch
from rayform.decoders._buffer_pool import FRAME_POOL
from rayform.decoders._output_arena import set_arena_buffers
from rayform.decoders._yuv import Yuv420Frame
from rayform.errors import ConfigError

POOLED_MIN_BYTES = 64 << 10
"""Main-process leaves smaller than this are plain ``torch.stack`` (small blocks come from the heap)."""

# A structure node: ("leaf",), ("dict", keys, children), ("list", children) (lists and tuples),
# or ("yuv", color_space, color_range) standing for two leaves (y, uv).
Structure = tuple[Any, ...]
_LEAF: Structure = ("leaf",)


class PooledBatchCollator:
    """Collate samples into reusable shared-memory buffers when running in DataLoader workers.

    Pass it as ``DataLoader(..., collate_fn=PooledBatchCollator())``. A worker keeps up to
    ``slots_per_field`` buffers per batch field; a buffer is reused once the main process has
    dropped every tensor (and view) of the batch that used it, and a field whose buffers are all
    still held falls back to PyTorch's usual path. Hold on to a batch's tensors as long as you
    like: they are never overwritten while referenced. Works with ``fork`` and ``spawn`` workers.

    Args:
        slots_per_field: the most buffers a worker keeps per field (>= 1).
        max_pool_bytes: the most buffer memory a worker keeps (>= 1); fields past it fall back.
    """

    def __init__(self, *, slots_per_field: int = 4, max_pool_bytes: int = 4 * 1024**3) -> None:
        for name, value in (("slots_per_field", slots_per_field),
                            ("max_pool_bytes", max_pool_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"PooledBatchCollator {name} must be an integer >= 1, got "
                                  f"{value!r}")
        self.slots_per_field = slots_per_field
        self.max_pool_bytes = max_pool_bytes
        self._pool: SlotPool | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"slots_per_field": self.slots_per_field, "max_pool_bytes": self.max_pool_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        PooledBatchCollator.__init__(self, **state)

    def __repr__(self) -> str:
        return (f"PooledBatchCollator(slots_per_field={self.slots_per_field}, "
                f"max_pool_bytes={self.max_pool_bytes})")

    def stats(self) -> dict[str, Any]:
        """This process's counts: its worker pool (``allocations``, ``reuses``, ``fallbacks``,
        ``pool_bytes``, ``slots``) and what it received from workers (``received_batches``,
        ``received_slots``: slot buffers mapped, ``received_leaves``: tensors served from them)."""
        pool = self._pool if self._pool is not None and self._pool.pid == os.getpid() else None
        counters = pool.counters if pool is not None else None
        return {
            "allocations": counters.allocations if counters else 0,
            "reuses": counters.reuses if counters else 0,
            "fallbacks": counters.fallbacks if counters else 0,
            "pool_bytes": pool.pool_bytes() if pool is not None else 0,
            "slots": {key: len(group) for key, group in pool.slots.items()} if pool else {},
            "received_batches": receiver_counters.batches,
            "received_slots": receiver_counters.slots,
            "received_leaves": receiver_counters.pooled_leaves,
        }

    def __call__(self, samples: Sequence[Any]) -> Any:
        """Collate ``samples`` (pooled inside a DataLoader worker, plain otherwise).

        Raises:
            ConfigError: samples differ in structure, a value is ``None``, or a numeric field's
                shapes or dtypes differ within the batch.
        """
        if not samples:
            return default_collate(list(samples))
        if isinstance(samples, SampleBatch) and samples.has_collated:
            # A rayform map batch: its fields already lie in one buffer each.
            with tracing_scope("rayform.collate", attributes={"rayform.batch_size": len(samples)}):
                batch = samples.collated()
                if batch is not None:
                    if get_worker_info() is None:
                        return batch
                    return self._pool_collated(batch, decode_into_slots=True)
        with tracing_scope("rayform.collate", attributes={"rayform.batch_size": len(samples)}):
            structure, names, columns = _flatten_batch(samples)
            if get_worker_info() is None:
                return assemble(structure, [_collate_plain(n, c) for n, c in zip(names, columns,
                                                                               strict=True)])
            return self._collate_pooled(structure, names, columns)

    def _worker_pool(self) -> SlotPool:
        if self._pool is None or self._pool.pid != os.getpid():
            self._pool = SlotPool(self.slots_per_field, self.max_pool_bytes)
        return self._pool

    def _pool_collated(self, batch: dict[str, Any], *, decode_into_slots: bool = False
                       ) -> WireBatch:
        """An already collated batch (:meth:`SampleBatch.collated`) into this worker's slots:
        each tensor leaf copied into its slot in one ``copy_``, other leaves sent as they are.

        With ``decode_into_slots`` (a map dataset's batch), the worker's next batches decode
        their images straight into slots lent by this pool
        (:func:`~rayform.decoders._output_arena.set_arena_buffers`): a leaf that is such a slot's
        payload is sent as it is, with no copy."""
        names: list[str] = []
        leaves: list[Any] = []
        structure = _flatten_collated(batch, "", names, leaves)
        pool = self._worker_pool()
        if decode_into_slots and not pool.lending:
            pool.lending = True
            set_arena_buffers(pool.lend)
        out: list[Any] = []
        new_slots: dict[int, torch.Tensor] = {}
        used: list[Slot] = []
        try:
            for name, leaf in zip(names, leaves, strict=True):
                slot = None
                if isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided \
                        and not leaf.requires_grad and leaf.device.type == "cpu":
                    # The leaf as its bytes lie (channels-last images: [N, H, W, C]).
                    order = memory_order(leaf)
                    stored = leaf if order is None else leaf.permute(order)
                    dense = stored.is_contiguous()
                    lent = pool.lent_slot(leaf) if dense else None
                    if lent is not None:  # decoded into the slot: sent as it lies
                        used.append(lent)
                        out.append(_filled(lent, leaf.dtype, tuple(stored.shape), new_slots,
                                           None if order is None
                                           else tuple(inverse_order(order))))
                        continue
                    slot = pool.acquire(name, leaf.numel() * leaf.element_size())
                if slot is None:
                    out.append(leaf.clone() if isinstance(leaf, torch.Tensor) else leaf)
                    continue
                used.append(slot)
                # Copied as the bytes lie (channels-last images: one memcpy, not a transpose).
                if not dense:
                    order, stored = None, leaf
                shape = tuple(stored.shape)
                slot.payload(leaf.dtype, shape).copy_(stored)
                out.append(_filled(slot, leaf.dtype, shape, new_slots,
                                   None if order is None else tuple(inverse_order(order))))
        except BaseException:
            pool.release_all(used)
            raise
        return WireBatch(pool_id=pool.pool_id, pid=pool.pid, new_slots=new_slots,
                         retired=pool.take_retired(), leaves=out, structure=structure,
                         assemble=assemble)

    def _collate_pooled(self, structure: Structure, names: list[str],
                        columns: list[list[Any]]) -> WireBatch:
        pool = self._worker_pool()
        leaves: list[Any] = []
        new_slots: dict[int, torch.Tensor] = {}
        used: list[Slot] = []
        try:
            for name, values in zip(names, columns, strict=True):
                tensors = _as_tensors(name, values)
                if tensors is None:
                    leaves.append(default_collate(values))
                    continue
                first = tensors[0]
                slot = pool.acquire(name, len(tensors) * first.numel() * first.element_size())
                if slot is None:
                    leaves.append(torch.stack(tensors))
                    continue
                used.append(slot)
                order = sample_memory_order(tensors)
                stored = tensors if order is None else [t.permute(order) for t in tensors]
                shape = (len(tensors), *stored[0].shape)
                torch.stack(stored, out=slot.payload(first.dtype, shape))
                leaves.append(_filled(slot, first.dtype, shape, new_slots,
                                      None if order is None else batch_permutation(order)))
        except BaseException:
            pool.release_all(used)
            raise
        return WireBatch(pool_id=pool.pool_id, pid=pool.pid, new_slots=new_slots,
                         retired=pool.take_retired(), leaves=leaves, structure=structure,
                         assemble=assemble)


def _filled(slot: Slot, dtype: torch.dtype, shape: tuple[int, ...],
            new_slots: dict[int, torch.Tensor], permute: tuple[int, ...] | None) -> PooledLeaf:
    """The wire leaf of a slot just filled (``shape`` as its bytes lie, ``permute`` giving the
    batch tensor); its buffer goes into ``new_slots`` the first time the slot is sent (the main
    process maps it once)."""
    if not slot.sent:
        new_slots[slot.slot_id] = slot.buffer
        slot.sent = True
    return PooledLeaf(slot.slot_id, dtype, shape, int(slot.state[0]), permute)


def sample_memory_order(tensors: Sequence[torch.Tensor]) -> tuple[int, ...] | None:
    """The dimensions of the samples' tensors in memory order (falling stride) when every sample
    is dense in that order and it is not their own (``[C, H, W]`` views of ``[H, W, C]`` images:
    ``(1, 2, 0)``), else ``None``: stacked in that order, the batch is one copy of the bytes as
    they lie rather than a transpose (about 15x dearer), and seen as ``[N, …]`` through
    :func:`batch_permutation` (``torch.channels_last`` for images)."""
    first = tensors[0]
    if first.is_contiguous():
        return None
    strides = first.stride()
    order = tuple(sorted(range(first.dim()), key=lambda d: -strides[d]))
    if order == tuple(range(first.dim())):
        return None
    if not all(t.stride() == strides and t.permute(order).is_contiguous() for t in tensors):
        return None
    return order


def batch_permutation(order: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation from ``[N, *permuted sample]`` memory back to ``[N, *sample]`` for samples
    stacked in :func:`sample_memory_order` ``order``."""
    return (0, *(1 + p for p in inverse_order(list(order))))


# ------------------------------------------------------------------------------ structure
def _flatten(value: Any, path: str, names: list[str], leaves: list[Any]) -> Structure:
    if value is None:
        raise ConfigError(
            f"PooledBatchCollator: field {path or '<sample>'!r} is None (missing data); the "
            "iterable dataset skips such samples, filter them out of map-dataset batches"
        )
    if isinstance(value, Mapping):
        keys = tuple(value)
        children = tuple(_flatten(value[k], f"{path}/{k}" if path else str(k), names, leaves)
                         for k in keys)
        return ("dict", keys, children)
    if isinstance(value, Yuv420Frame):
        names += [f"{path}/y", f"{path}/uv"]
        leaves += [value.y, value.uv]
        return ("yuv", value.color_space, value.color_range)
    if isinstance(value, list | tuple) and not isinstance(value, str):
        # Like default_collate, a sequence of fields collates to a list.
        return ("list", tuple(_flatten(v, f"{path}/{i}", names, leaves)
                              for i, v in enumerate(value)))
    names.append(path)
    leaves.append(value)
    return _LEAF


def _flatten_collated(value: Any, path: str, names: list[str], leaves: list[Any]) -> Structure:
    """The structure of a collated batch: nested dicts, each other value one leaf (a tensor,
    or a list of strings as ``default_collate`` makes it)."""
    if isinstance(value, dict):
        keys = tuple(value)
        return ("dict", keys, tuple(_flatten_collated(value[k], f"{path}/{k}" if path else str(k),
                                                      names, leaves) for k in keys))
    names.append(path)
    leaves.append(value)
    return _LEAF


# Leaf values the flat fast path takes as they are (exact types: subclasses take the general path).
_FLAT_LEAF_TYPES = frozenset({torch.Tensor, np.ndarray, int, float, bool, str, bytes})


def _flatten_flat_dicts(samples: Sequence[Any]
                        ) -> tuple[Structure, list[str], list[list[Any]]] | None:
    """The usual batch, dicts with the same keys in the same order whose values are all leaves
    (tensors, arrays, numbers, strings), split into columns without walking each sample;
    ``None`` for anything else (the general path then flattens it, or names what differs)."""
    first = samples[0]
    if type(first) is not dict:
        return None
    keys = tuple(first)
    if not all(type(s) is dict and tuple(s) == keys for s in samples):
        return None
    columns = [[s[k] for s in samples] for k in keys]
    leaf_types = _FLAT_LEAF_TYPES
    if not all(type(v) in leaf_types for column in columns for v in column):
        return None
    return ("dict", keys, (_LEAF,) * len(keys)), [str(k) for k in keys], columns


def _flatten_batch(samples: Sequence[Any]) -> tuple[Structure, list[str], list[list[Any]]]:
    flat = _flatten_flat_dicts(samples)
    if flat is not None:
        return flat
    names: list[str] = []
    first: list[Any] = []
    structure = _flatten(samples[0], "", names, first)
    columns: list[list[Any]] = [[v] for v in first]
    for i, sample in enumerate(samples[1:], start=1):
        leaves: list[Any] = []
        other = _flatten(sample, "", [], leaves)
        if other != structure:
            raise ConfigError(
                f"PooledBatchCollator: sample {i} differs in structure (keys, lengths or YUV "
                "colour metadata) from sample 0; every sample of a batch needs the same layout"
            )
        for column, value in zip(columns, leaves, strict=True):
            column.append(value)
    return structure, names, columns


def assemble(structure: Structure, values: list[Any]) -> Any:
    """Put collated leaves (in flattening order) back into the batch structure."""
    # A plain recursive function over an iterator: a nested closure would form a reference
    # cycle holding the tensors (and so the slots) until the garbage collector runs.
    return _build(structure, iter(values))


def _build(node: Structure, values: Iterator[Any]) -> Any:
    kind = node[0]
    if kind == "leaf":
        return next(values)
    if kind == "dict":
        return {k: _build(child, values) for k, child in zip(node[1], node[2], strict=True)}
    if kind == "yuv":
        y, uv = next(values), next(values)
        return Yuv420Frame(y, uv, node[1], node[2])
    return [_build(child, values) for child in node[1]]


# ------------------------------------------------------------------------------ leaves
def _as_tensors(name: str, values: list[Any]) -> list[torch.Tensor] | None:
    """The leaf's values as tensors of one shape and dtype, or ``None`` for non-numeric leaves.

    Raises:
        ConfigError: numeric values of different shapes or dtypes, or unsupported tensors.
    """
    first = values[0]
    if isinstance(first, torch.Tensor):
        tensors = values
    elif isinstance(first, np.ndarray) and first.dtype.kind in "biufc":
        tensors = [torch.as_tensor(v) for v in values]
    elif isinstance(first, Number | np.generic) and not isinstance(first, str):
        stacked = default_collate(values)
        return list(stacked.unbind(0)) if isinstance(stacked, torch.Tensor) else None
    else:
        return None
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise ConfigError(f"PooledBatchCollator: field {name!r} mixes tensors with other values")
    head = tensors[0]
    if any(t.device.type != "cpu" or t.layout != torch.strided or t.requires_grad
           or t.is_quantized for t in tensors):
        raise ConfigError(f"PooledBatchCollator: field {name!r} needs dense CPU tensors without "
                          "gradients (detach them, or keep them off the GPU in workers)")
    shape, dtype = head.shape, head.dtype
    if not all(t.shape == shape and t.dtype == dtype for t in tensors):
        shapes = {tuple(t.shape) for t in tensors}
        dtypes = {t.dtype for t in tensors}
        raise ConfigError(
            f"PooledBatchCollator: field {name!r} has shapes {sorted(shapes)} and dtypes "
            f"{sorted(map(str, dtypes))} in one batch; each field needs one shape and dtype "
            f"(pad ragged values in the dataset); first is {tuple(head.shape)}"
        )
    return list(tensors)


def _collate_plain(name: str, values: list[Any]) -> Any:
    """In the main process: batch-sized leaves are stacked into a buffer of the process's
    :data:`~rayform.decoders._buffer_pool.FRAME_POOL`, reused once the batch is dropped (a fresh
    multi-MB tensor per step would be mapped and faulted in anew); samples are stacked in their
    memory order (:func:`sample_memory_order`)."""
    tensors = _as_tensors(name, values)
    if tensors is None:
        return default_collate(values)
    first = tensors[0]
    order = sample_memory_order(tensors)
    stored = tensors if order is None else [t.permute(order) for t in tensors]
    nbytes = len(tensors) * first.numel() * first.element_size()
    if nbytes < POOLED_MIN_BYTES or first.dtype.is_complex:
        batch = torch.stack(stored)
    else:
        out = torch.from_numpy(FRAME_POOL.take(nbytes)).view(first.dtype)
        batch = torch.stack(stored, out=out.view(len(tensors), *stored[0].shape))
    return batch if order is None else batch.permute(batch_permutation(order))
