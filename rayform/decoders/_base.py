"""The batch decoder contract: ColumnDecoder, DecodeRequest and FieldBatch (Rerun 0.41 shape).

A decoder receives one :class:`FieldBatch` per field per fetch block or map batch (the rows the
data plane gathered for that field, grouped by segment and ascending in the index) and the
:class:`DecodeRequest` s of the samples in that block, and returns one decoded value (or ``None``
for missing data) per request. Data that exists but cannot be decoded is also ``None``, and is
reported through :meth:`FieldBatch.report_failure` so that the dataset can apply its policy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import numpy as np
import pyarrow as pa

from rayform.decoders._output_arena import OutputArena

if TYPE_CHECKING:
    import torch

IndexValue: TypeAlias = int | np.datetime64 | np.timedelta64


class QuerySelector(Protocol):
    """Rerun's ``rerun.chunk.Selector`` (a jq-like query): ``execute(rows)`` returns the selected
    array, or ``None`` when the query's errors are suppressed."""

    def execute(self, source: pa.Array) -> pa.Array | None: ...


Selector: TypeAlias = Callable[[pa.Array], pa.Array] | QuerySelector


def is_selector(value: object) -> bool:
    """A function of the Arrow rows, or an object with Rerun's ``Selector.execute``."""
    return callable(value) or callable(getattr(value, "execute", None))


def apply_selector(select: Selector, rows: pa.Array) -> pa.Array:
    """``select`` applied to ``rows`` (a suppressed Rerun query gives null rows: missing data)."""
    if callable(select):
        return select(rows)
    selected = select.execute(rows)
    return pa.nulls(len(rows), rows.type) if selected is None else selected
DecodeConcurrency: TypeAlias = Literal["inline", "field", "requests"]


@dataclass(frozen=True, slots=True)
class DecodeRequest:
    """What one sample needs from one field.

    Attributes:
        sample_position: where the result goes in the block.
        segment_id: the segment the rows come from.
        index_value: the sample's index value.
        decode_row_indices: every batch row needed to decode (for video: keyframe to last output).
        output_row_indices: the batch row served at each output position (repeats allowed,
            latest-at snapping); one entry when the field has no window.
        starts_at_keyframe: ``decode_row_indices[0]`` is a keyframe (video only).
    """

    sample_position: int
    segment_id: str
    index_value: IndexValue
    decode_row_indices: tuple[int, ...]
    output_row_indices: tuple[int, ...]
    starts_at_keyframe: bool = False

    def __post_init__(self) -> None:
        if not self.output_row_indices:
            raise ValueError("DecodeRequest.output_row_indices must not be empty")


_DEFERRED: pa.Array = pa.array([], type=pa.list_(pa.null()))
"""``FieldBatch.column`` when it is left to ``make_column`` (compared by identity)."""


def _check_column(column: pa.Array) -> pa.Array:
    if not pa.types.is_list(column.type):
        raise TypeError(
            f"FieldBatch.column must have an outer Arrow List type (one list per row), "
            f"got {column.type}"
        )
    return column


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class FieldBatch:
    """The rows of one field for one block: an outer Arrow ``List`` column (one list per row).

    Attributes:
        column: the component column, ``pa.list_`` typed; may be left out when ``make_column``
            is given.
        make_column: builds ``column`` the first time it is read (set by the pipeline when
            ``blobs`` already holds the rows, so that a decoder that reads the blobs never pays
            for joining them into a column); ``None``: ``column`` is given.
        select: an optional row-count-preserving function (or Rerun ``Selector``) applied to the
            rows taken.
        is_windowed: the field has a window (outputs are stacked ``[T, ...]``).
        open_segment: returns the segment's data-plane handle
            (:class:`rayform.catalog.SegmentData`) for decoders that need more than the column
            (static columns, attached assets such as MP4 files); ``None`` when unavailable.
        path: the field's column path (``Field.path``), so that a decoder can find sibling
            columns through ``open_segment`` (e.g. a video asset's ``AssetVideo:asset``);
            ``None`` when unknown.
        on_failure: told about every request whose data exists but cannot be decoded (a
            corrupt image, an undecodable frame), so that the dataset applies its
            ``on_decode_error`` policy; ``None`` outside a rayform dataset.
        output_arena: set by the pipeline when it splits the field's requests across decode
            threads: one buffer for the whole block's results, each task writing its rows
            (:class:`~rayform.decoders._output_arena.OutputArena`); decoders may ignore it.
        decode_threads: set by the pipeline when it decodes several blocks at once: the most
            threads this call should use (its share of the process's); ``None``: the decoder's
            own setting.
        channels_last: set by a dataset that cuts whole batches out of the decoder's
            :class:`~rayform.decoders.TensorRows` itself (``RerunIterableDataset(batch_size=…)``
            without ``collate_fn``, and the map datasets, whose batch is the block): an image
            decoder may then return ``[C, H, W]`` views of interleaved ``[H, W, C]`` memory (what
            Rerun's ``ImageDecoder`` returns), so that a batch is ``torch.channels_last``
            ``[N, C, H, W]`` and no planar copy is made; decoders may ignore it.
        blobs: set by the pipeline when the column holds one blob per row: row ``i``'s blob
            (``column[i][0]``) as it lies in its segment, zero-copy, so that a blob decoder
            need not parse (nor make) the column; decoders may ignore it.
    """

    column: pa.Array = field(default_factory=lambda: _DEFERRED)
    make_column: Callable[[], pa.Array] | None = None
    select: Selector | None = None
    is_windowed: bool = False
    open_segment: Callable[[str], Any] | None = None
    path: str | None = None
    on_failure: Callable[[DecodeRequest, str], None] | None = None
    output_arena: OutputArena | None = None
    decode_threads: int | None = None
    channels_last: bool = False
    blobs: Sequence[memoryview] | None = None

    def __post_init__(self) -> None:
        column = self.column
        if column is _DEFERRED:
            if self.make_column is None:
                raise TypeError("FieldBatch needs column= (the field's Arrow rows), or "
                                "make_column= to build it when a decoder reads it")
            object.__delattr__(self, "column")  # made by __getattr__ when first read
            return
        _check_column(column)

    if not TYPE_CHECKING:  # (hidden from mypy: it would type every unknown attribute)
        def __getattr__(self, name: str) -> Any:
            # Reached only when an attribute is not set: ``column`` left for ``make_column``.
            if name != "column" or self.make_column is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            column = _check_column(self.make_column())
            object.__setattr__(self, "column", column)  # two threads may both make it: same rows
            return column

    @property
    def has_column(self) -> bool:
        """Whether ``column`` is made (given, or built by ``make_column`` when first read)."""
        try:
            object.__getattribute__(self, "column")
        except AttributeError:
            return False
        return True

    def with_options(self, *, output_arena: OutputArena | None, channels_last: bool,
                     decode_threads: int | None) -> FieldBatch:
        """This batch with the pipeline's decode options (see the attributes); a column still
        to be made stays so (``dataclasses.replace`` would make it)."""
        column = self.column if self.has_column else _DEFERRED
        return replace(self, column=column, output_arena=output_arena,
                       channels_last=channels_last, decode_threads=decode_threads)

    def report_failure(self, request: DecodeRequest, reason: str) -> bool:
        """Report that ``request``'s data could not be decoded (its result is ``None``).

        Returns:
            False when nobody listens (the decoder is used on its own).
        """
        if self.on_failure is None:
            return False
        self.on_failure(request, reason)
        return True

    def take_rows(self, rows: Sequence[int]) -> pa.Array:
        """Gather ``rows`` of the column and apply ``select``."""
        taken = self.column.take(pa.array(rows, type=pa.int64()))
        if self.select is None:
            return taken
        selected = apply_selector(self.select, taken)
        if len(selected) != len(taken):
            raise ValueError(
                f"Field select changed the row count from {len(taken)} to {len(selected)}; "
                "windowed and batched fields need a selector that keeps one value per row"
            )
        return selected

    def take_decode_rows(self, request: DecodeRequest) -> pa.Array:
        return self.take_rows(request.decode_row_indices)

    def take_output_rows(self, request: DecodeRequest) -> pa.Array:
        return self.take_rows(request.output_row_indices)


class ColumnDecoder(ABC):
    """Turns the Arrow rows of one field into tensors, one per request (``None`` = missing)."""

    @abstractmethod
    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> Sequence[Any]:
        """Decode every request of a block; the result aligns 1:1 with ``requests``.

        Returns ``list[torch.Tensor | None]`` (or another decoded value type such as YUV planes),
        or, when every request decoded to a tensor of one shape,
        :class:`~rayform.decoders.TensorRows` over the stacked ``[N, …]`` tensor, which the
        datasets can batch without per-sample work.
        """

    def prior_keyframe_path(self, field_path: str) -> str | None:
        """The sibling column holding keyframe flags, for decoders that need a keyframe."""
        return None

    @property
    def fill_latest_at(self) -> bool:
        """Outputs map to the latest row at or before each output index value."""
        return True

    @property
    def decode_concurrency(self) -> DecodeConcurrency:
        """How the pipeline may spread this decoder's work over its decode threads.

        ``"inline"``: cheap (numeric); decoded in the calling thread. ``"field"``: one ``decode``
        call per field and block, on a decode thread, concurrently with other fields (the default;
        right for stateful decoders such as video). ``"requests"``: ``decode`` is thread-safe and
        its heavy work releases the GIL (images), so a block's requests may be split into chunks
        decoded concurrently, each chunk a separate ``decode`` call on the same batch.
        """
        return "field"

    @property
    def concurrent_blocks(self) -> bool:
        """``decode`` may run for two blocks at once (it is thread-safe across calls).

        An iterable dataset whose whole-field decoders all allow it prepares the next block
        (resolving rows, planning, assembling samples) while the current one decodes. Off by
        default: a custom decoder may keep per-call state.
        """
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


DecodedValue: TypeAlias = "torch.Tensor | Any"
