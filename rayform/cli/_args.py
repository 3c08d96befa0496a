"""Argument parsing shared by the sub-commands: the catalog option, output options, value types."""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from rayform._defaults import default_catalog_url
from rayform.cli._errors import UsageError
from rayform.cli._printing import FORMATS, OutputFormat

CATALOG_HELP = ("catalog directory or URL (s3://…, https://…); default: $RAYFORM_CATALOG, "
                "else ~/.local/share/rayform/catalog")
_DURATION = re.compile(r"(-?\d+(?:\.\d+)?)(ns|us|ms|s|min|h)")
_NS_PER_UNIT = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "min": 60 * 10**9, "h": 3600 * 10**9}
_MAX_COUNT = (1 << 63) - 1
_OFFSET = re.compile(r".*(Z|[+-]\d\d:?\d\d)$")


def catalog_option(parser: argparse.ArgumentParser, *, default: object) -> None:
    parser.add_argument("--catalog", metavar="URL", default=default, help=CATALOG_HELP)


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, *,
                summary: str, example: str, details: str = "") -> argparse.ArgumentParser:
    """A sub-command whose help has a one-line summary, optional details and an example.

    ``--catalog`` is accepted after the sub-command too (``rayform segments demo --catalog DIR``).
    """
    description = summary[0].upper() + summary[1:] + "." + (f"\n\n{details}" if details else "")
    parser = sub.add_parser(name, help=summary, description=description,
                            epilog=f"example:\n  {example}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    catalog_option(parser, default=argparse.SUPPRESS)
    return parser


def catalog_url(args: argparse.Namespace) -> str:
    return str(args.catalog) if args.catalog is not None else default_catalog_url()


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    if value > _MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {_MAX_COUNT}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number above zero (a rate, a number of seconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1e12:  # also refuses inf and nan
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text!r}")
    return value


def add_output_options(parser: argparse.ArgumentParser, *, default_limit: int = 50) -> None:
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (aligned text), csv or json (default: table)")
    parser.add_argument("--limit", type=non_negative_int, default=None, metavar="N",
                        help=f"print at most N rows; 0 prints all (default: {default_limit} in a "
                             "table, all in csv and json)")
    parser.set_defaults(default_limit=default_limit)


def output_format(args: argparse.Namespace) -> OutputFormat:
    limit = args.limit
    if limit is None:
        limit = args.default_limit if args.format == "table" else None
    return OutputFormat(format=args.format, limit=limit or None)


def parse_params(items: Sequence[str]) -> dict[str, object] | None:
    """``NAME=VALUE`` strings as SQL parameters: integers, floats and true/false are typed."""
    params: dict[str, object] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--param {item!r}: expected NAME=VALUE, e.g. --param site=lab-a")
        value: object = text
        if text in ("true", "false"):
            value = text == "true"
        else:
            for conv in (int, float):
                try:
                    value = conv(text)
                    break
                except ValueError:
                    continue
        params[name] = value
    return params or None


def time_value(text: str) -> Any:
    """A time on a timeline: an integer, an ISO date/time (UTC unless it names an offset), or a
    duration such as ``1.5s`` / ``250ms``.

    Returns:
        ``int``, ``numpy.datetime64[ns]`` or ``numpy.timedelta64[ns]``.
    """
    import numpy as np

    if re.fullmatch(r"-?\d+", text):
        return int(text)
    duration = _DURATION.fullmatch(text)
    if duration:
        return np.timedelta64(round(float(duration[1]) * _NS_PER_UNIT[duration[2]]), "ns")
    try:
        if _OFFSET.match(text):
            moment = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
            utc = moment.astimezone(dt.timezone.utc).replace(tzinfo=None)
            return np.datetime64(utc, "ns")
        return np.datetime64(text, "ns")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give an integer (sequence timelines, or ns), an ISO date or "
            "time such as 2026-01-01 or 2026-01-01T00:01:40Z, or a duration such as 1.5s"
        ) from None
