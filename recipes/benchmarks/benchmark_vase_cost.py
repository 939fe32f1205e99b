"""What VASE costs over plain TRPO, whole iterations, and where a VASE iteration's time goes.

Runs ``recipes/trpo_vase.py`` for each task with ``surprise=none``, ``surprise=vase`` and
``surprise=vase surprise.eta=0`` (the recipe's defaults otherwise: the authors' settings),
``iterations`` iterations, ``threads=1``, no
evaluation or checkpoints, one run at a time, the runs of each round alternating, each into a
scratch MLflow store; with ``--code DIR`` (repeatable) the same runs of another checkout
(e.g. an earlier commit's worktree), interleaved with this one's. Prints

* per task and code, the median over rounds of each run's median iteration time (iterations 2
  to the last, from ``train/wall_time``, which every commit logs) and VASE's over plain TRPO's:
  the bar is ≤ 1.3× on MountainCar and HalfCheetah, ≤ 1.5× on Ant. A VASE run's policy learns
  from its bonus and so collects other paths than plain TRPO's, at another cost per step where
  the simulator's cost depends on the motion (MountainCar's Box2D contacts); VASE with η = 0
  does all of VASE's work (the model, the bonus, the pool) while its policy learns from the
  extrinsic reward alone, as plain TRPO's does: its ratio is VASE's own cost on plain's kind
  of paths;
* a whole run's estimated wall time (the task's iterations × that median: a lower bound, as
  later iterations cost more where the policy's paths change and the pool grows) and the
  Figure 3 grid's core-hours at that speed (20 seeds of plain TRPO, VASE, NLL and VIME per
  task, the three BNN bonuses at VASE's iteration time);
* the phase table of this checkout's runs: each ``time/<phase>`` metric, median over
  iterations 2 to the last and over rounds (``torchrl_vase.timing``: the same clocks every run
  logs, not a profiler's);
* each iteration's time per frame against a bare ``env.step`` loop's (the unwrapped env,
  uniformly random actions, resets where episodes end; measured in each round beside the runs):
  issue 97's bar is plain TRPO at most 2.5x the loop on HalfCheetah and Ant, VASE within 3x.

    python recipes/benchmarks/benchmark_vase_cost.py [--tasks mountain_car half_cheetah ant]
        [--bonuses nll vime rnd disagreement icm]
        [--rounds 2] [--iterations 8] [--code ../before --label-code 731077c]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BARS = {"mountain_car": 1.3, "half_cheetah": 1.3, "ant": 1.5}
#: per frame, against a bare env.step loop: plain TRPO's bar and VASE's
FLOOR_BARS = {"half_cheetah": (2.5, 3.0), "ant": (2.5, 3.0)}


def env_floor(task: str, steps: int = 5000) -> float:
    """Seconds per step of a bare ``env.step`` loop of the task's env (the unwrapped env,
    uniformly random actions, a reset where an episode ends), this process, one thread."""
    import time

    import gymnasium
    import numpy as np
    from omegaconf import OmegaConf

    import torchrl_vase  # noqa: F401  (registers the tasks)

    env = gymnasium.make(OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml").id).unwrapped
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = np.stack([env.action_space.sample() for _ in range(steps)])
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    seconds = (time.perf_counter() - start) / steps
    env.close()
    return seconds


def paper_iterations(task: str) -> int:
    """A whole run's iterations: the task's config (``conf/env/<task>.yaml``)."""
    from omegaconf import OmegaConf

    return int(OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml").iterations)


#: the configurations compared: plain TRPO, VASE, and VASE's work on plain TRPO's kind of paths
SETTINGS = {"none": ["surprise=none"], "vase": ["surprise=vase"],
            "vase_eta0": ["surprise=vase", "surprise.eta=0"]}
#: the other bonuses (``--bonuses``), each at its config's settings: the anchors table's cost
BONUSES = ("nll", "vime", "rnd", "disagreement", "icm")


def run(code: Path, task: str, setting: str, iterations: int, store: Path) -> str:
    """One run of ``code``'s recipe in one of ``SETTINGS``; returns its MLflow run id."""
    uri = f"sqlite:///{store / 'mlflow.db'}"
    # run as a module from the checkout: Python puts it first on the path, so the run trains
    # that checkout's library (not the one installed in the venv)
    command = [sys.executable, "-m", "recipes.trpo_vase", f"env={task}",
               *SETTINGS.get(setting, [f"surprise={setting}"]), f"iterations={iterations}",
               "threads=1",
               "eval.every=0", "checkpoint.every=0", "progress_bar=false",
               f"mlflow.tracking_uri={uri}", f"checkpoint.dir={store / 'checkpoints'}",
               f"hydra.run.dir={store / 'hydra'}"]
    subprocess.run(command, cwd=code, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    from mlflow.tracking import MlflowClient

    runs = MlflowClient(tracking_uri=uri).search_runs(
        [e.experiment_id for e in MlflowClient(tracking_uri=uri).search_experiments()],
        order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].info.run_id


def histories(store: Path, run_id: str) -> dict[str, dict[int, float]]:
    """Every clock metric of the run by step (``train/wall_time`` and ``time/*``), and the
    paths each iteration collected (``train/episodes``: resets cost more than steps)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store / 'mlflow.db'}")
    names = [key for key in client.get_run(run_id).data.metrics
             if key in ("train/wall_time", "train/episodes", "train/frames")
             or key.startswith("time/")]
    return {name: {m.step: m.value for m in client.get_metric_history(run_id, name)}
            for name in names}


def iteration_times(wall: list[float]) -> list[float]:
    """Each iteration's seconds from the cumulative ``train/wall_time``."""
    return [b - a for a, b in zip([0.0, *wall[:-1]], wall, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(BARS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--code", type=Path, action="append", default=[],
                        help="another checkout to run the same way, interleaved")
    parser.add_argument("--bonuses", nargs="*", default=[], choices=BONUSES,
                        help="also these bonuses (this checkout), in the same rounds")
    parser.add_argument("--label-code", action="append", default=[],
                        help="its label in the tables (default: its directory's name)")
    args = parser.parse_args()
    codes = {"this": ROOT} | {
        (args.label_code[i] if i < len(args.label_code) else path.name): path.resolve()
        for i, path in enumerate(args.code)}
    skip = 2  # the first two iterations: imports warmed, the kernel loaded, the pool started
    seconds: dict[tuple[str, str, str], list[float]] = {}
    phases: dict[tuple[str, str], dict[str, list[float]]] = {}
    per_frame: dict[tuple[str, str, str], list[float]] = {}
    floors: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for task in args.tasks:
                floors.setdefault(task, []).append(env_floor(task))
                runs = [(label, code, surprise) for label, code in codes.items()
                        for surprise in SETTINGS]
                runs += [("this", ROOT, bonus) for bonus in args.bonuses]
                for label, code, surprise in runs:
                    store = Path(scratch) / f"{label}-{task}-{surprise}-{round_}"
                    store.mkdir()
                    clocks = histories(store, run(code, task, surprise, args.iterations,
                                                  store))
                    steps = sorted(clocks["train/wall_time"])
                    wall = [clocks["train/wall_time"][step] for step in steps]
                    times = iteration_times(wall)[skip:]
                    seconds.setdefault((task, label, surprise), []).append(
                        statistics.median(times))
                    frames = iteration_times([clocks["train/frames"][s] for s in steps])
                    per_frame.setdefault((task, label, surprise), []).append(
                        statistics.median(t / f for t, f in zip(
                            times, frames[skip:], strict=True)))
                    if label == "this":
                        cell = phases.setdefault((task, surprise), {})
                        for name, values in clocks.items():
                            if name not in ("train/wall_time", "train/frames"):  # 0: not run
                                cell.setdefault(name, []).append(statistics.median(
                                    values.get(step, 0.0) for step in steps[skip:]))
                print(f"round {round_ + 1}/{args.rounds}: {task} done", flush=True)

    print(f"\nMedian iteration time (iterations {skip + 1}-{args.iterations}, median over "
          f"{args.rounds} rounds), threads=1")
    print(f"{'task':<14} {'code':<10} {'plain s':>8} {'VASE s':>8} {'VASE/plain':>11} "
          f"{'per round':>22} {'bar':>5} {'η=0 s':>8} {'η=0/plain':>10} {'run: plain':>11} "
          f"{'VASE':>8}")
    grid: dict[str, float] = {}
    for task in args.tasks:
        for label in codes:
            plain = statistics.median(seconds[task, label, "none"])
            vase = statistics.median(seconds[task, label, "vase"])
            eta0 = statistics.median(seconds[task, label, "vase_eta0"])
            rounds = ", ".join(f"{v / p:.2f}" for p, v in zip(
                seconds[task, label, "none"], seconds[task, label, "vase"], strict=True))
            length = paper_iterations(task)
            print(f"{task:<14} {label:<10} {plain:>8.3f} {vase:>8.3f} {vase / plain:>10.2f}x "
                  f"{rounds:>22} {BARS.get(task, float('nan')):>5} {eta0:>8.3f} "
                  f"{eta0 / plain:>9.2f}x {plain * length / 3600:>10.2f}h "
                  f"{vase * length / 3600:>7.2f}h")
            # Figure 3's cells of the task: plain TRPO, and VASE, NLL and VIME (the three
            # BNN bonuses taken at VASE's iteration time: NLL's is the same work, VIME's more)
            grid[label] = grid.get(label, 0.0) + 20 * length * (plain + 3 * vase) / 3600
    print("\nFigure 3 at these speeds (20 seeds x plain TRPO, VASE, NLL and VIME at VASE's "
          "iteration time, the tasks above only): "
          + ", ".join(f"{label} {hours:,.0f} core-hours" for label, hours in grid.items()))

    if args.bonuses:
        print("\nEach bonus's iteration over plain TRPO's (this checkout; median over rounds; "
              "the bonus steers the policy, so its paths differ from plain TRPO's)")
        print(f"{'task':<14} " + "".join(f"{b:>14}" for b in ("vase", *args.bonuses)))
        for task in args.tasks:
            plain = statistics.median(seconds[task, "this", "none"])
            print(f"{task:<14} " + "".join(
                f"{statistics.median(seconds[task, 'this', b]) / plain:>13.2f}x"
                for b in ("vase", *args.bonuses)))

    print("\nPer frame against a bare env.step loop (median over rounds; bars: plain, VASE)")
    print(f"{'task':<14} {'code':<10} {'env us':>7} {'plain us':>9} {'x env':>6} {'VASE us':>8} "
          f"{'x env':>6} {'bars':>10}")
    for task in args.tasks:
        floor = statistics.median(floors[task])
        for label in codes:
            plain, vase = (statistics.median(per_frame[task, label, kind])
                           for kind in ("none", "vase"))
            bars = FLOOR_BARS.get(task)
            print(f"{task:<14} {label:<10} {floor * 1e6:>7.1f} {plain * 1e6:>9.1f} "
                  f"{plain / floor:>5.2f}x {vase * 1e6:>8.1f} {vase / floor:>5.2f}x "
                  f"{'' if bars is None else f'{bars[0]}x, {bars[1]}x':>10}")

    names = sorted({name for cell in phases.values() for name in cell})
    print(f"\nWhere an iteration's time goes (this checkout; time/<phase>, median of iterations "
          f"{skip + 1}-{args.iterations}, median over rounds; s)")
    columns = [(task, surprise) for task in args.tasks for surprise in SETTINGS]
    print(f"{'phase':<22}" + "".join(f"{task[:8] + ' ' + s:>20}" for task, s in columns))
    for name in names:
        cells = [phases[c].get(name) for c in columns]
        print(f"{name.removeprefix('time/'):<22}" + "".join(
            f"{statistics.median(v):>20.3f}" if v else f"{'':>20}" for v in cells))


if __name__ == "__main__":
    main()
