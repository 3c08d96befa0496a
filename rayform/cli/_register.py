"""``rayform register``: recordings into a dataset, creating it only once every source converted."""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import TYPE_CHECKING

from rayform.cli._args import add_command, catalog_url

CLI_DUPLICATE_FIX = ("pass --on-duplicate replace to overwrite it, or --on-duplicate skip to keep "
                     "it")
SHOWN_IDS = 10

if TYPE_CHECKING:
    from rayform.catalog import Catalog, ImportOptions
    from rayform.catalog._registration import OnDuplicate, PreparedLayer
    from rayform.storage._fetch import SourceUri


def connect_ray(args: argparse.Namespace) -> bool:
    """Connect to Ray when ``--ray [ADDRESS]`` was given; True if the Ray path should run."""
    if args.ray is None:
        return False
    from rayform.ray import connect

    connect(args.ray or None)
    return True


def add_ray_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                        help="run the work as Ray tasks: on a local cluster, or the cluster at "
                             "ADDRESS (needs rayform[ray])")


def import_options(args: argparse.Namespace) -> ImportOptions:
    """The :class:`ImportOptions` of ``--fps`` and ``--mapping``."""
    from rayform.catalog import ImportOptions

    return ImportOptions(rate_hz=args.fps, hdf5_mapping=args.mapping)


def prepare_locally(catalog: Catalog, sources: list[SourceUri], layers: list[str],
                    policy: OnDuplicate, *, progress: bool,
                    options: ImportOptions) -> list[PreparedLayer]:
    """Convert, validate and store every source, committing nothing.

    Everything that can be wrong with the input (a missing file, an unknown or damaged format, a
    bad id, two sources of one segment, two column types) raises here, before any dataset exists.
    """
    from rayform.catalog._preparation import convert_sources, store_layers
    from rayform.catalog._registration import registration_change

    staging = catalog.store.staging_dir()
    try:
        inspected = convert_sources(sources, layers, staging, desc="convert", show=progress,
                                    options=options)
        registration_change(None, inspected, policy)  # raises on a conflict, writes nothing
        return store_layers(catalog.store, inspected, desc="store", show=progress)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def cmd_register(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog
    from rayform.catalog._preparation import refuse_registered, registered_sources
    from rayform.catalog._registration import DUPLICATE_FIX, OnDuplicate, registration_request
    from rayform.errors import ConfigError, DuplicateSegmentError, EntryNotFoundError

    cat = Catalog.open(catalog_url(args))
    options = import_options(args)
    paths, layers, policy = registration_request(args.paths, args.layer, args.on_duplicate,
                                                  caller="register")
    exists = args.dataset in cat.dataset_names()
    if not exists and not args.create:
        raise EntryNotFoundError(
            f"catalog {cat.url} has no dataset {args.dataset!r}; add --create to create it, "
            f"datasets: {cat.dataset_names()}"
        )
    if args.ray is not None and options.given():
        raise ConfigError("--fps and --mapping are not passed to Ray tasks yet; register these "
                          "sources without --ray")
    if exists:
        dataset = cat.get_dataset(args.dataset)
        known = set(dataset.segment_ids())
        found = registered_sources(paths, layers,
                                   lambda i: dataset.segment_record(i) if i in known else None)
        if policy is OnDuplicate.ERROR:
            refuse_registered(found, fix=CLI_DUPLICATE_FIX)
        if policy is OnDuplicate.SKIP and found:
            done = {f.uri for f in found}
            args.paths = [u for u, s in zip(args.paths, paths, strict=True) if s.uri not in done]
            for item in found:
                print(f"skipped {item.uri}: already registered in layer {item.layer_name!r} "
                      f"({', '.join(shown_ids(list(item.segment_ids)))})", file=sys.stderr)
    if not args.paths:
        print(f"registered nothing into {args.dataset!r}: all {len(paths)} source(s) are there "
              "already; --on-duplicate replace overwrites them")
        return 0
    ray = connect_ray(args)
    if exists:
        if ray:
            from rayform.ray import register_many

            handle = register_many(dataset, args.paths, layer_name=args.layer,
                                   on_duplicate=policy)
        else:
            handle = dataset.register(args.paths, layer_name=args.layer, on_duplicate=policy,
                                      progress=sys.stderr.isatty(), import_options=options)
    else:
        if ray:
            from rayform.ray._ingest import prepare_many

            prepared = prepare_many(cat, args.paths, layer_name=args.layer)
        else:
            prepared = prepare_locally(cat, paths, layers, policy, progress=sys.stderr.isatty(),
                                       options=options)
        dataset = cat.create_dataset(args.dataset, exist_ok=True)
        print(f"created dataset {args.dataset!r}", file=sys.stderr)
        handle = dataset.register_prepared(prepared, on_duplicate=policy)
    try:
        ids = handle.wait().segment_ids
    except DuplicateSegmentError as err:  # found only after converting (formats without ids)
        raise DuplicateSegmentError(str(err).replace(DUPLICATE_FIX, CLI_DUPLICATE_FIX)) from err
    if ids:
        print(f"registered {len(ids)} segment(s) into {args.dataset!r}: "
              + ", ".join(shown_ids(ids)))
    if ids and args.curate:
        from rayform.curation import check_registered

        checked = check_registered(cat.get_dataset(args.dataset), ids)
        print(f"checked {len(ids)} segment(s): {checked.findings.num_rows} finding(s), "
              f"{sum(v.verdict != 'ok' for v in checked.verdicts)} segment(s) to review or "
              f"exclude (SELECT * FROM {args.dataset}.findings)",
              file=sys.stderr)
    if not ids:
        print(f"registered nothing into {args.dataset!r}: every segment is there already "
              "(--on-duplicate skip); --on-duplicate replace overwrites them")
    return 0


def shown_ids(ids: list[str]) -> list[str]:
    return ids[:SHOWN_IDS] + ([f"… {len(ids) - SHOWN_IDS} more"] if len(ids) > SHOWN_IDS else [])


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "register", summary="register recordings (files or folders) as segments",
                    example="rayform register robots ep0.rfr ep1.rfr --create",
                    details="Accepts rayform recordings (.rfr), Rerun .rrd (rayform[rerun]), ROS 2 "
                            "MCAP files and rosbag2 folders (rayform[mcap]), LeRobot folders and "
                            "MP4 files (rayform[video]), ROS 1 .bag and ROS 2 .db3 bags "
                            "(rayform[rosbag]), RLDS / TFDS builder folders (rayform[rlds]), Zarr "
                            "replay buffers (rayform[zarr]), HDF5 files (rayform[hdf5]) and PX4 "
                            "ULog files (rayform[ulog]). Either every segment lands or none does.")
    p.add_argument("dataset", help="the dataset to register into")
    p.add_argument("paths", nargs="+", metavar="URI",
                   help="recording files or folders, file:// URIs, or s3:// / https:// files")
    p.add_argument("--layer", default="base", help="the layer the recordings fill (default: base)")
    p.add_argument("--on-duplicate", choices=["error", "skip", "replace"], default="error",
                   help="when a segment already has this layer: fail (default), keep it, or "
                        "replace it")
    p.add_argument("--create", action="store_true",
                   help="create the dataset if missing (only once every source has converted)")
    p.add_argument("--fps", type=float, default=None, metavar="RATE_HZ",
                   help="the frame rate of sources that store none (RLDS, Zarr, HDF5): adds a "
                        "timestamp timeline on the exact frame grid")
    p.add_argument("--mapping", default=None, metavar="FILE",
                   help="an HDF5 mapping file (YAML or JSON) declaring a layout rayform does not "
                        "know; see docs/formats.md")
    p.add_argument("--curate", action="store_true",
                   help="run the cheap checks that need no other segment (lengths, index, "
                        "timestamps, rates, NaN, stored statistics, video frame counts) on the "
                        "new segments and keep their findings (SELECT * FROM <dataset>.findings)")
    add_ray_option(p)
    p.set_defaults(func=cmd_register)
