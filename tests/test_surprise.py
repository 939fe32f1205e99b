import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from torch import Tensor, nn
from torch.distributions import Normal, kl_divergence

from torchrl_vase import (
    BayesianMLP,
    DynamicsModel,
    VariationalELBOLoss,
    nll_surprise,
    prediction_nll,
    vase_surprise,
    vime_information_gain,
)
from torchrl_vase._validation import check_positive_int
from torchrl_vase.gaussian import gaussian_nll, squared_error_nll
from torchrl_vase.surprise import (
    _flat_transitions,
    _inverse_rho_hessian,
    _sums_over_sample_pairs,
)


def vime_information_gain_exact(  # the slow reference, one update a transition
    model: BayesianMLP,
    obs: Tensor,
    action: Tensor,
    next_obs: Tensor,
    *,
    num_samples: int = 10,
    sigma_c: float = 5.0,
    step_size: float = 0.01,
    num_steps: int = 1,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Reference Bayesian surprise: update q on each single transition, return ``KL(q_after ‖ q)``.

    For each transition (a Python loop: this is the slow reference, one backward pass per
    transition and step, as VIME's original), it takes ``num_steps`` preconditioned steps
    ``φ ← φ − λ H⁻¹ ∇_φ [NLL(φ) + KL(q_φ ‖ q)]`` (VIME's second-order update, the same noise as
    ``vime_information_gain`` for the same ``generator`` state) on a functional copy of
    (μ, ρ) and computes the exact KL between the factorised Gaussians. The model is not modified.
    For a small λ and one step, ``vime_information_gain`` ≈ 2 × this value.
    """
    check_positive_int("num_steps", num_steps)
    x, y, batch_shape = _flat_transitions(model, obs, action, next_obs, sigma_c, step_size)
    with torch.no_grad():
        noise = model.sample_noise(num_samples, generator=generator)
    mu_old, rho_old = model.mu.detach(), model.rho.detach()
    sigma_old = F.softplus(rho_old)

    old = Normal(mu_old, sigma_old)

    def kl_to_old(mu: Tensor, rho: Tensor) -> Tensor:
        return kl_divergence(Normal(mu, F.softplus(rho)), old).sum()

    gains = []
    with torch.enable_grad():
        for x_t, y_t in zip(x, y, strict=True):
            mu, rho = mu_old.clone(), rho_old.clone()
            for _ in range(num_steps):
                mu.requires_grad_(True)
                rho.requires_grad_(True)
                theta = mu + F.softplus(rho) * noise
                prediction = model.apply_weights(x_t.unsqueeze(0), model.unflatten(theta))
                loss = squared_error_nll(prediction, y_t.unsqueeze(0), sigma_c).mean()
                loss = loss + kl_to_old(mu, rho)
                grad_mu, grad_rho = torch.autograd.grad(loss, (mu, rho))
                with torch.no_grad():
                    mu = mu - step_size * sigma_old.square() * grad_mu
                    rho = rho - step_size * _inverse_rho_hessian(rho) * grad_rho
            with torch.no_grad():
                gains.append(kl_to_old(mu, rho))
    return torch.stack(gains).reshape(batch_shape)


OBS, ACT, N = 3, 2, 7
SIGMA_C = 0.8


def _model(num_cells=(16,), activation=nn.Tanh, seed=0):
    torch.manual_seed(seed)
    model = BayesianMLP(OBS + ACT, OBS, list(num_cells), activation, dtype=torch.float64)
    with torch.no_grad():  # a posterior away from its initial value
        model.rho.add_(torch.randn_like(model.rho) * 0.5 - 1.0)
    return model


def _transitions(batch=(11,), seed=1):
    gen = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(*batch, dim, generator=gen, dtype=torch.float64) for dim in (OBS, ACT, OBS)
    )


def _gen(seed=5):
    return torch.Generator().manual_seed(seed)


def _numpy_forward(model, x, weights, activation):
    """Independent float64 forward of every weight sample: [N, T, out]."""
    outs = []
    for n in range(weights[0][0].shape[0]):
        h = x
        for i, (w, b) in enumerate(weights):
            h = h @ w[n].numpy().T + b[n].numpy()
            if i < len(weights) - 1:
                h = activation(h)
        outs.append(h)
    return np.stack(outs)


def _numpy_sample_nll(model, obs, action, next_obs, activation=np.tanh, seed=5,
                      sigma_c=SIGMA_C):
    """The authors' per-sample surprise ``‖s' − f_n‖² / (2σ_c²)`` (no normaliser): [N, T]."""
    weights = [(w.detach(), b.detach()) for w, b in model.sample_weights(N, generator=_gen(seed))]
    x = np.concatenate([obs.numpy(), action.numpy()], -1)
    prediction = _numpy_forward(model, x, weights, activation)
    squared = ((next_obs.numpy() - prediction) ** 2).sum(-1)
    return squared / (2 * sigma_c**2)


def _numpy_entropy(model):
    sigma = np.log1p(np.exp(model.rho.detach().numpy()))
    return 0.5 * np.log(2 * np.pi * np.e * sigma**2).sum()


def test_vase_matches_an_independent_computation():
    model = _model()
    obs, action, next_obs = _transitions()
    delta = 3e-3
    got = vase_surprise(
        model, obs, action, next_obs, num_samples=N, sigma_c=SIGMA_C, delta=delta, generator=_gen()
    )
    expected = _numpy_sample_nll(model, obs, action, next_obs).mean(0) - delta * _numpy_entropy(
        model
    )
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)


def test_vase_with_delta_zero_is_the_authors_mean_squared_error_over_two_sigma_squared():
    model = _model()
    obs, action, next_obs = _transitions()
    got = vase_surprise(
        model, obs, action, next_obs, num_samples=N, sigma_c=SIGMA_C, delta=0.0, generator=_gen()
    )
    predictions = model(obs, action, weights=model.sample_weights(N, generator=_gen()))
    squared_error = (next_obs - predictions).square().sum(-1).mean(0)
    # no Gaussian normaliser D·log(√(2π)σ_c): the authors' surprise() adds it back
    torch.testing.assert_close(got, squared_error.detach() / (2 * SIGMA_C**2))
    assert got.min() >= 0


@pytest.mark.parametrize("measure", ["vase", "nll"])
def test_the_bonus_times_sigma_c_squared_does_not_depend_on_sigma_c(measure):
    """Without a constant, U is the squared error over 2σ_c² (VASE) or a log-mean-exp of such
    terms (NLL, where σ_c also sets the mixture's temperature: its limit for a large σ_c)."""
    model = _model()
    obs, action, next_obs = _transitions()
    if measure == "vase":
        scaled = [
            sigma_c**2 * vase_surprise(model, obs, action, next_obs, num_samples=N,
                                       sigma_c=sigma_c, delta=0.0, generator=_gen())
            for sigma_c in (0.5, 1.0, 5.0, 50.0)
        ]
        for value in scaled[1:]:
            torch.testing.assert_close(value, scaled[0], rtol=1e-12, atol=0)
        return
    # NLL: exactly the mixture of the closed-form terms at every σ_c, and it tends to VASE's
    # value (the mean) as σ_c grows, both times σ_c²
    for sigma_c in (0.5, 5.0):
        terms = _numpy_sample_nll(model, obs, action, next_obs, sigma_c=sigma_c)
        expected = np.log(N) - np.logaddexp.reduce(-terms, axis=0)
        got = nll_surprise(model, obs, action, next_obs, num_samples=N, sigma_c=sigma_c,
                           generator=_gen())
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)
    wide = 1e4**2 * nll_surprise(model, obs, action, next_obs, num_samples=N, sigma_c=1e4,
                                 generator=_gen())
    mean = vase_surprise(model, obs, action, next_obs, num_samples=N, sigma_c=1.0, delta=0.0,
                         generator=_gen())
    torch.testing.assert_close(wide, mean, rtol=1e-6, atol=0)


def test_a_tenfold_sigma_c_divides_the_bonus_by_a_hundred_on_fixed_weights_and_inputs():
    """bars/42: U(σ_c = 0.5) / U(σ_c = 5) = 100 with δ = 0 (a constant would break it)."""
    torch.manual_seed(0)
    model = BayesianMLP(OBS + ACT, OBS, [32])  # float32, as a run's
    obs, action, next_obs = (t.float() for t in _transitions())
    tight, loose = (vase_surprise(model, obs, action, next_obs, sigma_c=sigma_c, delta=0.0,
                                  generator=_gen()) for sigma_c in (0.5, 5.0))
    torch.testing.assert_close(tight / loose, torch.full_like(tight, 100.0), rtol=1e-5, atol=0)


def test_prediction_nll_with_its_normaliser_is_the_gaussian_s_log_density():
    model = _model()
    obs, action, next_obs = _transitions()
    full = prediction_nll(model, obs, action, next_obs, num_samples=N, sigma_c=SIGMA_C,
                          normalised=True, generator=_gen())
    weights = model.sample_weights(N, generator=_gen())
    predictions = model(obs, action, weights=weights).detach()
    expected = -torch.distributions.Normal(predictions, SIGMA_C).log_prob(next_obs).sum(-1)
    torch.testing.assert_close(full, expected)
    errors = prediction_nll(model, obs, action, next_obs, num_samples=N, sigma_c=SIGMA_C,
                            generator=_gen())
    torch.testing.assert_close(full - errors, torch.full_like(full, OBS * math.log(
        SIGMA_C * math.sqrt(2 * math.pi))))


def test_gaussian_nll_is_the_log_density_summed_over_the_last_dim_of_any_batch_shape():
    # [samples, rows, features] with rows != features: the normaliser counts the features only
    generator = torch.Generator().manual_seed(3)
    prediction, target = torch.randn(2, 5, 3, generator=generator), torch.randn(2, 5, 3)
    expected = -Normal(prediction, SIGMA_C).log_prob(target).sum(-1)
    torch.testing.assert_close(gaussian_nll(prediction, target, SIGMA_C), expected)


def test_nll_surprise_matches_an_independent_mixture_density():
    model = _model()
    obs, action, next_obs = _transitions()
    got = nll_surprise(
        model, obs, action, next_obs, num_samples=N, sigma_c=SIGMA_C, generator=_gen()
    )
    sample_nll = _numpy_sample_nll(model, obs, action, next_obs)
    # −log((1/N) Σ_n exp(−nll_n)), with the max shifted out for stability
    low = sample_nll.min(0)
    expected = low - np.log(np.exp(-(sample_nll - low)).mean(0))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)


@pytest.mark.parametrize("batch", [(1,), (40,), (4, 6)])
def test_mixture_nll_never_exceeds_the_mean_nll(batch):
    model = _model(seed=3)
    obs, action, next_obs = _transitions(batch, seed=4)
    kwargs = {"num_samples": N, "sigma_c": SIGMA_C}
    mixture = nll_surprise(model, obs, action, next_obs, generator=_gen(), **kwargs)
    mean = vase_surprise(model, obs, action, next_obs, delta=0.0, generator=_gen(), **kwargs)
    assert mixture.shape == batch
    assert (mixture <= mean + 1e-12).all()
    assert (mixture < mean - 1e-6).any()  # strictly, where the samples disagree


def _inverse_hessians_from_the_spec(model):
    sigma = torch.log1p(torch.exp(model.rho.detach()))
    rho = model.rho.detach()
    h_rho = 2 * torch.exp(2 * rho) / ((1 + torch.exp(rho)) ** 2 * sigma**2)
    return sigma**2, 1 / h_rho


@pytest.mark.parametrize(
    ("num_cells", "wide_input", "summed_over_pairs"),
    [((8, 8), False, [False, False, False]), ((24, 24), False, [False, True, False]),
     ((24, 24), True, [True, True, True])],
)
def test_vime_matches_per_transition_autograd_gradients(num_cells, wide_input, summed_over_pairs):
    # (24, 24) takes both of vime_information_gain's forms: sample pairs for the 24 × 24 layer;
    # with 12 more observation features, also for the first layer (its input shared by samples)
    extra = 12 if wide_input else 0
    torch.manual_seed(0)
    model = BayesianMLP(OBS + extra + ACT, OBS + extra, list(num_cells), nn.Tanh,
                        dtype=torch.float64)
    with torch.no_grad():
        model.rho.add_(torch.randn_like(model.rho) * 0.5 - 1.0)
    layer_shapes = [w.shape[-2:] for w, _ in model.unflatten(model.mu)]
    assert [_sums_over_sample_pairs(*shape, N) for shape in layer_shapes] == summed_over_pairs
    gen = torch.Generator().manual_seed(1)
    obs, action, next_obs = (torch.randn(9, dim, generator=gen, dtype=torch.float64)
                             for dim in (OBS + extra, ACT, OBS + extra))
    step = 0.01
    got = vime_information_gain(
        model, obs, action, next_obs, num_samples=N, sigma_c=SIGMA_C, step_size=step,
        generator=_gen(), chunk_size=4,
    )
    noise = model.sample_noise(N, generator=_gen())
    inv_h_mu, inv_h_rho = _inverse_hessians_from_the_spec(model)
    expected = []
    for t in range(obs.shape[0]):  # one backward pass per transition, as VIME's original does
        mu = model.mu.detach().clone().requires_grad_(True)
        rho = model.rho.detach().clone().requires_grad_(True)
        theta = mu + torch.log1p(torch.exp(rho)) * noise
        prediction = model.apply_weights(
            torch.cat([obs[t], action[t]]).unsqueeze(0), model.unflatten(theta)
        )
        nll = ((next_obs[t] - prediction) ** 2).sum(-1) / (2 * SIGMA_C**2)
        g_mu, g_rho = torch.autograd.grad(nll.mean(), (mu, rho))
        expected.append(step**2 * ((g_mu**2 * inv_h_mu).sum() + (g_rho**2 * inv_h_rho).sum()))
    torch.testing.assert_close(got, torch.stack(expected))


def test_vime_of_a_frozen_model_is_the_trainable_model_s():
    # the per-transition gradients flow from the first pre-activation, not from the parameters
    model, transitions = _model(), _transitions((6,))
    trainable = vime_information_gain(model, *transitions, num_samples=N, generator=_gen())
    model.requires_grad_(False)
    frozen = vime_information_gain(model, *transitions, num_samples=N, generator=_gen())
    torch.testing.assert_close(frozen, trainable, rtol=0, atol=0)


def test_the_defaults_are_the_papers():
    # N = 10 weight samples (paper and VIME), VIME's step size 0.01 and its clip at 1,000
    model, transitions = _model(), _transitions((5,))
    assert prediction_nll(model, *transitions).shape == (10, 5)
    torch.testing.assert_close(
        vime_information_gain(model, *transitions, generator=_gen()),
        vime_information_gain(model, *transitions, num_samples=10, step_size=0.01,
                              generator=_gen()), rtol=0, atol=0)
    obs, action, next_obs = transitions
    huge = vime_information_gain(model, obs, action, 1e4 * next_obs, sigma_c=1e-3,
                                 generator=_gen())
    assert huge.max() == 1000.0


def test_measures_of_a_batch_with_several_dims_are_those_of_its_flattened_rows():
    model = _model()
    batch = _transitions((2, 4))
    flat = tuple(part.reshape(8, -1) for part in batch)
    for measure, kwargs in ((vime_information_gain, {}), (prediction_nll, {"normalised": True}),
                            (vase_surprise, {})):
        got = measure(model, *batch, generator=_gen(), **kwargs)
        expected = measure(model, *flat, generator=_gen(), **kwargs)
        torch.testing.assert_close(got, expected.reshape(got.shape))


def test_vime_second_order_value_is_twice_the_exact_kl_for_a_small_step():
    model = _model()
    obs, action, next_obs = _transitions((6,))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    kwargs = {"num_samples": N, "sigma_c": SIGMA_C, "step_size": 1e-4}
    second_order = vime_information_gain(model, obs, action, next_obs, generator=_gen(), **kwargs)
    exact = vime_information_gain_exact(model, obs, action, next_obs, generator=_gen(), **kwargs)
    assert (exact > 0).all()
    # VIME's code omits the ½ of the second-order expansion of KL(q_after ‖ q)
    torch.testing.assert_close(second_order, 2 * exact, rtol=1e-3, atol=0)
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key  # parameters restored / untouched


def test_vime_is_clipped_and_works_under_no_grad_without_touching_grads():
    model = _model()
    obs, action, next_obs = _transitions()
    with torch.no_grad():
        gain = vime_information_gain(
            model, obs, action, 100 * next_obs, sigma_c=0.01, clip=5.0, generator=_gen()
        )
    assert gain.max() == 5.0 and gain.min() >= 0
    assert model.mu.grad is None and model.rho.grad is None


def test_measures_return_one_value_per_transition_for_any_batch_shape():
    model = _model()
    obs, action, next_obs = _transitions((2, 3, 4))
    for measure in (vase_surprise, nll_surprise, vime_information_gain):
        assert measure(model, obs, action, next_obs).shape == (2, 3, 4)
    assert prediction_nll(model, obs, action, next_obs, num_samples=5).shape == (5, 2, 3, 4)


def _linear_dynamics(n, seed, shift=0.0):
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, OBS, generator=gen) + shift
    action = torch.randn(n, ACT, generator=gen)
    next_obs = 0.9 * obs + 0.3 * action.sum(-1, keepdim=True)
    return obs, action, next_obs


def test_surprise_drops_for_trained_transitions_and_stays_high_for_novel_ones():
    torch.manual_seed(0)
    model = BayesianMLP(OBS + ACT, OBS, [32])
    obs, action, next_obs = _linear_dynamics(2000, seed=1)
    data = TensorDict(
        {"observation": obs, "action": action, ("next", "observation"): next_obs}, [2000]
    )
    # raw data on both sides: the surprise functions take the network and prepared data
    loss_fn = VariationalELBOLoss(
        DynamicsModel(model, sigma_c=0.5, standardize=False), kl_weight=50 / 2000
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    familiar, novel = _linear_dynamics(300, seed=2), _linear_dynamics(300, seed=3, shift=6.0)
    kwargs = {"sigma_c": 0.5, "generator": _gen()}

    def surprises(transitions):
        return {
            "vase": vase_surprise(model, *transitions, delta=0.0, **kwargs).median(),
            "nll": nll_surprise(model, *transitions, **kwargs).median(),
            "vime": vime_information_gain(model, *transitions, **kwargs).median(),
        }

    before = surprises(familiar)
    for _ in range(10):
        for idx in torch.randperm(2000).split(50):
            out = loss_fn(data[idx])
            optimizer.zero_grad()
            (out["loss_nll"] + out["loss_kl"]).backward()
            optimizer.step()
    after, unseen = surprises(familiar), surprises(novel)
    for measure in ("vase", "nll", "vime"):
        assert after[measure] < 0.5 * before[measure], (measure, before, after)
        assert unseen[measure] > 5 * after[measure], (measure, after, unseen)


@pytest.mark.parametrize(
    "mutate,error,match",
    [
        (lambda o, a, n: (o[:, :2], a, n), ValueError, "in_features"),
        (lambda o, a, n: (o, a, n[:, :2]), ValueError, "next_obs has 2 features"),
        (lambda o, a, n: (o, a[:5], n), ValueError, "share their batch dims"),
        (lambda o, a, n: (o, a, n.float()), TypeError, "next_obs has dtype"),
        (lambda o, a, n: (o, a, n * float("nan")), ValueError, "non-finite"),
        (lambda o, a, n: (o * float("inf"), a, n), ValueError, "non-finite"),
        (lambda o, a, n: (o, a.long(), n), TypeError, "one-hot"),
    ],
)
def test_bad_transitions_raise(mutate, error, match):
    model = _model()
    for measure in (vase_surprise, nll_surprise, vime_information_gain):
        with pytest.raises(error, match=match):
            measure(model, *mutate(*_transitions()))


@pytest.mark.parametrize(
    "mutate,error,message",
    [
        (lambda o, a, n: (o[0, 0, 0], a, n), ValueError,
         "obs must be a tensor of shape [*batch, features]."),
        (lambda o, a, n: (o.tolist(), a, n), ValueError,
         "obs must be a tensor of shape [*batch, features]."),
        (lambda o, a, n: (o, a[0, 0, 0], n), ValueError,
         "action must be a tensor of shape [*batch, features]."),
        (lambda o, a, n: (o, a, n[0, 0, 0]), ValueError,
         "next_obs must be a tensor of shape [*batch, features]."),
        (lambda o, a, n: (o, a[:, :1], n[:, :1]), ValueError,
         "obs, action and next_obs must share their batch dims; got (2, 4, 3), (2, 1, 2) and "
         "(2, 1, 3)."),
        (lambda o, a, n: (o, a, n[..., :2]), ValueError,
         "next_obs has 2 features; the model has out_features=3."),
        (lambda o, a, n: (o, a, n * float("nan")), ValueError,
         "next_obs contains non-finite values (nan or inf)."),
    ],
)
def test_bad_transitions_are_refused_with_the_whole_message(mutate, error, message):
    model = _model()
    for measure in (vase_surprise, nll_surprise, vime_information_gain):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            measure(model, *mutate(*_transitions((2, 4))))


def test_bad_arguments_are_refused_with_the_whole_message():
    transitions = _transitions()
    for call, message in (
        (lambda: vase_surprise(nn.Linear(5, 3), *transitions),
         "model must be a BayesianMLP, got Linear."),
        (lambda: vime_information_gain(_model(), *transitions, step_size=-1.0),
         "step_size must be a finite number > 0, got -1.0."),
        (lambda: vime_information_gain(_model(), *transitions, clip=0),
         "clip must be a finite number > 0, got 0.0."),
        (lambda: vime_information_gain(
            BayesianMLP(OBS + ACT, OBS, [4], sampling="local", dtype=torch.float64),
            *transitions),
         "VIME's information gain is a gradient with respect to the weights: it needs weight "
         "sampling (a model with sampling='weights')."),
    ):
        with pytest.raises((TypeError, ValueError), match=f"^{re.escape(message)}$"):
            call()


def test_bad_arguments_raise():
    model, transitions = _model(), _transitions()
    with pytest.raises(ValueError, match="num_samples"):
        vase_surprise(model, *transitions, num_samples=0)
    with pytest.raises(ValueError, match="sigma_c"):
        nll_surprise(model, *transitions, sigma_c=0.0)
    with pytest.raises(ValueError, match="step_size"):
        vime_information_gain(model, *transitions, step_size=-1.0)
    with pytest.raises(ValueError, match="delta"):
        vase_surprise(model, *transitions, delta=float("nan"))
    with pytest.raises(TypeError, match="BayesianMLP"):
        vase_surprise(nn.Linear(5, 3), *transitions)
