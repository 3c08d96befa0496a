"""``rayform sql``: a read-only SQL query over the catalog, printed as a table, CSV or JSON."""

from __future__ import annotations

import argparse
import re
import sys

from rayform.cli._args import (
    add_command,
    add_output_options,
    catalog_url,
    output_format,
    parse_params,
    positive_float,
)
from rayform.cli._printing import print_table


def case_hint(query: str, dataset_names: list[str]) -> str | None:
    """A hint for a dataset name with capitals written unquoted (SQL folds it to lower case)."""
    for name in dataset_names:
        if name != name.lower() and re.search(rf'(?<!["\w]){re.escape(name)}(?!["\w])', query,
                                              flags=re.IGNORECASE):
            return (f'dataset names are case-sensitive and SQL folds unquoted names to lower case: '
                    f'write "{name}" in double quotes, e.g. SELECT * FROM "{name}".segments')
    return None


def cmd_sql(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog
    from rayform.errors import QueryError

    cat = Catalog.open(catalog_url(args))
    try:
        df = cat.sql(args.query, param_values=parse_params(args.param),
                     allow_statements=args.allow_statements, timeout_s=args.timeout)
        table = df.to_arrow_table()
    except QueryError as err:
        hint = case_hint(args.query, cat.dataset_names())
        if hint is None:
            raise
        raise QueryError(f"{err}; hint: {hint}") from err
    if table.num_columns == 0:
        print("statement ran (in this process's SQL session only)", file=sys.stderr)
        return 0
    print_table(table, output_format(args))
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "sql", summary="run a SQL query over the catalog and print the result",
        example="""rayform sql 'SELECT rerun_segment_id FROM demo.segments WHERE "property:task" = $t' """
                """--param t="open the drawer\"""",
        details="Every dataset is a SQL schema: DATASET.segments, DATASET.index_ranges and "
                'DATASET."/entity/path". Quote column names with colons or capitals in double '
                "quotes, strings in single quotes.")
    p.add_argument("query", help="one SQL query (DataFusion's dialect)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a value for $NAME in the query (repeatable; numbers and true/false typed)")
    p.add_argument("--allow-statements", action="store_true",
                   help="also run DDL, DML and SET statements; DataFusion may then read and "
                        "write any file this process can, so use it only for SQL you trust")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="cancel the query if planning or running it takes longer")
    add_output_options(p)
    p.set_defaults(func=cmd_sql)
