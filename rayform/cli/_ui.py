"""``rayform ui``: the catalog in a web browser (a local, read-only web application)."""

from __future__ import annotations

import argparse
import contextlib

from rayform.cli._args import add_command, catalog_url, non_negative_int, positive_float


def cmd_ui(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog
    from rayform.ui import ServeOptions, create_app, serve
    from rayform.ui._deps import require_ui

    require_ui()  # the missing extra first, before any catalog is opened
    options = ServeOptions(host=args.host, port=args.port, open_browser=not args.no_browser)
    app = create_app(Catalog.open(catalog_url(args)), sql_timeout_s=args.sql_timeout)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
        serve(app, options)
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # The defaults from the lowest layer: importing rayform.ui would load the web stack and
    # the catalog for every command's --help.
    from rayform._defaults import UI_HOST as DEFAULT_HOST
    from rayform._defaults import UI_PORT as DEFAULT_PORT
    from rayform._defaults import UI_SQL_TIMEOUT_S as DEFAULT_SQL_TIMEOUT_S

    p = add_command(sub, "ui", summary="browse the catalog in a web browser",
                    example="rayform ui --catalog my-catalog",
                    details="A local web page over the catalog: datasets, segment tables with a "
                            "SQL filter, episodes with their cameras and signals on one time "
                            "cursor, curation findings, SQL and slices (rayform[ui]). Read-only "
                            "but for saving a slice; listens on loopback unless --host says "
                            "otherwise.")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"the address to listen on (default: {DEFAULT_HOST}, this machine only; "
                        "0.0.0.0 exposes the catalog to the network and warns)")
    p.add_argument("--port", type=non_negative_int, default=DEFAULT_PORT,
                   help=f"the port (default: {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--sql-timeout", type=positive_float, default=DEFAULT_SQL_TIMEOUT_S,
                   metavar="SECONDS",
                   help="cancel a query of the SQL page or a table filter that runs longer "
                        f"(default: {DEFAULT_SQL_TIMEOUT_S:g})")
    p.set_defaults(func=cmd_ui)
