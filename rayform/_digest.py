"""Content digests read from untrusted metadata: 64 lowercase hex characters, never a path.

Every sha256 named by a catalog file (a snapshot's segment index, a layer's object, an asset, a
slice's or a table's objects, a recording's assets) is parsed as :data:`Digest`, and every path
built from one goes through :func:`require_digest` first, so a crafted ``"../../x"`` or
``"/etc/passwd"`` is refused wherever it enters.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import StringConstraints

from rayform.errors import CorruptMetadataError

DIGEST_PATTERN: Final = r"^[0-9a-f]{64}$"
_DIGEST_RE: Final = re.compile(DIGEST_PATTERN)

Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
"""A pydantic field type: a sha256 as 64 lowercase hex characters."""


def is_digest(text: object) -> bool:
    """True when ``text`` is a sha256 written as 64 lowercase hex characters."""
    return isinstance(text, str) and _DIGEST_RE.fullmatch(text) is not None


def require_digest(text: object, *, what: str) -> str:
    """``text`` if it is a digest.

    Raises:
        CorruptMetadataError: anything else (a path, ``..``, a NUL, the wrong length), naming
            ``what`` it was read as.
    """
    if not is_digest(text):
        shown = text[:80] if isinstance(text, str) else text
        raise CorruptMetadataError(
            f"{what}: {shown!r} is not a content digest (64 lowercase hex characters); the "
            "metadata that named it is damaged or crafted — refusing to use it as a file name"
        )
    assert isinstance(text, str)
    return text
