"""Sparse classic-control tasks: MountainCar, cart-pole swing-up, double pendulum."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

from torchrl_vase.envs._checks import checked_action

ASSETS = Path(__file__).parent / "assets"


class SparseMountainCarEnv(Continuous_MountainCarEnv):
    """MountainCarContinuous physics with a sparse reward: 1 on reaching the goal, else 0.

    Reaching the goal (position ≥ ``goal_position`` = 0.45, gymnasium's) ends the episode.
    Registered as ``torchrl_vase/SparseMountainCar-v0`` with a 500-step limit. The observation
    is (x, ẋ), not normalised (as in the paper).

    Examples:
        >>> env = SparseMountainCarEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> env.step(np.array([1.0]))[1]
        0.0
    """

    def __init__(self, render_mode: str | None = None, goal_velocity: float = 0.0) -> None:
        super().__init__(render_mode=render_mode, goal_velocity=goal_velocity)

    def step(self, action):
        action = checked_action(action, self.action_space)
        observation, _, terminated, truncated, info = super().step(action.astype(np.float32))
        return observation, 1.0 if terminated else 0.0, terminated, truncated, info


class SparseCartpoleSwingupEnv(MujocoEnv):
    """A MuJoCo cart-pole that starts hanging down; reward 1 while the pole is up (cos θ > 0.9).

    Observation (x, θ, ẋ, θ̇) with θ = 0 upright and an unlimited hinge; action a force on the
    cart in [−10, 10] N (clipped). The episode ends when ``|x| > max_cart_position`` (3).
    Registered as ``torchrl_vase/SparseCartpoleSwingup-v0`` with a 500-step limit.

    Start state (rllab/VIME's): x ~ U[−1, 1], ẋ ~ U[−2, 2], θ ~ U[π − 1, π + 1], θ̇ ~ U[−3, 3].
    Choices, with VIME's Box2D version as the guide: time step 0.05 s (MuJoCo 0.01 s × 5), pole
    1 m and 0.1 kg, cart 1 kg. VIME's code rewards cos θ > 0.8; the paper's table says 0.9, the
    default here (``upright_cosine``).

    Examples:
        >>> env = SparseCartpoleSwingupEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, bool(np.cos(obs[1]) < 0)
        ((4,), True)
    """

    metadata: ClassVar[dict] = {
        "render_modes": ["human", "rgb_array", "depth_array", "rgbd_tuple"],
        "render_fps": 20,
    }

    def __init__(
        self,
        upright_cosine: float = 0.9,
        max_cart_position: float = 3.0,
        render_mode: str | None = None,
    ) -> None:
        self.upright_cosine = upright_cosine
        self.max_cart_position = max_cart_position
        observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float64)
        super().__init__(
            str(ASSETS / "cartpole_swingup.xml"),
            frame_skip=5,
            observation_space=observation_space,
            render_mode=render_mode,
            default_camera_config={"distance": 6.0, "lookat": np.array([0.0, 0.0, 0.5])},
        )

    def _get_obs(self) -> np.ndarray:
        x, theta = self.data.qpos
        x_dot, theta_dot = self.data.qvel
        return np.array([x, theta, x_dot, theta_dot])

    def reset_model(self) -> np.ndarray:
        x, x_dot, theta, theta_dot = self.np_random.uniform(
            [-1.0, -2.0, np.pi - 1.0, -3.0], [1.0, 2.0, np.pi + 1.0, 3.0]
        )
        self.set_state(np.array([x, theta]), np.array([x_dot, theta_dot]))
        return self._get_obs()

    def step(self, action):
        self.do_simulation(checked_action(action, self.action_space), self.frame_skip)
        observation = self._get_obs()
        x, theta = observation[0], observation[1]
        terminated = bool(abs(x) > self.max_cart_position)
        upright = np.cos(theta) > self.upright_cosine
        if self.render_mode == "human":
            self.render()
        return observation, 1.0 if upright and not terminated else 0.0, terminated, False, {}


class SparseDoublePendulumEnv(MujocoEnv):
    """A MuJoCo double pendulum hanging down; reward 1 when its tip is near the upright tip.

    Observation (sin θ₁, cos θ₁, θ̇₁, sin θ₂, cos θ₂, θ̇₂) with θ₁ the first link's angle from
    upright and θ₂ the second joint's relative angle; action a torque on the second joint only,
    in [−5, 5] N·m (clipped). Reward 1 when the tip is within ``tip_radius`` (0.1) of its upright
    position (0, 0, 2); the episode never terminates. Registered as
    ``torchrl_vase/SparseDoublePendulum-v0`` with a 500-step limit.

    Start state (VIME's noise): θ₁ = π + N(0, 0.1²), θ₂ = N(0, 0.1²), θ̇ ~ N(0, 0.01²).
    Choices: links of 1 m and 1 kg (VIME's link length), 0.1 s per step as VIME's
    ("make sure mdp-level step is 100ms long"), a torque limit of 5 N·m (about the static torque
    of a hanging link, so swinging up needs pumping).

    Examples:
        >>> env = SparseDoublePendulumEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, round(float(env.tip_position()[2]), 1)
        ((6,), -2.0)
    """

    metadata: ClassVar[dict] = {
        "render_modes": ["human", "rgb_array", "depth_array", "rgbd_tuple"],
        "render_fps": 10,
    }

    def __init__(self, tip_radius: float = 0.1, render_mode: str | None = None) -> None:
        self.tip_radius = tip_radius
        observation_space = spaces.Box(-np.inf, np.inf, (6,), np.float64)
        super().__init__(
            str(ASSETS / "double_pendulum.xml"),
            frame_skip=10,
            observation_space=observation_space,
            render_mode=render_mode,
            default_camera_config={"distance": 7.0, "lookat": np.array([0.0, 0.0, 0.0])},
        )
        self.upright_tip = np.array([0.0, 0.0, 2.0])

    def tip_position(self) -> np.ndarray:
        """The tip of the second link in world coordinates."""
        return self.data.site("tip").xpos.copy()

    def _get_obs(self) -> np.ndarray:
        theta, omega = self.data.qpos, self.data.qvel
        return np.array(
            [np.sin(theta[0]), np.cos(theta[0]), omega[0], np.sin(theta[1]), np.cos(theta[1]),
             omega[1]]
        )

    def reset_model(self) -> np.ndarray:
        qpos = np.array([np.pi, 0.0]) + 0.1 * self.np_random.standard_normal(2)
        qvel = 0.01 * self.np_random.standard_normal(2)
        self.set_state(qpos, qvel)
        return self._get_obs()

    def step(self, action):
        self.do_simulation(checked_action(action, self.action_space), self.frame_skip)
        mujoco.mj_kinematics(self.model, self.data)  # positions of the state just reached
        near = np.linalg.norm(self.tip_position() - self.upright_tip) < self.tip_radius
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), 1.0 if near else 0.0, False, False, {}
