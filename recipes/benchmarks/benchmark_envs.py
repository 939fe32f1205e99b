"""Benchmark the sparse envs: steps per second, and how hard each task is to stumble upon.

Prints, for each registered env, steps/second with uniformly random actions through raw
gymnasium (``gymnasium.make``) and through TorchRL's ``GymEnv`` (``rollout`` without breaking on
done); then, for every task, the success rate of a uniformly random policy over ``--episodes``
episodes of the registered length (500 steps; LunarLander 1,000); the tasks stepped as the
collector steps them, ``--vector-envs`` copies through gymnasium's ``SyncVectorEnv`` and
through ``LeanVectorEnv``; and for the point robot the number of steps a uniformly random policy
needs to first reach the goal (episodes of 500 steps restarting at the origin; median over seeds,
with a cap).

A success is an episode with a positive reward (the sparse tasks), or, for LunarLander, one that
ends with the lander at rest (reward +100).

    python recipes/benchmarks/benchmark_envs.py [--steps 5000] [--episodes 200] [--seeds 5] \
        [--cap 200000]
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

from torchrl_vase.envs import SPARSE_ENVS, LeanVectorEnv, sync_vector_env


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


def _actions(env_id: str, steps: int) -> tuple[gymnasium.Env, list]:
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)
    return env, [env.action_space.sample() for _ in range(steps)]


def vector_env_steps_per_second(env_id: str, num_envs: int, steps: int,
                                rounds: int = 3) -> tuple[float, float]:
    """Env-steps per second of ``num_envs`` copies through gymnasium's ``SyncVectorEnv``
    (``sync_vector_env``) and ``LeanVectorEnv`` (the collector's), the same random actions,
    resets of the copies that end, measured in turns; medians of ``rounds``."""
    vectors = [sync_vector_env(env_id, num_envs), LeanVectorEnv(env_id, num_envs)]
    space = vectors[0].single_action_space
    actions = np.random.default_rng(0).uniform(space.low, space.high,
                                               (steps, num_envs, *space.shape))
    timings: list[list[float]] = [[], []]
    for _ in range(rounds):
        for vector, timing in zip(vectors, timings, strict=True):
            vector.reset(seed=0)
            start = time.perf_counter()
            for action in actions:
                _, _, terminated, truncated, _ = vector.step(action)
                done = terminated | truncated
                if done.any():
                    vector.reset(options={"reset_mask": done})
            timing.append(steps * num_envs / (time.perf_counter() - start))
    return statistics.median(timings[0]), statistics.median(timings[1])


def random_success_rate(env_id: str, episodes: int) -> float:
    """The fraction of episodes in which a uniformly random policy succeeds (see the module doc)."""
    env = gymnasium.make(env_id)
    env.action_space.seed(0)
    lander = "LunarLander" in env_id
    successes = 0
    for episode in range(episodes):
        env.reset(seed=episode)
        while True:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            if (not lander and reward > 0) or (lander and terminated and reward == 100):
                successes += 1
                break
            if terminated or truncated:
                break
    env.close()
    return successes / episodes


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
    parser.add_argument("--episodes", type=int, default=200, help="random-policy episodes per env")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cap", type=int, default=200_000)
    parser.add_argument(
        "--episode-steps", type=int, default=500, help="point robot time limit (0: none)"
    )
    parser.add_argument("--vector-envs", type=int, default=10, help="copies per vector env")
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)

    print(f"Steps per second, uniformly random actions, {args.steps:,} steps")
    print(f"{'env':<40} {'gymnasium':>10} {'GymEnv':>8}")
    for env_id in SPARSE_ENVS:
        raw = raw_steps_per_second(env_id, args.steps)
        wrapped = torchrl_steps_per_second(env_id, args.steps)
        print(f"{env_id:<40} {raw:>10,.0f} {wrapped:>8,.0f}")

    print(f"\nRandom-policy success over {args.episodes} episodes")
    for env_id in SPARSE_ENVS:
        print(f"{env_id:<40} {random_success_rate(env_id, args.episodes):>10.3f}")

    print(f"\nThe tasks as the collector steps them: {args.vector_envs} copies, env-steps "
          f"per second through SyncVectorEnv and LeanVectorEnv (the same transitions), in turns")
    print(f"{'env':<40} {'sync /s':>9} {'lean /s':>9} {'ratio':>6}")
    for env_id in SPARSE_ENVS:
        sync, lean = vector_env_steps_per_second(env_id, args.vector_envs,
                                                 max(1, args.steps // args.vector_envs))
        print(f"{env_id:<40} {sync:>9,.0f} {lean:>9,.0f} {lean / sync:>6.2f}")

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
