"""What the command prints instead of a traceback: one line naming the problem and its fix."""

from __future__ import annotations

import re
from pathlib import Path

import rayform

# The top-level module each optional extra brings, for ImportErrors raised without a hint.
EXTRA_OF_MODULE = {
    "av": "video",
    "PIL": "image",
    "simplejpeg": "fastjpeg",
    "rerun": "rerun",
    "mcap": "mcap",
    "mcap_ros2": "mcap",
    "yaml": "mcap",
    "boto3": "s3",
    "botocore": "s3",
    "ray": "ray",
    "torch": "torch",
    "matplotlib": "plot",
    "google_crc32c": "rlds",
    "zarr": "zarr",
    "numcodecs": "zarr",
    "starlette": "ui",
    "uvicorn": "ui",
    "jinja2": "ui",
}


class UsageError(Exception):
    """A command line that parses but asks for something impossible (exit status 2)."""


class CommandError(Exception):
    """A command that cannot do what it was asked, for a reason it states (exit status 1)."""


_EXTRA_HINT = re.compile(r"pip install '?rayform\[([a-z,]+)\]'?")


def install_hint(extra: str) -> str:
    """The command that installs ``rayform[extra]`` here: from the clone this rayform runs from
    (an editable install), else by name."""
    root = Path(rayform.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file():
        return f"pip install -e '{root}[{extra}]'"
    return f"pip install 'rayform[{extra}]'"


def missing_extra_message(err: ImportError, command: str) -> str | None:
    """One line for an ImportError of an optional dependency; ``None`` for any other."""
    text = str(err)
    named = _EXTRA_HINT.search(text)
    if named:
        return _EXTRA_HINT.sub(install_hint(named[1]), text).splitlines()[0]
    module = (err.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return f"rayform {command} needs the {module!r} package: {install_hint(extra)}"
