"""The command's entry point: the parser of every sub-command, and errors as one line each."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn, TextIO

import rayform
from rayform.cli import (
    _catalog_commands,
    _curate,
    _demo,
    _export,
    _lifecycle,
    _maintenance,
    _register,
    _slices,
    _sql,
    _stats,
    _ui,
)
from rayform.cli._args import catalog_option
from rayform.cli._errors import CommandError, UsageError, missing_extra_message
from rayform.errors import RayformError

DESCRIPTION = """\
rayform: an embedded catalog of robot recordings, with SQL over it and PyTorch datasets that
stream from it. A catalog is a directory (or s3:// / https:// URL); `rayform demo` writes one.
"""
EPILOG = """\
examples:
  rayform demo --episodes 2
  rayform sql 'SELECT * FROM demo.segments' --format csv
  rayform --catalog my-catalog register robots ep0.rfr --create

`rayform COMMAND --help` describes a command and its options.
"""


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command or choice."""

    def error(self, message: str) -> NoReturn:
        wrong = _INVALID_CHOICE.search(message)
        if wrong:
            choices = re.findall(r"'([^']*)'", wrong[2])
            close = difflib.get_close_matches(wrong[1], choices, n=1)
            if close:
                message = (f"{message.split(':', 1)[0]}: no such choice {wrong[1]!r}; did you "
                           f"mean {close[0]!r}? (choose from {', '.join(choices)})")
        super().error(message)


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """A warning as the command's own line: ``warning: …`` (no source line, no class name)."""
    print(f"warning: {message}", file=sys.stderr if file is None else file)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rayform", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"rayform {rayform.__version__}",
                        help="print the version and exit")
    catalog_option(parser, default=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (_catalog_commands, _register, _lifecycle, _sql, _stats, _curate, _export,
                   _slices, _demo, _maintenance, _ui):
        module.add_parsers(sub)
    return parser


def _quiet_broken_pipe() -> int:
    """The reader of our output left (``rayform sql … | head``): stop without a word."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    prog = " ".join(["rayform", args.command, *([args.slices_command]
                                                 if args.command == "slices" else [])])
    with warnings.catch_warnings():
        warnings.showwarning = show_warning
        return _run(args, prog)


def _run(args: argparse.Namespace, prog: str) -> int:
    try:
        return int(args.func(args))
    except UsageError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except (RayformError, CommandError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except ImportError as err:
        message = missing_extra_message(err, args.command)
        if message is None:
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 1
    except OSError as err:  # a file we were asked to write or read: say which, no traceback
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
