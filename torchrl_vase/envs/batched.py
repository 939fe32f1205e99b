"""Several copies of a gymnasium env stepped in one call, auto-reset off."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space


def sync_vector_env(env_id: str, num_envs: int, **make_kwargs) -> gymnasium.vector.VectorEnv:
    """gymnasium's ``SyncVectorEnv`` of ``num_envs`` copies with auto-reset disabled: the caller
    resets the copies that are done (``reset(options={"reset_mask": done})``), so a terminated or
    truncated step's observation is the episode's true last one.

    Examples:
        >>> import torchrl_vase  # registers the sparse envs
        >>> envs = sync_vector_env("torchrl_vase/SparseMountainCar-v1", 3)
        >>> envs.reset(seed=0)[0].shape
        (3, 2)
    """
    return gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED},
                              **make_kwargs)


class LeanVectorEnv(gymnasium.vector.VectorEnv):
    """``sync_vector_env``'s transitions for less: the copies stepped by a plain loop inside the
    wrappers ``gymnasium.make`` adds (``TimeLimit``, ``OrderEnforcing``, ``PassiveEnvChecker``: a
    fifth of a cheap env's step), ``TimeLimit``'s rule applied here; resets go through every
    wrapper. Auto-reset off and seeds as ``sync_vector_env``'s; the same transitions step for step
    (tested on every sparse env).

    Examples:
        >>> import torchrl_vase  # registers the sparse envs
        >>> envs = LeanVectorEnv("torchrl_vase/SparseMountainCar-v1", 3)
        >>> observation, _ = envs.reset(seed=0)
        >>> observation.shape, envs.step(np.zeros((3, 1)))[1].shape
        ((3, 2), (3,))
    """

    def __init__(self, env_id: str, num_envs: int, **make_kwargs) -> None:
        self.envs = [gymnasium.make(env_id, **make_kwargs) for _ in range(num_envs)]
        self._bare = [_without_make_wrappers(env) for env in self.envs]
        self.max_episode_steps = _time_limit(self.envs[0])
        self.num_envs = num_envs
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = self.envs[0].metadata
        self._observations = self.observation_space.sample() * 0
        self._elapsed = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict | None = None) -> tuple[np.ndarray, dict]:
        seeds = ([seed + i for i in range(self.num_envs)] if isinstance(seed, int)
                 else [None] * self.num_envs if seed is None else list(seed))
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs.")
        options = dict(options or {})
        mask = options.pop("reset_mask", np.ones(self.num_envs, dtype=bool))
        for i in np.flatnonzero(mask):
            self._observations[i], _ = self.envs[i].reset(seed=seeds[i], options=options or None)
            self._elapsed[i] = 0
        return self._observations.copy(), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray, dict]:
        rewards = np.empty(self.num_envs, dtype=np.float64)
        terminated = np.empty(self.num_envs, dtype=bool)
        truncated = np.empty(self.num_envs, dtype=bool)
        for i, env in enumerate(self._bare):
            self._observations[i], rewards[i], terminated[i], truncated[i], _ = env.step(
                actions[i])
        self._elapsed += 1
        if self.max_episode_steps is not None:
            truncated |= self._elapsed >= self.max_episode_steps
        return self._observations.copy(), rewards, terminated, truncated, {}

    def close_extras(self, **kwargs) -> None:
        for env in self.envs:
            env.close()


#: what ``gymnasium.make`` wraps an env in; ``LeanVectorEnv`` steps inside them
_MAKE_WRAPPERS = (gymnasium.wrappers.TimeLimit, gymnasium.wrappers.OrderEnforcing,
                  gymnasium.wrappers.PassiveEnvChecker)


def _without_make_wrappers(env: gymnasium.Env) -> gymnasium.Env:
    while isinstance(env, _MAKE_WRAPPERS):
        env = env.env
    return env


def _time_limit(env: gymnasium.Env) -> int | None:
    """The ``max_episode_steps`` of the ``TimeLimit`` among ``make``'s wrappers, if any."""
    while isinstance(env, _MAKE_WRAPPERS):
        if isinstance(env, gymnasium.wrappers.TimeLimit):
            return env._max_episode_steps
        env = env.env
    return None


def unit_to_bounds(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """A policy's action in [−1, 1], clipped there, mapped linearly onto the env's ``[low, high]``
    (torchrl's ``ClipTransform`` then ``ActionScaling``; rllab's ``NormalizedEnv``). One copy for
    collection, evaluation and videos, so all three act alike.

    Examples:
        >>> import numpy as np
        >>> unit_to_bounds(np.array([-2.0, 0.0, 0.5]), np.full(3, -10.0), np.full(3, 10.0))
        array([-10.,   0.,   5.])
    """
    return low + (np.clip(action, -1.0, 1.0) + 1.0) * (high - low) / 2
