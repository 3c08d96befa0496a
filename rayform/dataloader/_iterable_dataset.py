"""RerunIterableDataset: a shuffled, sharded stream of samples (Rerun 0.41 API, plus resume).

One pass (``__iter__``) runs one loop whatever the order comes from (``_order_source``):

1. this process's stream: live, the shuffle strategy's epoch order, seeded by the epoch
   (``set_epoch``) or by ``(seed, epoch)``, cut into a contiguous shard per DDP rank then per
   DataLoader worker (or, with :class:`StableOrder`, chunks of the canonical sequence dealt
   round-robin), into fetch blocks, and through the ``BlockShuffle(buffer_size=…)`` emission
   buffer seeded by ``[epoch, rank, worker]``; or, replaying a :class:`Manifest`, the same three
   things read from the manifest's rows for this rank and worker;
2. fetch blocks decoded by the pipeline, one block of lookahead on a background thread;
3. samples yielded in emission order, screened: live, samples with a ``None`` field are skipped
   (warned once per field; more than ``max_consecutive_skipped_samples`` in a row raise
   ``RuntimeError``); replayed, the manifest already dropped them, so a required field without a
   value raises.

``len(ds)`` is the global number of samples (the manifest's row count when replaying). Mid-epoch
resume: ``state_dict()`` / ``load_state_dict()``; the next pass continues with exactly the samples
not yet consumed (see :meth:`RerunIterableDataset.state_dict`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from torch.utils.data import IterableDataset

from rayform.dataloader._batched_run import batched_run
from rayform.dataloader._block_columns import Collate, Sample
from rayform.dataloader._config import DataSource, EdgeMode, Field
from rayform.dataloader._decode_policy import DecodeErrorPolicy, check_decode_policy
from rayform.dataloader._epoch_plan import ProcessStream
from rayform.dataloader._manifest import Manifest
from rayform.dataloader._manifest_replay import ManifestOrder, manifest_sampling, replay_pipeline
from rayform.dataloader._order_source import LiveOrder, OrderSource
from rayform.dataloader._partition import StreamPosition
from rayform.dataloader._pipeline_build import build_pipeline
from rayform.dataloader._sample_index import FixedRateSampling, SampleIndex
from rayform.dataloader._shuffle import (
    NoShuffle,
    SampleShuffle,
    ShuffleStrategy,
    check_block_size,
)
from rayform.dataloader._skipping import DEFAULT_MAX_CONSECUTIVE_SKIPPED, check_max_skipped
from rayform.dataloader._stable_order import StableOrder
from rayform.dataloader._worker_process import settle_worker_process
from rayform.decoders._thread_pool import ThreadPool
from rayform.errors import ConfigError

STATE_FORMAT = "rayform.RerunIterableDataset/1"
FIRST_FETCH_SAMPLES = 32
"""Samples in a worker's first decode of a pass when the dataset does not batch (DataLoader's
batch size is not known here; 32 is the usual one)."""
Decoded = TypeVar("Decoded")


def fetch_threads(fields: Mapping[str, Field], *, shuffled_blocks: bool) -> int:
    """Blocks prepared at once: two when every decoder that does real work allows it, so that
    one block's Python work (rows, plans, samples) runs while the other's frames decode and the
    decode threads never wait between blocks.

    Decoders split by request (images) are thread-safe, so they always allow it. Whole-field
    decoders (video) must say so (:attr:`ColumnDecoder.concurrent_blocks`), and only for
    blocks in shuffled order: blocks read in order continue the decoder sessions the previous
    one left open. Inline-only fields (numeric) stay one block at a time: their work holds the
    GIL, so a second block would only contend for it."""
    heavy = [f.decode for f in fields.values() if f.decode.decode_concurrency != "inline"]
    whole = [d for d in heavy if d.decode_concurrency == "field"]
    if not heavy or (whole and not (shuffled_blocks and all(d.concurrent_blocks for d in whole))):
        return 1
    return 2


class RerunIterableDataset(IterableDataset[Sample]):
    """An iterable dataset over a catalog dataset: shuffled, sharded, skipping incomplete samples.

    Args:
        source: the dataset and optional segment list.
        index: the index timeline.
        fields: sample key -> :class:`Field`.
        timeline_sampling: the grid on timestamp / duration timelines (required there).
        fetch_block_size: samples per fetch and decode pass.
        shuffle_strategy: :class:`SampleShuffle` (default), :class:`BlockShuffle` or
            :class:`NoShuffle`.
        decode_threads: decode threads per process (``None``: one per CPU up to 8 in the main
            process; inside a DataLoader worker, the CPUs divided among the workers, at
            least 1).
        max_consecutive_skipped_samples: give up after this many incomplete samples in a row
            (``None``: never).
        edge: ``"trim"`` or ``"pad"`` (see :data:`~rayform.dataloader.EdgeMode`).
        sample_metadata: add ``sample["meta"]`` (segment id and version, index value, index).
        seed: a base seed; orders then depend on ``(seed, epoch)``. ``None`` (Rerun): the epoch.
        stable_order: make the sequence independent of ``num_workers`` and the number of ranks.
        manifest: replay this manifest's order instead (see :meth:`from_manifest`); then
            ``shuffle_strategy``, ``seed`` and ``stable_order`` must be left unset.
        on_decode_error: data that exists but cannot be decoded: ``"raise"`` (default) a
            ``DecodeError`` naming the field, entity, segment and index value; ``"skip"`` the
            sample with a warning; or keep ``"none"`` with a warning (the stream then skips it
            as an incomplete sample).
        batch_size: yield batches of this many samples instead of single samples (beyond
            Rerun; use it with ``DataLoader(ds, batch_size=None)``). The same samples in the same
            order, batched as ``default_collate`` would batch them, but cut straight from each
            decoded block: no per-sample tensors or dicts for fields whose decoder returns
            :class:`~rayform.decoders.TensorRows` (``NumericDecoder``), and a batch of
            consecutive rows of one block is a view of it. The last batch of a pass may be
            smaller. ``None`` (default): one sample at a time, as in Rerun.
        collate_fn: with ``batch_size``, build each batch with this function of the per-sample
            dicts instead (e.g. :class:`~rayform.decoders.Yuv420Collator`).
    """

    def __init__(self, source: DataSource, index: str, fields: Mapping[str, Field], *,
                 timeline_sampling: FixedRateSampling | None = None,
                 fetch_block_size: int = 128,
                 shuffle_strategy: ShuffleStrategy | None = None,
                 decode_threads: int | None = None,
                 max_consecutive_skipped_samples: int | None = DEFAULT_MAX_CONSECUTIVE_SKIPPED,
                 edge: EdgeMode = "trim",
                 sample_metadata: bool = False,
                 seed: int | None = None,
                 stable_order: StableOrder | None = None,
                 manifest: Manifest | None = None,
                 on_decode_error: DecodeErrorPolicy = "raise",
                 batch_size: int | None = None,
                 collate_fn: Collate | None = None) -> None:
        super().__init__()
        policy = check_decode_policy(on_decode_error)
        if batch_size is not None and (isinstance(batch_size, bool)
                                       or not isinstance(batch_size, int) or batch_size < 1):
            raise ConfigError(f"batch_size must be an integer >= 1 or None, got {batch_size!r}")
        if collate_fn is not None and (batch_size is None or not callable(collate_fn)):
            raise ConfigError(f"collate_fn={collate_fn!r} needs batch_size= and must be callable; "
                              "without batch_size pass it to DataLoader(collate_fn=…)")
        check_block_size(fetch_block_size)
        if shuffle_strategy is not None and not isinstance(shuffle_strategy, ShuffleStrategy):
            raise TypeError(f"shuffle_strategy must be SampleShuffle(), BlockShuffle(…) or "
                            f"NoShuffle(), got {shuffle_strategy!r}")
        if stable_order is not None and not isinstance(stable_order, StableOrder):
            raise TypeError(f"stable_order must be StableOrder(batch_size=…), got {stable_order!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"seed must be an integer >= 0 or None, got {seed!r}")
        max_skipped = check_max_skipped(max_consecutive_skipped_samples)
        self._order: OrderSource
        if manifest is None:
            self._pipeline = build_pipeline(source, index, fields,
                                            timeline_sampling=timeline_sampling,
                                            decode_threads=decode_threads, edge=edge,
                                            sample_metadata=sample_metadata, what="RerunIterableDataset")
            self._order = LiveOrder(shuffle_strategy or SampleShuffle(),
                                    fetch_block_size=int(fetch_block_size), seed=seed,
                                    stable=stable_order, max_skipped=max_skipped)
        else:
            given = {"shuffle_strategy": shuffle_strategy, "seed": seed,
                     "stable_order": stable_order}
            clash = sorted(k for k, v in given.items() if v is not None)
            if clash:
                raise ConfigError(f"{clash} cannot be combined with a manifest: its order, shards "
                                  "and fetch blocks are frozen (re-plan with manifest.shuffle)")
            self._pipeline = replay_pipeline(manifest, source, index, fields,
                                             timeline_sampling=timeline_sampling,
                                             decode_threads=decode_threads, edge=edge,
                                             sample_metadata=sample_metadata)
            self._order = ManifestOrder(manifest, list(fields))
        self._pipeline.decode_errors = policy
        self._manifest = manifest
        self._fields = dict(fields)
        self._epoch = 0
        self._resume_position = 0
        self._consumed = 0
        self._batch_size = batch_size
        self._collate_fn = collate_fn
        shuffled = manifest is None and not isinstance(shuffle_strategy, NoShuffle)
        blocks_at_once = fetch_threads(fields, shuffled_blocks=shuffled)
        self._prefetch = ThreadPool(blocks_at_once, name="rayform-fetch", background=True)
        self._pipeline.concurrent_blocks = blocks_at_once
        self._first_block_cut = all(f.decode.decode_concurrency != "field"
                                    for f in fields.values())

    @classmethod
    def from_manifest(cls, manifest: Manifest, source: DataSource, fields: dict[str, Field], *,
                      decode_threads: int | None = None,
                      sample_metadata: bool = False,
                      on_decode_error: DecodeErrorPolicy = "raise",
                      batch_size: int | None = None,
                      collate_fn: Collate | None = None) -> RerunIterableDataset:
        """Replay a manifest: its order, shards and fetch blocks, decoded from ``source``.

        ``fields`` may be a subset of the manifest's (same paths and windows). The run must have
        the manifest's topology (``validate_topology``). ``state_dict`` / ``load_state_dict``
        resume a replay mid-epoch.

        Raises:
            ConfigError: the fields or the data differ from when the manifest was built.
        """
        meta = manifest.metadata
        return cls(source, meta.index_name, fields, timeline_sampling=manifest_sampling(meta),
                   fetch_block_size=meta.fetch_block_size, decode_threads=decode_threads,
                   edge=meta.edge, sample_metadata=sample_metadata, manifest=manifest,
                   on_decode_error=on_decode_error, batch_size=batch_size,
                   collate_fn=collate_fn)

    # ------------------------------------------------------------------------ properties
    @property
    def sample_index(self) -> SampleIndex:
        return self._pipeline.sample_index

    @property
    def fields(self) -> dict[str, Field]:
        return dict(self._fields)

    @property
    def batch_size(self) -> int | None:
        """Samples per yielded batch (``None``: samples are yielded one at a time)."""
        return self._batch_size

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def shuffle_strategy(self) -> ShuffleStrategy | None:
        """The live strategy (``None`` when replaying a manifest)."""
        return self._order.strategy if isinstance(self._order, LiveOrder) else None

    @property
    def manifest(self) -> Manifest | None:
        return self._manifest

    def __len__(self) -> int:
        """The global number of samples (not per rank or worker), as in Rerun."""
        if self._manifest is not None:
            return self._manifest.num_rows
        return self._pipeline.sample_index.total_samples

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch (the shuffle seed; a manifest's order does not change); a new epoch
        starts from its beginning."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"set_epoch needs an integer >= 0, got {epoch!r}")
        if epoch != self._epoch:
            self._resume_position = 0
            self._consumed = 0
        self._epoch = epoch

    def __repr__(self) -> str:
        order = f"manifest={self._manifest!r}" if self._manifest is not None \
            else f"shuffle_strategy={self.shuffle_strategy!r}"
        return (f"RerunIterableDataset({self._pipeline.view.name!r}, "
                f"fields={sorted(self._fields)}, samples={len(self)}, {order}, "
                f"epoch={self._epoch})")

    # ------------------------------------------------------------------------ resume
    def state_dict(self, *, num_samples: int | None = None) -> dict[str, Any]:
        """Where this epoch stands, for a checkpoint.

        Args:
            num_samples: samples this rank's training loop consumed this epoch. ``None``: what
                this process's own iterator yielded (exact with ``num_workers=0``). With worker
                processes the main process cannot see consumption, so pass the count (it maps to a
                position exactly with ``stable_order``).

        Returns:
            ``{"format", "epoch", "seed", "order", "position"}`` (plain ints and strings).
        """
        position = self._consumed
        if num_samples is not None:
            if isinstance(num_samples, bool) or not isinstance(num_samples, int) \
                    or num_samples < 0:
                raise ConfigError(f"num_samples must be an integer >= 0, got {num_samples!r}")
            world = StreamPosition.current().world_size
            position = self._order.position_after(num_samples, world_size=world)
        return {
            "format": STATE_FORMAT,
            "epoch": self._epoch,
            "seed": self._order.seed,
            "order": self._order.state_tag,
            "position": int(position),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume: the next pass continues the saved epoch after its consumed samples.

        Raises:
            ConfigError: a state from another format, seed or ordering.
        """
        expected = {"format", "epoch", "seed", "order", "position"}
        if set(state) != expected or state["format"] != STATE_FORMAT:
            raise ConfigError(
                f"load_state_dict expects a state from RerunIterableDataset.state_dict() with "
                f"keys {sorted(expected)} and format {STATE_FORMAT!r}, got keys {sorted(state)}"
            )
        order, seed = self._order.state_tag, self._order.seed
        if state["order"] != order or state["seed"] != seed:
            raise ConfigError(
                f"the saved state used order={state['order']!r}, seed={state['seed']!r}; this "
                f"dataset uses order={order!r}, seed={seed!r}; build it the same way"
            )
        position = state["position"]
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ConfigError(f"state position must be an integer >= 0, got {position!r}")
        self._epoch = int(state["epoch"])
        self._resume_position = position
        self._consumed = position

    # ------------------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[Any]:
        settle_worker_process()
        position = StreamPosition.current()
        stream = self._order.stream(self._pipeline, position, epoch=self._epoch,
                                    start=self._resume_position)
        self._resume_position = 0
        if self._batch_size is not None:
            return self._run_batches(stream, position, self._batch_size)
        return self._run(stream, position)

    def _blocks(self, stream: ProcessStream, pos: StreamPosition
                ) -> tuple[npt.NDArray[np.int64], list[npt.NDArray[np.int64]], bool]:
        """What this pass still consumes (emission order), its fetch blocks, and whether the
        first block was cut.

        In a DataLoader worker, whose pass starts anew every epoch and decodes on one thread, a
        first block that holds the first sample to emit is decoded in two parts: a batch's worth
        (``batch_size``, else :data:`FIRST_FETCH_SAMPLES`) first, so the first batch leaves after
        that many decodes rather than a whole block's, then the rest (started once the first part
        is done, see :meth:`_prefetched`). Which samples come out, and in which order, does not
        depend on how blocks are cut; blocks that decode a whole field at once (video: shared
        GOPs) are never cut.
        """
        todo = stream.emission[stream.start:]
        needed = np.zeros(len(stream.indices), dtype=np.bool_)
        needed[todo] = True
        blocks = [np.arange(s, e, dtype=np.int64)[needed[s:e]] for s, e in stream.fetches]
        blocks = [b for b in blocks if len(b)]
        first = self._batch_size or FIRST_FETCH_SAMPLES
        if pos.in_worker and self._first_block_cut and blocks and len(blocks[0]) > first \
                and len(todo) and int(todo[0]) in blocks[0][:first]:
            blocks[:1] = [blocks[0][:first], blocks[0][first:]]
            return todo, blocks, True
        return todo, blocks, False

    def _run_batches(self, stream: ProcessStream, pos: StreamPosition, batch_size: int
                     ) -> Iterator[Any]:
        todo, blocks, cut = self._blocks(stream, pos)
        self._consumed = self._order.position(stream, 0, pos)

        def consumed(count: int) -> None:
            self._consumed = self._order.position(stream, count, pos)

        # Batches cut from the columns may be channels-last views; per-sample dicts for a
        # collate_fn stay planar (stacking [C, H, W] views of [H, W, C] memory transposes).
        process = partial(self._pipeline.process_columns, channels_last=self._collate_fn is None)
        produced = self._prefetched(blocks, stream.indices, process, first_alone=cut)
        try:
            yield from batched_run(blocks, (columns for _, columns in produced), todo,
                                   stream.indices, batch_size=batch_size,
                                   screen=self._order.screen(self._pipeline.sample_index),
                                   keys=self._pipeline.keys, collate_fn=self._collate_fn,
                                   consumed=consumed)
        finally:
            produced.close()

    def _run(self, stream: ProcessStream, pos: StreamPosition) -> Iterator[Sample]:
        screen = self._order.screen(self._pipeline.sample_index)
        keys = self._pipeline.keys
        todo, blocks, cut = self._blocks(stream, pos)
        self._consumed = self._order.position(stream, 0, pos)
        consumed_here = 0
        decoded: dict[int, Sample] = {}
        produced = self._prefetched(blocks, stream.indices, self._pipeline.process,
                                    first_alone=cut)
        try:
            for p in todo.tolist():
                while p not in decoded:
                    positions, samples = next(produced)
                    decoded.update(zip(positions.tolist(), samples, strict=True))
                sample = decoded.pop(p)
                consumed_here += 1
                self._consumed = self._order.position(stream, consumed_here, pos)
                if screen.admit(sample, keys, int(stream.indices[p])):
                    yield sample
        finally:
            produced.close()

    def _prefetched(self, blocks: list[npt.NDArray[np.int64]], indices: npt.NDArray[np.int64],
                    process: Callable[[npt.NDArray[np.int64]], Decoded], *,
                    first_alone: bool = False
                    ) -> Generator[tuple[npt.NDArray[np.int64], Decoded], None, None]:
        """Each block decoded by ``process`` on the fetch threads (:func:`fetch_threads`), one
        block more ahead than there are fetch threads: a thread that finishes its block before
        the block ahead of it is consumed starts the next one instead of waiting (blocks take
        unequal time: a GOP prefix to decode, a shorter last block per segment). With
        ``first_alone`` (a worker's first block, cut to a batch's worth), the next blocks start
        once the first is decoded, so that the first batch does not share the worker's CPU with
        them (measured: first batch ~155 -> ~100 ms with 2 workers on 2 cores).

        The segments of the blocks are announced to the view first, in the order the blocks are
        read: a remote catalog downloads their recordings in the background (bounded, read
        lazily from this hint); a local one ignores it."""
        self._pipeline.view.prefetch(
            self._pipeline.sample_index.segments_in_first_use(indices[b] for b in blocks))
        pending: deque[tuple[npt.NDArray[np.int64], Future[Decoded]]] = deque()
        queue = iter(blocks)

        def submit() -> bool:
            block = next(queue, None)
            if block is None:
                return False
            pending.append((block, self._prefetch.submit(process, indices[block])))
            return True

        def top_up(ahead: int) -> None:
            while len(pending) < ahead and submit():
                pass

        ahead = self._prefetch.threads + 1
        top_up(1 if first_alone else ahead)
        try:
            while pending:
                block, future = pending.popleft()
                samples = future.result()
                top_up(ahead)
                yield block, samples
        finally:
            for _, future in pending:
                future.cancel()
