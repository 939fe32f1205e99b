"""Plain TRPO from ``recipes/trpo_vase.py`` beside sb3-contrib's TRPO: frames/s and learning.

Both with the same settings: ``--num-envs`` envs × ``5000 / num_envs`` steps = 5,000 frames per
update, policy [64, 32] tanh, critic [32] tanh, orthogonal initialisation, value targets
advantages + values (TD(λ)), max KL 0.01, 10 conjugate-gradient iterations, 5 critic epochs of
minibatches of 500 (Adam, 1e-3), γ 0.99, λ 0.95, one torch thread each. Runs
alternate between the two libraries (ours, sb3, ours, sb3, …) so that a change of load hits both.

* frames/s end to end (collection and updates) on HalfCheetah-v5 and MountainCarContinuous-v0,
  ``--fps-frames`` frames per run, ``--rounds`` runs each; the table gives the median and the
  ratio ours / sb3;
* learning: the mean return of the episodes that end in the last 20,000 frames, on HalfCheetah-v5
  (200,000 frames) and InvertedPendulum-v5 (100,000), ``--seeds`` seeds each.

The trust region: sb3-contrib's TRPO bounds the KL *averaged over the action's dimensions* (its
``kl_divergence`` of per-dimension Normals, then ``.mean()``), ours (rllab's, the paper's) the KL of
the whole action distribution, summed over dimensions. With ``d`` action dimensions, sb3's
``target_kl=0.01, cg_damping=0.1`` is exactly our ``max_kl=0.01·d, cg_damping=0.1·d`` (same search
direction, step and acceptance); ``--trust-region sb3`` (the default) runs ours so, ``textbook``
with ``max_kl=0.01, cg_damping=0.1`` as written.

The initial exploration: sb3's Gaussian acts in the env's units with std 1 (log-std 0); ours, as
rllab's, in [−1, 1] scaled to the bounds, so log-std 0 is a std of the half-range in the env's
units (3 on InvertedPendulum-v5, whose bounds are ±3; 1 on the other two). Ours runs with
``trpo.init_log_std = −log(half-range)``, the same initial policy in the env's units.

Needs the ``bench`` extra: ``pip install -c constraints.txt -e ".[bench]"``.

    python recipes/benchmarks/benchmark_sb3.py            # everything (about 15 minutes on 2 cores)
    python recipes/benchmarks/benchmark_sb3.py --skip-learning
    python recipes/benchmarks/benchmark_sb3.py --ours trpo.init=orthogonal trpo.cg_damping=1e-5
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium
import numpy as np
import torch
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
FRAMES_PER_UPDATE = 5000
LAST_FRAMES = 20_000
LEARNING = {"HalfCheetah-v5": 200_000, "InvertedPendulum-v5": 100_000}
SPEED = ("HalfCheetah-v5", "MountainCarContinuous-v0")


def _recipe():
    spec = importlib.util.spec_from_file_location("trpo_vase", ROOT / "recipes" / "trpo_vase.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def like_sb3(env_id: str, kind: str) -> tuple[str, ...]:
    """Our ``max_kl`` and CG damping for sb3's ``target_kl=0.01, cg_damping=0.1``, and our
    policy's initial log-std for sb3's std of 1 in the env's action units (see the doc)."""
    with gymnasium.make(env_id) as env:
        low, high = env.action_space.low, env.action_space.high
    dims = int(np.prod(low.shape)) if kind == "sb3" else 1
    half_range = np.unique((high - low) / 2)
    if len(half_range) != 1:
        raise ValueError(f"{env_id}: bounds of unequal ranges, {low}, {high}")
    return (f"env.max_kl={0.01 * dims:g}", f"trpo.cg_damping={0.1 * dims:g}",
            f"trpo.init_log_std={-np.log(half_range[0]):.6g}")


def ours(env_id: str, frames: int, seed: int, num_envs: int, store: Path, extra: list[str]):
    """Plain TRPO from the recipe; returns (frames/s, [(end frame, episode return), ...])."""
    iterations = frames // FRAMES_PER_UPDATE
    overrides = [
        "env=half_cheetah", f"env.id={env_id}", "env.name=sb3_comparison", "surprise=none",
        f"seed={seed}", f"iterations={iterations}", f"num_envs={num_envs}",
        f"env.frames_per_batch={FRAMES_PER_UPDATE}", "env.policy_cells=[64,32]",
        "env.critic_cells=[32]", "trpo.critic_activation=tanh",
        # sb3's initialisation and value targets (returns = advantages + values), as its TRPO
        "trpo.init=orthogonal", "advantage.value_target=td_lambda",
        "env.normalize_observations=false",
        "trpo.gamma=0.99", "trpo.gae_lambda=0.95", "trpo.critic_epochs=5",
        "trpo.critic_minibatch=500", "trpo.critic_lr=1e-3", "threads=1", "progress_bar=false",
        "checkpoint.every=0", "eval.every=0",  # sb3 evaluates nothing either
        "collection=continuous",  # sb3's: episodes run on across updates
        f"mlflow.tracking_uri=sqlite:///{store / 'mlflow.db'}",
        f"mlflow.experiment={env_id}", *extra,
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("trpo_vase", overrides=overrides)
    result = RECIPE.train(cfg)
    client = MlflowClient(tracking_uri=cfg.mlflow.tracking_uri)
    history = {
        name: {m.step: m.value for m in client.get_metric_history(result["run_id"], name)}
        for name in ("Return/mean", "train/episodes", "train/wall_time")
    }
    episodes = [  # each iteration's mean, weighted by its number of episodes
        (step, history["Return/mean"][step], int(history["train/episodes"][step]))
        for step in sorted(history["Return/mean"])
    ]
    returns = [(step, value) for step, value, count in episodes for _ in range(count)]
    wall = max(history["train/wall_time"].values())
    return frames / wall, returns


def sb3(env_id: str, frames: int, seed: int, num_envs: int):
    """sb3-contrib's TRPO with the same settings; returns (frames/s, [(end frame, return), ...])."""
    from sb3_contrib import TRPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Episodes(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: list[tuple[int, float]] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append((self.num_timesteps, float(info["episode"]["r"])))
            return True

    env = make_vec_env(env_id, n_envs=num_envs, seed=seed)
    model = TRPO(
        "MlpPolicy", env, n_steps=FRAMES_PER_UPDATE // num_envs, batch_size=500, gamma=0.99,
        gae_lambda=0.95, target_kl=0.01, cg_max_steps=10, n_critic_updates=5, learning_rate=1e-3,
        policy_kwargs={"net_arch": {"pi": [64, 32], "vf": [32]}, "activation_fn": nn.Tanh},
        seed=seed, device="cpu", verbose=0,
    )
    callback = Episodes()
    start = time.perf_counter()
    model.learn(total_timesteps=frames, callback=callback)
    elapsed = time.perf_counter() - start
    env.close()
    return frames / elapsed, callback.returns


def last_mean(returns: list[tuple[int, float]], frames: int) -> float:
    ending = [value for step, value in returns if step > frames - LAST_FRAMES]
    return float(np.mean(ending)) if ending else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--fps-frames", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed, ...")
    parser.add_argument("--skip-sb3-learning", action="store_true",
                        help="learning runs of ours only (choosing our settings)")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-learning", action="store_true")
    parser.add_argument("--trust-region", choices=("sb3", "textbook"), default="sb3",
                        help="sb3: our KL bound and damping scaled to sb3's per-dimension KL")
    parser.add_argument("--learning-envs", nargs="+", choices=list(LEARNING),
                        default=list(LEARNING))
    parser.add_argument("--ours", nargs="*", default=[], help="extra Hydra overrides for ours")
    args = parser.parse_args()
    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        sys.exit('sb3-contrib is not installed: pip install -c constraints.txt -e ".[bench]"')
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.num_envs} envs; "
          f"trust region {args.trust_region}; ours with {args.ours or 'the recipe defaults'}")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp)
        if not args.skip_speed:
            print(f"\nFrames/s end to end, {args.fps_frames:,} frames a run, runs in turns, "
                  f"median of {args.rounds}")
            print(f"{'env':<28} {'ours':>8} {'sb3':>8} {'ours/sb3':>9}")
            for env_id in SPEED:
                rates = {"ours": [], "sb3": []}
                for round_ in range(args.rounds):
                    rates["ours"].append(
                        ours(env_id, args.fps_frames, round_, args.num_envs, store,
                             [*like_sb3(env_id, args.trust_region), *args.ours])[0]
                    )
                    rates["sb3"].append(sb3(env_id, args.fps_frames, round_, args.num_envs)[0])
                mine, theirs = (statistics.median(rates[k]) for k in ("ours", "sb3"))
                print(f"{env_id:<28} {mine:>8,.0f} {theirs:>8,.0f} {mine / theirs:>8.2f}x  "
                      f"(ours {[round(r) for r in rates['ours']]}, "
                      f"sb3 {[round(r) for r in rates['sb3']]})")
        if not args.skip_learning:
            print(f"\nMean return of the episodes ending in the last {LAST_FRAMES:,} frames, "
                  f"{args.seeds} seeds")
            print(f"{'env':<22} {'frames':>8} {'ours':>30} {'sb3':>30}")
            for env_id in args.learning_envs:
                frames = LEARNING[env_id]
                finals = {"ours": [], "sb3": []}
                for seed in range(args.first_seed, args.first_seed + args.seeds):
                    finals["ours"].append(last_mean(
                        ours(env_id, frames, seed, args.num_envs, store,
                             [*like_sb3(env_id, args.trust_region), *args.ours])[1], frames))
                    if not args.skip_sb3_learning:
                        finals["sb3"].append(last_mean(
                            sb3(env_id, frames, seed, args.num_envs)[1], frames))
                cells = {k: f"{np.mean(v):8.1f} ({', '.join(f'{x:.0f}' for x in v)})"
                         if v else "–" for k, v in finals.items()}
                print(f"{env_id:<22} {frames:>8,} {cells['ours']:>30} {cells['sb3']:>30}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


RECIPE = _recipe()

if __name__ == "__main__":
    main()
