"""Reusable shared-memory batch slots between DataLoader workers and the main process.

PyTorch moves each batch a worker collates through a fresh shared-memory segment: the worker
allocates and faults in new pages, passes a file descriptor per tensor over a socket, and the main
process maps and faults the pages in again, then unmaps them — for 32 decoded images about as
much work as decoding them. Here a worker keeps a few *slots* per batch field instead:

- a slot is a shared uint8 tensor: a 64-byte header (an int64 state word: 0 free, otherwise the
  token of the batch using it) and the payload;
- the first batch that uses a slot sends the slot itself (PyTorch shares it, by file descriptor or
  by name); the main process keeps the mapping, keyed by the worker's pool id and the slot id;
  later batches send only ``(slot id, dtype, shape, token)``;
- the main process hands out tensors viewing the payload through a fresh numpy array per batch;
  when the last tensor or view of it is gone the array is collected, and a finalizer writes 0 into
  the slot's state word, which the worker reads before reusing the slot.

No thread, pipe or lock is needed: the worker only turns a slot from free to busy, the main
process only from busy to free. A slot the main process still holds is never overwritten; when
every slot of a field is busy the worker falls back to PyTorch's own path for that batch. Works with
``fork`` and ``spawn`` workers and either PyTorch sharing strategy.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

HEADER_BYTES = 64
FREE = 0

# dtypes numpy cannot hold travel as a same-sized integer and are viewed back in torch.
_NUMPY_STAND_IN = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


@dataclass(slots=True)
class Slot:
    """One shared buffer of a worker's pool."""

    slot_id: int
    buffer: torch.Tensor  # uint8 [HEADER_BYTES + capacity], in shared memory
    state: npt.NDArray[np.int64]  # the header's state word (a numpy view, shared)
    sent: bool = False

    @property
    def capacity(self) -> int:
        return int(self.buffer.numel()) - HEADER_BYTES

    @property
    def is_free(self) -> bool:
        return int(self.state[0]) == FREE

    def payload(self, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        """A tensor of ``dtype`` and ``shape`` over the start of the payload."""
        nbytes = _numel(shape) * _itemsize(dtype)
        return self.buffer[HEADER_BYTES:HEADER_BYTES + nbytes].view(dtype).view(shape)


class PooledLeaf(NamedTuple):
    """A batch tensor that lives in a slot: what travels instead of its bytes.

    A named tuple rather than a frozen dataclass: several travel with every batch, and a tuple
    pickles and unpickles without a ``__setstate__`` call per leaf."""

    slot_id: int
    dtype: torch.dtype
    shape: tuple[int, ...]  # as the bytes lie in the slot (C order)
    token: int
    permute: tuple[int, ...] | None = None  # the batch tensor is the slot's view permuted so
    # (a torch.channels_last image batch travels as the [N, H, W, C] bytes it is in memory)


@dataclass(slots=True)
class PoolCounters:
    allocations: int = 0
    reuses: int = 0
    fallbacks: int = 0


@dataclass(slots=True)
class SlotPool:
    """A worker process's slots, per batch field (created lazily in the worker).

    Args:
        slots_per_field: the most slots kept per field.
        max_pool_bytes: the most slot memory kept by this worker.
    """

    slots_per_field: int
    max_pool_bytes: int
    pool_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = field(default_factory=os.getpid)
    slots: dict[str, list[Slot]] = field(default_factory=dict)
    counters: PoolCounters = field(default_factory=PoolCounters)
    _next_id: int = 0
    _next_token: int = 0
    _retired: list[int] = field(default_factory=list)
    lending: bool = False  # this pool's slots are the process's arena buffers (see lend)
    # Slots lent to the decoders (see :meth:`lend`), by their payload's address.
    _lent: dict[int, tuple[Slot, int, list[bool]]] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)  # decode threads lend

    def pool_bytes(self) -> int:
        return sum(s.capacity for group in self.slots.values() for s in group)

    def acquire(self, key: str, nbytes: int) -> Slot | None:
        """A free slot of field ``key`` with room for ``nbytes`` (allocated if allowed), marked
        busy; ``None`` when the field's slots are all busy and no more may be allocated."""
        with self._lock:
            return self._acquire(key, nbytes)

    def _acquire(self, key: str, nbytes: int) -> Slot | None:
        group = self.slots.setdefault(key, [])
        free = [s for s in group if s.is_free]
        fitting = [s for s in free if s.capacity >= nbytes]
        slot: Slot | None
        if fitting:
            slot = min(fitting, key=lambda s: s.capacity)
            self.counters.reuses += 1
        else:
            # Too small free slots are replaced (the largest first) rather than kept.
            victim = max(free, key=lambda s: s.capacity, default=None)
            kept = self.pool_bytes() - (victim.capacity if victim is not None else 0)
            room = victim is not None or len(group) < self.slots_per_field
            if not room or kept + nbytes > self.max_pool_bytes:
                self.counters.fallbacks += 1
                return None
            slot = self._allocate(nbytes)
            if victim is not None:
                group[group.index(victim)] = slot
                self._retired.append(victim.slot_id)
            else:
                group.append(slot)
            self.counters.allocations += 1
        self._next_token += 1
        slot.state[0] = self._next_token
        return slot

    def _allocate(self, nbytes: int) -> Slot:
        # Made in shared memory straight away, as default_collate does in a worker: a heap
        # tensor's share_memory_() would fill it with zeros and then copy it there.
        storage = torch.UntypedStorage._new_shared(  # type: ignore[no-untyped-call]
            HEADER_BYTES + max(nbytes, 1))
        buffer = torch.empty(0, dtype=torch.uint8).set_(storage)
        state = buffer[:8].numpy().view(np.int64)
        state[0] = FREE
        self._next_id += 1
        return Slot(slot_id=self._next_id, buffer=buffer, state=state)

    def lend(self, key: str, nbytes: int) -> torch.Tensor | None:
        """A busy slot's payload ``uint8 [nbytes]`` for a decoder to write a block into
        (thread-safe; :func:`~rayform.decoders._output_arena.set_arena_buffers`), or ``None``
        when the field's slots are all busy. The collator sends the slot without a copy when
        the batch is its payload (:meth:`lent_slot`); a slot that is never sent turns free again
        once the last tensor over the payload is gone."""
        with self._lock:
            slot = self.acquire(f"decode:{key}", nbytes)
            if slot is None:
                return None
            token = int(slot.state[0])
            array = slot.buffer[HEADER_BYTES:HEADER_BYTES + nbytes].numpy()
            sent = [False]
            self._lent[array.ctypes.data] = (slot, token, sent)
            # Fires when the last view of the payload is gone (torch.from_numpy keeps the array).
            weakref.finalize(array, self._returned, array.ctypes.data, slot, token, sent) \
                .atexit = False
            return torch.from_numpy(array)

    def _returned(self, address: int, slot: Slot, token: int, sent: list[bool]) -> None:
        with self._lock:
            entry = self._lent.get(address)
            if entry is not None and entry[0] is slot and entry[1] == token:
                del self._lent[address]
        if not sent[0] and int(slot.state[0]) == token:
            slot.state[0] = FREE  # never sent: the worker was its only user

    def lent_slot(self, tensor: torch.Tensor) -> Slot | None:
        """The lent slot whose payload ``tensor`` is, from its first byte, marked as sent (the
        main process frees it); ``None`` for any other tensor."""
        with self._lock:
            lent = self._lent.get(tensor.data_ptr())
            if lent is None:
                return None
            slot, token, sent = lent
            if sent[0] or int(slot.state[0]) != token:
                return None
            sent[0] = True
            return slot

    def release_all(self, slots: list[Slot]) -> None:
        """Mark ``slots`` free again (a collate that failed half-way)."""
        for slot in slots:
            slot.state[0] = FREE

    def take_retired(self) -> list[int]:
        retired, self._retired = self._retired, []
        return retired


@dataclass(slots=True)
class WireBatch:
    """A pooled batch on its way to the main process (pickled by the DataLoader's queue).

    ``assemble(structure, values)`` (a module-level function) puts the leaves back into the
    batch's structure; slots sent for the first time travel in ``new_slots`` (shared by PyTorch's
    pickler), slots replaced since the last batch in ``retired``.
    """

    pool_id: str
    pid: int
    new_slots: dict[int, torch.Tensor]
    retired: list[int]
    leaves: list[Any]  # PooledLeaf, or a plain value (non-pooled leaves, fallbacks)
    structure: Any
    assemble: Callable[[Any, list[Any]], Any]

    def __reduce__(self) -> tuple[Any, ...]:
        return (receive_batch, (self.pool_id, self.pid, self.new_slots, self.retired,
                                self.leaves, self.structure, self.assemble))


# ------------------------------------------------------------------------------ main process
@dataclass(slots=True)
class _ReceivedPool:
    pid: int
    # slot id -> (the slot's bytes, its state word): mapped once, viewed by every batch
    buffers: dict[int, tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]] = field(
        default_factory=dict)


@dataclass(slots=True)
class ReceiverCounters:
    batches: int = 0
    slots: int = 0
    pooled_leaves: int = 0


_received: dict[str, _ReceivedPool] = {}
receiver_counters = ReceiverCounters()


def receive_batch(pool_id: str, pid: int, new_slots: dict[int, torch.Tensor], retired: list[int],
                  leaves: list[Any], structure: Any,
                  assemble: Callable[[Any, list[Any]], Any]) -> Any:
    """Unpickle a pooled batch in the main process: tensors view the cached slot mappings."""
    pool = _received.get(pool_id)
    if pool is None:
        _forget_dead_pools()
        pool = _received[pool_id] = _ReceivedPool(pid=pid)
    for slot_id in retired:
        pool.buffers.pop(slot_id, None)
    for slot_id, buffer in new_slots.items():
        raw = buffer.numpy()
        pool.buffers[slot_id] = (raw, raw[:8].view(np.int64))
        receiver_counters.slots += 1
    values = []
    for leaf in leaves:
        if isinstance(leaf, PooledLeaf):
            values.append(_view(*pool.buffers[leaf.slot_id], leaf))
            receiver_counters.pooled_leaves += 1
        else:
            values.append(leaf)
    receiver_counters.batches += 1
    return assemble(structure, values)


def _view(buffer: npt.NDArray[np.uint8], state: npt.NDArray[np.int64], leaf: PooledLeaf
          ) -> torch.Tensor:
    itemsize = _itemsize(leaf.dtype)
    nbytes = _numel(leaf.shape) * itemsize
    raw = buffer[HEADER_BYTES:HEADER_BYTES + nbytes]
    np_dtype, stand_in = _numpy_dtype(leaf.dtype)
    array = raw.view(np_dtype).reshape(leaf.shape)
    # The finalizer fires when the last tensor or view of this batch's array is gone.
    weakref.finalize(array, _release, state, leaf.token).atexit = False
    tensor = torch.from_numpy(array)
    if stand_in:
        tensor = tensor.view(leaf.dtype)
    return tensor if leaf.permute is None else tensor.permute(leaf.permute)


_NUMPY_DTYPES: dict[torch.dtype, tuple[np.dtype[Any], bool]] = {}


def _numpy_dtype(dtype: torch.dtype) -> tuple[np.dtype[Any], bool]:
    """The numpy dtype that views a slot's bytes as ``dtype``, and whether it is a same-sized
    stand-in (dtypes numpy cannot hold), worked out once per dtype."""
    known = _NUMPY_DTYPES.get(dtype)
    if known is None:
        try:
            known = (torch.empty(0, dtype=dtype).numpy().dtype, False)
        except TypeError:
            known = (np.dtype(_NUMPY_STAND_IN[_itemsize(dtype)]), True)
        _NUMPY_DTYPES[dtype] = known
    return known


def _release(state: npt.NDArray[np.int64], token: int) -> None:
    if int(state[0]) == token:
        state[0] = FREE


def _forget_dead_pools() -> None:
    """Drop the mappings of pools whose worker exited (tensors still held keep theirs alive)."""
    for pool_id, pool in list(_received.items()):
        try:
            os.kill(pool.pid, 0)
        except ProcessLookupError:
            del _received[pool_id]
        except PermissionError:  # pragma: no cover - another user's process reused the pid
            del _received[pool_id]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _itemsize(dtype: torch.dtype) -> int:
    return int(dtype.itemsize)
