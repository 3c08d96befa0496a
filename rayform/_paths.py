"""The one place that turns a ``/``-separated key into a path below a root, refusing escapes.

Keys and listed names come from metadata files and object-store listings, which are untrusted: a
component that is empty (an absolute key), ``.`` or ``..``, holds a separator or a NUL, or is longer
than a file name may be is refused before any path exists, so nothing read from a catalog can make
rayform read, write or delete a file outside the catalog directory or the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

from pydantic import AfterValidator

from rayform.errors import InvalidNameError

MAX_COMPONENT_BYTES: Final = 255


def component_problem(name: str) -> str | None:
    """Why ``name`` cannot be one path component (None when it can)."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty (an absolute key or a doubled '/')"
    if name in (".", ".."):
        return "is '.' or '..'"
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if "\x00" in name:
        return "contains a NUL character"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
        return f"is longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def _component(name: str) -> str:
    problem = component_problem(name)
    if problem is not None:
        raise ValueError(f"name {name[:80]!r} {problem}")
    return name


KeyComponent = Annotated[str, AfterValidator(_component)]
"""A pydantic field type: one name of a listing (a single, safe path component)."""


def path_under(root: Path, key: str, *, what: str) -> Path:
    """``root`` joined with the components of ``key`` (``""`` is ``root`` itself).

    Raises:
        InvalidNameError: a component of ``key`` would leave ``root`` or is not a file name.
    """
    if key == "":
        return root
    parts = key.split("/")
    for part in parts:
        problem = component_problem(part)
        if problem is not None:
            raise InvalidNameError(
                f"{what}: key {key[:200]!r} is refused: component {part[:80]!r} {problem}; "
                f"a key must stay inside {root}"
            )
    return root.joinpath(*parts)
