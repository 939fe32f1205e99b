"""Sparse locomotion: gymnasium's HalfCheetah and Ant models, rewarded only far from the start."""

from __future__ import annotations

import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.envs.mujoco.ant_v5 import AntEnv
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv

from torchrl_vase.envs._checks import checked_action


class SparseHalfCheetahEnv(HalfCheetahEnv):
    """HalfCheetah with reward 1 when the torso's x ≥ ``goal_x`` (paper: 5), else 0.

    Observation (20 dims, as in rllab/VIME): ``qpos[1:]`` (8), ``qvel`` (9) and the torso's centre
    of mass (3). Never terminates; registered as ``torchrl_vase/SparseHalfCheetah-v0`` with a
    500-step limit. Everything else is gymnasium's HalfCheetah-v5 (model, frame skip, reset noise).

    Examples:
        >>> env = SparseHalfCheetahEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape
        (20,)
    """

    def __init__(self, goal_x: float = 5.0, render_mode: str | None = None, **kwargs) -> None:
        super().__init__(render_mode=render_mode, **kwargs)
        self.goal_x = goal_x
        self.observation_space = spaces.Box(-np.inf, np.inf, (20,), np.float64)

    def _get_obs(self) -> np.ndarray:
        torso_com = self.data.body("torso").xipos
        return np.concatenate([self.data.qpos[1:], self.data.qvel, torso_com])

    def torso_x(self) -> float:
        return float(self.data.qpos[0])

    def step(self, action):
        observation, _, _, truncated, info = super().step(checked_action(action, self.action_space))
        reward = 1.0 if self.torso_x() >= self.goal_x else 0.0
        return observation, reward, False, truncated, info


class SparseAntEnv(AntEnv):
    """Ant with reward 1 when the torso's x ≥ ``goal_x`` (paper: 3), else 0.

    ``goal="velocity"`` rewards an x-velocity above ``goal_velocity`` (3) instead, as the authors'
    code does. Observation (125 dims, rllab's): ``qpos`` (15, with x and y), ``qvel`` (14), the
    external contact forces of the 14 bodies clipped to [−1, 1] (84), the torso's rotation matrix
    (9) and its centre of mass (3). The episode ends when the torso's z leaves [0.2, 1.0];
    registered as ``torchrl_vase/SparseAnt-v0`` with a 500-step limit.

    Examples:
        >>> env = SparseAntEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape
        (125,)
    """

    def __init__(
        self,
        goal_x: float = 3.0,
        goal: str = "position",
        goal_velocity: float = 3.0,
        render_mode: str | None = None,
        **kwargs,
    ) -> None:
        if goal not in ("position", "velocity"):
            raise ValueError(f"goal must be 'position' or 'velocity', got {goal!r}.")
        super().__init__(render_mode=render_mode, healthy_z_range=(0.2, 1.0), **kwargs)
        self.goal_x, self.goal, self.goal_velocity = goal_x, goal, goal_velocity
        self.observation_space = spaces.Box(-np.inf, np.inf, (125,), np.float64)

    def _get_obs(self) -> np.ndarray:
        mujoco.mj_rnePostConstraint(self.model, self.data)  # fills cfrc_ext
        torso = self.data.body("torso")
        return np.concatenate(
            [
                self.data.qpos,
                self.data.qvel,
                np.clip(self.data.cfrc_ext, -1.0, 1.0).ravel(),
                torso.xmat,
                torso.xipos,
            ]
        )

    def torso_x(self) -> float:
        return float(self.data.qpos[0])

    def step(self, action):
        observation, _, terminated, truncated, info = super().step(
            checked_action(action, self.action_space)
        )
        if self.goal == "position":
            success = self.torso_x() >= self.goal_x
        else:
            success = info["x_velocity"] > self.goal_velocity
        return observation, 1.0 if success else 0.0, terminated, truncated, info
