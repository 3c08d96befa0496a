"""Tables for a terminal of a given width, in which keys and numbers are never cut.

Each column has a natural width (its widest cell or header) and a least width: the natural one
for ids, names, numbers, times and flags, which are never cut or wrapped; for free text and lists,
the longest word (text wraps between words). The layout keeps the leading columns that fit at
their least widths, gives the room left to the text columns, and names how many trailing columns
it left out (``--format csv`` prints them). When not even two columns fit, each row is printed as
a block of ``name  value`` lines instead. Cell text is shown as it is, never read as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

COLUMN_GAP = 3  # a column's right padding, the (blank) divider and the next one's left padding
BLOCK_GAP = 2  # between a name and its value in a block
MIN_TABLE_COLUMNS = 2  # fewer than this fitting: one block per row instead
MIN_BLOCK_VALUE_WIDTH = 16  # narrower: a block puts each value on the line below its name


@dataclass(frozen=True, slots=True, kw_only=True)
class TextColumn:
    """One column as text.

    Attributes:
        name: the header.
        cells: one text per row.
        wraps: free text or a list, which may wrap between words; otherwise a key or a number.
        numeric: right-aligned.
    """

    name: str
    cells: Sequence[str]
    wraps: bool = False
    numeric: bool = False

    @property
    def natural_width(self) -> int:
        return max([cell_len(self.name), *(cell_len(c) for c in self.cells)])

    @property
    def least_width(self) -> int:
        if not self.wraps:
            return self.natural_width
        words = [cell_len(w) for c in self.cells for w in c.split()]
        return max([cell_len(self.name), *words])


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Which columns a table shows, how wide each is, or blocks when none fit.

    Attributes:
        widths: the width of each shown column (the leading ``len(widths)`` columns).
        hidden: how many trailing columns are left out.
        blocks: one block of ``name  value`` lines per row instead of a table.
    """

    widths: tuple[int, ...]
    hidden: int
    blocks: bool = False


def table_width(widths: Sequence[int]) -> int:
    return sum(widths) + COLUMN_GAP * max(len(widths) - 1, 0)


def plan_layout(columns: Sequence[TextColumn], *, width: int) -> Layout:
    """The widest table of leading columns within ``width``, text columns widened into the room left."""
    least = [c.least_width for c in columns]
    shown = len(columns)
    while shown and table_width(least[:shown]) > width:
        shown -= 1
    if shown < min(MIN_TABLE_COLUMNS, len(columns)):
        return Layout(widths=(), hidden=len(columns), blocks=True)
    widths = least[:shown]
    room = width - table_width(widths)
    for i, column in enumerate(columns[:shown]):
        extra = min(room, column.natural_width - widths[i])
        widths[i] += extra
        room -= extra
    return Layout(widths=tuple(widths), hidden=len(columns) - shown)


def hidden_note(hidden: int) -> str:
    return f"… {hidden} more column{'' if hidden == 1 else 's'}: --format csv prints every column"


def _print_blocks(console: Console, columns: Sequence[TextColumn], num_rows: int) -> None:
    """Each row as ``name  value`` lines; in a narrow terminal, each value under its name."""
    label = max(cell_len(c.name) for c in columns)
    value_width = console.width - label - BLOCK_GAP
    beside = value_width >= MIN_BLOCK_VALUE_WIDTH
    grid = Table.grid(padding=(0, BLOCK_GAP) if beside else (0, 0, 0, BLOCK_GAP),
                      pad_edge=not beside)
    if beside:
        grid.add_column(width=label, no_wrap=True, style="bold")
    grid.add_column(width=value_width if beside else max(console.width - BLOCK_GAP, 1),
                    overflow="fold")
    for row in range(num_rows):
        if row:
            grid.add_row(*([Text("")] * len(grid.columns)))
        for column in columns:
            if beside:
                grid.add_row(Text(column.name), Text(column.cells[row]))
            else:
                grid.add_row(Text(column.name, style="bold"))
                grid.add_row(Text(column.cells[row]))
    console.print(grid)


def print_text_table(console: Console, columns: Sequence[TextColumn], num_rows: int) -> None:
    """Print ``columns`` (each with ``num_rows`` cells) fitted to ``console.width``."""
    if not columns:
        return
    layout = plan_layout(columns, width=console.width)
    if layout.blocks:
        _print_blocks(console, columns, num_rows)
        return
    shown = columns[:len(layout.widths)]
    view = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column, width in zip(shown, layout.widths, strict=True):
        view.add_column(Text(column.name), width=width, no_wrap=not column.wraps,
                        overflow="fold", justify="right" if column.numeric else "left")
    for row in range(num_rows):
        view.add_row(*(Text(column.cells[row]) for column in shown))
    console.print(view)
    if layout.hidden:
        console.print(Text(hidden_note(layout.hidden), style="dim"))
