"""What a command prints through: its output format, and ``print_table``, which loads the
renderers (pyarrow, rich) only when a command prints, so ``--help`` and ``--version`` stay fast."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("table", "csv", "json")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFormat:
    """How a command prints its result table.

    Attributes:
        format: ``"table"``, ``"csv"`` or ``"json"``.
        limit: the most rows printed; ``None`` prints every row.
    """

    format: str = "table"
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"output format {self.format!r} is not one of {FORMATS}")
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"output limit must be >= 0, got {self.limit!r}")


def print_table(table: pa.Table, output: OutputFormat, *, stream: TextIO | None = None) -> None:
    """Print ``table`` to ``stream`` (standard output) in ``output``'s format."""
    from rayform.cli._output import render_table

    render_table(table, fmt=output.format, limit=output.limit, stream=stream)
