"""How much of the library one run reaches: the library files whose functions a short
TRPO + VASE run calls, and the library's size.

Runs ``recipes/trpo_vase.py`` in this process under cProfile (MountainCar, VASE, two iterations,
a checkpoint and an evaluation every iteration, a scratch MLflow store and checkpoint directory)
and prints each library file it called a function in, with the functions' count, then the count
of files and the library's Python lines. Module bodies are left out (what importing a module
runs: its top-level statements, its class bodies, their comprehensions); ``--with-class-bodies``
counts a file whose class bodies alone ran too.

    python recipes/benchmarks/library_reach.py [--with-class-bodies] [overrides ...]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import linecache
import pstats
import runpy
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "torchrl_vase"


def reached_files(overrides: list[str], class_bodies: bool) -> dict[str, set[str]]:
    """The library files whose functions the run called, with those functions' names."""
    with tempfile.TemporaryDirectory() as scratch:
        sys.argv = ["recipes/trpo_vase.py", "iterations=2", "threads=1", "progress_bar=false",
                    "eval.every=1", "checkpoint.every=1",
                    f"mlflow.tracking_uri=sqlite:///{scratch}/m.db",
                    f"checkpoint.dir={scratch}/checkpoints", f"hydra.run.dir={scratch}/hydra",
                    *overrides]
        profile = cProfile.Profile()
        profile.enable()
        with contextlib.suppress(SystemExit):  # the recipe's own exit
            runpy.run_path(str(ROOT / "recipes" / "trpo_vase.py"), run_name="__main__")
        profile.disable()
    files: dict[str, set[str]] = {}
    for filename, line, function in pstats.Stats(profile).stats:
        path = Path(filename)
        if function == "<module>" or PACKAGE not in path.parents:
            continue
        source = linecache.getline(filename, line)
        module_level = not source.startswith((" ", "\t"))
        if (source.lstrip().startswith("class ") and not class_bodies) or (
                function.startswith("<") and module_level):
            continue  # run by the module's import
        files.setdefault(str(path.relative_to(PACKAGE)), set()).add(function)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--with-class-bodies", action="store_true")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    files = reached_files(args.overrides, args.with_class_bodies)
    for name in sorted(files):
        print(f"{name:<34} {len(files[name]):>4} functions")
    lines = sum(len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py"))
    print(f"\n{len(files)} library files called; torchrl_vase/ holds {lines:,} Python lines")


if __name__ == "__main__":
    main()
