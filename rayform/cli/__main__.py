"""``python -m rayform.cli``: the ``rayform`` command."""

from __future__ import annotations

import sys

from rayform.cli import main

sys.exit(main())
