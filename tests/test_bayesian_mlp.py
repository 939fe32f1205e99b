import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torch.distributions import Normal, kl_divergence

from torchrl_vase import BayesianMLP


def _random_posterior(model: BayesianMLP, seed: int = 0) -> None:
    """Move every μ and ρ away from its initial value so the closed forms are exercised."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("rho"):
                param.copy_(torch.randn(param.shape, generator=gen) - 1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=gen))


def _distributions(model: BayesianMLP) -> tuple[Normal, Normal]:
    mu, sigma = model.mu, model.posterior_std()
    return Normal(mu, sigma), Normal(torch.zeros_like(mu), torch.full_like(mu, model.prior_std))


@pytest.mark.parametrize("num_cells", [[], [32], [64, 64]])
def test_entropy_and_kl_match_torch_distributions(num_cells):
    model = BayesianMLP(5, 3, num_cells, prior_std=0.7, dtype=torch.float64)
    _random_posterior(model)
    q, prior = _distributions(model)
    torch.testing.assert_close(model.entropy(), q.entropy().sum())
    torch.testing.assert_close(model.kl_divergence(), kl_divergence(q, prior).sum())


def test_parameter_count_covers_weights_and_biases():
    model = BayesianMLP(4, 3, [32])
    assert model.num_parameters == 4 * 32 + 32 + 32 * 3 + 3
    assert model.posterior_std().shape == (model.num_parameters,)
    # softplus(ρ) starts at the prior std by default, and at the given value otherwise
    torch.testing.assert_close(model.posterior_std(), torch.full((model.num_parameters,), 0.5))
    narrow = BayesianMLP(4, 3, [32], init_posterior_std=0.01)
    torch.testing.assert_close(narrow.posterior_std(), torch.full((narrow.num_parameters,), 0.01))


def test_entropy_and_kl_are_differentiable():
    model = BayesianMLP(3, 2, [8])
    (model.entropy() + model.kl_divergence()).backward()
    for param in model.parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all()


def _reference_forward(x, weights, activation):
    """An independent single-weight-set MLP, layer by layer."""
    h = x
    for i, (w, b) in enumerate(weights):
        h = h @ w.T + b
        if i < len(weights) - 1:
            h = activation(h)
    return h


@pytest.mark.parametrize(
    "num_cells,activation_class", [([32], nn.ReLU), ([64, 64], nn.Tanh), ([], nn.ReLU)]
)
def test_batched_forward_equals_separate_forwards(num_cells, activation_class):
    torch.manual_seed(0)
    model = BayesianMLP(6, 4, num_cells, activation_class, dtype=torch.float64)
    x = torch.randn(7, 5, 6, dtype=torch.float64)  # two batch dims
    num_samples = 10
    weights = model.sample_weights(num_samples)
    batched = model(x, weights=weights)
    assert batched.shape == (num_samples, 7, 5, 4)
    for n in range(num_samples):
        single = [(w[n], b[n]) for w, b in weights]
        torch.testing.assert_close(batched[n], model(x, weights=single))
        torch.testing.assert_close(batched[n], _reference_forward(x, single, activation_class()))


def test_large_batches_are_blocked_without_changing_the_result():
    # 3,000 rows x 10 samples x 64 units is larger than one cache block: exercises the blocking
    torch.manual_seed(0)
    model = BayesianMLP(26, 20, [64, 64], nn.Tanh)
    x = torch.randn(3, 1000, 26)
    weights = model.sample_weights(10)
    batched = model(x, weights=weights)
    assert batched.shape == (10, 3, 1000, 20)
    for n in (0, 9):
        expected = _reference_forward(x, [(w[n], b[n]) for w, b in weights], nn.Tanh())
        torch.testing.assert_close(batched[n], expected, atol=1e-5, rtol=1e-5)


def test_num_samples_draws_distinct_weight_sets_shared_across_the_batch():
    torch.manual_seed(0)
    model = BayesianMLP(3, 2, [16])
    x = torch.randn(1, 3).expand(4, 3)  # four copies of one input
    out = model(x, num_samples=5)
    assert out.shape == (5, 4, 2)
    # one weight set per sample, shared by the batch: identical inputs give identical outputs
    torch.testing.assert_close(out, out[:, :1].expand_as(out))
    # and different samples differ
    assert (out[0] - out[1]).abs().max() > 1e-3


def test_sampling_follows_the_posterior():
    torch.manual_seed(0)
    model = BayesianMLP(2, 1, [], init_posterior_std=0.3)
    _random_posterior(model, seed=3)
    theta = model.sample_parameters(20000)
    torch.testing.assert_close(theta.mean(0), model.mu.detach(), atol=0.02, rtol=0)
    sigma = nn.functional.softplus(model.rho).detach()
    torch.testing.assert_close(theta.std(0), sigma, atol=0.02, rtol=0.02)
    # the per-layer views are slices of the same draw
    (weight, bias), = model.unflatten(theta)
    torch.testing.assert_close(weight.reshape(20000, -1), theta[:, :2])
    torch.testing.assert_close(bias, theta[:, 2:])


def test_mean_forward_uses_the_means_and_single_sample_is_unbatched():
    torch.manual_seed(0)
    model = BayesianMLP(3, 2, [8])
    x = torch.randn(4, 3)
    torch.testing.assert_close(model(x, use_mean=True), model(x, weights=model.mean_weights()))
    torch.testing.assert_close(
        model(x, use_mean=True), _reference_forward(x, model.mean_weights(), nn.ReLU())
    )
    assert model(x).shape == (4, 2)
    assert model(x[0]).shape == (2,)  # no batch dim at all


def test_several_inputs_are_concatenated():
    torch.manual_seed(0)
    model = BayesianMLP(5, 2, [8])
    obs, action = torch.randn(4, 3), torch.randn(4, 2)
    weights = model.sample_weights(3)
    torch.testing.assert_close(
        model(obs, action, weights=weights), model(torch.cat([obs, action], -1), weights=weights)
    )


def test_works_inside_tensordict_module():
    torch.manual_seed(0)
    model = BayesianMLP(4, 3, [8])
    module = TensorDictModule(model, in_keys=["observation", "action"], out_keys=["prediction"])
    td = TensorDict({"observation": torch.randn(6, 3), "action": torch.randn(6, 1)}, [6])
    torch.manual_seed(1)
    module(td)
    torch.manual_seed(1)
    expected = model(td["observation"], td["action"])
    torch.testing.assert_close(td["prediction"], expected)


def test_state_dict_round_trip():
    torch.manual_seed(0)
    model = BayesianMLP(4, 3, [16, 16], nn.Tanh)
    _random_posterior(model)
    clone = BayesianMLP(4, 3, [16, 16], nn.Tanh)
    clone.load_state_dict(model.state_dict())
    x = torch.randn(5, 4)
    torch.testing.assert_close(clone(x, use_mean=True), model(x, use_mean=True))
    torch.manual_seed(7)
    sampled = model(x, num_samples=3)
    torch.manual_seed(7)
    torch.testing.assert_close(clone(x, num_samples=3), sampled)
    assert set(model.state_dict()) == {"mu", "rho"}


def test_monte_carlo_kl_from_log_density_ratio_matches_closed_form():
    torch.manual_seed(0)
    model = BayesianMLP(3, 2, [8], dtype=torch.float64)
    _random_posterior(model)
    with torch.no_grad():
        estimate = model.log_density_ratio(model.sample_parameters(20000)).mean()
        exact = model.kl_divergence()
    assert math.isclose(estimate.item(), exact.item(), rel_tol=0.02)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"prior_std": 0.0}, ValueError, "prior_std"),
        ({"prior_std": -1.0}, ValueError, "prior_std"),
        ({"prior_std": float("nan")}, ValueError, "prior_std"),
        ({"init_posterior_std": 0.0}, ValueError, "init_posterior_std"),
        ({"in_features": 0}, ValueError, "in_features"),
        ({"out_features": 2.5}, TypeError, "out_features"),
        ({"num_cells": 32}, ValueError, "num_cells"),
        ({"num_cells": [32, 0]}, ValueError, "num_cells"),
        ({"dtype": torch.int64}, TypeError, "dtype"),
    ],
)
def test_bad_construction_raises(kwargs, error, match):
    args = {"in_features": 3, "out_features": 2, **kwargs}
    with pytest.raises(error, match=match):
        BayesianMLP(**args)


@pytest.mark.parametrize(
    "make_input,call_kwargs,error,match",
    [
        (lambda: torch.randn(4, 5), {}, ValueError, "in_features=3"),
        (lambda: torch.randint(0, 3, (4, 3)), {}, TypeError, "floating point"),
        (lambda: torch.randn(4, 3, dtype=torch.float64), {}, TypeError, "float64"),
        (lambda: torch.tensor([[0.0, float("nan"), 1.0]]), {}, ValueError, "non-finite"),
        (lambda: torch.tensor([[0.0, float("inf"), 1.0]]), {}, ValueError, "non-finite"),
        (lambda: torch.tensor(1.0), {}, ValueError, "scalar"),
        (lambda: torch.randn(4, 3), {"num_samples": 0}, ValueError, "num_samples"),
        (lambda: torch.randn(4, 3), {"num_samples": 2.0}, TypeError, "num_samples"),
        (lambda: torch.randn(4, 3), {"num_samples": 2, "use_mean": True}, ValueError, "at most"),
    ],
)
def test_bad_forward_input_raises(make_input, call_kwargs, error, match):
    model = BayesianMLP(3, 2, [8])
    with pytest.raises(error, match=match):
        model(make_input(), **call_kwargs)


def test_bad_weights_raise():
    model = BayesianMLP(3, 2, [8])
    x = torch.randn(4, 3)
    weights = model.sample_weights(2)
    with pytest.raises(ValueError, match="one \\(weight, bias\\) pair per layer"):
        model(x, weights=weights[:1])
    with pytest.raises(ValueError, match="weights\\[1\\]"):
        model(x, weights=[weights[0], (weights[1][0][:, :, :4], weights[1][1])])
    with pytest.raises(ValueError, match="same N"):
        model(x, weights=[weights[0], (weights[1][0][0], weights[1][1][0])])


def _per_draw_squared_errors(model: BayesianMLP, x, y, draws, sampling) -> torch.Tensor:
    """The reference: each draw's network evaluated alone, in float64, from the weights
    (weight sampling) or the pre-activations' means, stds and noise (local samplings)."""
    x, y = x.double(), y.double()
    errors = []
    if sampling == "weights":
        for n in range(draws[0][0].shape[0]):
            h = x
            for i, (weight, bias) in enumerate(draws):
                h = h @ weight[n].double().T + bias[n].double()
                if i < len(draws) - 1:
                    h = model.activations[i](h)
            errors.append((y - h).square().sum(-1))
        return torch.stack(errors)
    means = model.unflatten(model.mu.detach().double())
    variances = model.unflatten(model.posterior_std().detach().double().square())
    for n in range(draws.shape[0]):
        h, offset = x, 0
        for i, ((mean_w, mean_b), (var_w, var_b)) in enumerate(zip(means, variances,
                                                                   strict=True)):
            width = mean_b.shape[0]
            xi = draws[n, :, offset:offset + width].double()  # [1 or rows, width]
            h = h @ mean_w.T + mean_b + (h.square() @ var_w.T + var_b).sqrt() * xi
            offset += width
            if i < len(means) - 1:
                h = model.activations[i](h)
        errors.append((y - h).square().sum(-1))
    return torch.stack(errors)


@pytest.mark.parametrize("sampling", ["weights", "local", "local_shared"])
@pytest.mark.parametrize("activation", [nn.Tanh, nn.ReLU])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_batchs_squared_errors_equal_each_draw_evaluated_alone(sampling, activation, dtype):
    torch.manual_seed(0)
    model = BayesianMLP(7, 3, [40, 24], activation, sampling=sampling, init_mean="normal",
                        dtype=dtype)
    _random_posterior(model)
    x, y = torch.randn(2000, 7, dtype=dtype), torch.randn(2000, 3, dtype=dtype)  # several blocks
    # float64: each tanh is libm's (float32's is the kernels' polynomial, to a few ulp)
    tolerance = ({"rtol": 2e-5, "atol": 1e-4} if dtype == torch.float32
                 else {"rtol": 1e-10, "atol": 1e-9})
    assert len(model._blocks(x, model.sample_output_noise(10, 2000))) > 1

    def generator():
        return torch.Generator().manual_seed(4)

    with torch.no_grad():  # the compiled layer passes (local samplings), in place otherwise
        errors = model.sample_squared_errors(x, y, 10, generator=generator())
    draws = (model.sample_weights(10, generator=generator()) if sampling == "weights"
             else model.sample_output_noise(10, 2000, generator=generator()))
    reference = _per_draw_squared_errors(model, x, y, draws, sampling)
    torch.testing.assert_close(errors.double(), reference, **tolerance)
    # with gradients: torch's calls, the same values, and a gradient
    differentiable = model.sample_squared_errors(x, y, 10, generator=generator())
    torch.testing.assert_close(differentiable.double(), reference, **tolerance)
    differentiable.mean().backward()
    assert model.rho.grad is not None and model.rho.grad.abs().sum() > 0


# ------------------------------------------------------------------------------------------------
# What mutation testing found untested (docs/mutation.md): each refusal's whole sentence, the
# initial means' laws, the draws' dtype and generator, several batch dims, several cache blocks
# of every sampling with and without gradients, and which evaluations the compiled passes serve
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"in_features": 0}, ValueError, "in_features must be an int >= 1, got 0."),
    ({"out_features": 2.5}, TypeError, "out_features must be an int >= 1, got 2.5."),
    ({"prior_std": 0.0}, ValueError, "prior_std must be a finite number > 0, got 0.0."),
    ({"init_posterior_std": -1.0}, ValueError,
     "init_posterior_std must be a finite number > 0, got -1.0."),
    ({"init_mean": "glorot"}, ValueError,
     "init_mean must be one of ('uniform', 'normal'), got 'glorot'."),
])
def test_a_refused_construction_says_which_argument_and_what_it_got(kwargs, error, message):
    with pytest.raises(error) as refused:
        BayesianMLP(**{"in_features": 3, "out_features": 2, **kwargs})
    assert str(refused.value) == message


@pytest.mark.parametrize("num_cells", [[1], [32, 1], [1, 1]])
def test_a_hidden_layer_of_one_unit_is_a_network(num_cells):
    model = BayesianMLP(3, 2, num_cells)
    assert model(torch.randn(4, 3), num_samples=2).shape == (2, 4, 2)


@pytest.mark.parametrize(("inputs", "error", "message"), [
    ((), TypeError, "BayesianMLP.forward needs at least one input tensor."),
    ((torch.randn(4, 2), [[0.0]] * 4), TypeError, "input 1 must be a torch.Tensor, got list."),
    ((torch.ones(4, 3, dtype=torch.int64),), TypeError,
     "input 0 has dtype torch.int64; BayesianMLP takes floating point inputs (one-hot encode "
     "discrete actions first)."),
    ((torch.randn(2, 5, 2), torch.randn(2, 5, 2)), ValueError,  # every dim its own size
     "inputs of shape (2, 5, 2), (2, 5, 2) give 4 features along the last dim; the model has "
     "in_features=3."),
    ((torch.tensor([[0.0, math.inf, 1.0]]),), ValueError,
     "inputs contain non-finite values (nan or inf)."),
])
def test_a_refused_input_says_which_and_why(inputs, error, message):
    with pytest.raises(error) as refused:
        BayesianMLP(3, 2, [8])(*inputs)
    assert str(refused.value) == message


def test_refused_weights_and_calls_say_so_in_full():
    model = BayesianMLP(3, 2, [8])
    x = torch.randn(4, 3)
    with pytest.raises(ValueError) as refused:
        model(x, num_samples=2, use_mean=True)
    assert str(refused.value) == "Pass at most one of num_samples, weights and use_mean."
    (w0, b0), (w1, b1) = model.sample_weights(2)
    cases = {  # each breaks one of the checks alone, in the last layer
        "leads differ": [(w0, b0), (w1, b1[:1].expand(3, 2))],
        "a bias of the wrong width": [(w0, b0), (w1, b1[:, :1])],
        "two leading dims": [(w.expand(2, *w.shape), b.expand(2, *b.shape))
                             for w, b in ((w0, b0), (w1, b1))],
    }
    for name, weights in cases.items():
        with pytest.raises(ValueError) as refused:
            model(x, weights=weights)
        index = 0 if name == "two leading dims" else 1
        (n_out, n_in) = model.layer_sizes[index][::-1]
        assert str(refused.value) == (
            f"weights[{index}] has shapes {tuple(weights[index][0].shape)} and "
            f"{tuple(weights[index][1].shape)}; expected ([N,] {(n_out, n_in)}) and ([N,] "
            f"{(n_out,)}) with the same N for every layer."), name
    size = model.num_parameters
    for theta in (torch.zeros(2, 2, size), torch.zeros(size + 1)):
        with pytest.raises(ValueError) as refused:
            model.log_density_ratio(theta)
        assert str(refused.value) == (f"flat parameters must have shape [{size}] or [N, {size}], "
                                      f"got {tuple(theta.shape)}.")
    # one flat sample is a scalar ratio, N of them N ratios
    assert model.log_density_ratio(model.sample_parameters().detach()).shape == ()
    assert model.log_density_ratio(model.sample_parameters(5).detach()).shape == (5,)


def test_initial_means_follow_their_laws():
    # uniform: torch.nn.Linear's U(±1/√fan_in) per layer, weights and biases
    torch.manual_seed(0)
    model = BayesianMLP(4, 3, [400, 100])
    for (weight, bias), (n_in, _) in zip(model.mean_weights(), model.layer_sizes, strict=True):
        bound = 1 / math.sqrt(n_in)
        for values in (weight, bias):
            assert values.abs().max() <= bound
            if values.numel() >= 100:  # both ends reached
                assert values.min() < -0.9 * bound and values.max() > 0.9 * bound
        assert weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    # normal: N(0, 1) for every mean (the authors' code), whatever the layer's width
    torch.manual_seed(0)
    normal = BayesianMLP(4, 3, [400, 100], init_mean="normal")
    assert normal.init_mean == "normal"
    assert normal.mu.std().item() == pytest.approx(1.0, abs=0.02)
    assert normal.mu.mean().item() == pytest.approx(0.0, abs=0.02)
    normal.reset_parameters()  # again by the same law
    assert normal.mu.std().item() == pytest.approx(1.0, abs=0.02)


def test_draws_take_the_models_dtype_and_only_the_generators_numbers():
    model = BayesianMLP(3, 2, [8], dtype=torch.float64, sampling="local")
    assert model.sample_noise(2).dtype == torch.float64
    assert model.sample_output_noise(2, 5).dtype == torch.float64
    x = torch.randn(2, 5, 3, dtype=torch.float64)  # two batch dims

    def seeded():
        return torch.Generator().manual_seed(7)

    torch.manual_seed(0)
    first = model.sample_outputs(x, 4, generator=seeded())
    torch.manual_seed(1)  # the global stream changes nothing the generator draws
    again = model.sample_outputs(x, 4, generator=seeded())
    assert first.shape == (4, 2, 5, 2) and torch.equal(first, again)
    flat = model.sample_outputs(x.reshape(10, 3), 4, generator=seeded())
    torch.testing.assert_close(first, flat.reshape(4, 2, 5, 2))


@pytest.mark.parametrize("sampling", ["weights", "local", "local_shared"])
@pytest.mark.parametrize("gradients", [True, False])
def test_outputs_of_many_cache_blocks_equal_each_draw_evaluated_alone(sampling, gradients):
    torch.manual_seed(0)
    model = BayesianMLP(7, 3, [40, 24], nn.Tanh, sampling=sampling, init_mean="normal")
    _random_posterior(model)
    x, y = torch.randn(2000, 7), torch.zeros(2000, 3)
    assert len(model._blocks(x, model.sample_output_noise(10, 2000))) > 1

    def seeded():
        return torch.Generator().manual_seed(4)

    with torch.set_grad_enabled(gradients):
        outputs = model.sample_outputs(x, 10, generator=seeded())
        noise = model.sample_output_noise(10, 2000, generator=seeded())
        from_noise = model.outputs_from_noise(x, noise) if sampling != "weights" else None
    draws = (model.sample_weights(10, generator=seeded()) if sampling == "weights" else noise)
    # y = 0: the reference's squared errors are the outputs' squared norms
    reference = _per_draw_squared_errors(model, x, y, draws, sampling)
    assert outputs.shape == (10, 2000, 3)
    torch.testing.assert_close(outputs.double().square().sum(-1), reference, rtol=2e-5,
                               atol=1e-4)
    if from_noise is not None:
        torch.testing.assert_close(from_noise, outputs)


def test_the_compiled_passes_serve_a_local_sampling_without_gradients_on_the_cpu(monkeypatch):
    served = []
    compiled = BayesianMLP._compiled_squared_errors
    monkeypatch.setattr(BayesianMLP, "_compiled_squared_errors",
                        lambda self, *args: served.append(1) or compiled(self, *args))

    def errors(model, grad=False, dtype=torch.float32):
        x, y = torch.randn(50, 3, dtype=dtype), torch.randn(50, 2, dtype=dtype)
        before = len(served)
        with torch.set_grad_enabled(grad):
            model.sample_squared_errors(x, y, 4)
        return len(served) > before

    for activation in (nn.ReLU, nn.Tanh):
        for dtype in (torch.float32, torch.float64):
            assert errors(BayesianMLP(3, 2, [8], activation, sampling="local", dtype=dtype),
                          dtype=dtype)
    assert errors(BayesianMLP(3, 2, [], sampling="local_shared"))  # no hidden layer
    assert not errors(BayesianMLP(3, 2, [8], sampling="local"), grad=True)
    assert not errors(BayesianMLP(3, 2, [8], nn.ELU, sampling="local"))
    assert not errors(BayesianMLP(3, 2, [8], sampling="weights"))
    assert not errors(BayesianMLP(3, 2, [8], sampling="local", dtype=torch.bfloat16),
                      dtype=torch.bfloat16)


def test_a_linear_model_through_the_compiled_pass_is_its_closed_form():
    torch.manual_seed(0)
    model = BayesianMLP(3, 2, [], sampling="local", dtype=torch.float64)
    _random_posterior(model)
    x, y = torch.randn(30, 3, dtype=torch.float64), torch.randn(30, 2, dtype=torch.float64)
    noise = model.sample_output_noise(5, 30, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        errors = model.sample_squared_errors(x, y, 5, generator=torch.Generator().manual_seed(1))
    (mean_w, mean_b), = model.unflatten(model.mu.detach())
    (var_w, var_b), = model.unflatten(model.posterior_std().detach().square())
    out = x @ mean_w.T + mean_b + (x.square() @ var_w.T + var_b).sqrt() * noise
    torch.testing.assert_close(errors, (y - out).square().sum(-1))


def test_the_repr_names_the_sizes_and_a_local_sampling():
    assert repr(BayesianMLP(3, 2, [8])) == (
        "BayesianMLP(\n  in_features=3, out_features=2, num_cells=[8], prior_std=0.5\n"
        "  (activations): ModuleList(\n    (0): ReLU()\n  )\n)")
    assert "num_cells=[8], prior_std=0.5, sampling='local_shared'\n" in repr(
        BayesianMLP(3, 2, [8], sampling="local_shared"))
