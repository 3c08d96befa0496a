"""The ``rayform`` command: catalogs, registration, SQL, statistics, export, viewing, slices, demo."""

from __future__ import annotations

from rayform.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
