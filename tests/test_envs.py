import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from torchrl.envs import GymEnv
from torchrl.envs.utils import check_env_specs

import torchrl_vase  # noqa: F401  (registers the envs)
from torchrl_vase.envs import (
    EPISODE_STEPS,
    MAX_EPISODE_STEPS,
    SPARSE_ENVS,
    LeanVectorEnv,
    sync_vector_env,
)

DIMS = {  # id: (observation dim, action dim), the paper's table
    "torchrl_vase/PointRobot2D-v0": (2, 2),
    # the authors' versions (their envs/*_x.py on rllab's models)
    "torchrl_vase/SparseMountainCar-v1": (2, 1),
    "torchrl_vase/SparseCartpoleSwingup-v1": (4, 1),
    "torchrl_vase/SparseDoublePendulum-v1": (6, 1),
    "torchrl_vase/SparseHalfCheetah-v1": (20, 6),
    "torchrl_vase/SparseAnt-v1": (125, 8),
    "torchrl_vase/LunarLanderContinuous-v1": (8, 2),
}
IDS = list(SPARSE_ENVS)


def test_every_env_is_registered():
    assert set(DIMS) == set(IDS)
    for env_id in IDS:
        expected = 1000 if env_id == "torchrl_vase/LunarLanderContinuous-v1" else 500
        assert gymnasium.spec(env_id).max_episode_steps == expected
    assert EPISODE_STEPS.get("torchrl_vase/PointRobot2D-v0", MAX_EPISODE_STEPS) == 500


# the checker's advice, not a fault: the authors' tasks act in their own bounds (CartpoleSwingup's
# ±10 N) and observe unbounded velocities, as they ran them
@pytest.mark.filterwarnings("ignore:.*(For Box action spaces|A Box observation space):UserWarning")
@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_env_checker_and_dimensions(env_id):
    env = gymnasium.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    obs_dim, action_dim = DIMS[env_id]
    assert env.observation_space.shape == (obs_dim,)
    assert env.action_space.shape == (action_dim,)
    env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_torchrl_gym_env_specs(env_id):
    env = GymEnv(env_id)
    check_env_specs(env, seed=0)
    assert env.observation_spec["observation"].shape == (DIMS[env_id][0],)
    env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_seeding_makes_resets_and_steps_reproducible(env_id):
    def run(seed):
        env = gymnasium.make(env_id)
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        trajectory = [obs]
        for _ in range(5):
            trajectory.append(env.step(env.action_space.sample())[0])
        env.close()
        return np.stack(trajectory)

    np.testing.assert_array_equal(run(3), run(3))
    if env_id != "torchrl_vase/PointRobot2D-v0":  # the robot always starts at the origin
        assert not np.array_equal(run(3)[0], run(4)[0])


@pytest.mark.parametrize(
    "env_id", [i for i in IDS if i != "torchrl_vase/LunarLanderContinuous-v1"]  # dense
)
def test_reward_is_zero_for_random_actions_over_a_short_rollout(env_id):
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)
    rewards = [env.step(env.action_space.sample())[1] for _ in range(20)]
    assert rewards == [0.0] * 20
    env.close()


def _unwrapped(env_id):
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    return env, env.unwrapped


def test_point_robot_goal_clipping_and_wrap_around():
    env, robot = _unwrapped("torchrl_vase/PointRobot2D-v0")
    obs, reward, terminated, _, _ = env.step(np.array([0.5, -0.5], dtype=np.float32))
    np.testing.assert_allclose(obs, [0.01, -0.01])  # clipped to |v| ≤ 0.01
    assert reward == 0.0 and not terminated
    robot.position = np.array([1.995, 0.0])
    obs, *_ = env.step(np.array([0.01, 0.0], dtype=np.float32))
    np.testing.assert_allclose(obs, [-1.995, 0.0], atol=1e-6)  # out of the right edge, in the left
    robot.position = np.array([0.96, 1.0])
    obs, reward, terminated, _, info = env.step(np.array([0.01, 0.0], dtype=np.float32))
    assert reward == 1.0 and terminated
    np.testing.assert_allclose(info["position"], [0.97, 1.0])


@pytest.mark.parametrize("env_id", IDS)
def test_bad_actions_raise(env_id):
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    action_dim = DIMS[env_id][1]
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(action_dim + 1, dtype=np.float32))
    with pytest.raises(ValueError, match="non-finite"):
        env.step(np.full(action_dim, np.nan, dtype=np.float32))
    env.close()


SHORT_LIMIT = "torchrl_vase_test/MountainCarShortLimit-v1"
gymnasium.register(SHORT_LIMIT, entry_point=gymnasium.spec(
    "torchrl_vase/SparseMountainCar-v1").entry_point, max_episode_steps=40)
WRAPPED = "torchrl_vase_test/DoubledRewardPointRobot-v0"  # a wrapper of the env's own
gymnasium.register(WRAPPED, max_episode_steps=500, entry_point=lambda: gymnasium.wrappers.
                   TransformReward(gymnasium.make("torchrl_vase/PointRobot2D-v0").unwrapped,
                                   lambda r: 2 * r + 1))


@pytest.mark.parametrize("env_id", [*SPARSE_ENVS, SHORT_LIMIT, WRAPPED])
def test_the_lean_vector_env_steps_as_the_sync_vector_env(env_id):
    """Observations, rewards, terminations and truncations equal, step for step, through
    terminations, the time limit (a 40-step one) and masked resets."""
    lean, sync = LeanVectorEnv(env_id, 3), sync_vector_env(env_id, 3)
    assert np.array_equal(lean.reset(seed=5)[0], sync.reset(seed=5)[0])
    rng = np.random.default_rng(0)
    space = sync.single_action_space
    ends = 0
    for _ in range(90):
        action = rng.uniform(space.low, space.high, (3, *space.shape))
        ours, theirs = lean.step(action), sync.step(action)
        for got, expected in zip(ours[:4], theirs[:4], strict=True):
            assert np.array_equal(got, expected), env_id
        done = theirs[2] | theirs[3]
        if done.any():
            ends += int(done.sum())
            assert np.array_equal(lean.reset(options={"reset_mask": done.copy()})[0],
                                  sync.reset(options={"reset_mask": done})[0])
    assert env_id != SHORT_LIMIT or ends >= 6  # the limit ended every copy's episodes twice
    assert env_id != WRAPPED or (ours[1] >= 1).all()  # the env's own wrapper stepped too
    lean.close()
    sync.close()
