"""The executable documentation covers every code block: each names a language the tests run.

The blocks themselves run through sybil (``conftest.py`` at the repository root collects README.md
and docs/*.md); this checks that none escapes it by an unknown or missing language, and that the
blocks marked as not run are few and say why.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_LANGUAGES = {"python", "bash", "sql"}
DIAGRAMS = {"text", "mermaid"}  # layouts, call trees, graphs: not code
FENCE = re.compile(r"^```(\S*)\s*$", re.MULTILINE)


def _blocks(path: Path) -> list[tuple[str, str]]:
    """(language, the line above the block) for every fenced block of ``path``."""
    text = path.read_text()
    fences = list(FENCE.finditer(text))
    assert len(fences) % 2 == 0, f"{path.name}: an unclosed code fence"
    out = []
    for opening in fences[::2]:
        above = text[:opening.start()].rstrip().splitlines()
        out.append((opening[1], above[-1] if above else ""))
    return out


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_block_names_a_language_the_tests_run(path: Path) -> None:
    for language, _ in _blocks(path):
        assert language in RUN_LANGUAGES | DIAGRAMS, f"{path.name}: a ```{language} block"


def test_almost_every_block_runs() -> None:
    blocks = [(path.name, lang, above) for path in DOCUMENTS for lang, above in _blocks(path)
              if lang in RUN_LANGUAGES]
    not_run = [(name, above) for name, _, above in blocks if above.startswith("_Not run in CI:")]
    for name, above in not_run:
        assert re.fullmatch(r"_Not run in CI: .+\._", above), f"{name}: {above!r} says no reason"
    # 5 blocks install packages or start clusters; everything else runs as written
    assert len(not_run) <= 5 and len(blocks) >= 25, (len(blocks), not_run)
