"""The scripts under ``recipes/`` as modules, for the tests (they are scripts, not a package)."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_recipe(path: str) -> ModuleType:
    """``recipes/<path>.py`` (e.g. ``"study/compare"``), loaded once per test process and
    registered under its file name (its dataclasses look their module up while it loads). A
    script imports its siblings by name, as Python lets a script do (its folder first on the
    path): the same folder is put on the path here while it loads."""
    file = ROOT / "recipes" / f"{path}.py"
    name = file.stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(file.parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(file.parent))
    return sys.modules[name]


def train_killed(call: int, cfg, monkeypatch, owner, name: str) -> None:
    """``recipes/trpo_vase.py``'s ``train(cfg)`` interrupted (``KeyboardInterrupt``) in the
    ``call``-th call of ``owner.name`` (a module's function or a class's method), as a kill
    between two checkpoints."""
    import pytest

    calls, original = [], getattr(owner, name)

    def crash(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt("killed")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, crash)
    with pytest.raises(KeyboardInterrupt):
        load_recipe("trpo_vase").train(cfg)
    monkeypatch.setattr(owner, name, original)


def train_killed_in_critic_fit(call: int, cfg, monkeypatch) -> None:
    """``train(cfg)`` killed in its ``call``-th critic fit: one call per iteration."""
    from torchrl_vase.objectives import critic_fit as algorithm

    train_killed(call, cfg, monkeypatch, algorithm, "fit_critic")
