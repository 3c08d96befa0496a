"""``rayform stats``: exact statistics, one row per column and dimension (joint names where the
recording has them), printed to 4 significant digits, and drawn with ``--plot``."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

from rayform.cli._args import (
    add_command,
    add_output_options,
    catalog_url,
    non_negative_int,
    output_format,
)
from rayform.cli._printing import print_table
from rayform.cli._register import add_ray_option, connect_ray

if TYPE_CHECKING:
    import pyarrow as pa

DEFAULT_DIGITS = 4
SEGMENT_ID = "rerun_segment_id"


def cmd_stats(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog, compute_statistics

    dataset = Catalog.open(catalog_url(args)).get_dataset(args.dataset)
    columns = args.column or None
    if connect_ray(args):
        from rayform.ray import compute_statistics as ray_statistics

        stats = ray_statistics(dataset, columns, timeline=args.timeline)
    else:
        stats = compute_statistics(dataset, columns, timeline=args.timeline)
    if args.plot:
        from rayform.cli._plot import plot_statistics

        print(f"wrote {plot_statistics(stats, args.plot)}", file=sys.stderr)
    table = rounded(stats.dimension_table(per_segment=args.per_segment), args.digits)
    output = output_format(args)
    if output.format != "table":
        print_table(table, output)
        return 0
    # A table per column (and segment): its name and count once, then a row per dimension.
    segments = (table.column(SEGMENT_ID).to_pylist() if args.per_segment
                else [None] * table.num_rows)
    columns = table.column("column").to_pylist()
    starts = [i for i in range(table.num_rows)
              if i == 0 or (segments[i], columns[i]) != (segments[i - 1], columns[i - 1])]
    for start, stop in zip(starts, [*starts[1:], table.num_rows], strict=True):
        part = table.slice(start, stop - start)
        where = "" if segments[start] is None else f", segment {segments[start]}"
        print(f"{'' if start == 0 else chr(10)}{columns[start]}{where}: "
              f"{part.column('count')[0].as_py()} rows")
        unnamed = part.column("name").null_count == part.num_rows
        shown = part.drop_columns([c for c in (SEGMENT_ID, "column", "count")
                                   if c in part.column_names] + (["name"] if unnamed else []))
        print_table(shown, output)
    return 0


def significant(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` significant digits (NaN and infinities as they are)."""
    return float(f"{value:.{digits}g}") if math.isfinite(value) else value


def rounded(table: pa.Table, digits: int) -> pa.Table:
    """Every float column rounded to ``digits`` significant digits; 0 keeps them exact."""
    import pyarrow as pa

    if digits == 0:
        return table
    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            values = [None if v is None else significant(v, digits)
                      for v in table.column(i).to_pylist()]
            table = table.set_column(i, field, pa.array(values, field.type))
    return table


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "stats",
                    summary="per-dimension min/max/mean/std/quantiles, overall or per segment",
                    example="rayform stats demo --column /joints/position:Scalars:scalars "
                            "--plot joints.png")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("--column", action="append", default=[], metavar="COLUMN",
                   help="a numeric column (repeatable; default: every numeric column)")
    p.add_argument("--timeline", default=None,
                   help="count the rows on this timeline (default: per entity, the first dataset "
                        "timeline it has data on)")
    p.add_argument("--per-segment", action="store_true",
                   help="also print one row per segment, column and dimension")
    p.add_argument("--digits", type=non_negative_int, default=DEFAULT_DIGITS, metavar="N",
                   help=f"significant digits of the figures (default: {DEFAULT_DIGITS}; 0 prints "
                        "them exactly)")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="also draw each column's distribution with its quantiles to an image "
                        "(needs rayform[plot])")
    add_ray_option(p)
    add_output_options(p, default_limit=200)
    p.set_defaults(func=cmd_stats)
