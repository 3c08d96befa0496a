"""RequestArrays: a block's decode requests held as numpy arrays, built into DecodeRequests lazily.

The pipeline resolves every request of a field at once with vectorised ``searchsorted``; making
one :class:`~rayform.decoders.DecodeRequest` object per request would cost more than decoding a
numeric field. :class:`RequestArrays` is a ``Sequence[DecodeRequest]`` (decoders written against
the plain contract iterate it as usual) whose arrays a vectorised decoder reads directly through
:func:`output_row_matrix`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np
import numpy.typing as npt

from rayform.decoders._base import DecodeRequest, IndexValue

NsDtype = str | None


def index_value_of(value: int, ns_dtype: NsDtype) -> IndexValue:
    """The public form of an int64 index value: ``int``, ``datetime64[ns]`` or ``timedelta64[ns]``."""
    if ns_dtype is None:
        return int(value)
    if ns_dtype == "datetime64[ns]":
        return np.datetime64(int(value), "ns")
    return np.timedelta64(int(value), "ns")


class CodedIds(Sequence[str]):
    """Segment ids held as codes into a list of names (one code per entry), no per-entry strings.

    ``ids[i]`` is ``names[codes[i]]``; a slice is another ``CodedIds`` over the same names.
    """

    __slots__ = ("codes", "names")

    def __init__(self, codes: npt.NDArray[np.int64], names: Sequence[str]) -> None:
        self.codes = codes
        self.names = names

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> CodedIds: ...

    def __getitem__(self, i: int | slice) -> str | CodedIds:
        if isinstance(i, slice):
            return CodedIds(self.codes[i], self.names)
        return self.names[int(self.codes[i])]

    def __iter__(self) -> Iterator[str]:
        names = self.names
        return (names[c] for c in self.codes.tolist())

    def __repr__(self) -> str:
        return f"CodedIds({len(self)} ids over {len(self.names)} names)"


class RequestArrays(Sequence[DecodeRequest]):
    """The requests of one field for one block, as arrays (one entry per request).

    Requests are ordered as the batch rows: grouped by segment, ascending within a segment.

    Attributes:
        sample_positions: ``int64[N]`` where each result goes in the block.
        segment_ids: the segment of each request.
        index_values: ``int64[N]`` each sample's index value (ns on temporal timelines).
        output_rows: ``int64[N, T]`` the batch row served at each output position (``T == 1``
            without a window).
        decode_starts: ``int64[N]`` first batch row to decode (inclusive), or ``None`` when the
            decode rows are the output rows (sorted, de-duplicated).
        decode_stops: ``int64[N]`` end of the decode rows (exclusive), with ``decode_starts``.
        starts_at_keyframe: ``decode_starts`` are keyframe rows.
        ns_dtype: ``"datetime64[ns]"``, ``"timedelta64[ns]"`` or ``None`` (sequence timeline).
    """

    __slots__ = (
        "decode_starts",
        "decode_stops",
        "index_values",
        "ns_dtype",
        "output_rows",
        "sample_positions",
        "segment_ids",
        "starts_at_keyframe",
    )

    def __init__(self, *, sample_positions: npt.NDArray[np.int64], segment_ids: Sequence[str],
                 index_values: npt.NDArray[np.int64], output_rows: npt.NDArray[np.int64],
                 decode_starts: npt.NDArray[np.int64] | None = None,
                 decode_stops: npt.NDArray[np.int64] | None = None,
                 starts_at_keyframe: bool = False, ns_dtype: NsDtype = None) -> None:
        n = len(sample_positions)
        if output_rows.ndim != 2 or output_rows.shape[0] != n or len(segment_ids) != n \
                or len(index_values) != n:
            raise ValueError(
                f"RequestArrays: inconsistent lengths (positions {n}, segments "
                f"{len(segment_ids)}, index values {len(index_values)}, output rows "
                f"{output_rows.shape})"
            )
        if (decode_starts is None) != (decode_stops is None):
            raise ValueError("RequestArrays: give both decode_starts and decode_stops, or neither")
        if n and output_rows.shape[1] == 0:
            raise ValueError("RequestArrays: output_rows needs at least one column")
        self.sample_positions = sample_positions
        self.segment_ids = segment_ids
        self.index_values = index_values
        self.output_rows = output_rows
        self.decode_starts = decode_starts
        self.decode_stops = decode_stops
        self.starts_at_keyframe = starts_at_keyframe
        self.ns_dtype = ns_dtype

    def __len__(self) -> int:
        return len(self.sample_positions)

    @overload
    def __getitem__(self, i: int) -> DecodeRequest: ...

    @overload
    def __getitem__(self, i: slice) -> RequestArrays: ...

    def __getitem__(self, i: int | slice) -> DecodeRequest | RequestArrays:
        if isinstance(i, slice):
            return RequestArrays(
                sample_positions=self.sample_positions[i],
                segment_ids=self.segment_ids[i],
                index_values=self.index_values[i],
                output_rows=self.output_rows[i],
                decode_starts=None if self.decode_starts is None else self.decode_starts[i],
                decode_stops=None if self.decode_stops is None else self.decode_stops[i],
                starts_at_keyframe=self.starts_at_keyframe,
                ns_dtype=self.ns_dtype,
            )
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"request {i} out of range for {n} requests")
        outputs = self.output_rows[i]
        if self.decode_starts is None or self.decode_stops is None:
            decode = tuple(np.unique(outputs).tolist())
        else:
            decode = tuple(range(int(self.decode_starts[i]), int(self.decode_stops[i])))
        return DecodeRequest(
            sample_position=int(self.sample_positions[i]),
            segment_id=self.segment_ids[i],
            index_value=index_value_of(int(self.index_values[i]), self.ns_dtype),
            decode_row_indices=decode,
            output_row_indices=tuple(outputs.tolist()),
            starts_at_keyframe=self.starts_at_keyframe,
        )

    def __iter__(self) -> Iterator[DecodeRequest]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        width = self.output_rows.shape[1] if self.output_rows.ndim == 2 else 0
        return f"RequestArrays({len(self)} requests, {width} outputs each)"


def output_row_matrix(requests: Sequence[DecodeRequest]) -> npt.NDArray[np.int64] | None:
    """The ``[N, T]`` output rows of ``requests``, or ``None`` when their widths differ."""
    if isinstance(requests, RequestArrays):
        return requests.output_rows
    if not requests:
        return np.zeros((0, 1), dtype=np.int64)
    width = len(requests[0].output_row_indices)
    if any(len(r.output_row_indices) != width for r in requests):
        return None
    return np.array([r.output_row_indices for r in requests], dtype=np.int64).reshape(-1, width)
