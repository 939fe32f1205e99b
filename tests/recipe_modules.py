"""The scripts under ``recipes/`` as modules, for the tests (they are scripts, not a package)."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_recipe(name: str) -> ModuleType:
    """``recipes/<name>.py``, loaded once per test process and registered under ``name`` (its
    dataclasses look their module up while it loads)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "recipes" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
