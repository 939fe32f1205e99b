"""Benchmark the sparse envs: steps per second, and how hard the point robot is to stumble upon.

Prints, for each registered env, steps/second with uniformly random actions through raw
gymnasium (``gymnasium.make``) and through TorchRL's ``GymEnv`` (``rollout`` without breaking on
done), and for the point robot the number of steps a uniformly random policy needs to first reach
the goal (episodes of 500 steps restarting at the origin; median over seeds, with a cap).

    python recipes/benchmark_envs.py [--steps 5000] [--seeds 5] [--cap 200000]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import gymnasium
import numpy as np
import torch
from torchrl.envs import GymEnv

from torchrl_vase.envs import SPARSE_ENVS


def raw_steps_per_second(env_id: str, steps: int) -> float:
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(steps)]
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def torchrl_steps_per_second(env_id: str, steps: int) -> float:
    env = GymEnv(env_id)
    env.set_seed(0)
    env.rollout(10, break_when_any_done=False)  # warm-up
    start = time.perf_counter()
    env.rollout(steps, break_when_any_done=False)
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def random_steps_to_goal(seed: int, cap: int, episode_steps: int) -> int | None:
    """Steps a uniformly random policy takes to first reach the point robot's goal (None: cap).

    ``episode_steps=0`` removes the time limit: one endless random walk on the torus.
    """
    env = gymnasium.make("torchrl_vase/PointRobot2D-v0")
    if episode_steps == 0:
        env = env.unwrapped
    elif episode_steps != env.spec.max_episode_steps:
        env = gymnasium.make("torchrl_vase/PointRobot2D-v0", max_episode_steps=episode_steps)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for step in range(1, cap + 1):
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        if reward > 0:
            return step
        if terminated or truncated:
            env.reset()
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cap", type=int, default=200_000)
    parser.add_argument(
        "--episode-steps", type=int, default=500, help="point robot time limit (0: none)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)

    print(f"Steps per second, uniformly random actions, {args.steps:,} steps")
    print(f"{'env':<40} {'gymnasium':>10} {'GymEnv':>8}")
    for env_id in SPARSE_ENVS:
        raw = raw_steps_per_second(env_id, args.steps)
        wrapped = torchrl_steps_per_second(env_id, args.steps)
        print(f"{env_id:<40} {raw:>10,.0f} {wrapped:>8,.0f}")

    results = [
        random_steps_to_goal(seed, args.cap, args.episode_steps) for seed in range(args.seeds)
    ]
    reached = [r for r in results if r is not None]
    capped = [args.cap if r is None else r for r in results]
    median = statistics.median(capped)
    shown = f"{median:,.0f}" if len(reached) > len(results) / 2 else f"> {args.cap:,} (the cap)"
    print(
        f"\nPoint robot ({args.episode_steps or 'no'} step limit), uniformly random policy: steps "
        f"to first reach the goal, median over "
        f"{args.seeds} seeds: {shown}; reached within the cap in {len(reached)} of "
        f"{len(results)} seeds {sorted(reached) if reached else ''}"
    )
    env = gymnasium.make("torchrl_vase/PointRobot2D-v0").unwrapped
    spread = 0.01 * np.sqrt(2 / 3) * np.sqrt(500)  # rms displacement of 500 uniform steps
    print(
        f"(an episode of 500 uniform steps moves the robot {spread:.2f} from the origin, rms; the "
        f"goal is {np.linalg.norm(env.goal):.2f} away)"
    )


if __name__ == "__main__":
    main()
