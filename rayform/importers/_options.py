"""Import options: what a source does not say about itself (its rate, its HDF5 layout).

Options are one typed object given to a registration (``register(…, import_options=…)``,
``rayform register --fps/--mapping``). Each importer names the options it reads
(:attr:`Importer.options_read`) and receives them through :meth:`Importer.configured`; an option
that no importer of the registration reads is refused, so that a ``--fps`` given to an MCAP file
is an error rather than silently ignored.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Protocol

from rayform.errors import ConfigError


class ReadsOptions(Protocol):
    """What :func:`require_options_read` needs of an importer."""

    @property
    def name(self) -> str: ...

    @property
    def options_read(self) -> frozenset[str]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOptions:
    """Options for importers whose sources leave something out.

    Attributes:
        rate_hz: the source's frame rate, for formats that store none (ALOHA/ACT HDF5, robomimic
            files without ``control_freq``, RLDS …): the importer writes a ``timestamp`` timeline
            on the exact frame grid. A rate the source itself declares wins only when none is given.
        hdf5_mapping: a mapping file (YAML or JSON) that declares an HDF5 layout rayform does not
            know (docs/formats.md, "HDF5 mapping files").
    """

    rate_hz: float | None = None
    hdf5_mapping: Path | None = None

    def __post_init__(self) -> None:
        rate = self.rate_hz
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)
                                 or not math.isfinite(rate) or rate <= 0):
            raise ConfigError(f"ImportOptions.rate_hz must be a finite rate > 0 in Hz, got {rate!r}")
        if self.hdf5_mapping is not None:
            if not isinstance(self.hdf5_mapping, str | os.PathLike):
                raise ConfigError("ImportOptions.hdf5_mapping must be a path to a mapping file, "
                                  f"got {type(self.hdf5_mapping).__name__}")
            object.__setattr__(self, "hdf5_mapping", Path(self.hdf5_mapping))

    def given(self) -> list[str]:
        """The names of the options that are set."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]


NO_OPTIONS = ImportOptions()


def require_options_read(options: ImportOptions, importers: Iterable[ReadsOptions]) -> None:
    """Refuse an option that none of ``importers`` reads.

    Raises:
        ConfigError: an option applies to none of the sources' formats.
    """
    used = list(importers)
    read = set().union(*(importer.options_read for importer in used))
    unread = [name for name in options.given() if name not in read]
    if unread:
        formats = sorted({importer.name for importer in used})
        raise ConfigError(
            f"import option(s) {unread} apply to none of the sources' formats ({formats}); "
            "leave them out, or register those sources separately"
        )
