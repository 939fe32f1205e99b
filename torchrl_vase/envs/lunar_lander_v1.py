"""The authors' LunarLanderContinuous as they ran it (``torchrl_vase/LunarLanderContinuous-v1``)."""

from __future__ import annotations

import numpy as np
from gymnasium.envs.box2d.lunar_lander import LunarLander

from torchrl_vase.envs._checks import checked_action

__all__ = ["AuthorsLunarLanderEnv"]


class AuthorsLunarLanderEnv(LunarLander):
    """The authors' LunarLanderContinuous: gymnasium's, without the −100 for a crash.

    A crash or flying off the screen ends the episode with that step's ordinary reward (the
    authors' one change to gym's ``lunar_lander.py``); the dense shaping is kept, so this task is
    **not sparse** in their code. ``torchrl_vase/LunarLanderContinuous-v1``, 1,000 steps.

    Examples:
        >>> env = AuthorsLunarLanderEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, env.action_space.shape
        ((8,), (2,))
    """

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode, continuous=True)

    def step(self, action):
        action = checked_action(action, self.action_space)
        shaping_before = self.prev_shaping
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated and self.lander.awake:  # gymnasium replaced the reward by −100: undo it
            main, side = action
            main_power = (np.clip(main, 0.0, 1.0) + 1.0) * 0.5 if main > 0 else 0.0
            side_power = np.clip(abs(side), 0.5, 1.0) if abs(side) > 0.5 else 0.0
            reward = self.prev_shaping - shaping_before if shaping_before is not None else 0.0
            reward -= 0.30 * main_power + 0.03 * side_power
        return observation, float(reward), terminated, truncated, info
