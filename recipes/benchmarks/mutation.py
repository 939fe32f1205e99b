"""Mutation testing of the library's core (issue 100): every mutant mutmut makes of a module,
run against the tests that cover it, and the module's score.

    python recipes/benchmarks/mutation.py                          # every module of MODULES
    python recipes/benchmarks/mutation.py --modules gaussian trpo  # some
    python recipes/benchmarks/mutation.py --report docs/mutation.md

Each module runs in a scratch copy of this checkout (the files git tracks, as they are in the
working tree) with mutmut 3 (``pip install 'mutmut>=3.8'``) told to mutate that one file and to
run the tests named for it. Its score is killed / (killed + survived + timed out + suspicious +
reached by no test): a mutant no test reaches counts against it. Not part of ``make test``: a
module takes minutes to hours. A surviving mutant is either killed by a new test that asserts
behaviour or recorded as equivalent, with the reason, in the report (``mutmut show <name>``
prints one)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTMUT = Path(sys.executable).with_name("mutmut")

#: module -> (its file, the tests that cover it)
MODULES = {
    "gaussian": ("torchrl_vase/gaussian.py", ["tests/test_elbo_loss.py", "tests/test_surprise.py"]),
    "surprise": ("torchrl_vase/surprise.py",
                 ["tests/test_surprise.py", "tests/test_properties.py"]),
    "elbo": ("torchrl_vase/objectives/elbo.py", ["tests/test_elbo_loss.py"]),
    "trainer": ("torchrl_vase/objectives/trainer.py",
                ["tests/test_elbo_kernel.py", "tests/test_exploration.py",
                 "tests/test_forward_bonus.py"]),
    "trpo": ("torchrl_vase/objectives/trpo.py", ["tests/test_trpo.py"]),
    "advantage": ("torchrl_vase/objectives/advantage.py", ["tests/test_advantage.py"]),
    "forward_losses": ("torchrl_vase/objectives/forward_losses.py",
                       ["tests/test_forward_bonus.py"]),
    # the network's tests, and those of what drives it: the measures, the ELBO and its kernel
    "bayesian_mlp": ("torchrl_vase/modules/bayesian_mlp.py",
                     ["tests/test_bayesian_mlp.py", "tests/test_local_reparameterization.py",
                      "tests/test_surprise.py", "tests/test_elbo_loss.py",
                      "tests/test_elbo_kernel.py", "tests/test_properties.py"]),
    "forward_models": ("torchrl_vase/modules/forward_models.py", ["tests/test_forward_bonus.py"]),
    # a transform's tests, and those of the loop that drives it (Exploration)
    "intrinsic": ("torchrl_vase/transforms/intrinsic.py",
                  ["tests/test_transforms.py", "tests/test_exploration.py",
                   "tests/test_forward_bonus.py"]),
    "surprise_reward": ("torchrl_vase/transforms/surprise_reward.py",
                        ["tests/test_transforms.py", "tests/test_exploration.py",
                         "tests/test_forward_bonus.py"]),
    "checkpointing": ("torchrl_vase/checkpointing.py",
                      ["tests/test_checkpointing.py", "tests/test_properties.py"]),
    # mutmut leaves decorated functions alone and every kernel is a numba.njit: the scratch copy
    # drops the decorators and runs numba's kernels as Python (NUMBA_DISABLE_JIT), UNCOMPILED
    "kernels": ("torchrl_vase/kernels.py",
                ["tests/test_elbo_kernel.py", "tests/test_bayesian_mlp.py",
                 "tests/test_advantage.py"]),
    # the loop's resume: its state, the steps it logs again after a resume, its signals
    "loop": ("torchrl_vase/loop.py", ["tests/test_loop.py", "tests/test_checkpointing.py"]),
}
UNCOMPILED = {"kernels"}
COUNTS = ("killed", "survived", "timeout", "suspicious", "no_tests")


def scratch_copy(into: Path) -> None:
    """The files git tracks, as they are in the working tree, under ``into``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = ROOT / name, into / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def without_numba_decorators(path: Path) -> None:
    """``path`` without its ``@numba.njit(...)`` lines (run as Python, its functions mutate)."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if not line.lstrip().startswith("@numba.")))


def statuses(folder: Path, env: dict) -> dict[str, str]:
    """Every mutant of ``folder``'s run and its status as mutmut words it (``killed``, ``no
    tests``, ``not checked``, ...)."""
    listed = subprocess.run([str(MUTMUT), "results", "--all", "true"], cwd=folder, check=True,
                            capture_output=True, text=True, env=env).stdout
    return dict(line.strip().split(": ", 1) for line in listed.splitlines() if ": " in line)


def mutate(name: str, scratch: Path, workers: int, sample: int = 0,
           seed: int = 0) -> dict[str, int]:
    """mutmut's counts for one module (``MODULES[name]``); ``sample``: of that many of its
    mutants, drawn at random (``seed``), alone."""
    path, tests = MODULES[name]
    folder = scratch / name
    shutil.rmtree(folder, ignore_errors=True)
    scratch_copy(folder)
    if name in UNCOMPILED:
        without_numba_decorators(folder / path)
    (folder / "setup.cfg").write_text(
        "[mutmut]\nsource_paths = torchrl_vase\n"
        f"only_mutate = {path}\n"
        "pytest_add_cli_args_test_selection =\n" + "".join(f"    {t}\n" for t in tests)
        + "also_copy =\n    conftest.py\n    conf\n    recipes\n    data\n")
    # mutmut forks each mutant's test run from a process that has run the tests: a fork taken
    # after torch's OpenMP pool has worked waits forever on that pool's lock in the child's first
    # parallel matmul (22 of gaussian.py's 44 mutants "timed out" so), so one thread throughout
    env = os.environ | {key: "1" for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                             "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")}
    if name in UNCOMPILED:
        env["NUMBA_DISABLE_JIT"] = "1"
    chosen = []
    if sample:  # a filter no mutant matches makes mutmut write them all and stop
        subprocess.run([str(MUTMUT), "run", "no-such-mutant"], cwd=folder, check=False,
                       capture_output=True, env=env)
        names = sorted(statuses(folder, env))
        chosen = random.Random(seed).sample(names, min(sample, len(names)))
        print(f"{name}: {len(chosen)} of its {len(names)} mutants, drawn with seed {seed}",
              flush=True)
    subprocess.run([str(MUTMUT), "run", "--max-children", str(workers), *chosen], cwd=folder,
                   check=False, stdout=subprocess.DEVNULL, env=env)
    subprocess.run([str(MUTMUT), "export-cicd-stats"], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL)
    if chosen:  # the drawn mutants' statuses ("not checked" for the others)
        drawn = [statuses(folder, env)[m].replace(" ", "_") for m in chosen]
        return {key: drawn.count(key) for key in COUNTS}
    stats = json.loads((folder / "mutants" / "mutmut-cicd-stats.json").read_text())
    return {key: int(stats.get(key, 0)) for key in COUNTS}


REPORT_BLOCK = ("<!-- mutation.py's last report -->", "<!-- end of mutation.py's report -->")


def write_report(page: Path, text: str) -> None:
    """``text`` between the page's report markers (the rest of the page, the survivors read one
    by one, kept); a page without them gets the table alone."""
    start, end = REPORT_BLOCK
    old = page.read_text() if page.exists() else ""
    if start in old and end in old:
        text = old.split(start, 1)[0] + f"{start}\n{text}{end}" + old.split(end, 1)[1]
    page.write_text(text)


def score(counts: dict[str, int]) -> float:
    """killed / every mutant that is not known equivalent (a mutant no test reaches counts)."""
    total = sum(counts.values())
    return counts["killed"] / total if total else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="*", default=list(MODULES), choices=list(MODULES))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/torchrl_vase_mutation"))
    parser.add_argument("--workers", type=int, default=max(1, len(os.sched_getaffinity(0))))
    parser.add_argument("--report", type=Path, help="write the table there (markdown)")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="run N of a module's mutants drawn at random (0: all)")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (--sample)")
    args = parser.parse_args()
    if not MUTMUT.exists():
        raise SystemExit(f"no mutmut beside {sys.executable}: pip install 'mutmut>=3.8'.")
    commit = subprocess.run(["git", "rev-parse", "--short=8", "HEAD"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    rows = ["| module | mutants | killed | survived | timed out | suspicious | no test | score |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in args.modules:
        counts = mutate(name, args.scratch, args.workers, args.sample, args.seed)
        rows.append(f"| `{MODULES[name][0]}` | {sum(counts.values())} | "
                    + " | ".join(str(counts[key]) for key in COUNTS)
                    + f" | {score(counts):.0%} |")
        print(rows[-1], flush=True)
    load = os.getloadavg()[0]
    workers = f"{args.workers} worker" + ("s" if args.workers > 1 else "")
    text = (f"Mutation scores at `{commit}`, {datetime.date.today()} (mutmut 3, {workers}, "
            f"load average {load:.1f} at the end):\n\n"
            + "\n".join(rows) + "\n")
    print(text)
    if args.report:
        write_report(args.report, text)


if __name__ == "__main__":
    main()
