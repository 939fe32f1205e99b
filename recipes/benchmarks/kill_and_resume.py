"""Kill a run with SIGKILL at random instants, resume it each time, and compare its final metric
history with an uninterrupted run of the same config, value for value.

    .venv/bin/python recipes/benchmarks/kill_and_resume.py --kills 10            # MountainCar, VASE
    .venv/bin/python recipes/benchmarks/kill_and_resume.py --kills 3 -- env=point_robot surprise=rnd
    .venv/bin/python recipes/benchmarks/kill_and_resume.py --kills 10 -- algorithm=ppo    # PPO
    .venv/bin/python recipes/benchmarks/kill_and_resume.py --kills 6 -- algorithm=sac       # SAC

The reference run goes first (its duration sets the range of the kill instants); then the
run under test is started, killed after a uniformly random delay, resumed with ``resume=true``,
killed again, ..., up to ``--kills`` times (fewer if it finishes first), then left to finish.
Every other kill waits, after its delay, for the next checkpoint write to begin (a new temporary
file) and lands inside it. Every metric but the timings (``train/fps``,
``train/wall_time``) must be equal at every step, and no step may be logged twice.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from torchrl_vase.loop import is_clock

ROOT = Path(__file__).resolve().parents[2]
STARTUP = 4.0  # seconds of imports before a run starts
DEFAULTS = ["iterations=8", "num_envs=2", "env.frames_per_batch=500", "checkpoint.every=1",
            "surprise.elbo.updates_per_iteration=100", "progress_bar=false", "threads=1"]


def command(store: Path, overrides: list[str], resume: bool) -> list[str]:
    return [sys.executable, str(ROOT / "recipes" / "trpo_vase.py"), *DEFAULTS, *overrides,
            f"mlflow.tracking_uri=sqlite:///{store / 'mlflow.db'}",
            f"checkpoint.dir={store / 'checkpoints'}", f"resume={str(resume).lower()}"]


def history(store: Path) -> dict[str, tuple[str, dict[str, list[tuple[int, float]]]]]:
    """Each run's (by seed) status and metric histories."""
    client = MlflowClient(tracking_uri=f"sqlite:///{store / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    seeds = [run.data.tags["seed"] for run in runs]
    if len(set(seeds)) != len(seeds):  # a restart made new runs instead of continuing its own
        raise SystemExit(f"{store.name}: more than one run of a seed: {sorted(seeds)}")
    return {run.data.tags["seed"]: (run.info.status, {
        key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        for key in run.data.metrics if not is_clock(key)}) for run in runs}


def temporaries(store: Path) -> list[Path]:
    """Checkpoint files being written (a writer's unique temporary, renamed when complete)."""
    return list((store / "checkpoints").rglob(".*.tmp"))


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    """Equal step for step and value for value, NaN equal to NaN."""
    return len(a) == len(b) and all(
        sa == sb and (va == vb or (math.isnan(va) and math.isnan(vb)))
        for (sa, va), (sb, vb) in zip(a, b, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="of the kill instants")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the run")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; overrides: "
          f"{DEFAULTS + args.overrides}")
    with tempfile.TemporaryDirectory() as tmp:
        reference, tested = Path(tmp) / "reference", Path(tmp) / "tested"
        start = time.perf_counter()
        subprocess.run(command(reference, args.overrides, False), check=True,
                       capture_output=True, cwd=tmp)
        duration = time.perf_counter() - start
        print(f"uninterrupted run: {duration:.1f} s")
        kills, in_write = 0, 0
        resume = False
        while True:
            process = subprocess.Popen(command(tested, args.overrides, resume), cwd=tmp,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            resume = True
            stale = set(temporaries(tested))  # left by an earlier kill inside a write
            if kills < args.kills:
                # a process spends its first seconds importing: spread the kills so that most
                # land in training, over the whole run
                delay = rng.uniform(0.5, STARTUP + 2 * duration / args.kills)
                try:
                    process.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    if kills % 2:  # every other kill waits for the next checkpoint write
                        while process.poll() is None and not set(temporaries(tested)) - stale:
                            time.sleep(0.0005)
                    if process.poll() is None:
                        process.send_signal(signal.SIGKILL)
                        process.wait()
                        kills += 1
                        torn = bool(set(temporaries(tested)) - stale)
                        in_write += torn
                        print(f"kill {kills} after {delay:.1f} s"
                              + (" (inside a checkpoint write)" if torn else ""))
                        continue
            else:
                process.wait()
            if process.returncode:
                raise SystemExit(process.stderr.read().decode()[-3000:])
            break  # finished
        references, tested_runs = history(reference), history(tested)
        if references.keys() != tested_runs.keys():
            raise SystemExit(f"runs of seeds {sorted(tested_runs)}, expected {sorted(references)}")
        differ = []
        for seed, (status_ref, expected) in sorted(references.items()):
            status, got = tested_runs[seed]
            differ += [(seed, k, expected.get(k), got.get(k)) for k in expected.keys() | got.keys()
                       if not same(expected.get(k, []), got.get(k, []))]
            steps = sorted({step for values in got.values() for step, _ in values})
            print(f"seed {seed}: run status {status} (reference {status_ref}); {len(steps)} "
                  f"steps, {len(got)} metrics compared")
        print(f"{kills} kills ({in_write} inside a checkpoint write)")
        if differ:
            for seed, key, expected, got in sorted(differ)[:10]:
                print(f"  seed {seed} {key}: uninterrupted {expected}\n  resumed {got}")
            raise SystemExit("the resumed run's history differs")
        print("final metric history equal to the uninterrupted run's, value for value")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
