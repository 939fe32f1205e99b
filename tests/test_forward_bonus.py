"""Disagreement and ICM: their networks and bonuses against closed forms on fixed weights, their
losses against independent computations, bad input refused at construction, and both through
the recipe (TRPO and SAC) killed and resumed exactly."""

from __future__ import annotations

import copy
import math
import re

import pytest
import torch
from mlflow.tracking import MlflowClient
from recipe_modules import train_killed, train_killed_in_critic_fit
from tensordict import TensorDict
from test_sac import _config as sac_config
from test_sac import _history as sac_history
from test_trpo_vase_recipe import _config, _history, recipe
from torch import nn
from torchrl.envs import TransformedEnv
from torchrl.testing.mocking_classes import ContinuousActionConvMockEnv

from torchrl_vase import (
    DisagreementRewardTransform,
    DynamicsModel,
    EnsembleLoss,
    EnsembleMLP,
    Exploration,
    ICMLoss,
    ICMNetwork,
    ICMRewardTransform,
    VASERewardTransform,
)
from torchrl_vase.off_policy import SACUpdate


def _transitions(n: int = 40, obs_dim: int = 3, action_dim: int = 2, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, obs_dim, generator=gen), torch.randn(n, action_dim, generator=gen),
            torch.randn(n, obs_dim, generator=gen))


def _batch(n: int = 40, seed: int = 0) -> TensorDict:
    """Transitions of a linear system, ``s' = 0.8 s + B a`` (something to learn)."""
    obs, action, _ = _transitions(n, seed=seed)
    next_obs = 0.8 * obs + action @ torch.tensor([[0.3, 0.0, 0.3], [0.0, 0.3, -0.3]])
    return TensorDict({"observation": obs, "action": action,
                       "next": {"observation": next_obs, "reward": torch.zeros(n, 1)}}, [n])


def test_the_ensemble_is_its_members_each_an_mlp_of_its_own_weights():
    net = EnsembleMLP(5, 3, [8, 8], members=4)
    obs, action, _ = _transitions()
    out = net(obs, action)
    x = torch.cat([obs, action], -1)
    for k in range(4):  # member k: its own linear layers, nothing shared
        h = x
        for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
            h = h @ w[k].T + b[k, 0]
            h = torch.relu(h) if i < 2 else h
        torch.testing.assert_close(out[k], h)
    # members start apart (their own initialisation), each like torch.nn.Linear's bounds
    assert not torch.equal(net.weights[0][0], net.weights[0][1])
    assert net.weights[0].abs().max() <= 1 / 5**0.5


def test_disagreement_is_the_variance_over_members_summed_over_features():
    model = DynamicsModel(EnsembleMLP(5, 3, [], members=3), standardize=False)
    with torch.no_grad():  # linear members predicting the constants c_k, a feature at a time
        model.network.weights[0].zero_()
        model.network.biases[0].copy_(torch.tensor([[[0.0, 1.0, 2.0]], [[2.0, 1.0, 2.0]],
                                                    [[4.0, 1.0, 5.0]]]))
    bonus = DisagreementRewardTransform(model)
    u = bonus.bonus(*_transitions())
    # per feature the population variance over the three members: 8/3, 0, 2
    torch.testing.assert_close(u, torch.full((40,), 8 / 3 + 0 + 2))
    # a permuted batch permutes its bonus; halves concatenated give the whole batch's
    obs, action, next_obs = _transitions()
    model.network.biases[0].data.normal_()
    model.network.weights[0].data.normal_()
    whole = bonus.bonus(obs, action, next_obs)
    order = torch.randperm(40)
    torch.testing.assert_close(bonus.bonus(obs[order], action[order], next_obs[order]),
                               whole[order])
    torch.testing.assert_close(torch.cat([bonus.bonus(obs[:20], action[:20], next_obs[:20]),
                                          bonus.bonus(obs[20:], action[20:], next_obs[20:])]),
                               whole)
    assert (whole >= 0).all()


def test_icm_s_bonus_is_half_the_squared_forward_error_in_feature_space():
    net = ICMNetwork(5, 3, feature_dim=4, num_cells=[8])
    model = DynamicsModel(net, standardize=False)
    obs, action, next_obs = _transitions()
    u = ICMRewardTransform(model).bonus(obs, action, next_obs)
    phi, phi_next = net.encoder(obs), net.encoder(next_obs)
    predicted = net.forward_model(torch.cat([phi, action], -1))
    torch.testing.assert_close(u, 0.5 * ((predicted - phi_next) ** 2).sum(-1))


def test_icm_s_loss_weighs_inverse_and_forward_by_beta():
    net = ICMNetwork(5, 3, feature_dim=4, num_cells=[8])
    model = DynamicsModel(net, standardize=False)
    batch = _batch()
    out = ICMLoss(model, beta=0.3)(batch)
    phi, phi_next = net.encoder(batch["observation"]), net.encoder(batch["next", "observation"])
    inverse = net.inverse(torch.cat([phi, phi_next], -1))
    forward = net.forward_model(torch.cat([phi, batch["action"]], -1))
    torch.testing.assert_close(out["loss_inverse"],
                               0.7 * ((inverse - batch["action"]) ** 2).mean())
    torch.testing.assert_close(out["loss_forward"],
                               0.3 * 0.5 * ((forward - phi_next) ** 2).sum(-1).mean())
    # the encoder learns from both losses (the authors' code stops no gradient)
    sum(out.values()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.encoder.parameters())


def test_the_ensemble_s_loss_is_each_member_s_squared_error():
    model = DynamicsModel(EnsembleMLP(5, 3, [8], members=2), standardize=False)
    batch = _batch()
    predictions = model.network(batch["observation"], batch["action"])
    expected = ((predictions - batch["next", "observation"]) ** 2).mean()
    torch.testing.assert_close(EnsembleLoss(model)(batch)["loss_forward"], expected)


@pytest.mark.parametrize("make", [
    lambda: DisagreementRewardTransform(DynamicsModel(EnsembleMLP(5, 3, [8]))),
    lambda: ICMRewardTransform(DynamicsModel(ICMNetwork(5, 3, feature_dim=8))),
])
def test_each_bonus_trains_through_the_exploration_seam_and_its_loss_falls(make):
    torch.manual_seed(0)
    bonus = make()
    exploration = Exploration(bonus, pool_min=40, updates_per_iteration=50, batch_size=8,
                              lr=3e-3)
    first = exploration.fit(_batch(200, seed=1))
    later = [exploration.fit(_batch(200, seed=1)) for _ in range(5)][-1]
    assert all(key.startswith(bonus.metric_prefix) for key in first)
    assert sum(later.values()) < 0.5 * sum(first.values())  # every loss_* term, summed
    metrics = exploration.reward(batch := _batch(200, seed=2))
    assert metrics["bonus/mean"] > 0
    torch.testing.assert_close(batch["next", "reward"], 1e-4 * batch["next", "intrinsic_reward"])


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("make", [
    lambda: DisagreementRewardTransform(DynamicsModel(EnsembleMLP(5, 3, [8]))),
    lambda: ICMRewardTransform(DynamicsModel(ICMNetwork(5, 3, feature_dim=8),
                                             target="next_observation")),
])
def test_the_trainer_s_steps_are_the_loss_modules_own_bit_for_bit(make, weight_decay,
                                                                 monkeypatch):
    """``ModelTrainer`` prepares the whole sample once and steps on its slices: the same
    parameters and means, bit for bit, as the loss module's forward on each minibatch, autograd
    and torch's own ``Adam.step``, with the model standardising by its pool's statistics; a
    plain Adam steps without ``Optimizer.step``, any other (weight decay) through it."""
    torch.manual_seed(0)
    exploration = Exploration(make(), pool_min=40, updates_per_iteration=20, batch_size=8)
    exploration.fit(_batch(200, seed=1))  # the pool's statistics: standardisation is on
    assert exploration.loss.model.observation_scale.ne(1).all()
    sample = _batch(160, seed=3)
    loss, trainer = exploration.loss, exploration.trainer
    assert trainer.backend == "autograd"  # the numba kernel trains the ELBO only
    if weight_decay:
        trainer.optimizer.param_groups[0]["weight_decay"] = weight_decay
    reference_loss = copy.deepcopy(loss)
    reference = torch.optim.Adam(reference_loss.parameters(), fused=True)
    # a copy: load_state_dict keeps the very tensors it is given, which the trainer updates
    reference.load_state_dict(copy.deepcopy(trainer.optimizer.state_dict()))
    prepared, prepare = [], loss.model.prepare
    monkeypatch.setattr(loss.model, "prepare", lambda *args: prepared.append(1) or prepare(*args))
    if not weight_decay:
        monkeypatch.setattr(trainer.optimizer, "step", lambda: pytest.fail("Optimizer.step"))
    got = trainer(sample)
    assert len(prepared) == 1  # the sample at once, not a minibatch at a time
    totals: dict[str, torch.Tensor] = {}
    for minibatch in sample.split(8):
        out = reference_loss(minibatch)
        reference.zero_grad()
        sum(value for key, value in out.items() if key.startswith("loss_")).backward()
        reference.step()
        for key, value in out.items():
            totals[key] = totals.get(key, 0.0) + value.detach()
    assert got == {key: (total / 20).item() for key, total in totals.items()}
    for ours, theirs in zip(loss.parameters(), reference_loss.parameters(), strict=True):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: EnsembleMLP(5, 3, members=1), "at least 2 members"),
    (lambda: DisagreementRewardTransform(members=1), "at least 2 members"),
    (lambda: ICMNetwork(5, 3, feature_dim=0), "feature size"),
    (lambda: ICMRewardTransform(feature_dim=0), "feature size"),
    (lambda: ICMLoss(DynamicsModel(ICMNetwork(5, 3)), beta=1.5), "beta"),
    (lambda: DisagreementRewardTransform(DynamicsModel(ICMNetwork(5, 3))), "EnsembleMLP"),
    (lambda: ICMRewardTransform(nn.Linear(5, 3)), "DynamicsModel"),
    (lambda: VASERewardTransform(DynamicsModel(EnsembleMLP(5, 3))), "BayesianMLP"),
])
def test_bad_construction_is_refused_with_a_sentence(build, message):
    with pytest.raises((TypeError, ValueError), match=message):
        build()


@pytest.mark.parametrize("transform", [DisagreementRewardTransform, ICMRewardTransform])
def test_a_bonus_asked_of_pixel_observations_is_refused_when_attached(transform):
    env = ContinuousActionConvMockEnv()
    with pytest.raises(ValueError, match=r"pixel|vector|feature"):
        TransformedEnv(env, transform(observation_key="pixels"))


@pytest.mark.parametrize("surprise", ["disagreement", "icm"])
def test_two_trpo_iterations_killed_and_resumed_log_the_uninterrupted_history(
        store, monkeypatch, surprise):
    overrides = ("env=mountain_car", f"surprise={surprise}", "seed=41", "iterations=3",
                 "checkpoint.every=1")
    uninterrupted = recipe.train(_config(store, *overrides,
                                         f"mlflow.experiment=whole-{surprise}"))
    train_killed_in_critic_fit(3, _config(store, *overrides), monkeypatch)
    result = recipe.train(_config(store, *overrides, "resume=true"))
    resumed = _history(store[0], result["run_id"])
    assert resumed == _history(store[0], uninterrupted["run_id"])
    assert any(key.startswith(f"{surprise}/") for key in resumed) and "bonus/mean" in resumed


@pytest.mark.parametrize("surprise", ["disagreement", "icm"])
def test_sac_updates_killed_and_resumed_log_the_uninterrupted_history(store, monkeypatch,
                                                                      surprise):
    overrides = (f"surprise={surprise}", "seed=43", "iterations=3", "checkpoint.every=1")
    uninterrupted = recipe.train(sac_config(store, *overrides,
                                            f"mlflow.experiment=sac-whole-{surprise}"))
    train_killed(2, sac_config(store, *overrides), monkeypatch, SACUpdate, "__call__")
    result = recipe.train(sac_config(store, *overrides, "resume=true"))
    assert MlflowClient(tracking_uri=store[0]).get_run(result["run_id"]).info.status == "FINISHED"
    resumed = sac_history(store[0], result["run_id"])
    assert resumed == sac_history(store[0], uninterrupted["run_id"])
    assert "bonus/sampled_mean" in resumed


def test_icm_s_loss_on_a_batch_of_episodes_sums_each_transition_s_features():
    """``[episodes, steps]`` transitions: ½‖φ̂ − φ‖² over the feature dim, whatever the batch."""
    net = ICMNetwork(5, 3, feature_dim=4, num_cells=[8])
    model = DynamicsModel(net, standardize=False)
    flat = _batch(40)
    out = ICMLoss(model, beta=1.0)(flat.reshape(4, 10))
    torch.testing.assert_close(out["loss_forward"], ICMLoss(model, beta=1.0)(flat)["loss_forward"])
    assert out["loss_inverse"] == 0  # β = 1: the forward model alone (β = 0: the inverse alone)
    assert ICMLoss(model, beta=0.0)(flat)["loss_forward"] == 0


@pytest.mark.parametrize(("kwargs", "model_kwargs", "message"), [
    ({"beta": -0.1}, {}, "beta weighs the forward loss"),
    ({}, {"target": "delta"},
     r"^ICM encodes s' itself: build its model with target='next_observation'\.$"),
])
def test_icm_s_loss_refuses_what_it_cannot_compute(kwargs, model_kwargs, message):
    model = DynamicsModel(ICMNetwork(5, 3, feature_dim=4), standardize=False, **model_kwargs)
    with pytest.raises(ValueError, match=message):
        ICMLoss(model, **kwargs)


# -- What mutation testing found unasserted (issue 100)

def test_an_ensemble_starts_as_torch_s_linear_layers_would_each_member_its_own():
    # kaiming-uniform weights and uniform biases within ±1/√fan_in (nn.Linear's), per member
    ensemble = EnsembleMLP(20, 3, [400], members=5, dtype=torch.float64)
    assert ensemble.members == 5 and EnsembleMLP(4, 3).members == 5  # the paper's ensemble
    for weight, bias in zip(ensemble.weights, ensemble.biases, strict=True):
        weight, bias = weight.detach(), bias.detach()
        assert weight.dtype == bias.dtype == torch.float64
        bound = 1 / math.sqrt(weight.shape[-1])
        for values in (weight, bias):
            assert float(values.abs().max()) <= bound
            if values.numel() >= 1000:  # enough draws to come near the bound on both sides
                assert float(values.max()) > 0.95 * bound and float(values.min()) < -0.95 * bound
        assert not torch.equal(weight[0], weight[1])


def test_icm_s_networks_take_the_activation_and_dtype_asked_for():
    network = ICMNetwork(5, 3, feature_dim=4, num_cells=[8], activation_class=nn.Tanh,
                         dtype=torch.float64)
    for part in (network.encoder, network.inverse, network.forward_model):
        assert {type(m) for m in part.modules() if isinstance(m, (nn.ReLU, nn.Tanh))} == {nn.Tanh}
        assert {p.dtype for p in part.parameters()} == {torch.float64}
    sizes = [(m.in_features, m.out_features) for m in network.modules()
             if isinstance(m, nn.Linear)]
    assert sizes == [(3, 8), (8, 4), (8, 8), (8, 2), (6, 8), (8, 4)]


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: EnsembleMLP(4, 3, members=1),
         "an ensemble needs at least 2 members to disagree: members must be an int >= 2, got 1."),
        (lambda: EnsembleMLP(0, 3), "in_features must be an int >= 1, got 0."),
        (lambda: EnsembleMLP(4, 0), "out_features must be an int >= 1, got 0."),
        (lambda: ICMNetwork(5, 3, feature_dim=0),
         "ICM's feature size must be positive: feature_dim must be an int >= 1, got 0."),
        (lambda: ICMNetwork(0, 3), "in_features must be an int >= 1, got 0."),
        (lambda: ICMNetwork(5, 0), "out_features must be an int >= 1, got 0."),
        (lambda: ICMNetwork(3, 3), "in_features (3) must exceed out_features (3): the input is "
         "cat(observation, action)."),
    ],
)
def test_bad_forward_models_are_refused_with_the_whole_message(make, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        make()


@pytest.mark.parametrize("build", [lambda cells: EnsembleMLP(5, 3, cells),
                                   lambda cells: ICMNetwork(5, 3, feature_dim=4, num_cells=cells)])
def test_a_hidden_width_that_is_not_a_positive_int_is_named_with_the_widths(build):
    for cells in ([8, 0], [8, True], [2.5]):
        with pytest.raises(ValueError) as refused:
            build(cells)
        assert str(refused.value) == (f"num_cells must be a list of positive layer widths, got "
                                      f"{cells}.")
    assert build([1, 1]) is not None  # a width of one is a width


def test_icm_defaults_to_the_papers_sizes():
    net = ICMNetwork(5, 3)  # φ of 64 features, one hidden layer of 64 in each MLP
    phi, next_phi, action = net(torch.randn(4, 3), torch.randn(4, 2), torch.randn(4, 3))
    assert net.feature_dim == 64 and phi.shape == next_phi.shape == (4, 64)
    assert action.shape == (4, 2)
    assert [m.out_features for m in net.encoder.modules() if isinstance(m, nn.Linear)] == [64, 64]
