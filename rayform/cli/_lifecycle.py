"""Sub-commands that change what a catalog holds: datasets delete / rename, unregister.

Each is one atomic commit (see ``rayform/catalog/_lifecycle.py``) and asks before it acts when
run in a terminal; scripts confirm with ``--yes`` (without a terminal and without ``--yes`` the
command refuses, so that a pipeline never deletes by accident).
"""

from __future__ import annotations

import argparse
import sys

from rayform.cli._args import add_command, catalog_url
from rayform.cli._errors import CommandError, UsageError


def confirm(question: str, *, yes: bool) -> None:
    """Return when the user agrees (or ``--yes``); raise otherwise.

    Raises:
        UsageError: no terminal to ask and no ``--yes``.
        CommandError: the user said no.
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question.rstrip('?')} needs confirmation: pass --yes (stdin is not a "
                         "terminal to ask)")
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise CommandError("cancelled; nothing was changed")


def _yes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", "-y", action="store_true",
                        help="do not ask for confirmation (for scripts)")


def cmd_delete(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    ds = Catalog.open(catalog_url(args)).get_dataset(args.name)
    confirm(f"delete dataset {ds.name!r} ({len(ds.segment_ids())} segments, snapshot "
            f"{ds.snapshot_version})?", yes=args.yes)
    ds.delete()
    print(f"deleted dataset {ds.name!r}; slices pinned to it keep reading until `rayform gc` "
          "finds nothing else naming its files")
    return 0


def cmd_rename(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    ds = Catalog.open(catalog_url(args)).get_dataset(args.name)
    confirm(f"rename dataset {ds.name!r} to {args.new_name!r}?", yes=args.yes)
    ds.set_name(args.new_name)
    print(f"renamed dataset {args.name!r} to {ds.name!r} ({len(ds.segment_ids())} segments, "
          f"snapshot {ds.snapshot_version})")
    return 0


def cmd_unregister(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    if not args.segments and not args.layer:
        raise UsageError("name the segments to remove, or --layer to remove a layer of every "
                         "segment (or both)")
    ds = Catalog.open(catalog_url(args)).get_dataset(args.dataset)
    what = (", ".join(args.segments) if args.segments else "every segment")
    layers = f"layer(s) {', '.join(args.layer)} of " if args.layer else ""
    confirm(f"remove {layers}{what} from dataset {ds.name!r}?", yes=args.yes)
    result = ds.unregister(segments_to_drop=args.segments, layers_to_drop=args.layer).wait()
    if result.snapshot_version is None:
        print(f"nothing matched in dataset {ds.name!r}; nothing was changed")
        return 0
    for segment_id, removed in result.layers.items():
        gone = " (left the dataset)" if segment_id in result.segment_ids else ""
        print(f"{segment_id}: removed layer(s) {', '.join(removed)}{gone}")
    print(f"dataset {ds.name!r} is at snapshot {result.snapshot_version}; earlier snapshots keep "
          "the removed data readable until `rayform gc`")
    return 0


def add_dataset_actions(parser: argparse.ArgumentParser) -> None:
    """``rayform datasets delete NAME`` and ``rayform datasets rename NAME NEW_NAME``."""
    actions = parser.add_subparsers(dest="datasets_command", metavar="ACTION")
    p = add_command(actions, "delete", summary="delete a dataset (one atomic commit)",
                    example="rayform datasets delete scratch --yes",
                    details="Slices pinned to its snapshots keep reading until `rayform gc` "
                            "reclaims what nothing else names; the name can be used again.")
    p.add_argument("name", help="the dataset's name")
    _yes_option(p)
    p.set_defaults(func=cmd_delete)
    p = add_command(actions, "rename", summary="rename a dataset (one atomic commit)",
                    example="rayform datasets rename scratch fleet-2026 --yes",
                    details="No data is copied; slices made before keep reading under the old "
                            "name.")
    p.add_argument("name", help="the dataset's name")
    p.add_argument("new_name", metavar="NEW_NAME", help="its new name")
    _yes_option(p)
    p.set_defaults(func=cmd_rename)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "unregister", summary="remove segments, or layers, from a dataset",
                    example="rayform unregister robots ep3 ep7 --yes",
                    details="The named segments (every segment when none is named) times the "
                            "--layer names (every layer when none): a segment that loses its "
                            "last layer leaves the dataset. One atomic commit; earlier snapshots "
                            "keep the data readable until `rayform gc`.")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("segments", nargs="*", metavar="SEGMENT", help="segment ids to remove")
    p.add_argument("--layer", action="append", default=[], metavar="L",
                   help="remove only this layer (repeat for several)")
    _yes_option(p)
    p.set_defaults(func=cmd_unregister)
