"""``rayform slices create|list|show`` and ``rayform pull``: saved selections and their prefetch."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from rayform.cli._args import (
    add_command,
    add_output_options,
    catalog_url,
    output_format,
    parse_params,
    time_value,
)
from rayform.cli._errors import UsageError
from rayform.cli._printing import print_table

if TYPE_CHECKING:
    from rayform.catalog import TimeRange


def time_range(values: list[str] | None) -> TimeRange | None:
    """``--time-range TIMELINE START END`` as a :class:`TimeRange` (ISO dates, ints, durations)."""
    if values is None:
        return None
    from rayform.catalog import TimeRange

    timeline, start, end = values
    try:
        return TimeRange(timeline=timeline, start=time_value(start), end=time_value(end))
    except argparse.ArgumentTypeError as err:
        raise UsageError(f"--time-range: {err}") from None


def cmd_slices_create(args: argparse.Namespace) -> int:
    from rayform.client import Client

    if args.keep_label:
        if args.segment or args.where or args.param or args.time_range:
            raise UsageError("--keep-label selects by labels alone; drop --segment, --where, "
                             "--param and --time-range (or make the slice in two steps)")
        from rayform.catalog import Catalog
        from rayform.curation import labelled_slice

        made = labelled_slice(Catalog.open(catalog_url(args)), args.dataset, args.keep_label,
                              name=args.name)
        print(made.id)
        print(made.describe(), file=sys.stderr)
        return 0
    created = Client(catalog_url(args)).slices.create(
        args.dataset, segments=args.segment or None, where=args.where,
        params=parse_params(args.param), time_range=time_range(args.time_range), name=args.name)
    print(created.id)
    print(created.describe(), file=sys.stderr)
    return 0


def cmd_slices_list(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from rayform.client import Client

    rows = [{"id": s.id, "name": s.name or "", "dataset": s.dataset, "segments": len(s)}
            for s in Client(catalog_url(args)).slices.list()]
    schema = pa.schema([("id", pa.string()), ("name", pa.string()), ("dataset", pa.string()),
                        ("segments", pa.int64())])
    print_table(pa.Table.from_pylist(rows, schema=schema), output_format(args))
    return 0


def cmd_slices_show(args: argparse.Namespace) -> int:
    from rayform.client import Client

    found = Client(catalog_url(args)).slices.get(args.slice_id)
    print(json.dumps(found.to_dict(), indent=2) if args.json else found.describe())
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from rayform.catalog import pull_slice
    from rayform.client import Client

    result = pull_slice(Client(catalog_url(args)), args.slice_id,
                        progress=sys.stderr.isatty())
    print(result.summary())
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "slices", summary="saved, immutable selections of a dataset",
                    example="rayform slices list")
    slices = p.add_subparsers(dest="slices_command", required=True, metavar="ACTION")

    q = add_command(slices, "create", summary="pin a selection to its segment versions; prints its id",
                    example="""rayform slices create demo --where '"property:success"' """
                            "--time-range real_time 2026-01-01T00:00:00Z 2026-01-01T00:02:00Z")
    q.add_argument("dataset", help="the dataset's name")
    q.add_argument("--segment", action="append", default=[], metavar="ID",
                   help="keep this segment (repeatable)")
    q.add_argument("--where", default=None,
                   help='a SQL predicate over the segment table, e.g. \'"property:success"\'')
    q.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a value for $NAME in --where (repeatable)")
    q.add_argument("--time-range", nargs=3, metavar=("TIMELINE", "START", "END"), default=None,
                   help="keep [START, END] on TIMELINE: ISO dates or times (UTC unless an offset "
                        "is given), durations such as 1.5s, or integers")
    q.add_argument("--keep-label", action="append", default=[], metavar="LABEL",
                   help="keep only the ranges of notes with this label (annotations, or "
                        "findings by check id; repeatable): the segments having one, and no "
                        "sample whose window leaves them")
    q.add_argument("--name", default=None, help="a name to show in listings")
    q.set_defaults(func=cmd_slices_create)

    q = add_command(slices, "list", summary="list the catalog's slices, oldest first",
                    example="rayform slices list --format csv")
    add_output_options(q)
    q.set_defaults(func=cmd_slices_list)

    q = add_command(slices, "show", summary="describe one slice", example="rayform slices show "
                    "$(rayform slices list --format csv | tail -n 1 | cut -d, -f1)")
    q.add_argument("slice_id", help="the slice id (slc_…)")
    q.add_argument("--json", action="store_true", help="print its full description as JSON")
    q.set_defaults(func=cmd_slices_show)

    p = add_command(sub, "pull", summary="prefetch a slice into the local cache (for offline training)",
                    example="rayform --catalog https://example.org/catalog pull slc_…")
    p.add_argument("slice_id", help="the slice id (slc_…)")
    p.set_defaults(func=cmd_pull)
