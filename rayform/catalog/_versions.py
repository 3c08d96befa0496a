"""Optimistic, atomic commits of an entry's metadata snapshots.

Each commit writes the next numbered snapshot ``entries/<name>/versions/<n>.json`` with an exclusive
create. Two writers racing for the same number: one wins, the other re-reads the winner's snapshot,
re-applies its change and tries ``n + 1`` — so no update is ever lost, and a writer killed at any
point leaves either the old or the new snapshot visible, never a partial one.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from rayform.errors import CommitConflictError, CorruptMetadataError
from rayform.storage._documents import dump_model, parse_model
from rayform.storage._store import Store

_V = TypeVar("_V", bound=BaseModel)

MAX_COMMIT_ATTEMPTS = 200
_VERSION_FILE = re.compile(r"[0-9]{1,18}\.json")


def entry_prefix(name: str) -> str:
    return f"entries/{name}"


def entry_key(name: str) -> str:
    return f"{entry_prefix(name)}/entry.json"


def version_key(name: str, number: int) -> str:
    return f"{entry_prefix(name)}/versions/{number:012d}.json"


def latest_version_number(store: Store, name: str) -> int:
    """The newest committed snapshot number of an entry (0 when it has none)."""
    numbers = [int(n[:-5]) for n in store.list_names(f"{entry_prefix(name)}/versions")
               if _VERSION_FILE.fullmatch(n)]
    return max(numbers, default=0)


def load_version(store: Store, name: str, number: int, model: type[_V]) -> _V:
    key = version_key(name, number)
    parsed = parse_model(model, store.read_bytes(key), source=f"{store.url}/{key}")
    if getattr(parsed, "version", number) != number:
        raise CorruptMetadataError(
            f"{store.url}/{key}: snapshot file {number} says it is version "
            f"{getattr(parsed, 'version', None)!r} (renamed or crafted file)"
        )
    return parsed


def commit(store: Store, name: str, model: type[_V], mutate: Callable[[_V | None, int], _V]) -> _V:
    """Apply ``mutate(latest_or_None, next_number)`` and commit the result as the next snapshot.

    ``mutate`` may raise to abort; nothing is written then. It is called again after losing a race.
    """
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        current = latest_version_number(store, name)
        old = load_version(store, name, current, model) if current else None
        new = mutate(old, current + 1)
        if store.create_exclusive(version_key(name, current + 1), dump_model(new)):
            return new
        time.sleep(random.uniform(0, 0.002 * (1 + attempt)))
    raise CommitConflictError(
        f"entry {name!r}: gave up after {MAX_COMMIT_ATTEMPTS} concurrent commit attempts; retry"
    )
