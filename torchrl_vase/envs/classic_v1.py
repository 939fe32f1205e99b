"""The authors' classic tasks as they ran them: rllab's Box2D worlds, rebuilt with pybox2d.

The VASE authors' MountainCar, CartpoleSwingup and DoublePendulum subclass rllab's ``Box2DEnv``,
whose worlds come from rllab's model files; these classes build the same worlds directly with
``Box2DEnv``'s semantics: gravity (0, −10), the model's time step, iterations and frame skip;
the action clipped and applied before every physics step; reward and termination from the
state after it; ``reset`` restores every body in a new world, then sets the task's random
initial values as the authors' code does (docs/guides/envs.md, task by task)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import Box2D
import numpy as np
from gymnasium import Env, spaces

from torchrl_vase.envs._checks import checked_action
from torchrl_vase.envs._frames import GOAL, Canvas, draw_bodies

# rllab's observation bounds (Box2DEnv's BIG)
_BIG = 1e6


@dataclass(frozen=True)
class BodyState:
    """A body's pose and velocity, as rllab's ``Box2DEnv._state`` keeps them."""

    position: tuple[float, float]
    angle: float
    linear_velocity: tuple[float, float]
    angular_velocity: float


class RllabBox2DEnv(Env):
    """Shared machinery of rllab's ``Box2DEnv`` for the authors' Box2D tasks.

    Subclasses build the world (``_build``), set the random part of the initial state
    (``_randomize``), apply an action (``_apply``), and read the observation, reward and
    termination from the state after a step."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"]}  # render_fps: 1 / dt
    #: the part of the world a frame shows, (x_min, x_max, y_min, y_max) in metres, and its size
    view: ClassVar[tuple[float, float, float, float]] = (-3.0, 3.0, -1.0, 3.0)
    frame_size: ClassVar[tuple[int, int]] = (600, 400)
    #: seconds per physics step (the model's ``timestep``)
    timestep: float = 0.02
    #: Box2D's velocity and position solver iterations (rllab's defaults: 8 and 3)
    velocity_iterations: int = 8
    position_iterations: int = 3
    #: physics steps per env step
    frame_skip: int = 1

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}.")
        self.render_mode = render_mode
        self.metadata = {**type(self).metadata, "render_fps": round(1 / self.dt)}  # real time
        self._new_world()

    def render(self) -> np.ndarray | None:
        """With ``render_mode="rgb_array"``: the world's bodies (static ones grey), the goal
        (green) and the task's name, as a ``(400, 600, 3)`` image."""
        if self.render_mode != "rgb_array":
            return None
        canvas = Canvas(self.view, self.frame_size)
        draw_bodies(canvas, self.world)
        self._draw_goal(canvas)
        canvas.text(type(self).__name__.removeprefix("Rllab").removesuffix("Env"), (8, 8),
                    pixels=True)
        return canvas.frame()

    def _draw_goal(self, canvas: Canvas) -> None:
        """Where the sparse reward is (nothing by default)."""

    @property
    def dt(self) -> float:
        """Seconds per env step: ``frame_skip × timestep``."""
        return self.frame_skip * self.timestep

    # -- What a task provides
    def _build(self, world: Box2D.b2World) -> None:
        raise NotImplementedError

    def _randomize(self) -> None:
        raise NotImplementedError

    def _apply(self, action: np.ndarray) -> None:
        raise NotImplementedError

    def _observation(self) -> np.ndarray:
        raise NotImplementedError

    def _reward_and_done(self) -> tuple[float, bool]:
        raise NotImplementedError

    # -- rllab's Box2DEnv
    def set_body_state(self, name: str, state: BodyState) -> None:
        """Put a body at a pose and velocity (for tests: hand-set states)."""
        body = self._body(name)
        body.position = state.position
        body.angle = state.angle
        body.linearVelocity = state.linear_velocity
        body.angularVelocity = state.angular_velocity

    def _body(self, name: str):
        for body in self.world.bodies:
            if body.userData == name:
                return body
        raise KeyError(f"no body named {name!r}.")

    @staticmethod
    def _force(body, direction: tuple[float, float], magnitude: float) -> None:
        """rllab's force control: along a direction of the body's frame, at its origin."""
        world_force = body.GetWorldVector(tuple(_unit_vector(direction) * magnitude))
        body.ApplyForce(world_force, body.GetWorldPoint((0.0, 0.0)), True)

    @staticmethod
    def _torque(joint, torque: float) -> None:
        """rllab's torque control: a motor saturated at ``|torque|``, aiming at an unreachable
        speed."""
        joint.motorEnabled = True
        joint.motorSpeed = 1e5 if torque > 0 else -1e5
        joint.maxMotorTorque = abs(float(torque))

    def _new_world(self) -> None:
        self.world = Box2D.b2World(gravity=(0, -10), doSleep=True)
        self._build(self.world)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        # rllab puts the bodies of its one world back to their initial poses; a new world does
        # the same and also forgets the last episode's contacts, so that a seed fixes the episode
        self._new_world()
        self._randomize()
        return self._observation(), {}

    def step(self, action):
        action = checked_action(action, self.action_space)
        for _ in range(self.frame_skip):
            self._apply(action)
            self.world.Step(self.timestep, self.velocity_iterations, self.position_iterations)
        reward, done = self._reward_and_done()
        return self._observation(), reward, done, False, {}

    def close(self) -> None:
        for body in list(self.world.bodies):
            self.world.DestroyBody(body)


@functools.cache
def _unit_vector(direction: tuple[float, float]) -> np.ndarray:
    """A force direction scaled to length 1, computed once per direction (a step's cost)."""
    return np.asarray(direction, dtype=np.float64) / np.linalg.norm(direction)


@functools.cache
def _mountain_car_track() -> tuple[Box2D.b2ChainShape, Box2D.b2FixtureDef]:
    """rllab's MountainCar track: a chain of 201 points along a sine, the fixture's defaults
    (friction 0.2); the shape is kept beside the definition that refers to it."""
    points = 100
    vertices = [
        (0.5 / points * i * 4.0, np.sin((i / points - 0.5) * np.pi))
        for i in range(-points, points + 1)]
    shape = Box2D.b2ChainShape(vertices_chain=vertices)
    return shape, Box2D.b2FixtureDef(shape=shape)


def _box_space(dim: int) -> spaces.Box:
    return spaces.Box(-_BIG, _BIG, (dim,), np.float64)


class RllabMountainCarEnv(RllabBox2DEnv):
    """The authors' sparse MountainCar: rllab's Box2D car on a sine-shaped track.

    A box car on ``y = 1 − cos(πx/2)``, ``x ∈ [−2, 2]``, pushed by a force in [−1, 1] N along its
    own axis; 0.05 s a step. Observation ``(x, ẋ)``; start x = 0, ẋ ~ U(−1, 1). The episode ends
    with reward 1 at ``x ≥ goal_position`` or ``|x| ≥ track_end`` (either hill-top, as the authors'
    ``compute_reward``); 0 otherwise. ``torchrl_vase/SparseMountainCar-v1``, 500 steps.

    Args:
        goal_position: x of the goal on the right slope (authors: 0.6).
        track_end: ``|x|`` at which either end also ends the episode (authors: 2, the hill-tops).
        render_mode: ``None``, or ``"rgb_array"`` for ``render()``'s frames.

    Examples:
        >>> env = RllabMountainCarEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> float(obs[0]), bool(-1 <= obs[1] <= 1)
        (0.0, True)
        >>> env.dt
        0.05
    """

    timestep = 0.05
    view = (-2.3, 2.3, -0.4, 2.67)
    #: the track's half width and its height (the model's sine chain)
    track_half_width = 2.0
    track_height = 2.0

    def __init__(
        self, goal_position: float = 0.6, track_end: float = 2.0, render_mode: str | None = None
    ) -> None:
        if not 0 < track_end <= self.track_half_width:
            raise ValueError(
                f"track_end must be in (0, {self.track_half_width}] (the track's x range), "
                f"got {track_end}.")
        if not -track_end < goal_position < track_end:
            raise ValueError(
                f"goal_position {goal_position} is off the track (−{track_end}, {track_end}).")
        self.goal_position = float(goal_position)
        self.track_end = float(track_end)
        super().__init__(render_mode)
        self.observation_space = _box_space(2)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float64)

    @staticmethod
    def track_height_at(x: float | np.ndarray) -> float | np.ndarray:
        """The track's height ``1 − cos(πx/2)`` (between its 0.02 m chain points, a chord)."""
        return 1.0 - np.cos(np.pi * np.asarray(x) / 2)

    def _build(self, world: Box2D.b2World) -> None:
        self.cart = world.CreateDynamicBody(position=(0.0, 0.05), userData="cart")
        self.cart.CreatePolygonFixture(box=(0.2, 0.1), density=5.0, friction=0.0005)
        track = world.CreateStaticBody(position=(0.0, 1.0), userData="track")
        # Box2D copies the shape into the body: one definition serves every reset (pybox2d's
        # vertex setter, a Python loop over the 201 points, was 250 of a reset's 284 µs)
        track.CreateFixture(_mountain_car_track()[1])

    def _randomize(self) -> None:
        velocity = float(self.np_random.uniform(-1.0, 1.0))
        self.cart.linearVelocity = (velocity, self.cart.linearVelocity[1])

    def _apply(self, action: np.ndarray) -> None:
        self._force(self.cart, (1.0, 0.0), float(action[0]))

    def _observation(self) -> np.ndarray:
        return np.array([self.cart.position[0], self.cart.linearVelocity[0]], dtype=np.float64)

    def _draw_goal(self, canvas: Canvas) -> None:
        """A flag at ``goal_position`` on the track (and one at each end it also counts)."""
        for x in sorted({self.goal_position, -self.track_end, self.track_end}):
            ground = 1.0 - np.cos(np.pi * x / 2)  # the track's height there
            canvas.line([(x, ground), (x, ground + 0.35)], GOAL, width=3)
            canvas.polygon([(x, ground + 0.35), (x + 0.2, ground + 0.28), (x, ground + 0.21)],
                           GOAL)

    def _reward_and_done(self) -> tuple[float, bool]:
        x = float(self.cart.position[0])
        done = x >= self.goal_position or abs(x) >= self.track_end
        return float(done), bool(done)


class RllabCartpoleSwingupEnv(RllabBox2DEnv):
    """The authors' sparse cart-pole swing-up: rllab's Box2D cart-pole.

    A 1 kg cart on a rail and a 0.1 kg pole on a free hinge, pushed by a force in [−10, 10] N; 0.05
    s a step. Observation ``(x, ẋ, θ, θ̇)``, θ the pole's unwrapped angle, 0 upright; it starts
    hanging (θ ~ U(π ± 1)). Reward 1 while ``cos θ > upright_cosine``; the episode ends, with 0, at
    ``|x| > max_cart_position``. ``torchrl_vase/SparseCartpoleSwingup-v1``, 500 steps.

    Args:
        upright_cosine: the cos θ above which the pole counts as up (0.9; VIME's code: 0.8).
        max_cart_position: ``|x|`` beyond which the episode ends (3).
        render_mode: ``None``, or ``"rgb_array"`` for ``render()``'s frames.

    Examples:
        >>> env = RllabCartpoleSwingupEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, bool(np.cos(obs[2]) < 0)
        ((4,), True)
    """

    timestep = 0.05
    view = (-3.6, 3.6, -1.4, 3.4)

    def __init__(self, upright_cosine: float = 0.9, max_cart_position: float = 3.0,
                 render_mode: str | None = None) -> None:
        if not -1 < upright_cosine < 1:
            raise ValueError(f"upright_cosine must be in (−1, 1), got {upright_cosine}.")
        if max_cart_position <= 1:
            raise ValueError(
                "max_cart_position must exceed 1, the largest start position, got "
                f"{max_cart_position}.")
        self.upright_cosine = float(upright_cosine)
        self.max_cart_position = float(max_cart_position)
        super().__init__(render_mode)
        self.observation_space = _box_space(4)
        self.action_space = spaces.Box(-10.0, 10.0, (1,), np.float64)

    def _build(self, world: Box2D.b2World) -> None:
        cart_width, cart_height = 4 / np.sqrt(12), 3 / np.sqrt(12)
        self.cart = world.CreateDynamicBody(position=(0.0, cart_height / 2), userData="cart")
        self.cart.CreatePolygonFixture(
            box=(cart_width / 2, cart_height / 2), density=1.0, friction=0.0005)
        self.pole = world.CreateDynamicBody(position=(0.0, cart_height), userData="pole")
        self.pole.CreatePolygonFixture(
            vertices=[(0.05, 0.0), (0.05, 1.0), (-0.05, 1.0), (-0.05, 0.0)],
            density=1.0, friction=2e-6, groupIndex=-1,
        )
        track = world.CreateStaticBody(position=(0.0, cart_height / 2), userData="track")
        track.CreatePolygonFixture(box=(100.0, 0.1), friction=2e-6, groupIndex=-1)
        world.CreateRevoluteJoint(bodyA=self.cart, bodyB=self.pole, anchor=(0.0, cart_height))
        world.CreateJoint(Box2D.b2PrismaticJointDef(bodyA=track, bodyB=self.cart))

    def _randomize(self) -> None:
        x, x_dot, theta, theta_dot = self.np_random.uniform(
            [-1.0, -2.0, np.pi - 1.0, -3.0], [1.0, 2.0, np.pi + 1.0, 3.0])
        self.cart.position = (float(x), self.cart.position[1])
        self.cart.linearVelocity = (float(x_dot), self.cart.linearVelocity[1])
        self.pole.angle = float(theta)
        self.pole.angularVelocity = float(theta_dot)

    def _apply(self, action: np.ndarray) -> None:
        self._force(self.cart, (1.0, 0.0), float(action[0]))

    def _observation(self) -> np.ndarray:
        return np.array(
            [self.cart.position[0], self.cart.linearVelocity[0], self.pole.angle,
             self.pole.angularVelocity],
            dtype=np.float64,
        )

    def _reward_and_done(self) -> tuple[float, bool]:
        done = abs(float(self.cart.position[0])) > self.max_cart_position
        if done:
            return 0.0, True
        return float(np.cos(self.pole.angle) > self.upright_cosine), False


class RllabDoublePendulumEnv(RllabBox2DEnv):
    """The authors' sparse double pendulum: rllab's Box2D double pendulum, torque at the elbow.

    Two 0.5 kg links hanging from a pivot, a torque in [−50, 50] N·m at the elbow; 0.02 s a step.
    Observation ``(sin θ₁, cos θ₁, θ̇₁, sin θ₂, cos θ₂, θ̇₂)``, 0 hanging down. Reward 1 when the
    authors' ``get_tip_pos`` (``elbow − (sin θ₂, cos θ₂)``, the true tip mirrored in x; the two
    agree upright) is within ``tip_radius`` of (0, 2); never terminates.
    ``torchrl_vase/SparseDoublePendulum-v1``, 500 steps.

    Args:
        tip_radius: distance from (0, 2) within which the tip is rewarded (0.1; VIME: 1).
        render_mode: ``None``, or ``"rgb_array"`` for ``render()``'s frames.

    Examples:
        >>> env = RllabDoublePendulumEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, env.dt
        ((6,), 0.02)
    """

    timestep = 0.01
    velocity_iterations = 20
    position_iterations = 20
    frame_skip = 2
    link_length = 1.0
    view = (-3.45, 3.45, -2.3, 2.3)

    def __init__(self, tip_radius: float = 0.1, render_mode: str | None = None) -> None:
        if not 0 < tip_radius < 2 * self.link_length:
            raise ValueError(f"tip_radius must be in (0, 2), got {tip_radius}.")
        self.tip_radius = float(tip_radius)
        super().__init__(render_mode)
        self.observation_space = _box_space(6)
        self.action_space = spaces.Box(-50.0, 50.0, (1,), np.float64)
        self.target = np.array([0.0, 2 * self.link_length])

    def _build(self, world: Box2D.b2World) -> None:
        vertices = [(0.05, 0.0), (0.05, -1.0), (-0.05, -1.0), (-0.05, 0.0)]
        self.link1 = world.CreateDynamicBody(position=(0.0, 0.0), userData="link1")
        self.link1.CreatePolygonFixture(vertices=vertices, density=5.0, groupIndex=-1)
        self.link2 = world.CreateDynamicBody(position=(0.0, -1.0), userData="link2")
        self.link2.CreatePolygonFixture(vertices=vertices, density=5.0, groupIndex=-1)
        track = world.CreateStaticBody(position=(0.0, -0.1), userData="track")
        track.CreatePolygonFixture(box=(100.0, 0.1), groupIndex=-1)
        world.CreateRevoluteJoint(bodyA=track, bodyB=self.link1, anchor=(0.0, 0.0))
        self.elbow = world.CreateRevoluteJoint(
            bodyA=self.link1, bodyB=self.link2, anchor=(0.0, -1.0))

    def _randomize(self) -> None:
        angle1, angle2, velocity1, velocity2 = (
            self.np_random.standard_normal(4) * np.array([0.1, 0.1, 0.01, 0.01]))
        self.link1.angle, self.link2.angle = float(angle1), float(angle2)
        self.link1.angularVelocity = float(velocity1)
        self.link2.angularVelocity = float(velocity2)

    def _apply(self, action: np.ndarray) -> None:
        self._torque(self.elbow, float(action[0]))

    def _observation(self) -> np.ndarray:
        a1, a2 = self.link1.angle, self.link2.angle
        return np.array(
            [np.sin(a1), np.cos(a1), self.link1.angularVelocity,
             np.sin(a2), np.cos(a2), self.link2.angularVelocity],
            dtype=np.float64,
        )

    def tip_position(self) -> np.ndarray:
        """The authors' "tip": the second link's origin minus ``L·(sin θ₂, cos θ₂)``."""
        origin, angle = self.link2.position, self.link2.angle
        return np.array(
            [origin[0] - self.link_length * np.sin(angle),
             origin[1] - self.link_length * np.cos(angle)])

    def _draw_goal(self, canvas: Canvas) -> None:
        """The disc around (0, 2) that the tip must reach."""
        canvas.circle(self.target, self.tip_radius, GOAL, width=2)

    def _reward_and_done(self) -> tuple[float, bool]:
        near = np.linalg.norm(self.tip_position() - self.target) < self.tip_radius
        return float(near), False
