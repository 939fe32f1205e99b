"""Populations against single runs: K seeds in one process versus K single runs one after another.

Both sides are the recipe's own parts (``trpo_vase.build`` for every member) at the recipe's
defaults, threads=1, no MLflow, checkpoints or evaluation; the single runs use the single loop
(``TrainingLoop``), the population ``PopulationLoop``. Frames per second are the median over
iterations 1.. of each run (iteration 0 trains the model but adds no bonus yet), the K singles'
as total frames over their summed iteration times. The two sides alternate, ``--rounds`` times.

It also prints a single VASE run's iteration time over plain TRPO's (``surprise=none``) on the
same task, and the paper grid's cost on this machine at the population's speed: 10 seeds x 5
measures x 6 tasks at the authors' iterations, as core-hours, every measure costed as VASE
(plain TRPO is cheaper, VIME dearer) or, with ``--grid-measures``, each measure timed.

    python recipes/benchmarks/benchmark_population.py               # K=10, MountainCar, HalfCheetah
    python recipes/benchmarks/benchmark_population.py --members 4 --iterations 3 \
        --tasks mountain_car
    python recipes/benchmarks/benchmark_population.py --grid          # also the six tasks' estimate
    python recipes/benchmarks/benchmark_population.py --grid --grid-measures none vase nll vime rnd
    python recipes/benchmarks/benchmark_population.py --overrides num_envs=2 \
        env.frames_per_batch=500
    python recipes/benchmarks/benchmark_population.py --vs-trpo --iterations 8 --rounds 3 \
        --tasks mountain_car half_cheetah ant                    # VASE over TRPO, single runs
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from torchrl_vase import TrainingLoop
from torchrl_vase.population import (
    MemberStreams,
    PopulationCollector,
    PopulationMembers,
    PopulationStep,
)
from torchrl_vase.recipe import config as schema
from torchrl_vase.recipe.assembly import seeded_build
from torchrl_vase.recipe.population import member_config

ROOT = Path(__file__).resolve().parents[2]

#: the authors' iteration counts (their scripts), the paper grid's tasks
GRID = {"mountain_car": 50, "cartpole_swingup": 400, "double_pendulum": 400,
        "half_cheetah": 600, "ant": 600, "lunar_lander": 100}
MEASURES, SEEDS = 5, 10


class Recorder:
    """A logger that keeps each iteration's frames per second."""

    def __init__(self) -> None:
        self.fps: list[float] = []

    def log(self, steps) -> None:
        self.fps += [metrics["train/fps"] for _, metrics in steps]


OVERRIDES: list[str] = []  # --overrides: Hydra overrides of every run (a smaller budget)


def config(task: str, surprise: str, iterations: int):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("trpo_vase", overrides=[
            f"env={task}", f"surprise={surprise}", f"iterations={iterations}", "threads=1",
            "eval.every=0", "checkpoint.every=0", "progress_bar=false",
            "collection=rllab",  # a population collects in lanes: single runs alike
            # plain TRPO has no surprise settings
            *(o for o in OVERRIDES if surprise != "none" or not o.startswith("surprise."))])
    return schema.typed_config(cfg)


def member_build(cfg, seed: int, spaces, **kwargs):
    """The run of ``seed`` built as the recipe builds it (its config, its parts)."""
    member = member_config(cfg, seed)
    return member, seeded_build(member, *spaces, **kwargs)


def single_fps(cfg, seed: int) -> list[float]:
    """One single run: the frames per second of each of its iterations."""
    spaces = schema.check_env(cfg)
    member, (collector, step, state) = member_build(cfg, seed, spaces)
    recorder = Recorder()
    TrainingLoop(collector, step, iterations=cfg.iterations, seed=seed, state=state,
                 logger=recorder, reseed_collector=member.collection == "rllab", threads=1,
                 progress=False).run()
    return recorder.fps


def single_seconds(cfg, seed: int) -> tuple[float, int]:
    """One single run: the seconds of its iterations 1.. and their frames."""
    fps = single_fps(cfg, seed)
    frames = cfg.env.frames_per_batch
    return sum(frames / f for f in fps[1:]), frames * (len(fps) - 1)


def vase_over_trpo(task: str, iterations: int, rounds: int) -> None:
    """A single VASE run's iteration time over plain TRPO's (``surprise=none``), seed 0, the two
    runs alternating ``rounds`` times: the median frames/s of iterations 2.. of each run (from
    iteration 1 on an iteration adds the bonus; 2.. leaves the first of those out too)."""
    vase, plain = config(task, "vase", iterations), config(task, "none", iterations)
    ratios = []
    for _ in range(rounds):
        plain_fps = statistics.median(single_fps(plain, 0)[2:])
        vase_fps = statistics.median(single_fps(vase, 0)[2:])
        ratios.append(plain_fps / vase_fps)
        print(f"  {task}: plain TRPO {plain_fps:,.0f} frames/s, VASE {vase_fps:,.0f} frames/s: "
              f"a VASE iteration {ratios[-1]:.2f}x plain TRPO's", flush=True)
    print(f"{task}: a single VASE iteration {statistics.median(ratios):.2f}x plain TRPO's "
          f"(median of {rounds} interleaved rounds; each {', '.join(f'{r:.2f}x' for r in ratios)})",
          flush=True)


def population_seconds(cfg, seeds: list[int]) -> tuple[float, int]:
    """One population: the seconds of its iterations 1.. and all members' frames."""
    spaces = schema.check_env(cfg)
    built = [member_build(cfg, seed, spaces, make_collector=lambda *a: None)[1] for seed in seeds]
    streams = MemberStreams(seeds)
    collector = PopulationCollector(
        cfg.env.id, [state["actor"] for _, _, state in built], streams, num_envs=cfg.num_envs,
        frames_per_batch=cfg.env.frames_per_batch, reset_at_each_iter=cfg.collection == "rllab",
        make_kwargs=schema.make_kwargs(cfg))
    recorders = [Recorder() for _ in seeds]
    TrainingLoop(collector, PopulationStep([step for _, step, _ in built], streams),
                 members=PopulationMembers(streams, recorders), iterations=cfg.iterations,
                   reseed_collector=cfg.collection == "rllab", threads=1, progress=False).run()
    frames = cfg.env.frames_per_batch
    seconds = sum(frames / fps for fps in recorders[0].fps[1:])  # one member's = the iteration's
    return seconds, frames * len(seeds) * (len(recorders[0].fps) - 1)


def compare(task: str, members: int, iterations: int, rounds: int) -> float:
    """Population against singles, and VASE against plain TRPO, on one task; the population's
    frames per second."""
    vase, plain = config(task, "vase", iterations), config(task, "none", iterations)
    seeds = list(range(members))
    population, singles, ratios = [], [], []
    for _ in range(rounds):
        seconds, frames = population_seconds(vase, seeds)
        population.append(frames / seconds)
        runs = [single_seconds(vase, seed) for seed in seeds]
        singles.append(sum(f for _, f in runs) / sum(s for s, _ in runs))
        plain_seconds, plain_frames = single_seconds(plain, 0)
        vase_seconds, vase_frames = runs[0]
        ratios.append((vase_seconds / vase_frames) / (plain_seconds / plain_frames))
    pop, single = statistics.median(population), statistics.median(singles)
    each = ", ".join(f"{p / s:.2f}x" for p, s in zip(population, singles, strict=True))
    print(f"{task}: K={members} in one process {pop:,.0f} frames/s, {members} single runs one "
          f"after another {single:,.0f} frames/s: {pop / single:.2f}x "
          f"(rounds: {each})"
          f"; a single VASE iteration {statistics.median(ratios):.2f}x plain TRPO's", flush=True)
    return pop


def grid_estimate(measured: dict[tuple[str, str], float], members: int, iterations: int,
                  measures: list[str]) -> None:
    """The paper grid's core-hours at the populations' frames/s of ``measures`` on each task
    (``measured`` holds what is timed already); measures not timed are costed at the mean of
    those that are (with the default, VASE alone, every measure as VASE)."""
    total = 0.0
    for task, task_iterations in GRID.items():
        frames = config(task, "vase", 1).env.frames_per_batch * task_iterations
        hours = {}
        for measure in measures:
            if (task, measure) not in measured:
                seconds, count = population_seconds(config(task, measure, iterations),
                                                    list(range(members)))
                measured[(task, measure)] = count / seconds
                print(f"{task}, {measure}: K={members} population "
                      f"{measured[(task, measure)]:,.0f} frames/s", flush=True)
            hours[measure] = SEEDS * frames / measured[(task, measure)] / 3600
        task_hours = sum(hours.values()) * MEASURES / len(measures)
        total += task_hours
        each = ", ".join(f"{measure} {h:.2f}" for measure, h in hours.items())
        print(f"  {task}: {task_iterations} iterations, {task_hours:.1f} core-hours "
              f"(per measure: {each})")
    costed = ("every measure costed as " + measures[0] if len(measures) == 1
              else "measures " + ", ".join(measures))
    print(f"the paper grid ({SEEDS} seeds x {MEASURES} measures x {len(GRID)} tasks; {costed}) "
          f"at the population's speed: {total:.1f} core-hours on this machine")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=4, help="per run (the first is not "
                        "timed)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=["mountain_car", "half_cheetah"],
                        choices=sorted(GRID))
    parser.add_argument("--grid", action="store_true", help="also estimate the paper grid")
    parser.add_argument("--grid-measures", nargs="+", default=["vase"],
                        choices=["none", "vase", "nll", "vime", "rnd"],
                        help="the measures timed for the grid (default: VASE, for all five)")
    parser.add_argument("--vs-trpo", action="store_true",
                        help="only a single VASE run's iteration time over plain TRPO's, per "
                        "task, interleaved (--iterations 8: the median of iterations 2-7)")
    parser.add_argument("--overrides", nargs="*", default=[],
                        help="Hydra overrides of every run, e.g. env.frames_per_batch=500")
    args = parser.parse_args()
    OVERRIDES[:] = args.overrides
    if args.iterations < (3 if args.vs_trpo else 2):
        parser.error("--iterations must be >= 2 (the first is not timed; with --vs-trpo >= 3, "
                     "the first two are not).")
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() \
        else ["?"]
    print(f"commit {commit}, load average {' '.join(load)}, K={args.members}, "
          f"{args.iterations} iterations per run, {args.rounds} rounds"
          + (f", overrides {' '.join(args.overrides)}" if args.overrides else ""), flush=True)
    started = time.perf_counter()
    if args.vs_trpo:
        for task in args.tasks:
            vase_over_trpo(task, args.iterations, args.rounds)
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"done in {time.perf_counter() - started:.0f} s, load average {' '.join(load)}")
        return
    measured = {(task, "vase"): compare(task, args.members, args.iterations, args.rounds)
                for task in args.tasks}
    if args.grid:
        grid_estimate(measured, args.members, args.iterations, args.grid_measures)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() \
        else ["?"]
    print(f"done in {time.perf_counter() - started:.0f} s, load average {' '.join(load)}")


if __name__ == "__main__":
    main()
