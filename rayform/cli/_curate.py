"""``rayform curate`` (checks, findings, verdicts, a clean slice) and ``rayform annotate``."""

from __future__ import annotations

import argparse
import json
import sys

from rayform.cli._args import add_command, catalog_url, time_value
from rayform.cli._errors import UsageError
from rayform.cli._printing import OutputFormat, print_table

FAIL_ON = ("warning", "error")
TABLE_COLUMNS = ["segment", "check", "severity", "column", "dim_names", "start_row", "end_row",
                 "message"]


def cmd_curate(args: argparse.Namespace) -> int:
    import pyarrow as pa  # here, not at import: `rayform --help` stays fast

    from rayform.catalog import Catalog
    from rayform.catalog._slices import SLICE_ID_PREFIX, load_slice
    from rayform.cli._output import json_value
    from rayform.curation import curate, write_clean_slice

    if args.plot:
        from rayform.curation._plot import require_pyplot

        require_pyplot()  # before the work: a missing extra is one line, and nothing written
    catalog = Catalog.open(catalog_url(args))
    source = catalog.get_dataset(args.dataset)
    if args.slice is not None:
        found = load_slice(catalog, args.slice)
        if found.dataset != args.dataset:
            raise UsageError(f"--slice {args.slice} is a slice of {found.dataset!r}, not of "
                             f"{args.dataset!r}")
        source = found.view(catalog)  # type: ignore[assignment]
    checks = [c.strip() for c in args.checks.split(",") if c.strip()] if args.checks else None
    baseline = None
    if args.baseline is not None:
        baseline = load_slice(catalog, args.baseline).view(catalog) \
            if args.baseline.startswith(SLICE_ID_PREFIX) else catalog.get_dataset(args.baseline)
    result = curate(source, checks=checks, video=args.video, baseline=baseline,
                    persist=not catalog.url.startswith("https://"))
    if args.format == "json":
        print(json.dumps(json_value(result.to_json()), indent=1, ensure_ascii=False))
    elif args.format == "csv":
        print_table(result.findings_view(), OutputFormat(format="csv", limit=None))
    else:
        verdicts = pa.Table.from_pylist(
            [{"segment": v.segment, "verdict": v.verdict, "reasons": "; ".join(v.reasons)}
             for v in result.verdicts],
            schema=pa.schema([("segment", pa.string()), ("verdict", pa.string()),
                              ("reasons", pa.string())]))
        cov = result.coverage
        declared = "?" if cov["declared"] is None else cov["declared"]
        print(f"{result.dataset} @ snapshot {result.version}: {cov['registered']} registered of "
              f"{declared} declared, {cov['readable']} readable, {cov['checked']} checked "
              f"({cov['reused']} from earlier runs)")
        skipped = [c for c in cov["checks"] if not c["ran"]]
        for c in skipped:
            print(f"  skipped {c['id']}: {c['reason']}")
        print_table(verdicts, OutputFormat(format="table", limit=None))
        print_table(result.findings.select(TABLE_COLUMNS), OutputFormat(format="table",
                                                                        limit=None))
    if args.plot:
        from rayform.curation import plot_findings

        written = plot_findings(source, result, args.plot)
        print(f"wrote {len(written)} plot(s) to {args.plot}", file=sys.stderr)
    if args.write_slice:
        made = write_clean_slice(catalog, result, args.write_slice)
        print(f"wrote slice {made.id} ({len(made)} segments, {len(made.excluded)} excluded "
              "ranges)", file=sys.stderr)
    return result.exit_code(args.fail_on)


def cmd_annotate(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    dataset = Catalog.open(catalog_url(args)).get_dataset(args.dataset)
    attrs: dict[str, object] = {}
    for item in args.attr:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--attr {item!r}: expected KEY=VALUE, e.g. --attr who=alice")
        attrs[key] = value
    row = dataset.annotate(args.segment, time_value(args.start), time_value(args.end),
                           args.label, **attrs)
    print_table(row.select(["segment", "label", "start_row", "end_row", "start_ns", "end_ns"]),
                OutputFormat(format="table", limit=None))
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "curate",
                    summary="check a dataset's episodes: findings with row ranges and evidence, "
                            "a verdict per segment, a clean slice to train on",
                    example="rayform curate demo --fail-on warning --format json",
                    details="Exit status: 0 clean, 1 findings at or above --fail-on, 2 usage, "
                            "3 nothing checkable. Findings are kept in the catalog: "
                            "SELECT * FROM <dataset>.findings.")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("--slice", default=None, metavar="ID", help="check only this slice's segments")
    p.add_argument("--checks", default=None, metavar="GLOB,...",
                   help="check ids to run, as globs (values.*,-values.dead); default: all")
    p.add_argument("--video", choices=("sample", "full", "off"), default="sample",
                   help="video checks on a sample of frames, on every frame, or off "
                        "(default: sample)")
    p.add_argument("--baseline", default=None, metavar="DATASET|SLICE",
                   help="compare against this dataset (name) or slice (slc_…): columns gained "
                        "or lost, unit changes, shifted distributions (the drift.* checks)")
    p.add_argument("--fail-on", choices=FAIL_ON, default="error",
                   help="exit 1 when a finding is at least this severe (default: error)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table",
                   help="table (verdicts, then findings), json (the documented schema) or csv "
                        "(the findings)")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="write DIR/<segment>.png for each flagged segment: the flagged "
                        "dimensions with the findings' ranges shaded (needs rayform[plot])")
    p.add_argument("--write-slice", default=None, metavar="NAME",
                   help="save a slice of what is clean (excluded segments left out, flagged row "
                        "ranges excluded) and print its id")
    p.set_defaults(func=cmd_curate)

    p = add_command(sub, "annotate",
                    summary="note a time range of a segment (a subtask, an event); kept as "
                            "catalog data",
                    example="rayform annotate demo episode_000000 10 40 grasp --attr who=alice")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("segment", help="the segment id")
    p.add_argument("start", help="first row (integer) or time (1.5s, ISO date)")
    p.add_argument("end", help="end row, exclusive (integer) or time")
    p.add_argument("label", help="the label (SQL: WHERE label = '…')")
    p.add_argument("--attr", action="append", default=[], metavar="KEY=VALUE",
                   help="an attribute kept with the note (repeatable)")
    p.set_defaults(func=cmd_annotate)
