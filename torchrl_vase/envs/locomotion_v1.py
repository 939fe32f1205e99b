"""The authors' locomotion tasks as they ran them: rllab's HalfCheetah and Ant, on rllab's
``MujocoEnv`` semantics (``frame_skip`` MuJoCo steps, derived quantities recomputed after; reset
noise N(0, 0.01²) on positions, N(0, 0.1²) on velocities; the "torso" centre of mass is the
whole robot's). gymnasium's model files are rllab's (Ant's differences set back at load time)."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import ClassVar

import gymnasium
import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

from torchrl_vase.envs._checks import checked_action

_ASSETS = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
_GOALS = ("velocity", "position")


class _RllabMujocoEnv(MujocoEnv):
    """rllab's ``MujocoEnv`` reset and step semantics on a gymnasium ``MujocoEnv``."""

    metadata: ClassVar[dict] = {"render_modes": ["human", "rgb_array", "depth_array"]}

    def _forward(self) -> None:
        """Derived quantities at the current state, as rllab's ``model.forward()`` after a step."""
        mujoco.mj_forward(self.model, self.data)
        mujoco.mj_rnePostConstraint(self.model, self.data)  # external contact forces
        mujoco.mj_subtreeVel(self.model, self.data)  # subtree_linvel: the COM's velocity

    def _rllab_reset(self, qpos: np.ndarray) -> None:
        noisy_qpos = qpos + 0.01 * self.np_random.standard_normal(self.model.nq)
        qvel = 0.1 * self.np_random.standard_normal(self.model.nv)
        self.set_state(noisy_qpos, qvel)
        self._forward()

    def _simulate(self, action) -> None:
        self.do_simulation(checked_action(action, self.action_space), self.frame_skip)
        self._forward()
        if self.render_mode == "human":
            self.render()

    @functools.cached_property
    def _torso(self) -> int:
        return self.model.body("torso").id  # a name lookup: once, not every step

    def center_of_mass(self) -> np.ndarray:
        """The whole robot's centre of mass (rllab's ``get_body_com("torso")``)."""
        return self.data.subtree_com[self._torso].copy()

    def center_of_mass_velocity(self) -> np.ndarray:
        """Its linear velocity (rllab's ``get_body_comvel("torso")``)."""
        return self.data.subtree_linvel[self._torso].copy()


class RllabHalfCheetahEnv(_RllabMujocoEnv):
    """The authors' sparse HalfCheetah: rllab's model at 0.01 s per step, rewarded far from home.

    Observation (20): ``qpos[1:]``, ``qvel`` and the centre of mass; 6 motor controls in [−1, 1];
    rllab's reset noise. Reward 1 on every step on which the centre of mass's x exceeds ``goal_x``;
    never terminates. ``torchrl_vase/SparseHalfCheetah-v1``, 500 steps (docs/guides/envs.md).

    Args:
        goal_x: the centre-of-mass x beyond which a step is rewarded (5; it starts at 0.04).
        render_mode: gymnasium's MuJoCo render modes.

    Examples:
        >>> env = RllabHalfCheetahEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, env.dt
        ((20,), 0.01)
    """

    metadata: ClassVar[dict] = {**_RllabMujocoEnv.metadata, "render_fps": 100}

    def __init__(self, goal_x: float = 5.0, render_mode: str | None = None) -> None:
        if not goal_x > 0.1:
            raise ValueError(f"goal_x must lie ahead of the start (> 0.1), got {goal_x}.")
        self.goal_x = float(goal_x)
        super().__init__(str(_ASSETS / "half_cheetah.xml"), frame_skip=1,
                         observation_space=spaces.Box(-np.inf, np.inf, (20,), np.float64),
                         render_mode=render_mode)

    def _initialize_simulation(self):
        # the model file's compiler scales the masses to 14 kg with settotalmass, which MuJoCo
        # deprecates with a warning per env: the same model (bit for bit), scaled after compiling
        xml = Path(self.fullpath).read_text()
        total = re.search(r' settotalmass="([^"]+)"', xml)
        model = mujoco.MjModel.from_xml_string(xml.replace(total.group(0), ""))
        mujoco.mj_setTotalmass(model, float(total.group(1)))
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
        data = mujoco.MjData(model)
        mujoco.mj_setConst(model, data)
        return model, data

    def _forward(self) -> None:
        """Only what the observation and reward read after a step: the bodies' poses and the
        centre of mass (``mj_kinematics``, ``mj_comPos``). rllab's whole ``forward()`` computes
        the same ``subtree_com`` at a quarter more per step, and its other results are
        recomputed by the next ``mj_step`` before use (the same transitions, tested)."""
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)

    def _get_obs(self) -> np.ndarray:
        return np.concatenate([self.data.qpos[1:], self.data.qvel, self.center_of_mass()])

    def reset_model(self) -> np.ndarray:
        self._rllab_reset(self.init_qpos)
        return self._get_obs()

    def step(self, action):
        self._simulate(action)
        reward = 1.0 if self.center_of_mass()[0] > self.goal_x else 0.0
        return self._get_obs(), reward, False, False, {}


class RllabAntEnv(_RllabMujocoEnv):
    """The authors' sparse Ant: rllab's model, rewarded for running fast (their code) or far.

    gymnasium's model file with rllab's settings put back at load time (0.02 s a step, ``solimp``,
    ±150 N·m motors). Observation (125): ``qpos``, ``qvel``, clipped contact forces, the torso's
    rotation and the centre of mass; 8 torques; rllab's ``init_qpos`` and noise; the episode ends
    when the torso's z leaves [0.2, 1.0]. Reward 1 on every step on which the centre of mass's
    x-velocity exceeds ``goal_velocity`` (``goal="velocity"``, the authors' code) or its x exceeds
    ``goal_x`` (``"position"``, the paper's text). ``torchrl_vase/SparseAnt-v1``, 500 steps
    (docs/guides/envs.md).

    Args:
        goal: ``"velocity"`` or ``"position"``.
        goal_velocity: the x-velocity threshold (3 m/s).
        goal_x: the x threshold (3 m).
        render_mode: gymnasium's MuJoCo render modes.

    Examples:
        >>> env = RllabAntEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, env.dt, float(env.action_space.high[0])
        ((125,), 0.02, 150.0)
    """

    metadata: ClassVar[dict] = {**_RllabMujocoEnv.metadata, "render_fps": 50}

    def __init__(self, goal: str = "velocity", goal_velocity: float = 3.0, goal_x: float = 3.0,
                 render_mode: str | None = None) -> None:
        if goal not in _GOALS:
            raise ValueError(f"goal must be one of {_GOALS}, got {goal!r}.")
        if goal_velocity <= 0 or goal_x <= 0:
            raise ValueError("goal_velocity and goal_x must be > 0.")
        self.goal, self.goal_velocity, self.goal_x = goal, float(goal_velocity), float(goal_x)
        super().__init__(str(_ASSETS / "ant.xml"), frame_skip=1,
                         observation_space=spaces.Box(-np.inf, np.inf, (125,), np.float64),
                         render_mode=render_mode)

    def _initialize_simulation(self):
        model, data = super()._initialize_simulation()
        # rllab's ant.xml where gymnasium's differs
        model.opt.timestep = 0.02
        model.geom_solimp[:] = [0.8, 0.8, 0.01, 0.5, 2.0]
        model.geom_solref[:] = [0.02, 1.0]
        model.actuator_gear[:, 0] = 1.0
        model.actuator_ctrlrange[:] = [-150.0, 150.0]
        return model, data

    def _get_obs(self) -> np.ndarray:
        torso = self.data.body("torso")
        return np.concatenate(
            [self.data.qpos, self.data.qvel, np.clip(self.data.cfrc_ext, -1.0, 1.0).ravel(),
             torso.xmat, self.center_of_mass()])

    def reset_model(self) -> np.ndarray:
        self._rllab_reset(np.asarray(self.model.numeric("init_qpos").data, dtype=np.float64))
        return self._get_obs()

    def step(self, action):
        self._simulate(action)
        if self.goal == "velocity":
            success = self.center_of_mass_velocity()[0] > self.goal_velocity
        else:
            success = self.center_of_mass()[0] > self.goal_x
        state = np.concatenate([self.data.qpos, self.data.qvel])
        healthy = bool(np.isfinite(state).all() and 0.2 <= state[2] <= 1.0)
        return self._get_obs(), 1.0 if success else 0.0, not healthy, False, {}
