"""The authors' tasks (``-v1``) against facts read from their code and rllab's models.

Sources: lechszym/vase ``envs/*_x.py``; rll/rllab ``rllab/envs/box2d/box2d_env.py``, its parser and
``models/*.xml.mako``, ``rllab/envs/mujoco/mujoco_env.py``, ``vendor/mujoco_models/*.xml``.
"""

import gymnasium
import mujoco
import numpy as np
import pytest
from scipy import stats

import torchrl_vase  # noqa: F401  (registers the envs)
from torchrl_vase.envs import (
    AuthorsLunarLanderEnv,
    RllabAntEnv,
    RllabCartpoleSwingupEnv,
    RllabDoublePendulumEnv,
    RllabHalfCheetahEnv,
    RllabMountainCarEnv,
)
from torchrl_vase.envs.classic_v1 import BodyState

ZERO = np.zeros(1)


# ------------------------------------------------------------------------------------------------
# Time steps and bounds (the models' timestep × frame_skip; the controls' ctrllimit)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("env_class", "seconds", "low", "high"),
    [
        (RllabMountainCarEnv, 0.05, -1.0, 1.0),  # timestep 0.05, frame_skip 1
        (RllabCartpoleSwingupEnv, 0.05, -10.0, 10.0),  # timestep 0.05
        (RllabDoublePendulumEnv, 0.02, -50.0, 50.0),  # timestep 0.01, frame_skip 2
        (RllabHalfCheetahEnv, 0.01, -1.0, 1.0),  # timestep 0.01, rllab's frame_skip 1
        (RllabAntEnv, 0.02, -150.0, 150.0),  # rllab's ant.xml: 0.02, ctrlrange ±150
    ],
)
def test_seconds_per_step_and_action_bounds(env_class, seconds, low, high):
    env = env_class()
    env.reset(seed=0)
    assert env.dt == pytest.approx(seconds)
    assert np.all(env.action_space.low == low) and np.all(env.action_space.high == high)
    env.close()


# ------------------------------------------------------------------------------------------------
# MountainCar
# ------------------------------------------------------------------------------------------------
def _place_cart(env: RllabMountainCarEnv, x: float, speed: float = 0.0) -> None:
    """The car on the track at surface point x, tilted with it, its centre 0.11 m (half height +
    skin) off the surface, moving at ``speed`` along the track (positive: towards +x)."""
    slope = float(np.arctan(np.pi / 2 * np.sin(np.pi * x / 2)))
    normal = np.array([-np.sin(slope), np.cos(slope)])
    centre = np.array([x, env.track_height_at(x)]) + 0.11 * normal
    velocity = (speed * np.cos(slope), speed * np.sin(slope))
    env.set_body_state("cart", BodyState(tuple(centre), slope, velocity, 0.0))


def test_mountain_car_start_mass_and_track():
    env = RllabMountainCarEnv()
    starts = np.array([env.reset(seed=seed)[0] for seed in range(1000)])
    assert (starts[:, 0] == 0).all()  # x = 0 exactly
    assert starts[:, 1].min() >= -1 and starts[:, 1].max() <= 1  # ẋ ~ U(−1, 1)
    assert stats.kstest(starts[:, 1], stats.uniform(-1, 2).cdf).pvalue > 1e-3
    assert env.cart.mass == pytest.approx(0.4)  # 0.4 × 0.2 m at density 5
    track = next(b for b in env.world.bodies if b.userData == "track")
    vertices = np.array(track.fixtures[0].shape.vertices) + np.array([0.0, 1.0])
    assert len(vertices) == 201 and vertices[0, 0] == pytest.approx(-2.0)
    np.testing.assert_allclose(vertices[:, 1], 1 - np.cos(np.pi * vertices[:, 0] / 2), atol=1e-6)


@pytest.mark.parametrize(
    ("x", "speed", "ends"),
    [(0.7, 1.0, True), (0.55, 0.0, False), (-1.97, -1.5, True), (-1.5, 0.0, False)],
)
def test_mountain_car_either_hill_top_ends_with_reward_one(x, speed, ends):
    env = RllabMountainCarEnv()
    env.reset(seed=0)
    _place_cart(env, x, speed)
    obs, reward, terminated, truncated, _ = env.step(ZERO)
    # judged on the car's x after the step: x ≥ 0.6 or |x| ≥ 2 ends it, with reward 1
    assert bool(obs[0] >= 0.6 or abs(obs[0]) >= 2) is ends
    assert terminated is ends and reward == float(ends) and not truncated


def test_mountain_car_physics_gravity_damping_and_pumping():
    env = RllabMountainCarEnv(goal_position=1.9)
    env.reset(seed=0)
    _place_cart(env, -1.0)
    cart = env.cart

    def energy() -> float:
        vx, vy = cart.linearVelocity
        kinetic = 0.5 * cart.mass * (vx**2 + vy**2) + 0.5 * cart.inertia * cart.angularVelocity**2
        return cart.mass * 10 * cart.position[1] + kinetic

    start, xs, energies = energy(), [], []
    for _ in range(400):
        obs, *_ = env.step(ZERO)
        xs.append(obs[0])
        energies.append(energy())
    xs = np.array(xs)
    # released at rest it rolls down through the valley and back: it swings, but never above its
    # start (no energy appears) and loses height at every swing (the box's inelastic contacts
    # with the 0.02 m chain segments); it comes to rest in the valley
    assert xs.max() > 0.3 and np.max(energies) <= start + 0.02
    turns = [xs[i] for i in range(1, len(xs) - 1) if xs[i] < xs[i - 1] and xs[i] <= xs[i + 1]]
    assert env.track_height_at(turns[0]) < env.track_height_at(-1.0)
    assert abs(xs[-1]) < 0.05 and abs(cart.linearVelocity[0]) < 1e-3
    # 1 N cannot push the car up the hill from rest (it balances at x ≈ 0.1) ...
    env.reset(seed=0)
    env.cart.linearVelocity = (0.0, 0.0)
    positions = [env.step(np.ones(1))[0][0] for _ in range(200)]
    assert max(positions) < 0.35
    # ... but pumping energy (force along the velocity) reaches the goal
    env = RllabMountainCarEnv()
    env.reset(seed=0)
    env.cart.linearVelocity = (0.0, 0.0)
    velocity, steps = 0.0, 0
    while steps < 500:
        obs, reward, terminated, _, _ = env.step(np.array([1.0 if velocity >= 0 else -1.0]))
        velocity, steps = obs[1], steps + 1
        if terminated:
            break
    assert terminated and reward == 1.0 and obs[0] >= 0.6 and steps < 120


class _TrackBuiltEachReset(RllabMountainCarEnv):
    """The track as rllab's model describes it, its chain made anew through pybox2d's vertex
    setter at every reset (what the env did before it kept one fixture definition)."""

    def _build(self, world) -> None:
        self.cart = world.CreateDynamicBody(position=(0.0, 0.05), userData="cart")
        self.cart.CreatePolygonFixture(box=(0.2, 0.1), density=5.0, friction=0.0005)
        track = world.CreateStaticBody(position=(0.0, 1.0), userData="track")
        track.CreateChainFixture(vertices_chain=[
            (0.02 * i, np.sin((i / 100 - 0.5) * np.pi)) for i in range(-100, 101)])


def test_mountain_car_shared_track_definition_steps_bit_for_bit_as_a_track_built_anew():
    # many episodes (the pumping policy ends one every ~150 steps), resets in between: the
    # trajectories equal to the last bit, and the track is the model's chain either way
    def trajectory(env_class) -> tuple[np.ndarray, int]:
        env, rng = env_class(), np.random.default_rng(3)
        obs, _ = env.reset(seed=3)
        observations, episodes = [obs], 0
        for _ in range(1500):
            pump = rng.random() < 0.8
            action = np.array([1.0 if obs[1] >= 0 else -1.0]) if pump else rng.uniform(-1, 1, 1)
            obs, _, terminated, _, _ = env.step(action)
            observations.append(obs)
            if terminated:
                obs, _ = env.reset()
                observations.append(obs)
                episodes += 1
        track = env._body("track").fixtures[0]
        assert track.friction == pytest.approx(0.2) and track.shape.vertexCount == 201
        return np.array(observations), episodes

    shared, episodes = trajectory(RllabMountainCarEnv)
    anew, _ = trajectory(_TrackBuiltEachReset)
    assert episodes >= 5
    np.testing.assert_array_equal(shared, anew)


def test_mountain_car_contradictory_options_raise():
    with pytest.raises(ValueError, match="off the track"):
        RllabMountainCarEnv(goal_position=2.5)
    with pytest.raises(ValueError, match="track_end"):
        RllabMountainCarEnv(track_end=3.0)


def _where(frame: np.ndarray, colour) -> np.ndarray:
    """The pixels (row, column) of exactly ``colour``."""
    return np.argwhere((frame == np.asarray(colour, dtype=np.uint8)).all(-1))


def test_mountain_car_frame_draws_the_car_where_it_is_and_the_goal_flag():
    env = gymnasium.make("torchrl_vase/SparseMountainCar-v1", render_mode="rgb_array")
    env.reset(seed=0)
    car = env.unwrapped.cart
    car.position, car.angle = (1.0, 1.2), 0.0  # put by hand: a 0.4 x 0.2 m box centred there
    frame = env.render()
    assert frame.shape == (400, 600, 3) and frame.dtype == np.uint8
    # view (-2.3, 2.3) x (-0.4, 2.67) on 600 x 400: x -> (x + 2.3) * 600 / 4.6, y likewise
    x_min, x_max, y_min, y_max = env.unwrapped.view
    column, row = (1.0 - x_min) * 600 / (x_max - x_min), (y_max - 1.2) * 400 / (y_max - y_min)
    body = _where(frame, (70, 110, 170))
    np.testing.assert_allclose(body.mean(0), [row, column], atol=1.5)
    height, width = np.ptp(body, axis=0) + 1
    assert abs(width - 0.4 * 600 / 4.6) <= 2 and abs(height - 0.2 * 400 / (y_max - y_min)) <= 2
    flag = _where(frame, (0, 160, 0))  # the goal's flag stands on the track at x = 0.6
    goal_column = (0.6 - x_min) * 600 / (x_max - x_min)
    assert ((flag[:, 1] > goal_column - 2) & (flag[:, 1] < goal_column + 20)).sum() > 50
    env.close()


@pytest.mark.parametrize("env_id", ["torchrl_vase/SparseCartpoleSwingup-v1",
                                    "torchrl_vase/SparseDoublePendulum-v1"])
def test_box2d_tasks_render_frames_that_follow_their_bodies(env_id):
    env = gymnasium.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    first = env.render()
    for _ in range(10):
        env.step(env.action_space.high)
    moved = env.render()
    assert first.shape == moved.shape == (400, 600, 3)
    assert (first != moved).any(-1).sum() > 100  # the bodies moved, and so did their pixels
    plain = gymnasium.make(env_id)
    plain.reset(seed=0)
    assert plain.render() is None  # no render_mode: no frames
    with pytest.raises(ValueError, match="render_mode must be None or 'rgb_array'"):
        type(env.unwrapped)(render_mode="depth_array")


# ------------------------------------------------------------------------------------------------
# CartpoleSwingup
# ------------------------------------------------------------------------------------------------
def test_cartpole_masses_start_reward_and_termination():
    env = RllabCartpoleSwingupEnv()
    assert env.cart.mass == pytest.approx(1.0) and env.pole.mass == pytest.approx(0.1)
    starts = np.array([env.reset(seed=seed)[0] for seed in range(300)])
    for column, low, high in ((0, -1, 1), (1, -2, 2), (2, np.pi - 1, np.pi + 1), (3, -3, 3)):
        assert starts[:, column].min() >= low and starts[:, column].max() <= high
        assert starts[:, column].min() < low + 0.1 and starts[:, column].max() > high - 0.1
    env.reset(seed=0)
    # upright (θ = 0 is up), at rest: rewarded
    env.set_body_state("cart", BodyState((0.0, env.cart.position[1]), 0.0, (0.0, 0.0), 0.0))
    env.set_body_state("pole", BodyState((0.0, 0.866), 0.0, (0.0, 0.0), 0.0))
    obs, reward, terminated, _, _ = env.step(ZERO)
    assert reward == 1.0 and not terminated and abs(obs[2]) < 0.01
    # tilted to cos θ = 0.83 < 0.9: not rewarded
    env.set_body_state("pole", BodyState((0.0, 0.866), 0.6, (0.0, 0.0), 0.0))
    assert env.step(ZERO)[1] == 0.0
    # off the rail's end: done, reward 0 even when upright
    env.set_body_state("cart", BodyState((3.2, env.cart.position[1]), 0.0, (0.0, 0.0), 0.0))
    env.set_body_state("pole", BodyState((3.2, 0.866), 0.0, (0.0, 0.0), 0.0))
    _, reward, terminated, _, _ = env.step(ZERO)
    assert terminated and reward == 0.0


def test_cartpole_force_accelerates_the_cart_as_a_pinned_rod_demands():
    env = RllabCartpoleSwingupEnv()
    env.reset(seed=0)
    env.set_body_state("cart", BodyState((0.0, env.cart.position[1]), 0.0, (0.0, 0.0), 0.0))
    env.set_body_state("pole", BodyState((0.0, 0.866), 0.0, (0.0, 0.0), 0.0))
    obs, *_ = env.step(np.array([11.0]))  # clipped to 10 N
    # a uniform 1 × 0.1 m, 0.1 kg rod pinned at its base, upright and at rest, adds
    # m (1 − m d² / I) to the cart's 1 kg (d = 0.5 m to its centre, I about the pin)
    m, d = 0.1, 0.5
    inertia = m * (1.0**2 + 0.1**2) / 12 + m * d**2
    acceleration = 10.0 / (1.0 + m * (1 - m * d**2 / inertia))
    assert obs[1] == pytest.approx(acceleration * 0.05, rel=1e-3)  # one semi-implicit step


# ------------------------------------------------------------------------------------------------
# DoublePendulum
# ------------------------------------------------------------------------------------------------
def test_double_pendulum_masses_start_and_tip_reward():
    env = RllabDoublePendulumEnv()
    assert env.link1.mass == pytest.approx(0.5) and env.link2.mass == pytest.approx(0.5)
    starts = np.array([env.reset(seed=seed)[0] for seed in range(400)])
    angles = np.arctan2(starts[:, [0, 3]], starts[:, [1, 4]])  # absolute, 0 = hanging down
    assert np.abs(angles.std(0) - 0.1).max() < 0.015
    assert np.abs(starts[:, [2, 5]].std(0) - 0.01).max() < 0.0015
    # upright (both absolute angles π), at rest: the tip at (0, 2)
    env.set_body_state("link1", BodyState((0.0, 0.0), np.pi, (0.0, 0.0), 0.0))
    env.set_body_state("link2", BodyState((0.0, 1.0), np.pi, (0.0, 0.0), 0.0))
    np.testing.assert_allclose(env.tip_position(), [0.0, 2.0], atol=1e-6)
    obs, reward, terminated, _, _ = env.step(ZERO)
    assert reward == 1.0 and not terminated
    np.testing.assert_allclose(obs[[1, 4]], [-1.0, -1.0], atol=1e-3)  # cos θ = −1: upright
    # the authors' tip formula: elbow − (sin θ₂, cos θ₂), whatever the physics does next
    env.set_body_state("link2", BodyState((0.3, 0.9), 2.5, (0.0, 0.0), 0.0))
    np.testing.assert_allclose(env.tip_position(), [0.3 - np.sin(2.5), 0.9 - np.cos(2.5)])


def test_double_pendulum_elbow_torque_spins_the_links_opposite_ways():
    env = RllabDoublePendulumEnv()
    env.reset(seed=0)
    for name, position in (("link1", (0.0, 0.0)), ("link2", (0.0, -1.0))):
        env.set_body_state(name, BodyState(position, 0.0, (0.0, 0.0), 0.0))
    obs, *_ = env.step(np.array([50.0]))
    assert obs[5] > 0 > obs[2]  # +τ on the second link, −τ on the first
    assert env.step(np.array([0.0]))[0][5] > 0  # no torque: the motor does not brake it


# ------------------------------------------------------------------------------------------------
# HalfCheetah and Ant (rllab's MujocoEnv)
# ------------------------------------------------------------------------------------------------
def test_half_cheetah_observation_start_and_centre_of_mass_goal():
    env = RllabHalfCheetahEnv()
    obs, _ = env.reset(seed=0)
    assert env.model.body_subtreemass[1] == pytest.approx(14.0)  # settotalmass="14"
    np.testing.assert_allclose(obs[:8], env.data.qpos[1:])
    np.testing.assert_allclose(obs[8:17], env.data.qvel)
    np.testing.assert_allclose(obs[17:], env.center_of_mass())
    starts = np.array([env.reset(seed=seed)[0][:17] for seed in range(200)])
    assert np.abs(starts[:, :8].std(0) - 0.01).max() < 0.003  # qpos noise N(0, 0.01²)
    assert np.abs(starts[:, 8:].std(0) - 0.1).max() < 0.03  # qvel noise N(0, 0.1²)
    # rewarded on the whole robot's centre of mass, not the torso's x
    qpos, qvel = env.data.qpos.copy(), np.zeros(env.model.nv)
    qpos[0] = 5.0  # the torso's x is 5.0, the centre of mass's about 5.04
    env.set_state(qpos, qvel)
    _, reward, terminated, _, _ = env.step(np.zeros(6))
    assert reward == 1.0 and not terminated
    qpos[0] = 4.9  # centre of mass about 4.94
    env.set_state(qpos, qvel)
    assert env.step(np.zeros(6))[1] == 0.0


def test_half_cheetah_steps_as_with_rllabs_whole_forward():
    # its lighter forward (positions and centre of mass) against rllab's model.forward() after
    # every step: the same observations, bit for bit, over paths with resets between them
    light, whole = RllabHalfCheetahEnv(), RllabHalfCheetahEnv()
    whole._forward = lambda: super(RllabHalfCheetahEnv, whole)._forward()
    actions = np.random.default_rng(0).uniform(-1.5, 1.5, (600, 6))
    for i, action in enumerate(actions):
        if i % 200 == 0:
            assert np.array_equal(light.reset(seed=i)[0], whole.reset(seed=i)[0])
        ours, theirs = light.step(action), whole.step(action)
        assert np.array_equal(ours[0], theirs[0]) and ours[1:4] == theirs[1:4], i


@pytest.mark.parametrize("goal", ["velocity", "position"])
def test_ant_model_goal_and_termination(goal):
    env = RllabAntEnv(goal=goal)
    obs, _ = env.reset(seed=0)
    assert env.model.opt.timestep == 0.02
    assert env.model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
    assert env.model.body_subtreemass[1] == pytest.approx(0.911, abs=1e-3)
    assert abs(obs[2] - 0.55) < 0.05  # rllab's init_qpos: the torso at z = 0.55
    np.testing.assert_allclose(obs[122:], env.center_of_mass())
    qpos, qvel = env.data.qpos.copy(), np.zeros(env.model.nv)
    if goal == "velocity":  # the authors' code: the centre of mass's x-velocity above 3
        qvel[0] = 5.0
    else:  # the paper's text: its x beyond 3
        qpos[0] = 3.5
    env.set_state(qpos, qvel)
    _, reward, terminated, _, _ = env.step(np.zeros(8))
    assert reward == 1.0 and not terminated
    env.set_state(env.model.numeric("init_qpos").data.copy(), np.zeros(env.model.nv))
    assert env.step(np.zeros(8))[1] == 0.0  # standing still: neither
    qpos[2] = 1.5  # torso too high
    env.set_state(qpos, np.zeros(env.model.nv))
    assert env.step(np.zeros(8))[2]


def test_ant_default_goal_is_the_authors_velocity_and_bad_goal_raises():
    assert gymnasium.make("torchrl_vase/SparseAnt-v1").unwrapped.goal == "velocity"
    with pytest.raises(ValueError, match="goal"):
        RllabAntEnv(goal="distance")


# ------------------------------------------------------------------------------------------------
# LunarLander
# ------------------------------------------------------------------------------------------------
def _shaping(s: np.ndarray) -> float:
    """gymnasium's (and gym 0.12's) shaping of a lander observation."""
    return (-100 * np.hypot(s[0], s[1]) - 100 * np.hypot(s[2], s[3]) - 100 * abs(s[4])
            + 10 * s[6] + 10 * s[7])


def test_lunar_lander_crash_keeps_the_shaped_reward():
    ours = AuthorsLunarLanderEnv()
    theirs = gymnasium.make("LunarLanderContinuous-v3").unwrapped
    rewards, observations = {}, {}
    for name, env in (("ours", ours), ("gymnasium", theirs)):
        obs, _ = env.reset(seed=3)
        total, seen, terminated = [], [obs], False
        while not terminated:  # no engine: it falls and crashes
            obs, reward, terminated, _, _ = env.step(np.zeros(2, dtype=np.float32))
            total.append(reward)
            seen.append(obs)
        rewards[name], observations[name] = total, seen
    assert len(rewards["ours"]) == len(rewards["gymnasium"])  # the same flight
    np.testing.assert_allclose(rewards["ours"][:-1], rewards["gymnasium"][:-1])
    assert rewards["gymnasium"][-1] == -100 and ours.lander.awake  # a crash, not a landing
    # ours: the ordinary reward of that step, the change of shaping (no engine, no fuel)
    last, before = observations["ours"][-1], observations["ours"][-2]
    assert rewards["ours"][-1] == pytest.approx(_shaping(last) - _shaping(before), rel=1e-4)
