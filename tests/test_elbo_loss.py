import math
import re

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torch import nn
from torch.distributions import Normal, kl_divergence

from torchrl_vase import BayesianMLP, DynamicsModel, VariationalELBOLoss
from torchrl_vase.modules.forward_models import EnsembleMLP

OBS, ACT = 3, 2


def _transitions(batch: int = 16, seed: int = 0, dtype=torch.float32) -> TensorDict:
    gen = torch.Generator().manual_seed(seed)
    return TensorDict(
        {
            "observation": torch.randn(batch, OBS, generator=gen, dtype=dtype),
            "action": torch.randn(batch, ACT, generator=gen, dtype=dtype),
            ("next", "observation"): torch.randn(batch, OBS, generator=gen, dtype=dtype),
        },
        batch_size=[batch],
    )


def _model(dtype=torch.float32, num_cells=(16,), **kwargs) -> DynamicsModel:
    """A model that sees the data raw (no standardisation) unless told otherwise."""
    torch.manual_seed(0)
    network = BayesianMLP(OBS + ACT, OBS, list(num_cells), nn.Tanh, dtype=dtype)
    return DynamicsModel(network, **{"standardize": False, **kwargs})


def _numpy_nll(x, y, weights, sigma_c):
    """Independent float64 computation: mean over samples of −log N(y; f(x; θ_n), σ_c² I)."""
    x, y = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    nlls = []
    for n in range(weights[0][0].shape[0]):
        h = x
        for i, (w, b) in enumerate(weights):
            h = h @ w[n].detach().numpy().T + b[n].detach().numpy()
            if i < len(weights) - 1:
                h = np.tanh(h)
        log_density = (
            -0.5 * ((y - h) / sigma_c) ** 2 - np.log(sigma_c) - 0.5 * np.log(2 * np.pi)
        ).sum(-1)
        nlls.append(-log_density)
    return np.mean(nlls, axis=0)


@pytest.mark.parametrize("target", ["next_observation", "delta"])
def test_loss_terms_match_an_independent_computation(target):
    model = _model(torch.float64, sigma_c=0.7, target=target)
    td = _transitions(dtype=torch.float64)
    loss_fn = VariationalELBOLoss(model, num_samples=4, kl_weight=0.2)
    torch.manual_seed(3)
    weights = model.network.sample_weights(4)  # the loss draws its samples the same way
    torch.manual_seed(3)
    out = loss_fn(td)

    x = torch.cat([td["observation"], td["action"]], -1)
    y = td["next", "observation"]
    if target == "delta":
        y = y - td["observation"]
    expected_nll = _numpy_nll(x, y, weights, 0.7).sum()
    q = Normal(model.network.mu, model.network.posterior_std())
    prior = Normal(0.0, 0.5)
    expected_kl = kl_divergence(q, prior).sum().item()
    assert math.isclose(out["loss_nll"].item(), expected_nll, rel_tol=1e-9)
    assert math.isclose(out["loss_kl"].item(), 0.2 * expected_kl, rel_tol=1e-9)
    assert math.isclose(out["kl"].item(), expected_kl, rel_tol=1e-9)
    assert math.isclose(out["elbo"].item(), -(expected_nll + 0.2 * expected_kl), rel_tol=1e-9)
    assert math.isclose(out["entropy"].item(), q.entropy().sum().item(), rel_tol=1e-9)
    assert not out["elbo"].requires_grad and out["loss_nll"].requires_grad


def test_mean_reduction_is_the_sum_over_the_batch_size():
    model, td = _model(), _transitions(batch=12)
    torch.manual_seed(0)
    summed = VariationalELBOLoss(model)(td)["loss_nll"]
    torch.manual_seed(0)
    averaged = VariationalELBOLoss(model, reduction="mean")(td)["loss_nll"]
    torch.testing.assert_close(averaged, summed / 12)


def test_monte_carlo_kl_estimator_agrees_with_closed_form():
    model = _model(torch.float64)
    td = _transitions(batch=2, dtype=torch.float64)
    analytic = VariationalELBOLoss(model, kl_estimator="analytic")(td)["loss_kl"]
    estimates = VariationalELBOLoss(model, kl_estimator="monte_carlo", num_samples=20000)(td)
    assert math.isclose(estimates["loss_kl"].item(), analytic.item(), rel_tol=0.02)


def test_gradients_reach_every_mean_and_rho():
    model, td = _model(), _transitions()
    out = VariationalELBOLoss(model)(td)
    (out["loss_nll"] + out["loss_kl"]).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def _linear_gaussian_data(n, seed):
    """s' = A s + B a + ε, with the second action dim always 0: no data about its weights."""
    gen = torch.Generator().manual_seed(seed)
    a_matrix = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.8, 0.2], [-0.1, 0.0, 0.95]])
    b_matrix = torch.tensor([[0.5, 3.0], [0.0, -2.0], [0.3, 1.0]])
    obs = torch.randn(n, OBS, generator=gen)
    action = torch.randn(n, ACT, generator=gen)
    action[:, 1] = 0.0
    next_obs = obs @ a_matrix.T + action @ b_matrix.T + 0.05 * torch.randn(n, OBS, generator=gen)
    return TensorDict(
        {"observation": obs, "action": action, ("next", "observation"): next_obs}, [n]
    )


def test_training_on_linear_gaussian_dynamics_lowers_nll_and_shrinks_std_where_data_is():
    torch.manual_seed(0)
    train, held_out = _linear_gaussian_data(2000, seed=1), _linear_gaussian_data(500, seed=2)
    network = BayesianMLP(OBS + ACT, OBS, [], prior_std=0.5)  # a Bayesian linear model
    model = DynamicsModel(network, sigma_c=0.1, standardize=False)
    batch_size = 50
    loss_fn = VariationalELBOLoss(model, kl_weight=batch_size / len(train))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def held_out_nll():
        with torch.no_grad():
            return loss_fn(held_out)["loss_nll"].item() / len(held_out)

    before = held_out_nll()
    for _ in range(15):
        for idx in torch.randperm(len(train)).split(batch_size):
            out = loss_fn(train[idx])
            optimizer.zero_grad()
            (out["loss_nll"] + out["loss_kl"]).backward()
            optimizer.step()
    after = held_out_nll()

    assert after < before - 10, (before, after)
    (weight, _), = network.unflatten(network.posterior_std().detach())
    sigma = weight
    informed = sigma[:, : OBS + 1]  # weights on s and on the first action dim
    uninformed = sigma[:, OBS + 1]  # weights on the action dim that is always 0
    assert informed.max() < 0.15, informed  # from 0.5 at the start
    assert uninformed.min() > 0.4, uninformed  # held near the prior's 0.5 by the KL term


def test_set_keys_with_nested_keys_reads_the_same_data():
    model, td = _model(), _transitions()
    nested = TensorDict(
        {
            ("agent", "obs"): td["observation"],
            ("agent", "act"): td["action"],
            ("next", "agent", "obs"): td["next", "observation"],
        },
        batch_size=td.batch_size,
    )
    loss_fn = VariationalELBOLoss(model)
    torch.manual_seed(0)
    expected = loss_fn(td)
    loss_fn.set_keys(
        observation=("agent", "obs"),
        action=("agent", "act"),
        next_observation=("next", "agent", "obs"),
    )
    assert loss_fn.tensor_keys.observation == ("agent", "obs")
    torch.manual_seed(0)
    got = loss_fn(nested)
    torch.testing.assert_close(got["loss_nll"], expected["loss_nll"])
    with pytest.raises(KeyError, match="set_keys"):
        loss_fn(td)
    with pytest.raises(ValueError, match="not an accepted tensordict key"):
        loss_fn.set_keys(reward="r")


@pytest.mark.parametrize("target", ["next_observation", "delta"])
def test_standardised_loss_is_the_raw_loss_on_data_standardised_by_the_pool(target):
    pool = _transitions(batch=200, seed=4)
    pool["observation"] = pool["observation"] * 10 + 3
    pool["next", "observation"] = pool["observation"] + 0.1 * pool["next", "observation"]
    model = _model(standardize=True, sigma_c=0.5, target=target)
    model.update_statistics(pool["observation"], pool["action"], pool["next", "observation"])
    batch = pool[:16]
    torch.manual_seed(0)
    standardised = VariationalELBOLoss(model)(batch)

    # independently: the pool's population mean and std (+1e-8), as the authors' numpy code
    def z(value, reference):
        reference = reference.numpy().astype(np.float64)
        return (value.numpy() - reference.mean(0)) / (reference.std(0) + 1e-8)

    obs, act, nxt = pool["observation"], pool["action"], pool["next", "observation"]
    # s' is standardised by the observation statistics, s' − s by its own
    y = z((nxt - obs)[:16], nxt - obs) if target == "delta" else z(nxt[:16], obs)
    manual = TensorDict(
        {"observation": torch.tensor(z(obs[:16], obs), dtype=torch.float32),
         "action": torch.tensor(z(act[:16], act), dtype=torch.float32),
         ("next", "observation"): torch.tensor(y, dtype=torch.float32)},
        [16],
    )
    raw_model = _model(sigma_c=0.5)  # same seed: same parameters; predicts s'
    torch.manual_seed(0)
    plain = VariationalELBOLoss(raw_model)(manual)
    torch.testing.assert_close(standardised["loss_nll"], plain["loss_nll"], rtol=1e-4, atol=1e-4)


def test_the_loss_never_changes_the_statistics_and_they_travel_with_state_dict():
    model = _model(standardize=True)
    pool = _transitions(batch=64)
    model.update_statistics(pool["observation"], pool["action"], pool["next", "observation"])
    before = {k: v.clone() for k, v in model.state_dict().items() if "loc" in k or "scale" in k}
    VariationalELBOLoss(model)(_transitions(batch=64, seed=5))
    for key, value in before.items():
        torch.testing.assert_close(model.state_dict()[key], value)
    clone = _model(standardize=True)
    clone.load_state_dict(model.state_dict())
    torch.testing.assert_close(clone.observation_scale, model.observation_scale)
    assert int(clone.statistics_count) == 64


def test_discrete_and_float64_inputs_are_prepared_as_the_transform_prepares_them():
    network = BayesianMLP(OBS + 3, OBS, [8])
    model = DynamicsModel(network, standardize=False, action_classes=3)
    index = torch.tensor([0, 2, 1, 1])
    td = TensorDict({"observation": torch.randn(4, OBS), "action": index,
                     ("next", "observation"): torch.randn(4, OBS)}, [4])
    one_hot = td.clone().set("action", torch.nn.functional.one_hot(index, 3).float())
    loss_fn = VariationalELBOLoss(model)
    torch.manual_seed(0)
    from_index = loss_fn(td)["loss_nll"]
    torch.manual_seed(0)
    from_one_hot = loss_fn(one_hot)["loss_nll"]
    torch.manual_seed(0)
    from_float64 = loss_fn(one_hot.double())["loss_nll"]
    torch.testing.assert_close(from_index, from_one_hot)
    torch.testing.assert_close(from_float64, from_one_hot)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"num_samples": 0}, ValueError, "num_samples"),
        ({"num_samples": 1.5}, TypeError, "num_samples"),
        ({"kl_weight": -0.1}, ValueError, "kl_weight"),
        ({"kl_weight": float("inf")}, ValueError, "kl_weight"),
        ({"kl_estimator": "mc"}, ValueError, "kl_estimator"),
        ({"reduction": "none"}, ValueError, "reduction"),
    ],
)
def test_bad_construction_raises(kwargs, error, match):
    with pytest.raises(error, match=match):
        VariationalELBOLoss(_model(), **kwargs)


def test_a_model_that_is_not_a_dynamics_model_raises_and_says_how_to_wrap_it():
    with pytest.raises(TypeError, match="model must be a DynamicsModel"):
        VariationalELBOLoss(nn.Linear(5, 3))
    with pytest.raises(TypeError, match=r"DynamicsModel\(network"):
        VariationalELBOLoss(BayesianMLP(5, 3, [8]))
    with pytest.raises(TypeError, match="trains a BayesianMLP; this model holds a EnsembleMLP"):
        VariationalELBOLoss(DynamicsModel(EnsembleMLP(5, 3, [8])))


def _with(td: TensorDict, key, value) -> TensorDict:
    td = td.clone()
    td.set(key, value)
    return td


@pytest.mark.parametrize(
    "mutate,error,match",
    [
        (lambda td: _with(td, "action", torch.randn(16, ACT + 1)), ValueError, "action"),
        (lambda td: _with(td, ("next", "observation"), torch.randn(16, 4)), ValueError, "next"),
        (lambda td: td.exclude("action").set("action", torch.zeros(16, dtype=torch.long)),
         TypeError, "action_classes"),
        (lambda td: _with(td, "observation", torch.full((16, OBS), float("nan"))),
         ValueError, "non-finite"),
        (lambda td: td.exclude("action"), KeyError, "action"),
    ],
)
def test_bad_tensordict_input_raises(mutate, error, match):
    loss_fn = VariationalELBOLoss(_model())
    with pytest.raises(error, match=match):
        loss_fn(mutate(_transitions()))


def test_batch_shapes_that_disagree_raise():
    td = _transitions()
    bad = TensorDict(
        {
            "observation": td["observation"],
            "action": td["action"][:8],
            ("next", "observation"): td["next", "observation"],
        },
        batch_size=[],
    )
    with pytest.raises(ValueError, match="action"):
        VariationalELBOLoss(_model())(bad)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_the_terms_on_given_noise_are_an_independent_computation(reduction):
    model = _model(torch.float64, num_cells=(16, 8), sigma_c=0.7)
    network = model.network
    loss_fn = VariationalELBOLoss(model, num_samples=6, kl_weight=0.3, reduction=reduction)
    td = _transitions(batch=10, dtype=torch.float64)
    x, y = loss_fn.model_inputs(td)
    noise = network.sample_noise(6)
    loss_nll, kl, entropy = loss_fn.terms_from_noise(x, y, noise)
    weights = network.unflatten(network.parameters_from_noise(noise))
    per_row = _numpy_nll(x, y, weights, 0.7)
    expected = per_row.sum() if reduction == "sum" else per_row.mean()
    assert math.isclose(loss_nll.item(), expected, rel_tol=1e-10)
    q = Normal(network.mu.detach(), network.posterior_std().detach())
    assert math.isclose(kl.item(), kl_divergence(q, Normal(0.0, 0.5)).sum().item(),
                        rel_tol=1e-10)
    assert math.isclose(entropy.item(), q.entropy().sum().item(), rel_tol=1e-10)
    # forward is the same computation on the noise it draws itself
    torch.manual_seed(5)
    drawn = loss_fn.step_noise(10)
    torch.manual_seed(5)
    out = loss_fn(td)
    torch.testing.assert_close(out["loss_nll"], loss_fn.terms_from_noise(x, y, drawn)[0])


def test_the_gradients_follow_a_change_of_settings():
    loss_fn = VariationalELBOLoss(DynamicsModel.build(3, 1, [8], standardize=False),
                                  num_samples=4, kl_weight=0.2)
    network = loss_fn.model.network
    x, y, noise = torch.randn(10, 4), torch.randn(10, 3), loss_fn.step_noise(10)

    def gradient() -> torch.Tensor:
        loss_nll, kl, _ = loss_fn.terms_from_noise(x, y, noise)
        return torch.autograd.grad(loss_nll + loss_fn.kl_weight * kl, network.mu)[0]

    before, sigma_c = gradient(), loss_fn.model.sigma_c
    loss_fn.kl_weight, loss_fn.model.sigma_c = 0.5, 2 * sigma_c
    after = gradient()
    # d/dmu of the KL term scales with kl_weight, the data term with 1 / sigma_c^2
    data_before = before - 0.2 * network.mu.detach() / network.prior_std**2
    data_after = after - 0.5 * network.mu.detach() / network.prior_std**2
    torch.testing.assert_close(data_after, data_before / 4, rtol=1e-4, atol=1e-6)


# -- What mutation testing found unasserted (issue 100)

def test_the_monte_carlo_kl_is_the_mean_log_density_ratio_of_the_same_draws():
    model = _model(torch.float64)
    network = model.network
    loss_fn = VariationalELBOLoss(model, kl_estimator="monte_carlo", num_samples=3)
    noise = loss_fn.step_noise(4, generator=torch.Generator().manual_seed(1))
    x, y = torch.randn(4, OBS + ACT, dtype=torch.float64), torch.randn(4, OBS, dtype=torch.float64)
    _, kl, _ = loss_fn.terms_from_noise(x, y, noise)
    sigma = torch.nn.functional.softplus(network.rho.detach())
    theta = network.mu.detach() + sigma * noise
    expected = (Normal(network.mu.detach(), sigma).log_prob(theta).sum(-1)
                - Normal(0.0, network.prior_std).log_prob(theta).sum(-1)).mean()
    torch.testing.assert_close(kl.detach(), expected)
    assert not torch.isclose(kl.detach(), network.kl_divergence().detach())  # 3 draws: not exact


@pytest.mark.parametrize(("sampling", "rows_drawn"), [("local", 5), ("local_shared", 1)])
def test_a_local_step_draws_one_pre_activation_per_unit_and_row_or_per_unit(sampling, rows_drawn):
    model = DynamicsModel.build(OBS, ACT, [16, 8], sampling=sampling, standardize=False)
    loss_fn = VariationalELBOLoss(model, num_samples=3)
    assert loss_fn.step_noise_shape(5) == (3, rows_drawn, 16 + 8 + OBS)
    assert loss_fn.step_noise(5, steps=2).shape == (2, 3, rows_drawn, 16 + 8 + OBS)


def test_step_noise_comes_from_the_generator_given():
    loss_fn = VariationalELBOLoss(_model(), num_samples=3)
    draws = [loss_fn.step_noise(4, steps=2, generator=torch.Generator().manual_seed(9))
             for _ in range(2)]
    assert torch.equal(draws[0], draws[1])
    with pytest.raises(ValueError, match=re.escape("steps must be an int >= 1, got 0.")):
        loss_fn.step_noise(4, steps=0)


@pytest.mark.parametrize("sampling", ["weights", "local"])
def test_a_batch_of_paths_has_the_loss_of_its_flattened_transitions(sampling):
    model = DynamicsModel.build(OBS, ACT, [16], sampling=sampling, standardize=False)
    loss_fn = VariationalELBOLoss(model, num_samples=3)
    flat = _transitions(batch=12)
    torch.manual_seed(3)
    expected = loss_fn(flat)
    torch.manual_seed(3)
    got = loss_fn(flat.reshape(3, 4))
    for key in ("loss_nll", "loss_kl"):
        torch.testing.assert_close(got[key], expected[key])


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"kl_weight": -0.1}, "kl_weight must be a finite number >= 0, got -0.1."),
        ({"kl_estimator": "mc"},
         "kl_estimator must be one of ('analytic', 'monte_carlo'), got 'mc'."),
        ({"reduction": "none"}, "reduction must be one of ('sum', 'mean'), got 'none'."),
    ],
)
def test_bad_construction_is_refused_with_the_whole_message(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        VariationalELBOLoss(_model(), **kwargs)


def test_the_refusals_of_a_model_say_the_whole_reason():
    for model, message in (
        (nn.Linear(5, 3), "model must be a DynamicsModel, got Linear: wrap the network once, "
         "DynamicsModel(network, ...), and give that one object to the loss and to the bonus "
         "transform, so both see the same standardised data."),
        (DynamicsModel(EnsembleMLP(5, 3, [8])),
         "VariationalELBOLoss trains a BayesianMLP; this model holds a EnsembleMLP."),
    ):
        with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
            VariationalELBOLoss(model)
    local = DynamicsModel.build(OBS, ACT, [8], sampling="local")
    message = ("kl_estimator='monte_carlo' needs the sampled weights: a model with a local "
               "sampling draws pre-activations instead; use the analytic KL.")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        VariationalELBOLoss(local, kl_estimator="monte_carlo")


@pytest.mark.parametrize("missing", ["observation", "action", "next_observation"])
def test_a_missing_key_is_named_with_the_keys_present(missing):
    key = ("next", "observation") if missing == "next_observation" else missing
    td = _transitions().exclude(key)
    present = [k for k in (["observation", "action", ("next", "observation")]) if k != key]
    message = (f"{missing} key {key!r} not found in the tensordict; set it with "
               f"loss.set_keys({missing}=...). Keys present: {present}.")
    with pytest.raises(KeyError, match=re.escape(message)):
        VariationalELBOLoss(_model())(td)


def test_the_defaults_are_the_papers():
    # N = 10 samples of q (paper), the ELBO's own weight of 1 on the KL, its closed form, summed
    loss_fn = VariationalELBOLoss(_model())
    assert (loss_fn.num_samples, loss_fn.kl_weight, loss_fn.kl_estimator, loss_fn.reduction) == (
        10, 1.0, "analytic", "sum")
