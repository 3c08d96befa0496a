"""TextDecoder: string component rows (``TextDocument:text``, LeRobot's task) to Python ``str``.

Text has no tensor form, so a sample holds ``str`` (``list[str]`` with a window), which
PyTorch's default collate gathers into a list per batch. A row holding several strings gives them
joined by newlines; a null or empty row gives ``None`` (a window with one gives ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from rayform.decoders._base import ColumnDecoder, DecodeConcurrency, DecodeRequest, FieldBatch


class TextDecoder(ColumnDecoder):
    """Decode string rows to ``str`` (``list[str]`` with a window).

    Raises:
        TypeError: from :meth:`decode`, when the column does not hold strings.
    """

    @property
    def decode_concurrency(self) -> DecodeConcurrency:
        return "inline"

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]
               ) -> list[str | list[str] | None]:
        out: list[str | list[str] | None] = []
        for request in requests:
            rows = batch.take_output_rows(request)
            _check_strings(rows.type)
            texts = [None if not row else "\n".join(str(v) for v in row if v is not None)
                     for row in rows.to_pylist()]
            if any(t is None for t in texts):
                out.append(None)
            elif batch.is_windowed:
                out.append([t for t in texts if t is not None])
            else:
                out.append(texts[0])
        return out


def _check_strings(list_type: pa.DataType) -> None:
    inner = list_type.value_type if pa.types.is_list(list_type) \
        or pa.types.is_large_list(list_type) else list_type
    if not (pa.types.is_string(inner) or pa.types.is_large_string(inner)):
        raise TypeError(f"TextDecoder reads string rows (TextDocument:text), got {list_type}; "
                        "use NumericDecoder for numbers")
