"""``rayform stats``: exact per-column statistics, printed, and drawn with ``--plot``."""

from __future__ import annotations

import argparse
import sys

from rayform.cli._args import add_command, add_output_options, catalog_url, output_format
from rayform.cli._output import print_table
from rayform.cli._register import add_ray_option, connect_ray


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
    table = stats.to_arrow()
    if not args.per_segment:
        table = table.filter(table.column("rerun_segment_id").is_null()).drop_columns(
            ["rerun_segment_id"])
    print_table(table, output_format(args))
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "stats",
                    summary="exact per-column min/max/mean/std/quantiles, overall or per segment",
                    example="rayform stats demo --column /joints/position:Scalars:scalars "
                            "--plot joints.png")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("--column", action="append", default=[], metavar="COLUMN",
                   help="a numeric column (repeatable; default: every numeric column)")
    p.add_argument("--timeline", default=None,
                   help="count the rows on this timeline (default: per entity, the first dataset "
                        "timeline it has data on)")
    p.add_argument("--per-segment", action="store_true",
                   help="also print one row per segment and column")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="also draw each column's distribution with its quantiles to an image "
                        "(needs rayform[plot])")
    add_ray_option(p)
    add_output_options(p, default_limit=200)
    p.set_defaults(func=cmd_stats)
