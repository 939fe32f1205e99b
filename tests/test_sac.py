"""SAC through the library's loop: torchrl's SACLoss untouched, the bonus on the replay buffer
under the model at sampling time, the buffer checkpointed by appending, exact resume."""

import contextlib
import copy
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from recipe_modules import load_recipe, train_killed
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import GymEnv
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.objectives import SACLoss, SoftUpdate

from torchrl_vase import (
    DynamicsModel,
    Exploration,
    RNDRewardTransform,
    SurpriseRewardTransform,
    VASERewardTransform,
    load_policy,
    tanh_policy,
)
from torchrl_vase.exploration import ReplayBonus
from torchrl_vase.loop import is_clock
from torchrl_vase.off_policy import OffPolicyStep, SACUpdate
from torchrl_vase.recipe import assembly
from torchrl_vase.recipe import config as schema
from torchrl_vase.replay import ReplayJournal

ROOT = Path(__file__).resolve().parents[1]
recipe = load_recipe("trpo_vase")


def _config(store, *overrides):
    """A tiny SAC run on MountainCar: whole paths of 32 steps, two a batch, 16 updates a batch."""
    uri, root = store
    tiny = [f"mlflow.tracking_uri={uri}", f"checkpoint.dir={root / 'checkpoints'}",
            "algorithm=sac", "env=mountain_car", "+env.make_kwargs.max_episode_steps=32",
            "iterations=4", "sac.frames_per_batch=64", "sac.init_random_frames=64",
            "sac.batch_size=32", "sac.num_cells=[16,16]", "sac.utd_ratio=0.25",
            "env.pool_min=50", "progress_bar=false", "checkpoint.every=0", "eval.every=0"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("trpo_vase", overrides=[*tiny, *overrides])
    if cfg.surprise.name != "none":
        schema.model_training(cfg).updates_per_iteration = 3
    return cfg


def _batch(n: int = 64, obs_dim: int = 3, seed: int = 0) -> TensorDict:
    generator = torch.Generator().manual_seed(seed)
    return TensorDict({
        "observation": torch.randn(n, obs_dim, generator=generator),
        "action": torch.rand(n, 1, generator=generator) * 2 - 1,
        "next": {"observation": torch.randn(n, obs_dim, generator=generator),
                 "reward": torch.randn(n, 1, generator=generator),
                 "done": torch.zeros(n, 1, dtype=torch.bool),
                 "terminated": torch.zeros(n, 1, dtype=torch.bool)}}, [n])


def test_the_recipe_s_sac_step_is_torchrl_s_sac_loss_step_by_hand(store):
    cfg = schema.typed_config(_config(store, "surprise=none", "sac.utd_ratio=1"))
    spaces = schema.check_env(cfg)
    collector, _, state = assembly.seeded_build(cfg, *spaces)
    collector.shutdown()
    update = state["sac"]
    # by hand, as torchrl's SAC example: copies of the same networks, the defaults of
    # sota-implementations/sac/config.yaml, one Adam per part, loss summed, soft update
    actor = copy.deepcopy(state["actor"])
    q_value = copy.deepcopy(update.loss.qvalue_network)
    loss = SACLoss(actor, q_value, num_qvalue_nets=2, loss_function="l2", delay_qvalue=True,
                   alpha_init=1.0, action_spec=actor.spec)
    loss.make_value_estimator(gamma=0.99)
    loss.load_state_dict(update.loss.state_dict())  # the same initial twin critics and targets
    optimizers = [torch.optim.Adam(list(loss.actor_network_params.flatten_keys().values()),
                                   lr=3e-4),
                  torch.optim.Adam(list(loss.qvalue_network_params.flatten_keys().values()),
                                   lr=3e-4),
                  torch.optim.Adam([loss.log_alpha], lr=3e-4)]
    target = SoftUpdate(loss, eps=0.995)
    batch = _batch(32, obs_dim=2)
    update.replay.extend(batch)
    torch.manual_seed(3)
    sample = update.replay.sample()
    out = loss(sample)
    (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
    for optimizer in optimizers:
        optimizer.step()
    target.step()
    acting = copy.deepcopy(state["actor"].state_dict())
    torch.manual_seed(3)
    metrics = update(1)  # utd_ratio 1: one update for one frame
    assert metrics["sac/updates"] == 1
    ours, theirs = update.loss.state_dict(), loss.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=key)
    assert metrics["sac/loss_qvalue"] == pytest.approx(out["loss_qvalue"].item())
    # the actor the collector acts with is the loss's: the step moved it
    moved = [key for key, value in state["actor"].state_dict().items()
             if not torch.equal(value, acting[key])]
    assert moved


def _vase_buffer(capacity: int = 1000):
    buffer = ReplayBuffer(storage=LazyTensorStorage(capacity), batch_size=64)
    bonus = VASERewardTransform(DynamicsModel.build(2, 1, [16], sigma_c=0.5), eta=0.1)
    exploration = Exploration(bonus, pool=buffer, pool_min=50, updates_per_iteration=20)
    buffer.append_transform(ReplayBonus(exploration))
    return buffer, exploration


def test_a_sampled_batch_carries_r_e_plus_eta_u_under_the_model_at_sampling_time():
    buffer, exploration = _vase_buffer()
    batch = GymEnv("torchrl_vase/SparseMountainCar-v1").rollout(300)
    buffer.extend(batch.reshape(-1).clone())
    # before the model's first update: no bonus (the authors' rule), the reward as stored
    assert torch.equal(buffer.sample()["next", "intrinsic_reward"], torch.zeros(64, 1))
    exploration.fit(batch)
    stored = buffer.storage.get(torch.arange(300))["next", "reward"].clone()

    def sample_and_expected(seed):
        torch.manual_seed(seed)
        stream = exploration.random_stream.state_dict()
        sample, info = buffer.sample(return_info=True)
        torch.manual_seed(seed)  # the same index draw
        index, _ = buffer.sampler.sample(buffer.storage, 64)
        assert torch.equal(index, info["index"])
        expected = buffer.storage.get(index)
        exploration.random_stream.load_state_dict(stream)  # then the bonus's own draws
        exploration.bonus.eval()
        with exploration._own_random():
            exploration.bonus(expected)  # the bonus transform itself, on the stored transitions
        exploration.bonus.train()
        return sample, expected, index

    sample, expected, index = sample_and_expected(7)
    u = sample["next", "intrinsic_reward"]
    torch.testing.assert_close(u, expected["next", "intrinsic_reward"])
    assert u.std() > 0
    torch.testing.assert_close(sample["next", "reward"],
                               sample["next", "extrinsic_reward"] + 0.1 * u)
    assert torch.equal(sample["next", "extrinsic_reward"], stored[index])
    # the model learns: the same transitions get another bonus; the stored reward is the same
    exploration.fit(batch)
    again, _, _ = sample_and_expected(7)
    assert not torch.allclose(again["next", "intrinsic_reward"], u)
    assert torch.equal(again["next", "extrinsic_reward"], sample["next", "extrinsic_reward"])
    assert torch.equal(buffer.storage.get(torch.arange(300))["next", "reward"], stored)


@pytest.mark.parametrize("measure", ["vase", "nll"])
def test_the_sac_bonus_is_the_authors_squared_error_with_no_constant(measure):
    """The bonus on a sampled batch is ``mean_n ‖s' − f_n‖² / (2σ_c²)`` of the standardised
    transition (NLL: its log-mean-exp family), nothing added: a constant would be a reward a
    step for SAC as for TRPO."""
    buffer = ReplayBuffer(storage=LazyTensorStorage(1000), batch_size=64)
    bonus = SurpriseRewardTransform(DynamicsModel.build(2, 1, [16], sigma_c=0.5), eta=0.1,
                                    measure=measure, seed=11)
    exploration = Exploration(bonus, pool=buffer, pool_min=50, updates_per_iteration=20)
    buffer.append_transform(ReplayBonus(exploration))
    batch = GymEnv("torchrl_vase/SparseMountainCar-v1").rollout(300)
    buffer.extend(batch.reshape(-1).clone())
    exploration.fit(batch)
    torch.manual_seed(3)
    sample, info = buffer.sample(return_info=True)
    stored = buffer.storage.get(info["index"])
    model = bonus.model
    obs, action, target = model.prepare(stored["observation"], stored["action"],
                                        stored["next", "observation"])
    with torch.no_grad():
        outputs = model.network.sample_outputs(torch.cat([obs, action], -1), bonus.num_samples,
                                               generator=torch.Generator().manual_seed(11))
    errors = (target - outputs).square().sum(-1) / (2 * 0.5**2)  # [N, batch]
    # VASE: the transform's default δ = 1e-3 (the text's) takes δ·H(q), one number, off all
    expected = (errors.mean(0) - bonus.delta * model.network.entropy().detach()
                if measure == "vase"
                else math.log(bonus.num_samples) - torch.logsumexp(-errors, 0))
    torch.testing.assert_close(sample["next", "intrinsic_reward"].squeeze(-1), expected)


def test_the_shuffled_placebo_permutes_each_sampled_batch_s_bonus():
    """``Exploration(shuffle_bonus=True)`` under ``ReplayBonus``: the same bonuses, sum and
    spread, on other transitions; the reward follows the shuffled bonus, the extrinsic reward
    stays the transition's."""
    buffer, exploration = _vase_buffer()
    batch = GymEnv("torchrl_vase/SparseMountainCar-v1").rollout(300)
    buffer.extend(batch.reshape(-1).clone())
    exploration.fit(batch)
    torch.manual_seed(7)
    stream = exploration.random_stream.state_dict()
    honest = buffer.sample()
    exploration.shuffle_bonus = True
    placebo = ReplayBonus(exploration)
    assert repr(placebo) == "ReplayBonus(VASERewardTransform, shuffle_bonus=True)"
    beside = ReplayBuffer(storage=buffer.storage, batch_size=64)  # the same transitions
    beside.append_transform(placebo)
    torch.manual_seed(7)
    exploration.random_stream.load_state_dict(stream)
    shuffled = beside.sample()  # the same transitions and bonuses drawn, then the permutation
    assert torch.equal(shuffled["observation"], honest["observation"])
    u, v = honest["next", "intrinsic_reward"], shuffled["next", "intrinsic_reward"]
    assert torch.equal(u.flatten().sort().values, v.flatten().sort().values)
    assert not torch.equal(u, v)
    torch.testing.assert_close(shuffled["next", "reward"],
                               shuffled["next", "extrinsic_reward"] + 0.1 * v)
    assert torch.equal(shuffled["next", "extrinsic_reward"], honest["next", "extrinsic_reward"])


def test_sampling_reads_the_bonus_s_statistics_and_does_not_update_them():
    buffer = ReplayBuffer(storage=LazyTensorStorage(1000), batch_size=64)
    bonus = RNDRewardTransform(2, eta=0.1, num_cells=[16], embedding_dim=8)
    exploration = Exploration(bonus, pool=buffer, pool_min=50, updates_per_iteration=5)
    buffer.append_transform(ReplayBonus(exploration))
    batch = GymEnv("torchrl_vase/SparseMountainCar-v1").rollout(200)
    buffer.extend(batch.reshape(-1).clone())
    exploration.reward(batch)  # the collected batch updates them
    exploration.fit(batch)
    counts = bonus.obs_rms.count.clone()
    for _ in range(3):
        buffer.sample()
    assert torch.equal(bonus.obs_rms.count, counts)
    assert bonus.training  # left as it was


def test_the_model_trains_on_the_learner_s_buffer_and_does_not_save_it():
    buffer, exploration = _vase_buffer()
    assert exploration.pool is buffer and exploration.pool_size == 1000
    step = OffPolicyStep(buffer, lambda frames: {"frames": frames}, None)
    step(_batch(64, obs_dim=2))
    assert len(buffer) == 64
    with pytest.raises(ValueError, match="pool=replay"):
        OffPolicyStep(ReplayBuffer(storage=LazyTensorStorage(10)), lambda frames: {},
                      exploration)
    buffer.extend(_batch(100, obs_dim=2))
    metrics = exploration.fit(_batch(10, obs_dim=2))
    assert len(buffer) == 164  # fit does not extend a learner's buffer: it trains on it
    assert int(exploration.model_updates) == 20 and "bnn/elbo" in metrics
    assert exploration.state_dict()["_extra_state"]["pool"] is None


def test_the_journal_rebuilds_the_buffer_slot_for_slot_across_wraps_and_kills(tmp_path):
    def buffer():
        return ReplayBuffer(storage=LazyTensorStorage(50), batch_size=8)

    live = buffer()
    journal = ReplayJournal(live, tmp_path)
    states = []
    for k in range(7):  # 7 x 23 transitions: the ring of 50 wraps three times
        live.extend(TensorDict({"x": torch.arange(23 * k, 23 * (k + 1))}, [23]))
        states.append(journal.state_dict())
    # no chunk the last two checkpoints need is gone, nothing older is left: the previous
    # one (138 transitions) needs transitions 88 on
    chunks = sorted(path.name for path in tmp_path.glob("*.pt"))
    assert chunks[0] == "chunk-000000000069-000000000092.pt" and len(chunks) == 4
    assert not list(tmp_path.glob("*.sha256"))  # each chunk carries its digest inside
    restored = buffer()
    ReplayJournal(restored, tmp_path).load_state_dict(states[-1])
    assert torch.equal(restored.storage.get(torch.arange(50))["x"],
                       live.storage.get(torch.arange(50))["x"])
    assert restored.writer.state_dict() == live.writer.state_dict()
    # a process killed after writing a chunk, before its checkpoint: the chunk is not read and
    # is deleted; the buffer is the previous checkpoint's
    live.extend(TensorDict({"x": torch.arange(161, 200)}, [39]))
    journal.state_dict()
    again = buffer()
    ReplayJournal(again, tmp_path).load_state_dict(states[-1])
    assert torch.equal(again.storage.get(torch.arange(50))["x"],
                       restored.storage.get(torch.arange(50))["x"])
    assert not (tmp_path / "chunk-000000000161-000000000200.pt").exists()
    # a lost chunk is named, not papered over
    (tmp_path / "chunk-000000000115-000000000138.pt").unlink()
    with pytest.raises(FileNotFoundError, match="a chunk is missing"):
        ReplayJournal(buffer(), tmp_path).load_state_dict(states[-1])
    # a buffer that never wrapped goes into a larger one (a run resumed with more iterations)
    small, larger = buffer(), ReplayBuffer(storage=LazyTensorStorage(80))
    small.extend(TensorDict({"x": torch.arange(30)}, [30]))
    ReplayJournal(larger, tmp_path / "small").load_state_dict(
        ReplayJournal(small, tmp_path / "small").state_dict())
    assert torch.equal(larger.storage.get(torch.arange(30))["x"], torch.arange(30))
    assert len(larger) == 30 and larger.writer.state_dict()["_cursor"] == 30
    with pytest.raises(ValueError, match="same buffer size"):
        ReplayJournal(ReplayBuffer(storage=LazyTensorStorage(60)), tmp_path).load_state_dict(
            states[-1])


def _history(uri: str, run_id: str) -> dict:
    client = MlflowClient(tracking_uri=uri)
    return {key: [(m.step, "nan" if math.isnan(m.value) else m.value)
                  for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]
            for key in client.get_run(run_id).data.metrics if not is_clock(key)}


def test_a_sac_vase_run_killed_and_resumed_logs_the_uninterrupted_history(store, monkeypatch):
    # a buffer of 150 transitions: 5 batches of 64 wrap it twice, so resume must put each
    # transition back in its slot
    overrides = ("surprise=vase", "seed=31", "iterations=5", "checkpoint.every=2",
                 "sac.buffer_size=150", "eval.every=2")
    uninterrupted = recipe.train(_config(store, *overrides, "mlflow.experiment=sac_reference"))
    # iteration 0 collects the warm-up's 64 frames and updates (torchrl's rule: from the batch
    # that brings the frames to init_random_frames); killed in iteration 2's update, after the
    # checkpoint of iterations 0-1
    train_killed(3, _config(store, *overrides), monkeypatch, SACUpdate, "__call__")
    client = MlflowClient(tracking_uri=store[0])
    [killed] = client.search_runs([client.get_experiment_by_name("mountain_car").experiment_id],
                                  filter_string="tags.seed = '31'")
    assert killed.info.status == "KILLED"
    result = recipe.train(_config(store, *overrides, "resume=true"))
    assert result["run_id"] == killed.info.run_id
    resumed = _history(store[0], result["run_id"])
    assert resumed == _history(store[0], uninterrupted["run_id"])
    assert [step for step, _ in resumed["sac/loss_qvalue"]] == [64, 128, 192, 256, 320]
    assert "bnn/kl" in resumed and "bonus/sampled_mean" in resumed and "eval/return" in resumed
    # the trained actor back from the run's MLflow artifacts: SAC's tanh actor, as trained
    policy = load_policy(result["run_id"], tracking_uri=store[0])
    observation = TensorDict({"observation": torch.randn(5, 2)}, [5])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        acted = policy(observation.clone())["action"]
    weights = torch.load(Path(store[1]) / "checkpoints" / "mountain_car" / result["run_id"]
                         / "weights.pt", weights_only=True)["actor"]
    actor = tanh_policy(2, 1, [16, 16])
    actor.load_state_dict(weights)
    loc, _ = actor.module[0].module(observation["observation"])
    torch.testing.assert_close(acted, torch.tanh(loc))
    directory = Path(store[1]) / "checkpoints" / "mountain_car" / result["run_id"]
    state = torch.load(directory / "last.pt", weights_only=True)
    assert state["parts"]["replay"] == {"write_count": 320, "capacity": 150}
    assert state["parts"]["exploration"]["_extra_state"]["pool"] is None  # not saved twice
    # what the checkpoints wrote of the buffer: each transition once, not the whole buffer at
    # every checkpoint (the first chunk is kept: the previous checkpoint needs 106-127)
    chunks = sorted(path.name for path in (directory / "replay").glob("*.pt"))
    assert chunks == ["chunk-000000000000-000000000128.pt", "chunk-000000000128-000000000256.pt",
                      "chunk-000000000256-000000000320.pt"]


@pytest.mark.parametrize(("overrides", "message"), [
    (("advantage=combined",), "SAC has no advantage"),
    (("advantage.center_bonus=true",), "SAC has no advantage"),
    (("collection=rllab",), "collection=rllab"),
    (("surprise=vime",), "VIME's bonus"),
    (("sac.buffer_size=32",), "smaller than a collected batch"),
    (("sac.batch_size=2000", "sac.buffer_size=1000"), "exceeds sac.buffer_size"),
    (("sac.init_random_frames=256",), "never update"),
    (("sac.storage=disk",), "sac.storage must be one of"),
    (("sac.tau=2",), "sac.tau must be <= 1"),
    (("surprise=none", "shuffle_bonus=true"), "the placebo shuffles a bonus"),
])
def test_bad_sac_settings_are_refused_before_any_run_exists(store, overrides, message):
    with pytest.raises(ValueError, match=message):
        recipe.train(_config(store, "mlflow.experiment=refused", *overrides))
    client = MlflowClient(tracking_uri=store[0])
    assert client.get_experiment_by_name("refused") is None


def test_sac_runs_are_named_and_identified_by_what_they_read(store):
    cfg = schema.typed_config(_config(store, "surprise=rnd", "seed=4"))
    assert schema.run_name(cfg) == "sac-rnd-seed4"
    assert "advantage" not in schema.run_tags(cfg, "abc", None)
    assert not any(key.startswith(("trpo.", "ppo.", "advantage.")) for key in
                   schema.run_params(cfg))
    # a TRPO run's identity does not read the sac block (runs from before it keep theirs)
    trpo = schema.typed_config(_config(store, "algorithm=trpo"))
    assert "sac" in schema.identity_ignores(trpo)
    assert schema.iterations(schema.typed_config(_config(store, "iterations=null",
                                                         "sac.frames=1000"))) == 16


def test_a_memmap_replay_buffer_maps_its_files_in_the_run_s_checkpoint_directory(store):
    result = recipe.train(_config(store, "sac.storage=memmap", "checkpoint.every=2"))
    run_directory = store[1] / "checkpoints" / "mountain_car" / result["run_id"]
    mapped = {path.name for path in (run_directory / "replay_memmap").rglob("*.memmap")}
    assert {"observation.memmap", "action.memmap"} <= mapped, mapped
    assert (run_directory / "replay").is_dir()  # the journal beside it holds the transitions


def test_sac_with_vase_at_eta_zero_trains_bit_for_bit_as_sac_without_a_bonus(store, monkeypatch):
    """The exact control under SAC: the model trains on the buffer and rewards every sampled
    batch (its own random stream), its bonus weighs nothing: SAC's numbers are plain SAC's."""

    def history(*more):
        result = recipe.train(_config(store, "seed=5", *more))
        return _history(store[0], result["run_id"])

    plain = history("surprise=none", "mlflow.experiment=plain")
    zero = history("surprise=vase", "surprise.eta=0", "mlflow.experiment=zero")
    assert "bnn/elbo" in zero and "bonus/sampled_mean" in zero
    shared = sorted(key for key in plain if key in zero)
    assert {"sac/loss_actor", "sac/alpha", "Return/mean"} <= set(shared)
    assert {key: zero[key] for key in shared} == {key: plain[key] for key in shared}
    # with the bonus drawing from torch's default generator, SAC's samples follow its draws
    monkeypatch.setattr(Exploration, "_own_random", lambda self: contextlib.nullcontext())
    leaky = history("surprise=vase", "surprise.eta=0", "mlflow.experiment=leaky")
    assert any(leaky[key] != plain[key] for key in shared)


def test_updates_stop_at_the_next_one_once_a_signals_grace_has_run_out():
    import os
    import signal

    from torchrl_vase import q_value_network, tanh_policy
    from torchrl_vase.loop import StopNow, StopSignals

    torch.manual_seed(0)
    actor, q = tanh_policy(3, 1, [8]), q_value_network(3, 1, [8])
    loss = SACLoss(actor, q, action_spec=actor.spec)
    loss.make_value_estimator(gamma=0.99)
    buffer = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)
    buffer.extend(_batch(64))
    done = []

    class Counting(torch.optim.Adam):
        def step(self, closure=None):
            done.append(1)
            if len(done) == 5:  # a signal during the fifth update; no grace at all
                os.kill(os.getpid(), signal.SIGTERM)
            return super().step(closure)

    update = SACUpdate(loss, buffer, Counting(loss.parameters(), lr=1e-3),
                       SoftUpdate(loss, tau=0.005), utd_ratio=100)
    with StopSignals(grace=1e-9), pytest.raises(StopNow, match="SIGTERM"):
        update(64)  # 6,400 updates asked for
    assert len(done) == 5  # the sixth was never taken
