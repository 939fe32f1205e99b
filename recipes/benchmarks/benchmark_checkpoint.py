"""What a checkpoint of the bonus's replay pool costs: written whole, or appended (its journal).

    .venv/bin/python recipes/benchmarks/benchmark_checkpoint.py                 # Ant's sizes
    .venv/bin/python recipes/benchmarks/benchmark_checkpoint.py --pool 3000000  # Ant at its end

An ``Exploration`` at Ant's sizes (125 observations, 8 actions: 258 float32 a transition) whose
pool holds ``--pool`` transitions; each round saves its state as the recipe's checkpoint does
(``Checkpointer``: a temporary file, flushed, renamed over ``last.pt``) twice, interleaved: with
the pool whole in it, and with ``journal_pool`` after ``--new`` more transitions (an Ant run's 10
iterations between two checkpoints), which writes those alone as a chunk beside it; then a
resume of each into a fresh ``Exploration``. Prints the medians of the rounds, the bytes written
and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from tensordict import TensorDict

import torchrl_vase as tv
from torchrl_vase.checkpointing import Checkpointer


def exploration(obs: int, action: int, pool: int) -> tv.Exploration:
    bonus = tv.VASERewardTransform(tv.DynamicsModel.build(obs, action, [64, 64], sigma_c=0.5))
    return tv.Exploration(bonus, pool_size=pool, pool_min=500, updates_per_iteration=1)


def transitions(n: int, obs: int, action: int) -> TensorDict:
    return TensorDict({"observation": torch.randn(n, obs), "action": torch.randn(n, action),
                       "next": {"observation": torch.randn(n, obs)}}, [n])


def bytes_under(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=1_500_000, help="transitions in the pool")
    parser.add_argument("--new", type=int, default=50_000, help="added between two checkpoints")
    parser.add_argument("--obs", type=int, default=125)
    parser.add_argument("--action", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (a temp dir)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    capacity = args.pool + args.rounds * args.new
    whole, journaled = (exploration(args.obs, args.action, capacity) for _ in range(2))
    for start in range(0, args.pool, 100_000):  # the same transitions in both pools
        batch = transitions(min(100_000, args.pool - start), args.obs, args.action)
        whole.pool.extend(batch)
        journaled.pool.extend(batch)
    root = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        journaled.journal_pool(root / "journaled" / "pool")
        Checkpointer(root / "journaled").save(journaled.state_dict())  # the pool up to now
        times: dict[str, list[float]] = {"whole save": [], "appended save": [],
                                         "whole resume": [], "journal resume": []}
        written: dict[str, int] = {}
        for _ in range(args.rounds):
            batch = transitions(args.new, args.obs, args.action)
            whole.pool.extend(batch)
            journaled.pool.extend(batch)
            for name, part in (("whole", whole), ("appended", journaled)):
                directory = root / ("whole" if part is whole else "journaled")
                before = bytes_under(directory / "pool") if part is journaled else 0
                start = time.perf_counter()
                Checkpointer(directory).save(part.state_dict())
                times[f"{name} save"].append(time.perf_counter() - start)
                written[name] = (bytes_under(directory / "pool") - before
                                 + (directory / "last.pt").stat().st_size)
            for name, directory in (("whole", root / "whole"), ("journal", root / "journaled")):
                fresh = exploration(args.obs, args.action, capacity)
                if name == "journal":
                    fresh.journal_pool(directory / "pool")
                start = time.perf_counter()
                fresh.load_state_dict(Checkpointer(directory).load())
                times[f"{name} resume"].append(time.perf_counter() - start)
                assert torch.equal(fresh.pool.storage[:len(whole.pool)]["observation"],
                                   whole.pool.storage[:len(whole.pool)]["observation"])
                del fresh
        load = " ".join(f"{value:.2f}" for value in os.getloadavg())
        print(f"pool {args.pool:,} transitions of {2 * args.obs + args.action} floats, "
              f"+{args.new:,} a checkpoint, {args.rounds} rounds; load average {load}")
        for name, values in times.items():
            print(f"{name:>15}: {statistics.median(values):6.2f} s")
        for name, size in written.items():
            print(f"{name:>15} checkpoint writes {size / 2**20:8.1f} MiB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
