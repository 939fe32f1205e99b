"""Threads against cores: a run's speed at ``threads=1`` and ``threads=2``, quiet and beside a
busy core, and a two-job sweep at each setting.

For each (task, algorithm) runs ``recipes/trpo_vase.py`` (VASE, the task's sizes, ``--iterations``
iterations, no evaluation or checkpoints, a scratch MLflow store) at each thread count, first on a
quiet machine, then with one core kept busy by a spinning process (what a second job or a user's
editor does); the settings alternate within each round. Prints the median over rounds of each
run's median ``train/fps`` (iterations 2 to the last) and the ratio of the two thread counts.
Then runs the README's sweep (``-m seed=0,1 hydra/launcher=joblib``, MountainCar) at each
setting and prints its wall clock: a default that oversubscribes shows here.

    python recipes/benchmarks/benchmark_threads.py [--tasks mountain_car half_cheetah]
        [--algorithms trpo ppo sac] [--settings 1 2 auto] [--rounds 2] [--iterations 4]
        [--sweep-only]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
#: SAC: a short run of its networks and batch, 250 frames (and updates) an iteration
SAC = ["algorithm=sac", "sac.frames_per_batch=250", "sac.init_random_frames=250"]


def recipe(overrides: list[str], store: Path, sweep: bool = False) -> list[str]:
    return [sys.executable, "-m", "recipes.trpo_vase", *(["-m"] if sweep else []),
            "progress_bar=false", "eval.every=0",
            "checkpoint.every=0", f"mlflow.tracking_uri=sqlite:///{store / 'mlflow.db'}",
            f"hydra.run.dir={store / 'hydra'}", f"hydra.sweep.dir={store / 'sweep'}",
            *overrides]


def frames_per_second(task: str, algorithm: str, threads: str, iterations: int) -> float:
    """One run's median ``train/fps`` over its iterations 2 to the last."""
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch)
        overrides = [f"env={task}", "surprise=vase", f"threads={threads}",
                     f"iterations={iterations}", *(SAC if algorithm == "sac" else [])]
        subprocess.run(recipe(overrides, store), check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
        [run] = client.search_runs([e.experiment_id for e in client.search_experiments()])
        history = client.get_metric_history(run.info.run_id, "train/fps")
        return statistics.median(m.value for m in sorted(history, key=lambda m: m.step)[1:])


@contextlib.contextmanager
def busy_core(busy: bool) -> Iterator[None]:
    """A process spinning on one core while the block runs (``busy``), else nothing."""
    if not busy:
        yield
        return
    # it ends itself when this process does (a killed benchmark leaves no spinner behind)
    spin = f"import os\nwhile os.getppid() == {os.getpid()}: pass"
    spinner = subprocess.Popen([sys.executable, "-c", spin])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def sweep_seconds(threads: str) -> float:
    """The README's two-seed joblib sweep (MountainCar, 5 iterations) at ``threads``."""
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        subprocess.run(recipe(["seed=0,1", "hydra/launcher=joblib", "iterations=5",
                               f"threads={threads}"], Path(scratch), sweep=True),
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["mountain_car", "half_cheetah"])
    parser.add_argument("--algorithms", nargs="+", default=["trpo", "sac"])
    parser.add_argument("--settings", nargs="+", default=["1", "2"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--sweep-only", action="store_true", help="the sweep's wall clock alone")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'task':<14} {'learner':<6} {'other core':<11} "
          + " ".join(f"{'threads=' + s:>12}" for s in args.settings)
          + f" {args.settings[-1] + ' / ' + args.settings[0]:>8}")
    for task in [] if args.sweep_only else args.tasks:
        for algorithm in args.algorithms:
            for busy in (False, True):
                rates = {setting: [] for setting in args.settings}
                with busy_core(busy):
                    for _ in range(args.rounds):
                        for setting in args.settings:
                            rates[setting].append(frames_per_second(
                                task, algorithm, setting, args.iterations))
                medians = [statistics.median(rates[s]) for s in args.settings]
                print(f"{task:<14} {algorithm:<6} {'busy' if busy else 'quiet':<11} "
                      + " ".join(f"{m:>12,.0f}" for m in medians)
                      + f" {medians[-1] / medians[0]:>8.2f}")
    print("\nThe README's sweep, -m seed=0,1 hydra/launcher=joblib (MountainCar, 5 iterations), "
          "wall clock")
    for setting in args.settings:
        seconds = statistics.median(sweep_seconds(setting) for _ in range(args.rounds))
        print(f"threads={setting:<6} {seconds:>7.1f} s")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
