"""``rayform check``, ``rayform gc`` and ``rayform index``: catalog maintenance sub-commands.

Kept apart from :mod:`rayform.cli` so the main command can wire them in with one call::

    from rayform.cli_maintenance import add_parsers
    add_parsers(sub)   # sub = parser.add_subparsers(...)

Each handler takes the parsed arguments (with ``args.catalog``, the catalog URL) and returns the
exit status: ``check`` exits 1 when it finds damage.
"""

from __future__ import annotations

import argparse

SECONDS_PER_HOUR = 3600.0


def cmd_check(args: argparse.Namespace) -> int:
    from rayform.catalog import check_catalog

    report = check_catalog(args.catalog)
    print(report.summary())
    return 0 if report.ok else 1


def cmd_gc(args: argparse.Namespace) -> int:
    from rayform.catalog import gc_catalog

    report = gc_catalog(args.catalog, grace_s=args.grace_hours * SECONDS_PER_HOUR,
                        dry_run=args.dry_run)
    print(report.summary())
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog, index_catalog
    from rayform.errors import ConfigError
    from rayform.storage import LocalStore

    catalog = Catalog.open(args.catalog)  # refuses a folder that is not a catalog
    if not isinstance(catalog.store, LocalStore):
        raise ConfigError(f"rayform index: {catalog.url} is not a local catalog; run it on the "
                          "catalog directory before publishing it")
    count = index_catalog(catalog.url)
    print(f"{catalog.url}: wrote the listings of {count} folder(s); publish the folder with its "
          "hidden files")
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``check``, ``gc`` and ``index`` to the sub-command set ``sub`` of ``rayform``."""
    p = sub.add_parser("check", help="verify a catalog: metadata parses, objects exist and hash to "
                                     "their names, listings match (exit 1 on damage)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("gc", help="remove staging leftovers and unreferenced objects older than a "
                                  "grace period (local catalogs)")
    p.add_argument("--grace-hours", type=float, default=24.0,
                   help="keep anything younger than this (default 24; must exceed the longest "
                        "registration that may be running)")
    p.add_argument("--dry-run", action="store_true", help="only report what would be removed")
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser("index", help="rewrite the listing files a static HTTPS server needs "
                                     "(local catalogs)")
    p.set_defaults(func=cmd_index)
