"""SAC from ``recipes/trpo_vase.py`` beside stable-baselines3's SAC: training frames/s.

Both on HalfCheetah-v5, one env, [256, 256] ReLU actor and critics, batches of 256, one gradient
step a frame, γ 0.99, τ 0.005, Adam 3e-4, the temperature learnt from 1.0 towards −dim(action),
a buffer of 1 M, one torch thread each; ``--warm-up`` frames of random actions first. Runs
alternate (ours, sb3, ours, sb3, …) so that a change of load hits both; frames/s counts the
frames after the warm-up (updates and collection, not the start-up). With ``--bonus vase`` ours
also runs with VASE's bonus on every sampled batch, the third column its cost.

Needs the ``bench`` extra: ``pip install -c constraints.txt -e ".[bench]"``.

    python recipes/benchmarks/benchmark_sac_sb3.py                # about 5 minutes on 2 cores
    python recipes/benchmarks/benchmark_sac_sb3.py --bonus vase --rounds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
ENV = "HalfCheetah-v5"


def _recipe():
    spec = importlib.util.spec_from_file_location("trpo_vase", ROOT / "recipes" / "trpo_vase.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ours(frames: int, warm_up: int, seed: int, surprise: str, store: Path) -> float:
    """Frames/s of the recipe's SAC after its warm-up (from its logged wall time)."""
    overrides = [
        "algorithm=sac", "env=half_cheetah", f"env.id={ENV}", "env.name=sac_sb3",
        f"surprise={surprise}", f"seed={seed}", f"sac.frames={frames}",
        f"sac.init_random_frames={warm_up}", "threads=1", "progress_bar=false",
        "checkpoint.every=0", "eval.every=0", "env.normalize_observations=false",
        f"mlflow.tracking_uri=sqlite:///{store / 'mlflow.db'}", f"mlflow.experiment={surprise}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("trpo_vase", overrides=overrides)
    run_id = RECIPE.train(cfg)["run_id"]
    wall = {m.step: m.value for m in MlflowClient(cfg.mlflow.tracking_uri).get_metric_history(
        run_id, "train/wall_time")}
    start = min(step for step in wall if step > warm_up)  # the first iteration with updates
    return (frames - start) / (wall[frames] - wall[start])


def sb3(frames: int, warm_up: int, seed: int) -> float:
    """Frames/s of stable-baselines3's SAC after the same warm-up."""
    import gymnasium
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    class Clock(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == warm_up + 1000:  # as ours: from the end of an iteration
                self.start = time.perf_counter()
            return True

    model = SAC("MlpPolicy", gymnasium.make(ENV), buffer_size=1_000_000, learning_starts=warm_up,
                batch_size=256, tau=0.005, gamma=0.99, learning_rate=3e-4, train_freq=1,
                gradient_steps=1, ent_coef="auto_1.0", policy_kwargs={"net_arch": [256, 256]},
                seed=seed, device="cpu", verbose=0)
    clock = Clock()
    model.learn(total_timesteps=frames, callback=clock)
    return (frames - warm_up - 1000) / (time.perf_counter() - clock.start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=6000)
    parser.add_argument("--warm-up", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bonus", choices=("vase", "nll", "rnd"), default=None)
    args = parser.parse_args()
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        sys.exit('stable-baselines3 is not installed: pip install -c constraints.txt -e ".[bench]"')
    if args.frames % 1000 or args.warm_up % 1000 or args.frames <= args.warm_up + 1000:
        sys.exit("--frames and --warm-up are whole iterations of 1,000 frames, frames at least "
                 "two iterations past the warm-up.")
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    kinds = ["ours", "sb3", *([f"ours+{args.bonus}"] if args.bonus else [])]
    rates = {kind: [] for kind in kinds}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            rates["ours"].append(ours(args.frames, args.warm_up, round_, "none", Path(tmp)))
            rates["sb3"].append(sb3(args.frames, args.warm_up, round_))
            if args.bonus:
                rates[f"ours+{args.bonus}"].append(
                    ours(args.frames, args.warm_up, round_, args.bonus, Path(tmp)))
            loads.append(os.getloadavg()[0])
    median = {kind: statistics.median(values) for kind, values in rates.items()}
    print(f"{ENV}, frames {args.warm_up:,}-{args.frames:,} of each run, median of {args.rounds} "
          f"rounds; load average {min(loads):.2f}-{max(loads):.2f}; {torch.__version__}")
    for kind in kinds:
        print(f"{kind:>10}: {median[kind]:6.1f} frames/s  "
              f"{[round(value, 1) for value in rates[kind]]}")
    print(f"ours / sb3: {median['ours'] / median['sb3']:.2f}x")
    if args.bonus:
        print(f"ours+{args.bonus} cost: {median['ours'] / median[f'ours+{args.bonus}']:.2f}x "
              "the time of ours")


RECIPE = _recipe()

if __name__ == "__main__":
    main()
