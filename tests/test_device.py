"""``device``: the learner (actor, critics, bonus model, pool, updates) on it, the envs on the CPU.

Every test runs on the CPU and, where a CUDA device is present, on ``cuda`` (skipped elsewhere,
with the reason). On the CPU they check the wiring that must hold on any device (where each
piece lives, that batches from the envs stay on the CPU, that the acting policy follows the
learner's weights); on ``cuda`` the same assertions are the real test.
"""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from recipe_modules import load_recipe
from tensordict import TensorDict

import torchrl_vase
from torchrl_vase import (
    DynamicsModel,
    Exploration,
    SurpriseRewardTransform,
    VectorEnvCollector,
    defaults,
)
from torchrl_vase.objectives import critic_fit as algorithm

ROOT = Path(__file__).resolve().parents[1]
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device here")),
]


recipe = load_recipe("trpo_vase")


def _devices(module: torch.nn.Module) -> set[str]:
    return {t.device.type for t in [*module.parameters(), *module.buffers()]}


def _leaf_devices(td) -> set[str]:
    return {value.device.type for value in td.values(True, True)}


def _train_then_resume(overrides: list[str]) -> dict:
    """Two iterations of the recipe, then resumed to three in the same run; the first's result."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        first = recipe.train(compose("trpo_vase", overrides=overrides))
        resumed = recipe.train(compose("trpo_vase", overrides=[
            *[o for o in overrides if not o.startswith("iterations=")],
            "iterations=3", "resume=true"]))
    assert resumed["run_id"] == first["run_id"] and resumed["iterations_done"] == 3
    return first


@pytest.mark.parametrize("device", DEVICES)
def test_the_lean_collector_acts_on_the_cpu_with_the_learners_weights(device):
    actor = torchrl_vase.gaussian_policy(2, 2, [8], device=device)
    collector = VectorEnvCollector("torchrl_vase/PointRobot2D-v0", actor, num_envs=2,
                                   frames_per_batch=8, seed=0)
    assert _leaf_devices(next(iter(collector))) == {"cpu"}
    with torch.no_grad():
        for parameter in actor.parameters():
            parameter.add_(0.5)
    collector.update_policy_weights_()
    for acting, learning in zip(collector.policy.parameters(), actor.parameters(), strict=True):
        assert acting.device.type == "cpu"
        torch.testing.assert_close(acting, learning.cpu(), rtol=0, atol=0)
    collector.shutdown()


@pytest.mark.parametrize(("measure", "num_cells", "rtol"), [
    ("vase", [16], 1e-5),
    ("vime", [48, 48], 1e-4),  # VIME's both forms: sample pairs for the 48 × 48 layer
])
@pytest.mark.parametrize("device", DEVICES)
def test_a_bonus_on_the_device_rewards_cpu_batches_in_place(device, measure, num_cells, rtol):
    torch.manual_seed(0)
    sampling = defaults.sampling_for(measure)
    model = DynamicsModel.build(3, 1, num_cells, sampling=sampling)
    on_cpu = SurpriseRewardTransform(model, measure=measure, seed=1)
    on_device = SurpriseRewardTransform(DynamicsModel.build(3, 1, num_cells, sampling=sampling),
                                        measure=measure, seed=1).to(device)
    on_device.model.load_state_dict(model.state_dict())

    def batch():
        generator = torch.Generator().manual_seed(0)
        return TensorDict({
            "observation": torch.randn(5, 3, generator=generator),
            "action": torch.randn(5, 1, generator=generator),
            "next": {"observation": torch.randn(5, 3, generator=generator),
                     "reward": torch.zeros(5, 1)},
        }, [5])

    expected, out = on_cpu(batch()), on_device(batch())
    assert _leaf_devices(out) == {"cpu"}
    key = ("next", "intrinsic_reward")
    assert (expected[key] > 0).all()
    torch.testing.assert_close(out[key], expected[key], rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_the_pool_lives_with_the_model_and_takes_cpu_batches(device):
    bonus = SurpriseRewardTransform(DynamicsModel.build(3, 1, [16])).to(device)
    exploration = Exploration(bonus, bonus.make_loss(), pool_min=20, updates_per_iteration=2)
    rollout = TensorDict({
        "observation": torch.randn(4, 10, 3), "action": torch.randn(4, 10, 1),
        "next": {"observation": torch.randn(4, 10, 3), "reward": torch.zeros(4, 10, 1)},
    }, [4, 10])
    before = bonus.model.network.mu.clone()
    exploration.reward(rollout)
    exploration.fit(rollout)
    assert _leaf_devices(exploration.pool.storage[: len(exploration.pool)]) == {device}
    assert not torch.equal(bonus.model.network.mu, before)  # trained, on the device
    assert _devices(exploration) == {device}


@pytest.mark.parametrize("device", DEVICES)
def test_the_bonus_draws_on_the_device_from_its_own_stream_and_leaves_the_default_one(device):
    bonus = SurpriseRewardTransform(DynamicsModel.build(3, 1, [16])).to(device)
    exploration = Exploration(bonus, bonus.make_loss(), pool_min=20, updates_per_iteration=2,
                              seed=1)
    rollout = TensorDict({
        "observation": torch.randn(4, 10, 3), "action": torch.randn(4, 10, 1),
        "next": {"observation": torch.randn(4, 10, 3), "reward": torch.zeros(4, 10, 1)},
    }, [4, 10])
    torch.manual_seed(2)  # every device's default generator
    for _ in range(2):
        batch = rollout.clone()  # trains, then samples weights for the bonus
        exploration.reward(batch)
        exploration.fit(batch)
    after = torch.rand(3, device=device)
    torch.manual_seed(2)
    assert torch.equal(after, torch.rand(3, device=device))  # as if nothing had drawn
    assert ("cuda" in exploration.random_stream.state_dict()) == (device == "cuda")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("surprise", "algorithm_name"),
                         [("vase", "trpo"), ("rnd", "trpo"), ("vase", "ppo")])
def test_a_run_trains_on_the_device_checkpoints_and_resumes(tmp_path, monkeypatch, device,
                                                            surprise, algorithm_name, sqlite_uri):
    uri = sqlite_uri
    overrides = [
        f"algorithm={algorithm_name}", "ppo.minibatch_size=32", "ppo.epochs=2",
        f"mlflow.tracking_uri={uri}", f"checkpoint.dir={tmp_path / 'checkpoints'}",
        "env=point_robot", f"surprise={surprise}", "advantage=combined", f"device={device}",
        "iterations=2", "num_envs=2", "env.frames_per_batch=64", "env.pool_size=1000",
        "env.pool_min=50", "progress_bar=false", "checkpoint.every=1",
        "trpo.critic_minibatch=32", "eval.every=1", "eval.episodes=2", "collection=rllab",
    ]
    training = "predictor" if surprise == "rnd" else "elbo"  # RND's predictor, VASE's model
    overrides.append(f"surprise.{training}.updates_per_iteration=3")  # (500 by default)
    seen = []
    fit_critic = algorithm.fit_critic

    def spy(loss, batch, optimizer, **kwargs):  # what the updates are given, every iteration
        seen.append({
            "batch": _leaf_devices(batch),
            "actor": _devices(loss.actor_network),
            "critics": _devices(loss.critic_network),
            "advantage": _devices(loss.value_estimator),
            "optimizer": {p.device.type for g in optimizer.param_groups for p in g["params"]},
        })
        return fit_critic(loss, batch, optimizer, **kwargs)

    monkeypatch.setattr(algorithm, "fit_critic", spy)
    first = _train_then_resume(overrides)
    assert len(seen) == 3
    for devices in seen:
        assert devices == {"batch": {device}, "actor": {device}, "critics": {device},
                           "advantage": {device}, "optimizer": {device}}
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(first["run_id"])
    assert run.info.status == "FINISHED"
    history = client.get_metric_history(first["run_id"], "eval/return")
    assert [m.step for m in history] == sorted({m.step for m in history}) and len(history) == 3
    # the saved policy loads on a machine of any kind (weights mapped to the CPU)
    policy = torchrl_vase.load_policy(first["run_id"], tracking_uri=uri)
    assert _devices(policy) == {"cpu"}


@pytest.mark.parametrize("device", DEVICES)
def test_a_sac_run_trains_on_the_device_with_its_buffer_there_and_resumes(tmp_path, monkeypatch,
                                                                          device, sqlite_uri):
    from torchrl_vase.off_policy import SACUpdate

    uri = sqlite_uri
    overrides = [
        "algorithm=sac", f"device={device}", f"mlflow.tracking_uri={uri}",
        f"checkpoint.dir={tmp_path / 'checkpoints'}", "env=point_robot", "surprise=vase",
        "+env.make_kwargs.max_episode_steps=32", "iterations=2", "sac.frames_per_batch=64",
        "sac.init_random_frames=64", "sac.batch_size=32", "sac.num_cells=[16,16]",
        "sac.utd_ratio=0.1", "env.pool_min=50", "surprise.elbo.updates_per_iteration=3",
        "progress_bar=false", "checkpoint.every=1", "eval.every=1", "eval.episodes=2",
    ]
    seen, original = [], SACUpdate.__call__

    def spy(self, frames):  # where the learner, its buffer and a sample live
        sample = self.replay.sample()
        seen.append({"loss": {p.device.type for p in self.loss.parameters()},
                     "sample": _leaf_devices(sample),
                     "optimizer": {p.device.type for g in self.optimizer.param_groups
                                   for p in g["params"]}})
        return original(self, frames)

    monkeypatch.setattr(SACUpdate, "__call__", spy)
    first = _train_then_resume(overrides)
    assert seen and all(d == {"loss": {device}, "sample": {device}, "optimizer": {device}}
                        for d in seen)
    assert MlflowClient(tracking_uri=uri).get_run(first["run_id"]).info.status == "FINISHED"
    policy = torchrl_vase.load_policy(first["run_id"], tracking_uri=uri)
    assert _devices(policy) == {"cpu"}
