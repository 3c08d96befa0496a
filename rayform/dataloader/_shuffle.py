"""Epoch orders: SampleShuffle (default), BlockShuffle and NoShuffle, plus the ShuffleBuffer.

A strategy turns a :class:`SampleIndex` into one epoch's order of global indices and its *blocks*
(contiguous, segment-local runs that are fetched together). Orders are pure functions of the seed
(``set_epoch(e)`` makes the seed ``e``, as in Rerun):

- :class:`SampleShuffle`: ``default_rng(seed).permutation(total)``; every block is one sample.
- :class:`BlockShuffle`: blocks of ``fetch_block_size`` consecutive samples cut per segment, the
  block order permuted, natural order within a block; optionally a :class:`ShuffleBuffer` mixes the
  emitted stream (``buffer_size``, ``min_fill``).
- :class:`NoShuffle`: natural order (segment after segment, ascending), the same blocks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from rayform.errors import ConfigError

if TYPE_CHECKING:
    from rayform.dataloader._sample_index import SampleIndex

Seed: TypeAlias = int | Sequence[int]
Order: TypeAlias = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
_T = TypeVar("_T")


class ShuffleStrategy(ABC):
    """How one epoch's samples are ordered and grouped into fetch blocks."""

    RECIPE_TAG: ClassVar[str]

    @abstractmethod
    def epoch_order(self, sample_index: SampleIndex, *, fetch_block_size: int, seed: Seed
                    ) -> Order:
        """Every global index once, and the cumulative end position of each block.

        Returns:
            ``(indices int64[N], block_bounds int64[num_blocks])`` with ``block_bounds[-1] == N``.
        """

    def emission_buffer(self) -> ShuffleBuffer | None:
        """The stream shuffle applied after decoding, if any."""
        return None


def natural_blocks(segment_offsets: npt.NDArray[np.int64], fetch_block_size: int
                   ) -> npt.NDArray[np.int64]:
    """Block end positions cutting each segment every ``fetch_block_size`` samples."""
    check_block_size(fetch_block_size)
    counts = np.diff(segment_offsets)
    per_segment = -(-counts // fetch_block_size)
    segment = np.repeat(np.arange(len(counts)), per_segment)
    first_block = np.cumsum(per_segment) - per_segment
    k = np.arange(int(per_segment.sum()), dtype=np.int64) - np.repeat(first_block, per_segment)
    ends = segment_offsets[segment] + np.minimum((k + 1) * fetch_block_size, counts[segment])
    out: npt.NDArray[np.int64] = ends.astype(np.int64)
    return out


def check_block_size(fetch_block_size: int) -> None:
    if isinstance(fetch_block_size, bool) or not isinstance(fetch_block_size, int | np.integer) \
            or fetch_block_size < 1:
        raise ConfigError(f"fetch_block_size must be an integer >= 1, got {fetch_block_size!r}")


@dataclass(frozen=True, slots=True)
class SampleShuffle(ShuffleStrategy):
    """A uniform permutation of all samples (the default); every fetch mixes segments."""

    RECIPE_TAG: ClassVar[str] = "sample"

    def epoch_order(self, sample_index: SampleIndex, *, fetch_block_size: int, seed: Seed
                    ) -> Order:
        check_block_size(fetch_block_size)
        total = sample_index.total_samples
        indices = np.random.default_rng(seed).permutation(total).astype(np.int64)
        return indices, np.arange(1, total + 1, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class NoShuffle(ShuffleStrategy):
    """Natural order: segment after segment, ascending within a segment."""

    RECIPE_TAG: ClassVar[str] = "none"

    def epoch_order(self, sample_index: SampleIndex, *, fetch_block_size: int, seed: Seed
                    ) -> Order:
        total = sample_index.total_samples
        bounds = natural_blocks(sample_index.segment_offsets, fetch_block_size)
        return np.arange(total, dtype=np.int64), bounds


@dataclass(frozen=True, slots=True)
class BlockShuffle(ShuffleStrategy):
    """Shuffle whole blocks of ``fetch_block_size`` samples (fast for video: whole GOPs).

    Attributes:
        buffer_size: if set, a :class:`ShuffleBuffer` of this many samples mixes the stream.
        min_fill: samples the buffer holds before it emits (default ``buffer_size // 2``).
    """

    RECIPE_TAG: ClassVar[str] = "block"

    buffer_size: int | None = None
    min_fill: int | None = None

    def __post_init__(self) -> None:
        if self.min_fill is not None and self.buffer_size is None:
            raise ConfigError(
                f"BlockShuffle(min_fill={self.min_fill!r}) needs a buffer_size; give "
                "buffer_size= as well"
            )
        if self.buffer_size is not None:
            ShuffleBuffer(self.buffer_size, min_fill=self.min_fill)

    def epoch_order(self, sample_index: SampleIndex, *, fetch_block_size: int, seed: Seed
                    ) -> Order:
        ends = natural_blocks(sample_index.segment_offsets, fetch_block_size)
        sizes = np.diff(ends, prepend=0)
        perm = np.random.default_rng(seed).permutation(len(ends))
        new_sizes = sizes[perm]
        new_bounds = np.cumsum(new_sizes).astype(np.int64)
        old_starts = (ends - sizes)[perm]
        shift = np.repeat(old_starts - (new_bounds - new_sizes), new_sizes)
        indices = np.arange(int(new_bounds[-1]) if len(new_bounds) else 0, dtype=np.int64) + shift
        return indices.astype(np.int64), new_bounds

    def emission_buffer(self) -> ShuffleBuffer | None:
        if self.buffer_size is None:
            return None
        return ShuffleBuffer(self.buffer_size, min_fill=self.min_fill)


class ShuffleBuffer:
    """A streaming shuffle: hold up to ``buffer_size`` items, emit a uniformly random one.

    Each input item is appended, with one more pulled while the buffer is below ``buffer_size``;
    once the buffer holds ``min_fill`` items, one random item is emitted (swap with the last, pop).
    At the end the rest drains in random order.
    """

    def __init__(self, buffer_size: int, *, min_fill: int | None = None) -> None:
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 2:
            raise ConfigError(f"ShuffleBuffer buffer_size must be an integer >= 2, got {buffer_size!r}")
        fill = buffer_size // 2 if min_fill is None else min_fill
        if isinstance(fill, bool) or not isinstance(fill, int) or not 1 <= fill <= buffer_size:
            raise ConfigError(
                f"ShuffleBuffer min_fill must be an integer in [1, buffer_size={buffer_size}], "
                f"got {min_fill!r}"
            )
        self.buffer_size = buffer_size
        self.min_fill = fill

    def __repr__(self) -> str:
        return f"ShuffleBuffer(buffer_size={self.buffer_size}, min_fill={self.min_fill})"

    def shuffle(self, items: Iterable[_T], rng: np.random.Generator) -> Iterator[_T]:
        """Shuffle a stream; closes ``items`` (if it is a generator) when done or abandoned."""
        source = iter(items)
        buffer: list[_T] = []
        try:
            for item in source:
                buffer.append(item)
                if len(buffer) < self.buffer_size:
                    extra = next(source, _END)
                    if extra is not _END:
                        buffer.append(extra)  # type: ignore[arg-type]
                if len(buffer) >= self.min_fill:
                    yield _pop_random(buffer, rng)
            while buffer:
                yield _pop_random(buffer, rng)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    def emit_order(self, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """The order in which :meth:`shuffle` would emit the positions ``0 .. n-1``."""
        return np.fromiter(self.shuffle(range(n), rng), dtype=np.int64, count=n)


_END = object()


def _pop_random(buffer: list[_T], rng: np.random.Generator) -> _T:
    k = int(rng.integers(len(buffer)))
    item = buffer[k]
    buffer[k] = buffer[-1]
    buffer.pop()
    return item

