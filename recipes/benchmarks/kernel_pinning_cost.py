"""What pinning every kernel choice that changes a run's bits costs: the main recipe's iterations
timed phase by phase (its ``time/*`` metrics) as installed and with the three paths
``kernel_rounding.py`` found pinned to the ones every x86-64 processor has (``PINNED``), in fresh
processes, interleaved rounds, the median per phase.

Why: a run reruns bit for bit on one machine and rounds otherwise on another processor; a study
that must rerun bit for bit across processors would pin ATen's kernels to the scalar ones, MKL to
its compatible branch and numba to generic instructions on every machine it uses
(``docs/benchmarks.md``, "Which kernel choices change a run's bits"). This measures the price on
this machine; that pinning makes two processors agree is not shown by it (one processor here).

With numba pinned, its generic kernels are compiled (or loaded from numba's cache) before the
rounds, as ``make venv`` does the host's: generic instructions are a build of their own. The first
iteration (the model's first fit on a pool of one batch) is left out: the phases of iterations 2
onwards, summed, per round.

    python recipes/benchmarks/kernel_pinning_cost.py --iterations 10        # HalfCheetah VASE
    python recipes/benchmarks/kernel_pinning_cost.py --iterations 10 --env mountain_car
    python recipes/benchmarks/kernel_pinning_cost.py --pin ATEN_CPU_CAPABILITY  # one path only
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the settings under which ``kernel_rounding.py`` saw no host-specific path left: ATen's scalar
#: kernels, MKL's SSE2 branch, numba's generic instructions
PINNED = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "NUMBA_CPU_NAME": "generic"}

#: the run's phases printed first, in this order (the recipe's ``time/*`` metrics); any other
#: phase a run logged (``diagnostics``, ``logging``) follows, then the iteration
PHASES = ("collection", "bonus", "model", "pool", "advantage", "critic", "policy", "evaluation",
          "watchers", "other")


def warm_up(environment: dict[str, str]) -> None:
    """Compile numba's kernels under ``environment`` in a process of its own, or load them from
    its cache."""
    subprocess.run([sys.executable, "-c", "from torchrl_vase.kernels import warm_up; warm_up()"],
                   check=True, cwd=ROOT, env={**os.environ, **environment})


def timed_run(env: str, iterations: int, environment: dict[str, str], scratch: Path,
              name: str, overrides: tuple[str, ...] = ()) -> tuple[dict[str, float], str]:
    """One run of the recipe in a fresh process: each phase's seconds summed over iterations 2
    onwards, and the instruction set torch's kernels used in it (the run's
    ``machine.cpu_capability`` tag: ``DEFAULT`` when pinned)."""
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{scratch / f'{name}.db'}"
    command = [sys.executable, str(ROOT / "recipes" / "trpo_vase.py"), f"env={env}",
               f"iterations={iterations}", "threads=1", "progress_bar=false", "eval.every=0",
               "checkpoint.every=0", f"mlflow.tracking_uri={store}",
               f"checkpoint.dir={scratch / f'checkpoints-{name}'}",
               f"hydra.run.dir={scratch / 'hydra'}", *overrides]
    subprocess.run(command, check=True, capture_output=True, text=True, cwd=scratch,
                   env={**os.environ, **environment})
    client = MlflowClient(tracking_uri=store)
    [run] = client.search_runs([client.get_experiment_by_name(env).experiment_id])
    histories = {key.removeprefix("time/"): client.get_metric_history(run.info.run_id, key)
                 for key in run.data.metrics  # the exploration share is a fraction, no seconds
                 if key.startswith("time/") and key != "time/exploration_share"}
    # a phase is logged from the first iteration it ran in on: leave out the first iteration's
    # step, not each series' first value
    first = min(metric.step for metric in histories["iteration"])
    seconds = {phase: sum(metric.value for metric in history if metric.step != first)
               for phase, history in histories.items()}
    return seconds, run.data.tags["machine.cpu_capability"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="half_cheetah")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pin", nargs="+", choices=sorted(PINNED), default=sorted(PINNED),
                        help="which paths to pin (default: all three)")
    parser.add_argument("overrides", nargs="*", help="more of the recipe's Hydra overrides")
    args = parser.parse_args()
    if args.iterations < 2:
        parser.error("--iterations must be at least 2: the first iteration is left out.")
    from torchrl_vase.runs import machine

    pins = {name: PINNED[name] for name in args.pin}
    print(f"{machine()}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"before; {args.env}, iterations 2-{args.iterations}, median of {args.rounds} "
          f"interleaved rounds, one thread; pinned: "
          f"{' '.join(f'{key}={value}' for key, value in pins.items())}\n")
    if "NUMBA_CPU_NAME" in pins:  # the host's build is compiled by make venv
        warm_up(pins)
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    capabilities: dict[bool, set[str]] = {False: set(), True: set()}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for pinned in (False, True) if round_ % 2 == 0 else (True, False):
                seconds, capability = timed_run(
                    args.env, args.iterations, pins if pinned else {}, Path(tmp),
                    f"{round_}-{pinned}", tuple(args.overrides))
                results[pinned].append(seconds)
                capabilities[pinned].add(capability)
    print(f"ATen's kernels as installed: {', '.join(sorted(capabilities[False]))}; pinned: "
          f"{', '.join(sorted(capabilities[True]))}\n")
    print("| phase | as installed (s) | pinned (s) | pinned / as installed |")
    print("|---|---:|---:|---:|")
    logged = set().union(*(r for rs in results.values() for r in rs))
    for phase in (*PHASES, *sorted(logged - {*PHASES, "iteration"}), "iteration"):
        installed = statistics.median(r.get(phase, 0.0) for r in results[False])
        forced = statistics.median(r.get(phase, 0.0) for r in results[True])
        ratio = f"{forced / installed:.2f}" if installed > 0.05 else "-"
        print(f"| {phase} | {installed:.2f} | {forced:.2f} | {ratio} |")
    print(f"\nload average {' '.join(f'{x:.1f}' for x in os.getloadavg())} after")


if __name__ == "__main__":
    main()
