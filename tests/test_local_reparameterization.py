"""Local reparameterisation: pre-activations drawn row by row (``sampling="local"``) or with one
draw per unit shared by the rows (``"local_shared"``, the VASE authors' layer) instead of weight
sets. The hand gradients equal autograd's, the per-transition distribution equals weight
sampling's (checked by Monte Carlo), and what needs the weights themselves refuses it."""

import math

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from torchrl_vase import (
    DynamicsModel,
    Exploration,
    SurpriseRewardTransform,
    VariationalELBOLoss,
    prediction_nll,
    vime_information_gain,
)

LOCAL = ("local", "local_shared")


def _model(sampling: str, cells=(16, 8), activation=nn.Tanh, seed=0) -> DynamicsModel:
    torch.manual_seed(seed)
    return DynamicsModel.build(3, 2, list(cells), activation, standardize=False,
                               sampling=sampling, dtype=torch.float64)


@pytest.mark.parametrize("sampling", LOCAL)
def test_each_transition_has_the_distribution_of_weight_sampling(sampling):
    # per transition, E[NLL] agrees: the draws differ, the distribution not
    weights, local = _model("weights"), _model(sampling)
    local.load_state_dict(weights.state_dict())
    obs, action = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    next_obs = torch.randn(4, 3, dtype=torch.float64)
    draws = 20_000
    a = prediction_nll(weights.network, obs, action, next_obs, num_samples=draws, sigma_c=1.0)
    b = prediction_nll(local.network, obs, action, next_obs, num_samples=draws, sigma_c=1.0)
    error = ((a.var(0) + b.var(0)) / draws).sqrt()
    assert ((a.mean(0) - b.mean(0)).abs() < 5 * error).all(), (a.mean(0), b.mean(0), error)
    # per row, the draws of one transition are no longer shared with the others: rows
    # decorrelate; shared by the rows, one draw moves every row's pre-activations together
    rows_a, rows_b = torch.corrcoef(a.T)[0, 1:], torch.corrcoef(b.T)[0, 1:]
    if sampling == "local":
        assert rows_b.abs().max() < rows_a.abs().max()
    else:
        assert rows_b.abs().min() > 0.05, rows_b


@pytest.mark.parametrize("sampling", LOCAL)
def test_the_elbo_trains_with_local_reparameterization(sampling):
    model = _model(sampling, (16,), nn.ReLU)
    bonus = SurpriseRewardTransform(model, measure="vase", eta=1e-3, delta=0.0)
    exploration = Exploration(bonus, bonus.make_loss(num_samples=5), pool_min=50,
                              updates_per_iteration=200, batch_size=10, lr=1e-2)
    obs = torch.randn(2, 100, 3, dtype=torch.float64)
    action = torch.randn(2, 100, 2, dtype=torch.float64)
    batch = TensorDict({"observation": obs, "action": action,
                        "next": {"observation": obs + 0.5 * action[..., :1],
                                 "reward": torch.zeros(2, 100, 1, dtype=torch.float64)}},
                       [2, 100])
    first = exploration.fit(batch.clone())
    rewarded = batch.clone()
    second = exploration.reward(rewarded) | exploration.fit(rewarded)
    assert second["bnn/elbo"] > first["bnn/elbo"] and math.isfinite(second["bonus/mean"])


@pytest.mark.parametrize("sampling", LOCAL)
def test_what_needs_the_weights_refuses_local_reparameterization(sampling):
    model = _model(sampling)
    with pytest.raises(ValueError, match="measure='vime' needs weight sampling"):
        SurpriseRewardTransform(model, measure="vime")
    with pytest.raises(ValueError, match="needs weight sampling"):
        vime_information_gain(model.network, *(torch.randn(4, d, dtype=torch.float64)
                                               for d in (3, 2, 3)))
    with pytest.raises(ValueError, match="kl_estimator='monte_carlo' needs the sampled weights"):
        VariationalELBOLoss(model, kl_estimator="monte_carlo")


def test_shared_noise_is_one_draw_per_unit_for_every_row():
    # the authors' layer: with the means at zero and one row twice, both rows get the same draw
    model = _model("local_shared", (16,), nn.ReLU)
    torch.manual_seed(3)
    out = model.network.sample_outputs(torch.ones(2, 5, dtype=torch.float64), 4)
    assert out.shape == (4, 2, 3)
    torch.testing.assert_close(out[:, 0], out[:, 1], rtol=1e-12, atol=1e-12)
    assert (out[0] - out[1]).abs().max() > 1e-3  # each draw its own
    per_row = _model("local", (16,), nn.ReLU).network.sample_outputs(
        torch.ones(2, 5, dtype=torch.float64), 4)
    assert (per_row[:, 0] - per_row[:, 1]).abs().max() > 1e-3


def test_an_unknown_sampling_is_refused():
    with pytest.raises(ValueError, match=r"sampling must be one of \('weights', 'local', "
                                         r"'local_shared'\), got 'shared'"):
        DynamicsModel.build(3, 2, sampling="shared")
