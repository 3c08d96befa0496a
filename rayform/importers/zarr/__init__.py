"""Zarr replay buffers (Diffusion Policy's ``ReplayBuffer``, UMI): v2 and v3, folder or ``.zip``."""

from __future__ import annotations

from rayform.importers.zarr._importer import ZarrImporter

__all__ = ["ZarrImporter"]
