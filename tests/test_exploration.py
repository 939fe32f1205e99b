"""DynamicsModel's data preparation, Exploration (Algorithm 1's exploration side), and RND."""

import copy

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torchrl.envs import GymEnv, TransformedEnv
from torchrl.envs.utils import check_env_specs

from torchrl_vase import (
    BayesianMLP,
    DynamicsModel,
    Exploration,
    RNDRewardTransform,
    VASERewardTransform,
    vase_surprise,
)
from torchrl_vase._random_stream import RandomStream

MOUNTAIN_CAR = "torchrl_vase/SparseMountainCar-v1"


def _rollout(steps: int = 300, seed: int = 0) -> TensorDict:
    env = GymEnv(MOUNTAIN_CAR)
    env.set_seed(seed)
    torch.manual_seed(seed)
    return env.rollout(steps, break_when_any_done=False)


# ------------------------------------------------------------------------------------------------
# DynamicsModel
# ------------------------------------------------------------------------------------------------
def test_statistics_are_the_pool_s_population_mean_and_std():
    data = _rollout()
    model = DynamicsModel.build(2, 1, target="delta")
    model.update_statistics(data["observation"], data["action"], data["next", "observation"])
    obs = data["observation"].numpy().astype(np.float64)
    delta = (data["next", "observation"] - data["observation"]).numpy().astype(np.float64)
    np.testing.assert_allclose(model.observation_loc, obs.mean(0), rtol=1e-5)
    np.testing.assert_allclose(model.observation_scale, obs.std(0), rtol=1e-4)
    np.testing.assert_allclose(model.delta_scale, delta.std(0), rtol=1e-4)
    assert int(model.statistics_count) == 300


def test_a_growing_pools_statistics_read_only_its_new_rows_and_equal_the_whole_pools():
    generator = torch.Generator().manual_seed(0)
    obs = torch.randn(900, 3, generator=generator) * torch.tensor([5.0, 0.1, 1.0]) + 40.0
    action = torch.randn(900, 2, generator=generator)
    next_obs = obs + torch.randn(900, 3, generator=generator)
    model = DynamicsModel.build(3, 2, target="delta")
    model.update_statistics(obs[:300], action[:300], next_obs[:300])
    for end in (600, 900):
        # rows already counted are not read again: garbage there changes nothing
        seen = obs[:end].clone()
        seen[: end - 300] = float("nan")
        model.update_statistics(seen, action[:end], next_obs[:end], new=300)
    exact = {"observation": obs.double(), "action": action.double(),
             "delta": (next_obs - obs).double()}
    for name, values in exact.items():
        torch.testing.assert_close(getattr(model, f"{name}_loc"),
                                   values.mean(0).float(), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(getattr(model, f"{name}_scale"),
                                   values.std(0, unbiased=False).float(), rtol=1e-6, atol=1e-7)
    assert int(model.statistics_count) == 900
    # rows the model has not counted before the new ones: every row is read (and checked)
    with pytest.raises(ValueError, match="observation contains non-finite values"):
        model.update_statistics(seen, action[:end], next_obs[:end], new=100)
    with pytest.raises(ValueError, match=r"new must be an int in \[0, 900\]"):
        model.update_statistics(obs, action, next_obs, new=901)


def test_the_running_moments_travel_with_state_dict_and_an_older_state_reads_every_row():
    data = _rollout()
    model = DynamicsModel.build(2, 1)
    model.update_statistics(data["observation"][:200], data["action"][:200],
                            data["next", "observation"][:200])
    state = model.state_dict()
    resumed, older = DynamicsModel.build(2, 1), DynamicsModel.build(2, 1)
    resumed.load_state_dict(state)
    older.load_state_dict({k: v for k, v in state.items() if k != "_extra_state"})
    poisoned = data["observation"].clone()
    poisoned[:200] = float("nan")
    resumed.update_statistics(poisoned, data["action"], data["next", "observation"], new=100)
    with pytest.raises(ValueError, match="non-finite"):  # no moments: it reads the old rows
        older.update_statistics(poisoned, data["action"], data["next", "observation"], new=100)
    model.update_statistics(data["observation"], data["action"], data["next", "observation"],
                            new=100)
    assert torch.equal(resumed.observation_scale, model.observation_scale)


@pytest.mark.parametrize("pool_size", [500, 5000])
def test_an_explorations_statistics_are_its_pools_through_a_wrap_around(pool_size):
    # 5000: the pool grows and each update reads its new batch; 500: 600 and 900 transitions
    # wrapped the ring buffer and every row is read
    exploration = _exploration(pool_size=pool_size)
    for seed in range(3):
        exploration.fit(_rollout(300, seed=seed))
        pool = exploration.pool.storage[: len(exploration.pool)]
        model = exploration.bonus.model
        obs = pool["observation"].double()
        torch.testing.assert_close(model.observation_loc, obs.mean(0).float(), rtol=1e-6,
                                   atol=1e-7)
        torch.testing.assert_close(model.observation_scale,
                                   obs.std(0, unbiased=False).float(), rtol=1e-6, atol=1e-7)
        assert int(model.statistics_count) == len(exploration.pool)


def test_an_unstandardised_model_sees_raw_data():
    model = DynamicsModel.build(2, 1, standardize=False)
    data = _rollout(20)
    model.update_statistics(data["observation"], data["action"], data["next", "observation"])
    obs, _action, target = model.prepare(
        data["observation"], data["action"], data["next", "observation"]
    )
    torch.testing.assert_close(obs, data["observation"].float())  # cast to the model's dtype
    torch.testing.assert_close(target, data["next", "observation"].float())


def test_a_model_with_action_bounds_trains_and_rewards_on_the_applied_action():
    # surprise.model_action=applied: the model sees the action the env applies, the clipped one,
    # in its statistics, the ELBO's data and the bonus alike
    torch.manual_seed(0)
    obs, next_obs = torch.randn(200, 3), torch.randn(200, 3)
    action = torch.randn(200, 2) * 4  # a wide policy: most samples beyond the bounds
    low, high = torch.tensor([-1.0, -1.0]), torch.tensor([1.0, 0.5])
    applied = torch.maximum(torch.minimum(action, high), low)
    clipping = VASERewardTransform(
        DynamicsModel.build(3, 2, [16], action_bounds=(-1.0, high)), seed=5)
    raw = VASERewardTransform(DynamicsModel.build(3, 2, [16]), seed=5)
    raw.model.network.load_state_dict(clipping.model.network.state_dict())
    raw_loss, clipping_loss = raw.make_loss(), clipping.make_loss()

    def transitions(acted):
        return TensorDict({"observation": obs, "action": acted, ("next", "observation"): next_obs,
                           ("next", "reward"): torch.zeros(200, 1)}, [200])

    clipping.fit_statistics(transitions(action))
    raw.fit_statistics(transitions(applied))
    torch.testing.assert_close(clipping.model.action_loc, applied.mean(0))
    assert not torch.allclose(clipping.model.action_loc, action.mean(0), atol=0.05)
    for ours, theirs in zip(clipping_loss.model_inputs(transitions(action)),
                            raw_loss.model_inputs(transitions(applied)), strict=True):
        torch.testing.assert_close(ours, theirs)
    bonus, expected = clipping(transitions(action)), raw(transitions(applied))
    torch.testing.assert_close(bonus["next", "intrinsic_reward"],
                               expected["next", "intrinsic_reward"])
    # the clip does not hide a broken action, and a model without bounds is as it always was
    with pytest.raises(ValueError, match="action contains non-finite"):
        clipping.model.prepare(obs[:2], torch.tensor([[0.0, float("inf")]] * 2), next_obs[:2])
    assert "action_low" not in raw.model.state_dict() and not raw.model.clips_actions
    restored = DynamicsModel.build(3, 2, [16], action_bounds=(-1.0, 1.0))
    restored.load_state_dict(clipping.model.state_dict())
    torch.testing.assert_close(restored.action_high, high)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"action_bounds": (-1.0, 1.0), "action_classes": 2}, ValueError, "a discrete one"),
    ({"action_bounds": (1.0, -1.0)}, ValueError, "low < high"),
    ({"action_bounds": (-1.0, float("inf"))}, ValueError, "finite"),
    ({"action_bounds": ([-1.0, -1.0, -1.0], 1.0)}, ValueError, "2 values each"),
    ({"action_bounds": 1.0}, TypeError, r"a pair \(low, high\)"),
])
def test_bad_action_bounds_are_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        DynamicsModel.build(3, 2, [8], **kwargs)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m: m.prepare(torch.zeros(4, 3), torch.zeros(4, 1), torch.zeros(4, 3)),
         ValueError, r"needs \[\*batch, 2\]"),
        (lambda m: m.prepare(torch.zeros(4, 2), torch.zeros(5, 1), torch.zeros(4, 2)),
         ValueError, "action has shape"),
        (lambda m: m.prepare(torch.zeros(4, 2), torch.zeros(4, 1), torch.zeros(3, 2)),
         ValueError, "same shape"),
        (lambda m: m.prepare(torch.full((4, 2), float("inf")), torch.zeros(4, 1),
                             torch.zeros(4, 2)), ValueError, "non-finite"),
        (lambda m: m.prepare(torch.zeros(4, 2, dtype=torch.long), torch.zeros(4, 1),
                             torch.zeros(4, 2)), TypeError, "floating point"),
        (lambda m: m.update_statistics(torch.zeros(1, 2), torch.zeros(1, 1), torch.zeros(1, 2)),
         ValueError, "at least 2"),
    ],
)
def test_bad_data_gets_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call(DynamicsModel.build(2, 1))


def test_bad_construction():
    with pytest.raises(ValueError, match="target"):
        DynamicsModel(BayesianMLP(3, 2), target="state")
    with pytest.raises(ValueError, match="sigma_c"):
        DynamicsModel(BayesianMLP(3, 2), sigma_c=0.0)
    with pytest.raises(ValueError, match="action_classes"):
        DynamicsModel(BayesianMLP(5, 2), action_classes=2)
    with pytest.raises(ValueError, match="must exceed"):
        DynamicsModel(BayesianMLP(2, 2))
    with pytest.raises(ValueError, match="init_mean"):
        BayesianMLP(3, 2, init_mean="zeros")


def test_the_authors_mean_initialisation_is_standard_normal():
    torch.manual_seed(0)
    network = BayesianMLP(40, 30, [200], init_mean="normal")
    # 14,230 draws: the sample mean's std is 0.008
    assert abs(network.mu.mean().item()) < 0.04 and abs(network.mu.std().item() - 1) < 0.03
    uniform = BayesianMLP(40, 30, [200])
    assert uniform.mu.abs().max() <= 1 / np.sqrt(40) + 1e-6


# ------------------------------------------------------------------------------------------------
# Exploration
# ------------------------------------------------------------------------------------------------
def _step(exploration: Exploration, batch: TensorDict) -> dict[str, float]:
    """An on-policy iteration's exploration: the bonus, then the fit."""
    return exploration.reward(batch) | exploration.fit(batch)


def _exploration(sigma_c: float = 0.5, **kwargs) -> Exploration:
    torch.manual_seed(0)
    bonus = VASERewardTransform(DynamicsModel.build(2, 1, sigma_c=sigma_c), eta=0.1, delta=0.0,
                                seed=5)
    defaults = {"pool_min": 100, "updates_per_iteration": 30, "batch_size": 10}
    return Exploration(bonus, bonus.make_loss(kl_weight=0.2), **{**defaults, **kwargs})


def test_torch_train_and_eval_toggle_modes_and_take_no_model_steps():
    exploration = _exploration()
    exploration.fit(_rollout(300, seed=0))  # the pool is full enough: the model trains
    before = (exploration.model_updates, [p.clone() for p in exploration.parameters()])
    assert exploration.eval() is exploration  # nn.Module.eval, as on any module tree
    assert not any(module.training for module in exploration.modules())
    assert exploration.train() is exploration and all(m.training for m in exploration.modules())
    assert exploration.model_updates == before[0]
    for now, then in zip(exploration.parameters(), before[1], strict=True):
        assert torch.equal(now, then)


def test_algorithm_1_order_bonus_from_the_previous_model_then_pool_statistics_training():
    exploration = _exploration()
    first = _rollout(300, seed=0)
    metrics = _step(exploration, first)
    # no bonus before the model has learnt anything: the reward is left as it is
    assert (first["next", "intrinsic_reward"] == 0).all()
    torch.testing.assert_close(first["next", "reward"], first["next", "extrinsic_reward"])
    assert metrics["bonus/mean"] == 0.0
    assert int(exploration.model_updates) == 30 and len(exploration.pool) == 300
    assert {"bnn/loss_nll", "bnn/loss_kl", "bnn/elbo"} <= set(metrics)

    second = _rollout(300, seed=1)
    model_before = copy.deepcopy(exploration.bonus.model)  # the model of the previous iteration
    _step(exploration, second)
    # the bonus is the surprise under the model before this step's update, on its statistics
    obs, act, target = model_before.prepare(
        second["observation"], second["action"], second["next", "observation"]
    )
    expected = vase_surprise(model_before.network, obs, act, target, sigma_c=0.5, delta=0.0,
                             generator=torch.Generator().manual_seed(5))
    bonus = second["next", "intrinsic_reward"].squeeze(-1)
    assert bonus.std() > 0
    torch.testing.assert_close(bonus, expected)
    # then the pool (600 transitions) set the statistics
    pool = torch.cat([first["observation"], second["observation"]]).numpy()
    np.testing.assert_allclose(exploration.bonus.model.observation_loc, pool.mean(0), rtol=1e-5)
    torch.testing.assert_close(
        second["next", "reward"],
        second["next", "extrinsic_reward"] + 0.1 * second["next", "intrinsic_reward"],
    )


def test_the_shuffled_placebo_pays_an_iterations_bonuses_to_other_transitions():
    """``shuffle_bonus=True``: an on-policy batch gets the same bonuses as the honest
    exploration's, permuted across its transitions; the reward follows them, the extrinsic
    reward stays; the learner's random numbers are untouched."""
    honest, placebo = _exploration(), _exploration(shuffle_bonus=True)
    for exploration in (honest, placebo):
        _step(exploration, _rollout(300, seed=0))
    # [envs, steps], as the loop collects it
    batches = [_rollout(300, seed=1).unsqueeze(0) for _ in range(2)]
    torch.manual_seed(9)
    _step(honest, batches[0])
    torch.manual_seed(9)
    placebo_metrics = _step(placebo, batches[1])
    after = torch.rand(3)
    torch.manual_seed(9)
    assert torch.equal(after, torch.rand(3))  # the permutation came from the random stream
    u, v = (b["next", "intrinsic_reward"].reshape(-1) for b in batches)
    assert u.std() > 0 and not torch.equal(u, v)
    assert torch.equal(u.sort().values, v.sort().values)
    torch.testing.assert_close(batches[1]["next", "reward"],
                               batches[1]["next", "extrinsic_reward"] + 0.1 * batches[1][
                                   "next", "intrinsic_reward"])
    assert torch.equal(batches[1]["next", "extrinsic_reward"],
                       batches[0]["next", "extrinsic_reward"])
    # the metrics read the bonus the policy got: its mean unchanged
    assert placebo_metrics["bonus/mean"] == pytest.approx(u.mean().item(), rel=1e-6)


def test_nothing_trains_before_the_pool_holds_pool_min():
    exploration = _exploration(pool_min=500)
    _step(exploration, _rollout(300))
    assert int(exploration.model_updates) == 0
    assert int(exploration.bonus.model.statistics_count) == 0


def test_state_dict_round_trip_continues_identically():
    exploration = _exploration()
    _step(exploration, _rollout(300, seed=0))
    state = copy.deepcopy(exploration.state_dict())
    resumed = _exploration()
    resumed.load_state_dict(state)
    assert len(resumed.pool) == 300
    assert int(resumed.model_updates) == 30
    batch_a, batch_b = _rollout(200, seed=3), _rollout(200, seed=3)
    torch.manual_seed(11)
    _step(exploration, batch_a)
    torch.manual_seed(11)
    _step(resumed, batch_b)
    torch.testing.assert_close(batch_a["next", "intrinsic_reward"],
                               batch_b["next", "intrinsic_reward"])
    torch.testing.assert_close(exploration.bonus.model.network.mu, resumed.bonus.model.network.mu)


def test_the_pool_s_state_is_its_filled_part_and_survives_a_wrap_around(tmp_path):
    exploration = _exploration(pool_size=500)
    for seed in range(3):  # 900 transitions through a pool of 500: the cursor wrapped
        exploration.fit(_rollout(300, seed=seed))
    state = exploration.state_dict()
    saved = state["_extra_state"]["pool"]
    assert saved["cursor"] == 400 and saved["write_count"] == 900
    small = _exploration(pool_size=500)
    small.fit(_rollout(300, seed=0))
    rows = small.state_dict()["_extra_state"]["pool"]["transitions"]["observation"]
    assert len(rows) == 300
    # the filled rows themselves, not a copy (a pool of gigabytes is not doubled at a
    # checkpoint), and a file of them alone
    assert rows.data_ptr() == small.pool.storage[:300]["observation"].data_ptr()
    assert rows.untyped_storage().nbytes() == rows.numel() * rows.element_size()
    path = tmp_path / "state.pt"
    torch.save(state, path)
    resumed = _exploration(pool_size=500)
    resumed.load_state_dict(torch.load(path, weights_only=True))
    assert torch.equal(resumed.pool.storage[:500]["observation"],
                       exploration.pool.storage[:500]["observation"])
    batch = _rollout(100, seed=7)  # the next write lands on the same (oldest) slots
    exploration.pool.extend(batch.select(*exploration.bonus.transition_keys))
    resumed.pool.extend(batch.select(*resumed.bonus.transition_keys))
    assert torch.equal(resumed.pool.storage[:500]["observation"],
                       exploration.pool.storage[:500]["observation"])


def _pool_of(exploration: Exploration) -> tuple:
    """The pool's slots and its writer's cursor and count: what a restore must give back."""
    writer = exploration.pool.writer.state_dict()
    return (exploration.pool.storage[:len(exploration.pool)].to_dict(), int(writer["_cursor"]),
            int(writer["_write_count"]))


def _assert_same_pool(a: Exploration, b: Exploration) -> None:
    (rows_a, *counts_a), (rows_b, *counts_b) = _pool_of(a), _pool_of(b)
    assert counts_a == counts_b
    assert rows_a.keys() == rows_b.keys()
    for key, value in rows_a.items():
        if isinstance(value, dict):
            for inner, tensor in value.items():
                assert torch.equal(tensor, rows_b[key][inner])
        else:
            assert torch.equal(value, rows_b[key])


def test_a_journaled_pool_checkpoints_only_its_new_transitions_and_restores_slot_for_slot(
        tmp_path):
    chunks_dir = tmp_path / "pool"
    exploration = _exploration(pool_size=500)
    exploration.journal_pool(chunks_dir)
    whole = _exploration(pool_size=500)  # the same pool, checkpointed whole: the reference
    states = []
    for seed in range(4):  # 1,200 transitions through 500 slots: the cursor wraps twice
        batch = _rollout(300, seed=seed)
        exploration.fit(batch)
        whole.fit(batch)
        states.append(exploration.state_dict())
    # the checkpoint holds the count, not one transition; the files hold each batch once
    assert states[-1]["_extra_state"]["pool"] == {
        "journal": {"write_count": 1200, "capacity": 500}}
    chunks = sorted(path.name for path in chunks_dir.glob("*.pt"))
    # each chunk carries the digest of its content inside, and nothing else is beside them
    assert sorted(p.name for p in chunks_dir.iterdir()) == chunks
    assert all(torch.load(chunks_dir / c, weights_only=True)["_content_sha256"] for c in chunks)
    # the first batch was overwritten before the previous checkpoint: no checkpoint needs it
    assert chunks == ["chunk-000000000300-000000000600.pt", "chunk-000000000600-000000000900.pt",
                      "chunk-000000000900-000000001200.pt"]
    resumed = _exploration(pool_size=500)
    resumed.journal_pool(chunks_dir)
    torch.save(states[-1], tmp_path / "last.pt")  # as a checkpoint is read back
    resumed.load_state_dict(torch.load(tmp_path / "last.pt", weights_only=True))
    reference = _exploration(pool_size=500)
    reference.load_state_dict(whole.state_dict())
    _assert_same_pool(resumed, exploration)
    _assert_same_pool(resumed, reference)
    # the next write lands on the same (oldest) slots; the next sample draws the same rows
    batch = _rollout(100, seed=7)
    for pool in (exploration, resumed):
        pool.pool.extend(batch.select(*pool.bonus.transition_keys))
    _assert_same_pool(resumed, exploration)
    torch.manual_seed(3)
    drawn = exploration.pool.sample(20)
    torch.manual_seed(3)
    assert torch.equal(resumed.pool.sample(20)["observation"], drawn["observation"])


def test_a_whole_pool_checkpoint_loads_into_a_journaled_exploration_which_then_writes_it_all(
        tmp_path):
    old = _exploration(pool_size=500)
    for seed in range(2):
        old.fit(_rollout(300, seed=seed))
    state = old.state_dict()  # written whole (no journal), e.g. by an earlier version
    (tmp_path / "chunk-000000000000-000000000700.pt").write_bytes(b"left by a killed process")
    resumed = _exploration(pool_size=500)
    resumed.journal_pool(tmp_path)
    resumed.load_state_dict(state)
    _assert_same_pool(resumed, old)
    assert list(tmp_path.iterdir()) == []  # no checkpoint counts a chunk that was there
    journal = resumed.state_dict()["_extra_state"]["pool"]["journal"]
    assert journal == {"write_count": 600, "capacity": 500}
    again = _exploration(pool_size=500)
    again.journal_pool(tmp_path)
    again.load_state_dict(resumed.state_dict())
    _assert_same_pool(again, old)


def test_a_journal_moved_to_another_directory_writes_the_whole_pool_there(tmp_path):
    exploration = _exploration()
    exploration.journal_pool(tmp_path / "first")
    exploration.fit(_rollout(150, seed=0))
    exploration.state_dict()
    exploration.fit(_rollout(50, seed=1))
    exploration.journal_pool(tmp_path / "second")  # e.g. a copy of the run elsewhere
    state = exploration.state_dict()
    assert [p.name for p in (tmp_path / "second").glob("*.pt")] == [
        "chunk-000000000000-000000000200.pt"]
    resumed = _exploration()
    resumed.journal_pool(tmp_path / "second")
    resumed.load_state_dict(state)
    _assert_same_pool(resumed, exploration)


def test_a_journaled_checkpoint_needs_its_directory_and_a_learners_buffer_has_no_journal(
        tmp_path):
    exploration = _exploration()
    exploration.journal_pool(tmp_path)
    exploration.fit(_rollout(150, seed=0))
    with pytest.raises(ValueError, match=r"journal_pool\(that directory\)"):
        _exploration().load_state_dict(exploration.state_dict())
    from torchrl.data import LazyTensorStorage, ReplayBuffer

    buffer = ReplayBuffer(storage=LazyTensorStorage(1000))
    bonus = VASERewardTransform(DynamicsModel.build(2, 1, sigma_c=0.5), eta=0.1)
    learner = Exploration(bonus, pool=buffer, pool_min=100, updates_per_iteration=2)
    with pytest.raises(ValueError, match="its owner checkpoints it"):
        learner.journal_pool(tmp_path)


def test_the_transform_s_own_rollouts_train_the_model_discrete_nested_float64():
    env = TransformedEnv(GymEnv("CartPole-v1"), VASERewardTransform(eta=1e-4))
    batch = env.rollout(40, break_when_any_done=False)  # one-hot discrete actions
    exploration = Exploration(env.transform, pool_min=20, updates_per_iteration=3, batch_size=5)
    _step(exploration, batch.clone())
    assert int(exploration.model_updates) == 3
    model = DynamicsModel.build(3, 1, sigma_c=0.5)
    bonus = VASERewardTransform(model, observation_key=("agent", "obs"),
                                action_key=("agent", "act"))
    double = TensorDict({
        ("agent", "obs"): torch.randn(30, 3, dtype=torch.float64),
        ("agent", "act"): torch.randn(30, 1, dtype=torch.float64),
        ("next", "agent", "obs"): torch.randn(30, 3, dtype=torch.float64),
        ("next", "reward"): torch.zeros(30, 1, dtype=torch.float64),
    }, [30])
    exploration = Exploration(bonus, pool_min=20, updates_per_iteration=3, batch_size=5)
    _step(exploration, double.clone())
    metrics = _step(exploration, double)
    assert np.isfinite(metrics["bonus/mean"]) and double["next", "reward"].dtype == torch.float64


def test_a_model_update_that_overflows_names_the_settings():
    with pytest.raises(ValueError, match=r"sigma_c must be in \[1e-06, 1e\+06\], got 1e-20"):
        _exploration(sigma_c=1e-20)  # refused at construction; past the check, the update's
    exploration = _exploration()  # own guard still names the setting
    exploration.bonus.model.sigma_c = 1e-20
    with pytest.raises(FloatingPointError, match=r"non-finite loss_nll.*sigma_c=1e-20"):
        _step(exploration, _rollout(300))


def test_bad_settings_raise_at_construction():
    with pytest.raises(ValueError, match="pool_min"):
        _exploration(pool_min=1000, pool_size=500)
    with pytest.raises(ValueError, match="batch_size"):
        _exploration(pool_min=5, batch_size=10)
    with pytest.raises(TypeError, match="bonus transform"):
        Exploration(torch.nn.Identity())
    with pytest.raises(TypeError, match=r"optimizer must be a torch.optim.Optimizer .* got 'adam'"):
        _exploration(optimizer="adam")
    unrelated = torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))])
    with pytest.raises(ValueError, match=r"optimizer does not step 2 of the loss's 2 trainable "
                                         r"parameters"):
        _exploration(optimizer=unrelated)


def test_repr_summarises_every_kind_of_bonus():
    exploration = _exploration()
    assert repr(exploration) == (
        "Exploration(bonus=VASERewardTransform, loss=VariationalELBOLoss, optimizer=Adam, "
        f"pool=0/{exploration.pool_size}, pool_min={exploration.pool_min}, "
        f"updates_per_iteration={exploration.updates_per_iteration}, "
        f"batch_size={exploration.batch_size})")
    assert "VariationalELBOLoss(" in repr(exploration.loss)  # its own repr works too
    rnd = Exploration(RNDRewardTransform(2, eta=1.0), pool_min=10, batch_size=5)
    assert repr(rnd).startswith("Exploration(bonus=RNDRewardTransform, loss=RNDLoss")


# ------------------------------------------------------------------------------------------------
# RND
# ------------------------------------------------------------------------------------------------
def test_rnd_bonus_is_torchrl_s_prediction_error_on_both_paths():
    torch.manual_seed(0)
    transform = RNDRewardTransform(2, normalize_obs=False, normalize_reward=False, eta=0.5)
    env = TransformedEnv(GymEnv(MOUNTAIN_CAR), transform)
    check_env_specs(env, seed=0)
    rollout = env.rollout(20)
    with torch.no_grad():
        nxt = rollout["next", "observation"].float()
        expected = (transform.predictor_network(nxt) - transform.target_network(nxt)).square()
    torch.testing.assert_close(rollout["next", "intrinsic_reward"], expected.mean(-1, True))
    batch = rollout.clone()
    batch["next", "reward"] = batch["next", "extrinsic_reward"]
    del batch["next", "extrinsic_reward"]
    transform(batch)
    torch.testing.assert_close(
        batch["next", "intrinsic_reward"], rollout["next", "intrinsic_reward"]
    )
    torch.testing.assert_close(rollout["next", "reward"],
                               rollout["next", "extrinsic_reward"] + 0.5 * expected.mean(-1, True))


def test_rnd_exploration_learns_familiar_states():
    torch.manual_seed(0)
    bonus = RNDRewardTransform(2, normalize_reward=False)
    exploration = Exploration(bonus, bonus.make_loss(update_fraction=1.0), pool_min=100,
                              updates_per_iteration=50, batch_size=10)
    data = _rollout(300)
    _step(exploration, data.clone())
    first = data.clone()
    exploration.reward(first)
    for _ in range(2):
        exploration.fit(data.clone())
    again = data.clone()
    exploration.reward(again)
    # two more rounds of 50 predictor steps on these states leave about 4 % of their bonus
    # (seeds 0-2: 0.041-0.043); a predictor that does not train leaves all of it
    assert again["next", "intrinsic_reward"].mean() < 0.2 * first["next", "intrinsic_reward"].mean()
    other = VASERewardTransform(DynamicsModel.build(2, 1))
    with pytest.raises(TypeError, match="RNDLoss"):
        bonus.check_loss(other.make_loss())
    with pytest.raises(ValueError, match="make_loss"):
        bonus.check_loss(RNDRewardTransform(2).make_loss())


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adam_step_is_torch_adam(fused, dtype):
    from torchrl_vase._adam import adam_step, supports_adam_steps

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(n, dtype=dtype)) for n in (50, 7)]
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    reference = torch.optim.Adam(params, lr=3e-3, betas=(0.8, 0.99), fused=fused)
    ours = torch.optim.Adam(copies, lr=3e-3, betas=(0.8, 0.99), fused=fused)
    assert supports_adam_steps(ours)
    assert not supports_adam_steps(torch.optim.Adam(copies, weight_decay=0.1))
    assert not supports_adam_steps(torch.optim.SGD(copies, lr=0.1))
    for _ in range(200):
        grads = [torch.randn_like(p) for p in params]
        for p, c, g in zip(params, copies, grads, strict=True):
            p.grad, c.grad = g.clone(), g.clone()
        reference.step()
        adam_step(ours)
    for p, c in zip(params, copies, strict=True):
        torch.testing.assert_close(p, c, rtol=0, atol=0)
    for ref_state, our_state in zip(reference.state_dict()["state"].values(),
                                    ours.state_dict()["state"].values(), strict=True):
        for key, value in ref_state.items():  # the same state, in the same dtypes
            torch.testing.assert_close(our_state[key], value, rtol=0, atol=0)
    assert ours.state_dict()["state"][0]["step"] == 200


@pytest.mark.parametrize("backend", ["numba", "autograd"])
def test_the_trainer_s_elbo_steps_are_the_loss_modules_autograd_steps(monkeypatch, backend):
    """``ModelTrainer`` (either backend) against the loss module's own forward, ``backward`` and
    torch's Adam, minibatch by minibatch, on the same noise."""
    exploration = _exploration(updates_per_iteration=20, backend=backend)
    assert exploration.trainer.backend == backend
    exploration.fit(_rollout(300, seed=0))  # trains once: pool and statistics in place
    twin = copy.deepcopy(exploration)
    sample = exploration.pool.sample(20 * 10)
    network, twin_network = exploration.loss.model.network, twin.loss.model.network
    noise = exploration.loss.step_noise(10, steps=20)
    # the trainer with this noise (all 20 steps' in one draw) ...
    monkeypatch.setattr(exploration.loss, "step_noise",
                        lambda rows, steps=None, generator=None: noise[:steps])
    fast = exploration.trainer(sample)
    # ... and the loss module's forward, a step at a time, on the same noise
    draws = iter(noise)
    monkeypatch.setattr(twin.loss, "step_noise",
                        lambda rows, steps=None, generator=None: next(draws))
    slow = twin.trainer._loss_steps(sample)
    torch.testing.assert_close(network.mu, twin_network.mu, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(network.rho, twin_network.rho, rtol=1e-4, atol=1e-6)
    for key in ("loss_nll", "loss_kl", "elbo", "kl", "entropy"):
        assert fast[key] == pytest.approx(slow[key], rel=1e-4), key


def test_a_feature_constant_in_the_pool_is_centred_not_blown_up():
    model = DynamicsModel.build(3, 1, standardize=True)
    obs = torch.randn(100, 3)
    obs[:, 2] = 0.5  # never changes in the pool
    model.update_statistics(obs, torch.randn(100, 1), obs + 0.01)
    assert model.observation_scale[2] == 1.0 and model.observation_loc[2] == 0.5
    moved = obs[:1].clone()
    moved[0, 2] = 0.55
    prepared, _, _ = model.prepare(moved, torch.zeros(1, 1), moved)
    assert prepared[0, 2].item() == pytest.approx(0.05)


@pytest.mark.parametrize("delta", [1e-3, 0.0])
def test_vase_s_confidence_term_and_its_share_of_the_surprise_are_logged_where_it_is_on(delta):
    """δ·H(q) is one number for the whole batch (a reward a step, uncentred): logged as
    ``confidence`` with its share ``δ·H / (mean U + δ·H)``; absent with δ = 0 (the authors')."""
    bonus = VASERewardTransform(DynamicsModel.build(2, 1, [16], sigma_c=0.5), delta=delta)
    exploration = Exploration(bonus, pool_size=1000, pool_min=50, updates_per_iteration=5)
    before = exploration.reward(_rollout(100, seed=1))
    _step(exploration, _rollout(100, seed=2))  # the model's first steps
    metrics = exploration.reward(_rollout(100, seed=3))  # the bonus, the model unchanged
    if delta == 0:
        assert "bonus/confidence" not in metrics and "bonus/confidence_share" not in before
        return
    assert np.isnan(before["bonus/confidence"])  # no bonus before the model's first training
    term = delta * bonus.model.network.entropy().item()
    assert metrics["bonus/confidence"] == pytest.approx(term)
    assert metrics["bonus/confidence_share"] == pytest.approx(term / (metrics["bonus/mean"] + term))
    assert 0 < metrics["bonus/confidence_share"] < 1


# ------------------------------------------------------------------------------------------------
# The exploration's random numbers are its own
# ------------------------------------------------------------------------------------------------
def test_a_random_stream_draws_its_own_numbers_continues_and_resumes_from_its_state():
    stream = RandomStream(seed=5)
    reference = torch.Generator().manual_seed(5)
    torch.manual_seed(0)
    with stream.active():
        first = torch.randn(3)
        with stream.active():  # nested: one block, one stream
            second = torch.rand(2)
    assert torch.equal(first, torch.randn(3, generator=reference))
    assert torch.equal(second, torch.rand(2, generator=reference))
    # the default generator is where the block found it
    assert torch.equal(torch.rand(4), torch.rand(4, generator=torch.Generator().manual_seed(0)))
    state = stream.state_dict()
    with stream.active():  # the next block continues the stream, whatever torch was seeded with
        torch.manual_seed(123)  # inside: moves the stream, not the default generator
        third = torch.randn(3)
    assert torch.equal(third, torch.randn(3, generator=torch.Generator().manual_seed(123)))
    resumed = RandomStream(seed=99)
    resumed.load_state_dict(state)
    with resumed.active():
        assert torch.equal(torch.randn(3), torch.randn(3, generator=reference))
    with pytest.raises(ValueError, match="needs 'seed' and 'cpu'"):
        resumed.load_state_dict({"seed": 1})


def test_an_exploration_leaves_the_learners_random_numbers_as_it_found_them():
    batches = [_rollout(300, seed=0), _rollout(200, seed=1)]
    exploration = _exploration()
    torch.manual_seed(3)
    for batch in batches:  # the model trains, the bonus samples weights, the pool draws
        _step(exploration, batch)
    after = torch.rand(5)
    torch.manual_seed(3)
    assert torch.equal(after, torch.rand(5))  # as if no exploration had run
    assert batches[1]["next", "intrinsic_reward"].std() > 0  # it did run, and drew
    # its own draws are its stream's: another seed of torch's leaves its bonus as it was
    again, rerolled = _exploration(), [_rollout(300, seed=0), _rollout(200, seed=1)]
    torch.manual_seed(4)
    for batch in rerolled:
        _step(again, batch)
    assert torch.equal(rerolled[1]["next", "intrinsic_reward"],
                       batches[1]["next", "intrinsic_reward"])
    # and another stream's seed gives other draws
    other, third = _exploration(seed=8), [_rollout(300, seed=0), _rollout(200, seed=1)]
    for batch in third:
        _step(other, batch)
    assert not torch.equal(third[1]["next", "intrinsic_reward"],
                           batches[1]["next", "intrinsic_reward"])


def test_a_checkpoint_without_the_random_stream_is_refused_with_what_to_do():
    exploration = _exploration()
    _step(exploration, _rollout(300, seed=0))
    state = copy.deepcopy(exploration.state_dict())
    del state["_extra_state"]["random"]  # as torchrl-vase wrote it before the stream
    with pytest.raises(ValueError, match=r"no random stream of its own.*start the run afresh"):
        _exploration().load_state_dict(state)
