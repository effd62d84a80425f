"""Loading a Python file that is not in a package (scripts/*.py, a generated model file) as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_module(path: Path, register: bool = False) -> ModuleType:
    """The module run from `path`, named after its stem. `register` also puts it in sys.modules first, which a
    script's dataclasses need (they look their module up there)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod
