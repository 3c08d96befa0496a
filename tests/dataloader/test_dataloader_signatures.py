"""rayform's API takes every argument Rerun 0.41's does, the same way (golden: frozen signatures).

``rerun_0_41_signatures.json`` was generated from rerun-sdk 0.41.0 by ``make_rerun_signatures.py``
(see its docstring), so this runs without rerun-sdk. For every Rerun parameter rayform has one of
the same name and kind, positional ones in the same order, and Rerun's default where Rerun has
one; rayform's own extra parameters are keyword-only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from make_rerun_signatures import describe

import rayform
import rayform.catalog
import rayform.dataloader

GOLDEN = json.loads((Path(__file__).parent / "rerun_0_41_signatures.json").read_text())

# Rerun parameters rayform leaves out on purpose, with the reason.
NOT_OFFERED = {
    "CatalogClient.__init__": {
        "object_store_auth": "object-store credentials come from the environment (AWS_*)",
        "addr": "deprecated in Rerun 0.29 (renamed url)",
    },
}


def _resolve(owner: Any, dotted: str) -> Any:
    target = owner
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def _mismatches(name: str, rerun: list[list[str | None]], ours: list[list[str | None]]
                ) -> list[str]:
    problems = []
    skipped = NOT_OFFERED.get(name, {})
    by_name = {p[0]: p for p in ours}
    theirs = [p for p in rerun if p[0] not in skipped]
    for pname, kind, default in theirs:
        mine = by_name.get(pname)
        if mine is None:
            problems.append(f"{name}: no parameter {pname!r}")
            continue
        if mine[1] != kind:
            problems.append(f"{name}({pname}): {mine[1]}, Rerun has {kind}")
        if default is not None and mine[2] != default:
            problems.append(f"{name}({pname}): default {mine[2]}, Rerun has {default}")
    positional = [p[0] for p in theirs if p[1] == "POSITIONAL_OR_KEYWORD"]
    ours_positional = [p[0] for p in ours if p[1] == "POSITIONAL_OR_KEYWORD"]
    if ours_positional != positional:
        problems.append(f"{name}: positional parameters {ours_positional}, Rerun has {positional}")
    rerun_names = {p[0] for p in rerun}
    for pname, kind, _ in ours:
        if pname not in rerun_names and kind not in ("KEYWORD_ONLY", "VAR_KEYWORD"):
            problems.append(f"{name}: rayform option {pname!r} must be keyword-only, is {kind}")
    return problems


def test_the_golden_file_is_rerun_0_41() -> None:
    assert GOLDEN["rerun_sdk"].startswith("0.41.")
    assert len(GOLDEN["dataloader_all"]) == 24


def test_dataloader_all_covers_rerun() -> None:
    missing = set(GOLDEN["dataloader_all"]) - set(rayform.dataloader.__all__)
    assert not missing
    for name in GOLDEN["dataloader_all"]:
        assert getattr(rayform.dataloader, name) is not None


@pytest.mark.parametrize("name", sorted(GOLDEN["signatures"]))
def test_dataloader_signature_matches_rerun(name: str) -> None:
    ours = describe(_resolve(rayform.dataloader, name))
    assert _mismatches(name, GOLDEN["signatures"][name], ours) == []


@pytest.mark.parametrize("method", sorted(GOLDEN["catalog_client"]))
def test_catalog_client_signature_matches_rerun(method: str) -> None:
    client = rayform.catalog.CatalogClient
    target = client if method == "__init__" else getattr(client, method)
    name = f"CatalogClient.{method}"
    assert _mismatches(name, GOLDEN["catalog_client"][method], describe(target)) == []
    assert rayform.CatalogClient is client


def test_the_checker_catches_differences() -> None:
    """The comparison itself: a renamed, re-kinded, re-defaulted or extra positional parameter."""
    rerun = [["a", "POSITIONAL_OR_KEYWORD", None], ["b", "KEYWORD_ONLY", "1"]]
    assert _mismatches("f", rerun, rerun) == []
    assert _mismatches("f", rerun, [["a", "KEYWORD_ONLY", None], ["b", "KEYWORD_ONLY", "1"]])
    assert _mismatches("f", rerun, [["a", "POSITIONAL_OR_KEYWORD", None],
                                    ["b", "KEYWORD_ONLY", "2"]])
    assert _mismatches("f", rerun, [["a", "POSITIONAL_OR_KEYWORD", None],
                                    ["x", "POSITIONAL_OR_KEYWORD", None],
                                    ["b", "KEYWORD_ONLY", "1"]])
    assert _mismatches("f", rerun, [["b", "KEYWORD_ONLY", "1"]])
