"""The HDF5 fixture writers of the format tests (hdf5_sources.py) importable from here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "catalog" / "formats"))
