"""Tests of the benchmarks' own tools: ``benchmarks/`` is put on the import path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
