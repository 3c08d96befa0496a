"""Sub-commands that verify and clean a catalog: check, gc."""

from __future__ import annotations

import argparse

from rayform.cli._args import add_command, catalog_url

SECONDS_PER_HOUR = 3600.0


def cmd_check(args: argparse.Namespace) -> int:
    from rayform.catalog import check_catalog

    report = check_catalog(catalog_url(args))
    print(report.summary())
    return 0 if report.ok else 1


def cmd_gc(args: argparse.Namespace) -> int:
    from rayform.catalog import gc_catalog

    report = gc_catalog(catalog_url(args), grace_s=args.grace_hours * SECONDS_PER_HOUR,
                        dry_run=args.dry_run)
    print(report.summary())
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "check", summary="verify a catalog and exit 1 if it is damaged",
                    example="rayform check --catalog my-catalog",
                    details="Every metadata file must parse, every object it names must exist "
                            "and hash to its name, and (local catalogs) every listing file must "
                            "name what its folder holds. Nothing is written.")
    p.set_defaults(func=cmd_check)

    p = add_command(sub, "gc", summary="remove staging leftovers and unreferenced objects",
                    example="rayform gc --catalog my-catalog --dry-run",
                    details="Only what no snapshot (of any version) and no slice names, and only "
                            "when older than the grace period, which must exceed the longest "
                            "registration that may be running. Local and s3:// catalogs; "
                            "nothing is removed while any metadata file cannot be read.")
    p.add_argument("--grace-hours", type=float, default=24.0, metavar="H",
                   help="keep anything younger than H hours (default: 24)")
    p.add_argument("--dry-run", action="store_true", help="only report what would be removed")
    p.set_defaults(func=cmd_gc)
