"""VectorEnvCollector: torchrl's batch layout, actions as the env receives them, episode ends."""

import math

import gymnasium
import numpy as np
import pytest
import torch
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import (
    ActionScaling,
    ClipTransform,
    Compose,
    DoubleToFloat,
    GymWrapper,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.modules import MLP, IndependentNormal, ProbabilisticActor, TanhNormal

import torchrl_vase  # also registers the envs
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.envs import sync_vector_env

POINT_ROBOT = "torchrl_vase/PointRobot2D-v0"


def _actor(obs_dim: int = 2, action_dim: int = 2, init_std: float = 1.0) -> ProbabilisticActor:
    torch.manual_seed(0)
    head = nn.Sequential(MLP(obs_dim, action_dim, num_cells=[16]),
                         AddStateIndependentNormalScale(action_dim, scale_lb=0.0,
                                                        init_value=math.log(init_std)))
    return ProbabilisticActor(
        TensorDictModule(head, ["observation"], ["loc", "scale"]), in_keys=["loc", "scale"],
        distribution_class=IndependentNormal, return_log_prob=True,
    )


def test_the_batch_has_torchrl_collector_s_keys_shapes_and_dtypes():
    actor = _actor()
    lean = next(iter(VectorEnvCollector(POINT_ROBOT, actor, num_envs=4, frames_per_batch=40,
                                        seed=0)))
    env = TransformedEnv(
        GymWrapper(sync_vector_env(POINT_ROBOT, 4)),
        Compose(DoubleToFloat(), ActionScaling(), ClipTransform(in_keys_inv=["action"], low=-1.0,
                                                                high=1.0),
                StepCounter(), RewardSum()),
    )
    reference = next(iter(Collector(env, actor, frames_per_batch=40, total_frames=40,
                                    auto_register_policy_transforms=False)))
    for key in lean.keys(True, True):
        assert key in reference.keys(True, True), key
        assert lean[key].shape == reference[key].shape, key
        assert lean[key].dtype == reference[key].dtype, key
    # the log-probability is the policy's own, of the stored (unclipped) sample
    expected = torch.distributions.Normal(lean["loc"], lean["scale"]).log_prob(lean["action"])
    torch.testing.assert_close(lean["action_log_prob"], expected.sum(-1))


def test_the_env_receives_the_action_scaled_to_its_bounds_and_clipped():
    actor = _actor(init_std=3.0)  # wide: many samples outside [-1, 1]
    collector = VectorEnvCollector(POINT_ROBOT, actor, num_envs=3, frames_per_batch=30, seed=1)
    batch = next(iter(collector))
    moved = batch["next", "observation"] - batch["observation"]  # the robot's velocity
    expected = 0.01 * batch["action"].clamp(-1, 1)  # |v| ≤ 0.01, no wrap-around this close
    torch.testing.assert_close(moved, expected, atol=1e-6, rtol=0)
    assert batch["action"].abs().max() > 1  # the batch keeps the policy's own sample


def test_episode_ends_reset_the_env_and_the_counters():
    actor = _actor()
    collector = VectorEnvCollector(POINT_ROBOT, actor, num_envs=2, frames_per_batch=1400, seed=0)
    batch = next(iter(collector))  # 700 steps per env: every env truncated at its 500th
    truncated = batch["next", "truncated"].squeeze(-1)
    assert truncated.sum() == 2 and truncated[:, 499].all()
    assert (batch["next", "step_count"][:, 499] == 500).all()
    assert (batch["next", "step_count"][:, 500] == 1).all()
    # the last observation of an episode is its own; the next step starts at the origin
    assert (batch["next", "observation"][:, 499].abs().sum(-1) > 0).all()
    torch.testing.assert_close(batch["observation"][:, 500], torch.zeros(2, 2))
    # the episode reward is the running sum of the rewards since the last reset
    rewards = batch["next", "reward"].squeeze(-1)
    torch.testing.assert_close(batch["next", "episode_reward"][:, 499, 0],
                               rewards[:, :500].sum(-1))


def test_a_seed_fixes_the_batches_and_rllab_batches_start_fresh():
    def batches(reset):
        torch.manual_seed(3)
        collector = VectorEnvCollector("torchrl_vase/SparseMountainCar-v1", _actor(2, 1),
                                       num_envs=2, frames_per_batch=40, seed=5,
                                       reset_at_each_iter=reset)
        iterator = iter(collector)
        return next(iterator), next(iterator)

    first, second = batches(True)
    again, _ = batches(True)
    torch.testing.assert_close(first, again)
    assert (second["next", "step_count"][:, 0] == 1).all()  # a fresh episode each batch
    assert (second["observation"][:, 0, 0] == 0).all()  # the authors' car starts at x = 0
    _, continued = batches(False)
    assert (continued["next", "step_count"][:, 0] == 21).all()  # episodes run on


def test_observation_normalization_is_fixed_from_random_steps():
    collector = VectorEnvCollector("torchrl_vase/SparseMountainCar-v1", _actor(2, 1),
                                   num_envs=4, frames_per_batch=40, seed=0)
    collector.fit_observation_normalization(200)
    loc, scale = collector.observation_loc, collector.observation_scale
    assert abs(loc[0]) < 0.2 and 0.01 < scale[1] < 1
    batch = next(iter(collector))
    raw = batch["observation"] * scale + loc
    assert (raw[:, 0, 0].abs() < 1e-6).all()  # the starts, x = 0, standardised
    state = collector.state_dict()
    other = VectorEnvCollector("torchrl_vase/SparseMountainCar-v1", _actor(2, 1), num_envs=4,
                               frames_per_batch=40)
    other.load_state_dict(state)
    torch.testing.assert_close(other.observation_scale, scale)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="multiple of num_envs"):
        VectorEnvCollector(POINT_ROBOT, _actor(), num_envs=3, frames_per_batch=40)
    tanh_actor = ProbabilisticActor(
        TensorDictModule(nn.Linear(2, 4), ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"], distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},  # the collector maps [-1, 1] itself
    )
    with pytest.raises(TypeError, match="torchrl's Collector"):
        VectorEnvCollector(POINT_ROBOT, tanh_actor, num_envs=2, frames_per_batch=40)
    if "tests/Unbounded-v0" not in gymnasium.registry:
        gymnasium.register("tests/Unbounded-v0", entry_point=_UnboundedActions)
    with pytest.raises(ValueError, match="finite"):
        VectorEnvCollector("tests/Unbounded-v0", _actor(3, 1), num_envs=2, frames_per_batch=40)


def test_a_tanh_policy_acts_with_tanh_of_its_gaussian_sample_after_a_random_warm_up():
    policy = torchrl_vase.tanh_policy(2, 2, [16])
    collector = VectorEnvCollector(POINT_ROBOT, policy, num_envs=2, frames_per_batch=40,
                                   init_random_frames=40, seed=0)
    batches = iter(collector)
    torch.manual_seed(1)
    warm_up = next(batches)  # the first 40 frames: U(-1, 1), the policy not asked
    torch.manual_seed(1)
    torch.testing.assert_close(warm_up["action"], (torch.rand(20, 2, 2) * 2 - 1).transpose(0, 1))
    assert collector.state_dict()["frames"] == 40
    torch.manual_seed(2)
    batch = next(batches)
    torch.manual_seed(2)
    noise = torch.randn(20, 2, 2).transpose(0, 1)
    loc, scale = policy.module[0].module(batch["observation"])
    torch.testing.assert_close(batch["action"], torch.tanh(loc + scale * noise))
    assert "action_log_prob" not in batch  # SAC recomputes it
    # a collector restored from the state goes on with the policy, not the warm-up
    restored = VectorEnvCollector(POINT_ROBOT, policy, num_envs=2, frames_per_batch=40,
                                  init_random_frames=40, seed=0)
    restored.load_state_dict(collector.state_dict())
    assert not restored._acts_randomly()
    for each in (collector, restored):
        each.shutdown()


class _UnboundedActions(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


def test_it_is_a_torchrl_collector_with_its_length_hooks_next_and_weight_updates():
    from torchrl.collectors import BaseCollector

    actor = torchrl_vase.gaussian_policy(2, 1, [8])
    collector = VectorEnvCollector("torchrl_vase/SparseMountainCar-v1", actor, num_envs=2,
                                   frames_per_batch=20, total_frames=60, seed=0)
    assert isinstance(collector, BaseCollector) and len(collector) == 3
    calls = []
    collector.pre_collect_hook = lambda: calls.append("pre")
    collector.set_post_collect_hook(lambda batch: calls.append(batch.numel()))
    first = collector.next()  # torchrl's pull interface
    assert first.shape == (2, 10) and calls == ["pre", 20]
    assert [batch.numel() for batch in collector] == [20, 20]  # stops at total_frames
    assert calls == ["pre", 20, "pre", 20, "pre", 20]
    # weights pushed as torchrl's collectors take them: the acting policy's, not the learner's
    other = torchrl_vase.gaussian_policy(2, 1, [8])
    collector.update_policy_weights_(other.state_dict())
    for mine, theirs in zip(collector.policy.parameters(), other.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs)
    collector.update_policy_weights_(actor)
    for mine, theirs in zip(collector.policy.parameters(), actor.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs)
    collector.shutdown()


# ------------------------------------------------------------------------------------------------
# rllab's batches of whole paths (paths=True)
# ------------------------------------------------------------------------------------------------
LANDER = "torchrl_vase/LunarLanderContinuous-v1"  # paths of varied length: it lands or crashes


def _rllab_batch(actor, env_id: str, lanes: int, seed: int, budget: int, whole_paths: bool,
                 max_path_length: int | None = None):
    """rllab's rule, computed independently: each copy runs its paths one after another (copy i
    seeded ``seed + i``, then reset at every path's start), the paths ordered by when they start
    (copies together: in copy order), kept while fewer than ``budget`` steps are (``sample_paths``
    of one worker), the last cut to the budget unless whole (``truncate_paths``). The policy
    acts with its mean (a std of e^-100), so a path is a function of its copy's env alone."""
    network = actor.module[0].module
    runs = []  # (start, copy, observations)
    for copy in range(lanes):
        kwargs = {} if max_path_length is None else {"max_episode_steps": max_path_length}
        env = gymnasium.make(env_id, **kwargs)
        env.reset(seed=seed + copy)
        clock = 0
        # a path of the batch starts before its copy has taken `budget` steps: the paths
        # before it, its copy's among them, hold fewer
        while clock < budget:
            observation, _ = env.reset()
            observations, done = [], False
            while not done:
                loc, _ = network(torch.as_tensor(observation, dtype=torch.float32))
                observations.append(observation)
                low, high = env.action_space.low, env.action_space.high
                action = np.clip(low + (loc.detach().numpy() + 1) * (high - low) / 2, low, high)
                observation, _, terminated, truncated, _ = env.step(action)
                done = terminated or truncated
            runs.append((clock, copy, np.array(observations, dtype=np.float32)))
            clock += len(observations)
        env.close()
    paths, count = [], 0
    for _, _, observations in sorted(runs, key=lambda run: run[:2]):
        if count >= budget:
            break
        paths.append(observations)
        count += len(observations)
    if not whole_paths:
        paths[-1] = paths[-1][:len(paths[-1]) - (count - budget)]
    return paths


def _mean_actor(obs_dim: int, action_dim: int) -> ProbabilisticActor:
    """A policy whose actions are its mean, to the last bit (a std of e^-100)."""
    torch.manual_seed(0)
    actor = torchrl_vase.gaussian_policy(obs_dim, action_dim, [16])
    with torch.no_grad():
        for name, parameter in actor.named_parameters():
            if name.endswith("state_independent_scale"):
                parameter.fill_(-100.0)
    return actor


@pytest.mark.parametrize("whole_paths", [True, False])
def test_paths_are_rllabs_batch_whole_paths_in_the_order_they_start(whole_paths):
    actor = _mean_actor(8, 2)
    collector = VectorEnvCollector(LANDER, actor, num_envs=3, frames_per_batch=700, seed=4,
                                   paths=True, whole_paths=whole_paths)
    batch = collector.rollout()
    expected = _rllab_batch(actor, LANDER, 3, 4, 700, whole_paths)
    lengths = [len(path) for path in expected]
    assert len(set(lengths)) > 2  # paths of many lengths: the order matters
    assert batch.shape == (1, sum(lengths))
    assert (batch.numel() > 700) if whole_paths else (batch.numel() == 700)
    torch.testing.assert_close(batch["observation"][0], torch.as_tensor(np.concatenate(expected)))
    done = batch["next", "done"][0, :, 0]
    ends = np.cumsum(lengths) - 1
    expected_done = torch.zeros_like(done)
    expected_done[ends[:-1]] = True
    expected_done[ends[-1]] = whole_paths  # a cut path did not end
    assert torch.equal(done, expected_done)
    starts = np.concatenate([[0], ends[:-1] + 1])
    assert (batch["next", "step_count"][0, starts, 0] == 1).all()  # each from its reset


def test_paths_are_whole_up_to_the_envs_time_limit_beyond_the_copies_share():
    # LunarLander's paths may run 1,000 steps (its time limit, the authors' max_path_length):
    # 10 copies of a 5,000-step batch must not cut them at 500, as lanes of 500 steps do. The
    # point robot given that limit never ends a path early: five whole paths of 1,000
    assert VectorEnvCollector(LANDER, _actor(8, 2), num_envs=2, frames_per_batch=10,
                              paths=True).env.max_episode_steps == 1000
    collector = VectorEnvCollector(POINT_ROBOT, _actor(), num_envs=10, frames_per_batch=5000,
                                   seed=0, paths=True, make_kwargs={"max_episode_steps": 1000})
    batch = collector.rollout()
    done = batch["next", "done"][0, :, 0]
    assert batch.shape == (1, 5000) and done.nonzero().flatten().tolist() == [
        999, 1999, 2999, 3999, 4999]
    assert batch["next", "truncated"][0, :, 0].equal(done)  # the time limit ends them
    step_count = batch["next", "step_count"][0, :, 0]
    assert step_count.equal(torch.arange(5000) % 1000 + 1)
