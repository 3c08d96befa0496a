"""``pip install "rayform[torch]"`` is enough for the guide's five lines (JPEG and video cameras)."""

from __future__ import annotations

import re
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# What the guide's sample path imports beyond the core dependencies: torch, Pillow for JPEG
# cameras (ImageDecoder without simplejpeg), PyAV for video cameras (VideoFrameDecoder).
GUIDE_MODULES = ("torch", "PIL", "av")


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].strip().lower() for r in requirements}


def test_the_torch_extra_installs_what_the_guide_imports() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extra = requirement_names(project["optional-dependencies"]["torch"])
    providers = packages_distributions()
    for module in GUIDE_MODULES:
        dists = {d.lower() for d in providers.get(module, [])}
        assert dists, f"{module} is not installed here"
        assert dists & extra, f"rayform[torch] does not install {module} ({sorted(dists)})"
