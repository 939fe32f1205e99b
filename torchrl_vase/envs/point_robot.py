"""The paper's 2D point robot: a plane that wraps around, a single rewarding spot at (1, 1)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from gymnasium import Env, spaces

from torchrl_vase.envs._checks import checked_action
from torchrl_vase.envs._frames import AGENT, GOAL, GROUND, Canvas


class PointRobot2DEnv(Env):
    """A point on a square that wraps around (a torus, no walls), starting at the origin.

    The action is the velocity, each component clipped to ``[−max_speed, max_speed]``; the
    observation the position. Reward 1 on reaching within ``goal_radius`` of ``goal``, which ends
    the episode; 0 otherwise. ``torchrl_vase/PointRobot2D-v0``, 500 steps. Why these sizes:
    docs/guides/envs.md.

    Args:
        half_size: half the side of the square ``[−2, 2)²`` (the goal far from its wrapped copies).
        goal: the rewarding position (paper: (1, 1)).
        goal_radius: distance to the goal that counts as reaching it (five maximal steps).
        max_speed: the bound on each velocity component (paper: 0.01).
        render_mode: ``None`` or ``"rgb_array"`` (a 64 × 64 picture of the square).

    Examples:
        >>> env = PointRobot2DEnv()
        >>> obs, info = env.reset(seed=0)
        >>> obs
        array([0., 0.], dtype=float32)
        >>> obs, reward, terminated, truncated, info = env.step([0.5, 0.01])  # clipped to 0.01
        >>> obs, reward
        (array([0.01, 0.01], dtype=float32), 0.0)
    """

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, half_size: float = 2.0, goal: tuple[float, float] = (1.0, 1.0),
                 goal_radius: float = 0.05, max_speed: float = 0.01,
                 render_mode: str | None = None) -> None:
        if half_size <= 0 or goal_radius <= 0 or max_speed <= 0:
            raise ValueError("half_size, goal_radius and max_speed must be > 0.")
        if not all(-half_size <= g < half_size for g in goal):
            raise ValueError(f"goal {goal} is outside the square [-{half_size}, {half_size})².")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}.")
        self.half_size = float(half_size)
        self.goal = np.asarray(goal, dtype=np.float64)
        self.goal_radius = float(goal_radius)
        self.render_mode = render_mode
        self.observation_space = spaces.Box(-half_size, half_size, (2,), np.float32)
        self.action_space = spaces.Box(-max_speed, max_speed, (2,), np.float32)
        self.position = np.zeros(2)

    def _wrap(self, position: np.ndarray) -> np.ndarray:
        side = 2 * self.half_size
        return (position + self.half_size) % side - self.half_size

    def _observation(self) -> np.ndarray:
        return self.position.astype(np.float32)

    def at_goal(self) -> bool:
        """Whether the robot is within ``goal_radius`` of the goal (on the torus)."""
        offset = self._wrap(self.position - self.goal)
        return bool(np.linalg.norm(offset) <= self.goal_radius)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position = np.zeros(2)
        self.steps = 0  # the frames' label
        return self._observation(), {"position": self.position.copy()}

    def step(self, action):
        velocity = checked_action(action, self.action_space)
        self.position = self._wrap(self.position + velocity)
        self.steps += 1
        reached = self.at_goal()
        info = {"position": self.position.copy()}
        return self._observation(), 1.0 if reached else 0.0, reached, False, info

    #: side of a rendered frame in pixels: large enough to watch (the square's 4 units over
    #: 480 px: one maximal step of 0.01 is about 1 px, the robot a disc of 6 px radius)
    RENDER_SIZE = 480

    def render(self) -> np.ndarray | None:
        """A labelled top view: the square (white, grey edges: it wraps), the goal's disc
        (green, its true radius, at least 8 px), the robot (red disc) and the step count."""
        if self.render_mode != "rgb_array":
            return None
        h, size = self.half_size, self.RENDER_SIZE
        canvas = Canvas((-h, h, -h, h), (size, size))
        canvas.line([(-h, -h), (h, -h), (h, h), (-h, h), (-h, -h)], GROUND, width=3)
        canvas.circle(self.goal, self.goal_radius, GOAL, min_pixels=8.0)
        canvas.circle(self.position, 0.0, AGENT, min_pixels=6.0)
        label = 0.06 * h  # beside each disc, in world units
        canvas.text("goal", (self.goal[0] + label, self.goal[1] - label))
        canvas.text("robot", (self.position[0] + label, self.position[1] - label))
        canvas.text(f"PointRobot2D  step {self.steps}", (8, 8), pixels=True)
        return canvas.frame()
