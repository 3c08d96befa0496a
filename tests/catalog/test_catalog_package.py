"""The public surface: ``__all__`` sorted and complete, no torch on import."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["rayform", "rayform.catalog", "rayform.errors"])
def test_all_is_sorted_and_complete(module: str) -> None:
    mod = importlib.import_module(module)
    exported = list(mod.__all__)
    assert exported == sorted(exported), f"{module}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    missing = [n for n in exported if not hasattr(mod, n)]
    assert not missing, f"{module}.__all__ names {missing} that do not exist"
    public = {
        name for name, value in vars(mod).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
        and getattr(value, "__module__", module).startswith("rayform")
    }
    unexported = sorted(public - set(exported))
    assert not unexported, f"{module} defines public names missing from __all__: {unexported}"


def test_every_error_inherits_rayform_error_and_a_builtin() -> None:
    from rayform import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        if issubclass(cls, Warning):
            continue
        assert issubclass(cls, errors.RayformError), name
        if cls not in (errors.RayformError, errors.CatalogError):
            builtins = [b for b in cls.__mro__ if b.__module__ == "builtins"
                        and b not in (Exception, BaseException, object)]
            assert builtins, f"{name} inherits no builtin a caller would catch"


@pytest.mark.parametrize("statement", ["import rayform", "import rayform.catalog",
                                       "import rayform.errors",
                                       "from rayform.catalog import Catalog, RecordingWriter"])
def test_import_does_not_load_torch(statement: str) -> None:
    code = f"{statement}\nimport sys\nassert 'torch' not in sys.modules, 'torch was imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
