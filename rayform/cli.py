"""The rayform command: catalogs, registration, SQL, statistics, export, slices and the demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rayform._defaults import default_catalog_url
from rayform._text_table import format_table
from rayform.errors import RayformError

if TYPE_CHECKING:
    from rayform.catalog import TimeRange


def _catalog(args: argparse.Namespace) -> object:
    from rayform.catalog import Catalog

    return Catalog.open(args.catalog)


def cmd_init(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    cat = Catalog.create(args.catalog)
    print(f"catalog ready at {cat.url}")
    return 0


def _connect_ray(args: argparse.Namespace) -> bool:
    """Connect to Ray when ``--ray [ADDRESS]`` was given; True if the Ray path should run."""
    if args.ray is None:
        return False
    from rayform.ray import connect

    connect(args.ray or None)
    return True


def cmd_register(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    cat = Catalog.open(args.catalog)
    dataset = cat.create_dataset(args.dataset, exist_ok=True) if args.create \
        else cat.get_dataset(args.dataset)
    if _connect_ray(args):
        from rayform.ray import register_many

        handle = register_many(dataset, args.paths, layer_name=args.layer,
                               on_duplicate=args.on_duplicate)
    else:
        handle = dataset.register(args.paths, layer_name=args.layer,
                                  on_duplicate=args.on_duplicate, progress=True)
    result = handle.wait()
    print(f"registered {len(result.segment_ids)} segment(s) into {args.dataset!r}: "
          + ", ".join(result.segment_ids[:10]) + (" …" if len(result.segment_ids) > 10 else ""))
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from rayform.catalog import Catalog

    cat = Catalog.open(args.catalog)
    rows = [{"dataset": d.name, "segments": len(d.segment_ids()), "version": d.snapshot_version}
            for d in cat.datasets()]
    print(format_table(pa.Table.from_pylist(rows) if rows else pa.table({"dataset": []})))
    return 0


def cmd_segments(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    dataset = Catalog.open(args.catalog).get_dataset(args.dataset)
    print(format_table(dataset.segment_table_arrow(), max_rows=args.limit))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from rayform.catalog import Catalog

    schema = Catalog.open(args.catalog).get_dataset(args.dataset).schema()
    rows = [{"column": name, "kind": "index", "type": f"{schema.timelines[name]} "
             f"({schema.field(name).type})"} for name in schema.index_columns()]
    rows += [{"column": name, "kind": "component", "type": str(schema.field(name).type)}
             for name in schema.component_columns()]
    print(format_table(pa.Table.from_pylist(rows) if rows else pa.table({"column": []}),
                       max_rows=1000))
    return 0


def _parse_params(items: Sequence[str]) -> dict[str, object]:
    params: dict[str, object] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep:
            raise SystemExit(f"--param {item!r}: expected NAME=VALUE")
        value: object = text
        for conv in (int, float):
            try:
                value = conv(text)
                break
            except ValueError:
                continue
        if text in ("true", "false"):
            value = text == "true"
        params[name] = value
    return params


def cmd_sql(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog
    from rayform.catalog._query import run_query

    cat = Catalog.open(args.catalog)
    df = cat.sql(args.query, param_values=_parse_params(args.param) or None)
    print(format_table(run_query(df.to_arrow_table, "SQL query"), max_rows=args.limit))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog, compute_statistics

    dataset = Catalog.open(args.catalog).get_dataset(args.dataset)
    columns = args.column or None
    if _connect_ray(args):
        from rayform.ray import compute_statistics as ray_statistics

        stats = ray_statistics(dataset, columns, timeline=args.timeline)
    else:
        stats = compute_statistics(dataset, columns, timeline=args.timeline)
    table = stats.to_arrow()
    if not args.per_segment:
        table = table.filter(table.column("rerun_segment_id").is_null())
    print(format_table(table, max_rows=args.limit))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    dataset = Catalog.open(args.catalog).get_dataset(args.dataset)
    view = dataset.filter_segments(args.segment) if args.segment else dataset
    if args.format == "rrd":
        from rayform.exporters import export_rrd

        if len(view.segment_ids()) != 1:
            raise SystemExit("export rrd: choose exactly one segment with --segment ID")
        path = export_rrd(view, view.segment_ids()[0], args.out)
        print(f"wrote {path}")
        return 0
    if args.fps is None:
        raise SystemExit("export lerobot: --fps is required")
    if _connect_ray(args):
        from rayform.ray import export_lerobot as ray_export

        result = ray_export(view, args.out, fps=args.fps, timeline=args.timeline)
    else:
        from rayform.exporters import export_lerobot

        result = export_lerobot(view, args.out, fps=args.fps, timeline=args.timeline,
                                progress=True)
    print(f"wrote LeRobot v3.0 dataset {result.root}: {result.num_episodes} episodes, "
          f"{result.num_frames} frames, features {', '.join(result.features)}")
    return 0


def cmd_slices(args: argparse.Namespace) -> int:
    import json

    import pyarrow as pa

    from rayform.client import Client

    client = Client(args.catalog)
    if args.slices_command == "create":
        time_range = None
        if args.time_range:
            timeline, start, end = args.time_range
            time_range = (timeline, int(start), int(end))
        created = client.slices.create(args.dataset, segments=args.segment or None,
                                       where=args.where, params=_parse_params(args.param) or None,
                                       time_range=_time_range(time_range), name=args.name)
        print(created.id)
        print(created.describe(), file=sys.stderr)
    elif args.slices_command == "list":
        rows = [{"id": s.id, "name": s.name or "", "dataset": s.to_dict().get("dataset"),
                 "segments": len(s.to_dict().get("segments", []))} for s in client.slices.list()]
        print(format_table(pa.Table.from_pylist(rows) if rows else pa.table({"id": []})))
    else:
        found = client.slices.get(args.slice_id)
        print(json.dumps(found.to_dict(), indent=2) if args.json else found.describe())
    return 0


def _time_range(value: tuple[str, int, int] | None) -> TimeRange | None:
    if value is None:
        return None
    from rayform.catalog import TimeRange

    timeline, start, end = value
    return TimeRange(timeline=timeline, start=start, end=end)


def cmd_pull(args: argparse.Namespace) -> int:
    from rayform.catalog import pull_slice
    from rayform.client import Client

    result = pull_slice(Client(args.catalog), args.slice_id, progress=True)
    print(result.summary())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from rayform.catalog._query import run_query
    from rayform.demo import SUMMARY_SQL, DemoSpec, build_demo

    spec = DemoSpec(num_episodes=args.episodes)
    print(f"writing the demo catalog at {args.catalog} …", file=sys.stderr)
    dataset = build_demo(args.catalog, spec, replace=args.replace, progress=True)
    print(f"dataset {dataset.name!r}: {len(dataset.segment_ids())} episodes, "
          f"columns: {', '.join(dataset.schema().component_columns())}")
    table = run_query(dataset.catalog.sql(SUMMARY_SQL).to_arrow_table, "demo summary")
    print(format_table(table))
    try:
        import torch  # noqa: F401
    except ImportError:
        print("(install rayform[torch] to see the training loader pass)")
        return 0
    from rayform.demo import loader_pass

    print(loader_pass(dataset))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rayform", description=__doc__)
    parser.add_argument("--catalog", default=None,
                        help="catalog URL or directory (default: $RAYFORM_CATALOG or "
                             "~/.local/share/rayform/catalog)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="create a catalog")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("register", help="register recordings (files or folders) as segments")
    p.add_argument("dataset")
    p.add_argument("paths", nargs="+")
    p.add_argument("--layer", default="base")
    p.add_argument("--on-duplicate", choices=["error", "skip", "replace"], default="error")
    p.add_argument("--create", action="store_true", help="create the dataset if missing")
    _ray_option(p)
    p.set_defaults(func=cmd_register)

    p = sub.add_parser("datasets", help="list datasets")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser("segments", help="print a dataset's segment table")
    p.add_argument("dataset")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=cmd_segments)

    p = sub.add_parser("schema", help="print a dataset's columns")
    p.add_argument("dataset")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("sql", help="run a SQL query and print the result")
    p.add_argument("query")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a $NAME parameter value (repeatable)")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("stats", help="per-column min/max/mean/std/quantiles (overall or per segment)")
    p.add_argument("dataset")
    p.add_argument("--column", action="append", default=[], help="a numeric column (repeatable)")
    p.add_argument("--timeline", default=None)
    p.add_argument("--per-segment", action="store_true", help="also print each segment's rows")
    p.add_argument("--limit", type=int, default=200)
    _ray_option(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("export", help="export to LeRobot v3.0 (a dataset) or .rrd (one segment)")
    p.add_argument("format", choices=["lerobot", "rrd"])
    p.add_argument("dataset")
    p.add_argument("out", help="output folder (lerobot) or .rrd file")
    p.add_argument("--segment", action="append", default=[], help="only this segment (repeatable)")
    p.add_argument("--fps", type=float, default=None, help="LeRobot frame rate (latest-at grid)")
    p.add_argument("--timeline", default=None)
    _ray_option(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("slices", help="saved, immutable selections of a dataset")
    slices = p.add_subparsers(dest="slices_command", required=True)
    q = slices.add_parser("create", help="pin a selection to its segment versions; prints its id")
    q.add_argument("dataset")
    q.add_argument("--segment", action="append", default=[], help="a segment id (repeatable)")
    q.add_argument("--where", default=None,
                   help='a SQL predicate over the segment table, e.g. \'"property:success"\'')
    q.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a $NAME parameter of --where (repeatable)")
    q.add_argument("--time-range", nargs=3, metavar=("TIMELINE", "START", "END"), default=None,
                   help="keep [START, END] on TIMELINE (integers; ns on temporal timelines)")
    q.add_argument("--name", default=None)
    q = slices.add_parser("list", help="list slices")
    q = slices.add_parser("show", help="describe one slice")
    q.add_argument("slice_id")
    q.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_slices)

    p = sub.add_parser("pull", help="prefetch a slice into the local cache (for offline training)")
    p.add_argument("slice_id")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("demo", help="write the demo catalog and print a SQL summary")
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--replace", action="store_true", help="rewrite the demo episodes")
    p.set_defaults(func=cmd_demo)
    return parser


def _ray_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                        help="run the work as Ray tasks (a local cluster, or ADDRESS)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.catalog is None:
        args.catalog = default_catalog_url()
    try:
        return int(args.func(args))
    except RayformError as err:
        print(f"rayform: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
