"""Surprise measures of a transition ``(s, a, s')`` under a Bayesian dynamics model.

Pure functions over batches: ``obs [*B, obs_dim]``, ``action [*B, act_dim]``, ``next_obs [*B,
obs_dim]`` (what the model predicts) → one value per transition, ``[*B]``, in one batched
computation, the N weight samples drawn once for the batch (``generator`` for a reproducible
draw): ``vase_surprise`` (U_VASE, Eq. 10), ``nll_surprise`` (surprisal, Eq. 4) and
``vime_information_gain`` (VIME's Bayesian surprise, Eq. 6, tested against the exact KL after
the update step)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from torchrl_vase import defaults
from torchrl_vase._validation import check_num_samples, check_positive, check_sigma_c
from torchrl_vase.gaussian import log_normaliser, squared_error_nll
from torchrl_vase.modules.bayesian_mlp import BayesianMLP

__all__ = ["nll_surprise", "prediction_nll", "vase_surprise", "vime_information_gain"]


def _model_inputs(
    model: BayesianMLP, obs: Tensor, action: Tensor, next_obs: Tensor) -> tuple[Tensor, Tensor]:
    """Check a batch of transitions against the model; return ``(x, y)`` = (input, target)."""
    if not isinstance(model, BayesianMLP):
        raise TypeError(f"model must be a BayesianMLP, got {type(model).__name__}.")
    for name, tensor in (("obs", obs), ("action", action), ("next_obs", next_obs)):
        if not isinstance(tensor, Tensor) or tensor.dim() == 0:
            raise ValueError(f"{name} must be a tensor of shape [*batch, features].")
    if obs.shape[:-1] != action.shape[:-1] or obs.shape[:-1] != next_obs.shape[:-1]:
        raise ValueError(
            "obs, action and next_obs must share their batch dims; got "
            f"{tuple(obs.shape)}, {tuple(action.shape)} and {tuple(next_obs.shape)}.")
    x = model.check_inputs((obs, action))
    if next_obs.shape[-1] != model.out_features:
        raise ValueError(
            f"next_obs has {next_obs.shape[-1]} features; the model has "
            f"out_features={model.out_features}.")
    if next_obs.dtype != x.dtype:
        raise TypeError(f"next_obs has dtype {next_obs.dtype}, the model {x.dtype}.")
    if not torch.isfinite(next_obs).all():
        raise ValueError("next_obs contains non-finite values (nan or inf).")
    return x, next_obs


def prediction_nll(model: BayesianMLP, obs: Tensor, action: Tensor, next_obs: Tensor, *,
                   num_samples: int = 10, sigma_c: float = defaults.SIGMA_C,
                   normalised: bool = False, generator: torch.Generator | None = None) -> Tensor:
    """``‖s' − f(s, a; θ_n)‖² / (2σ_c²)`` for N weight samples θ_n ~ q: shape ``[N, *B]``.

    The per-sample negative log-likelihood of Eq. 11 as the authors' code computes the bonus,
    without the Gaussian's normaliser ``D·log(√(2π) σ_c)`` (``normalised=True`` adds it); every
    measure here is built on it.

    Examples:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> model = BayesianMLP(3, 2, [8])
        >>> batch = torch.randn(5, 2), torch.randn(5, 1), torch.randn(5, 2)
        >>> prediction_nll(model, *batch).shape
        torch.Size([10, 5])
        >>> same = lambda: torch.Generator().manual_seed(0)
        >>> full = prediction_nll(model, *batch, normalised=True, generator=same())
        >>> errors = prediction_nll(model, *batch, generator=same())
        >>> torch.allclose(full - errors, torch.tensor(log_normaliser(2, 0.5)), atol=1e-4)
        True
    """
    check_num_samples(num_samples)
    sigma_c = check_sigma_c(sigma_c)
    x, y = _model_inputs(model, obs, action, next_obs)
    # the squared errors block by block (sample_squared_errors), then squared_error_nll's scale
    errors = model.sample_squared_errors(x, y, num_samples, generator=generator) / (
        2 * sigma_c**2)
    return errors + log_normaliser(y.shape[-1], sigma_c) if normalised else errors


@torch.no_grad()
def vase_surprise(model: BayesianMLP, obs: Tensor, action: Tensor, next_obs: Tensor, *,
                  num_samples: int = 10, sigma_c: float = defaults.SIGMA_C,
                  delta: float = defaults.DELTA,
                  generator: torch.Generator | None = None) -> Tensor:
    """U_VASE (paper, Eq. 10) as the authors' code computes it:
    ``(1/N) Σ_n ‖s' − f(s, a; θ_n)‖² / (2σ_c²) − δ·H(q)``.

    The first term is the assorted surprise (the paper's lemma), without the Gaussian's constant
    normaliser; the second the confidence correction ``H(q) = ½ Σ_i log(2πe σ_i²)``, the same for
    every transition. ``delta=0`` is the authors' code (no confidence term).

    Args:
        model: the Bayesian dynamics model, input ``cat(obs, action)``.
        obs: s, ``[*B, obs_features]``.
        action: a, ``[*B, action_features]``.
        next_obs: s' (or what the model predicts), ``[*B, obs_features]``.

    Keyword Args:
        num_samples: N, the weight samples (paper: 10).
        sigma_c: σ_c of the likelihood (the authors' 0.5; the paper's text: 5).
        delta: δ, the confidence term's weight (the authors' 0; the paper's text: 1e-3).
        generator: RNG for the weight samples.

    Examples:
        >>> import torch
        >>> model = BayesianMLP(3, 2, [32])
        >>> obs, action, next_obs = torch.randn(100, 2), torch.randn(100, 1), torch.randn(100, 2)
        >>> vase_surprise(model, obs, action, next_obs, delta=1e-3).shape
        torch.Size([100])
    """
    if not math.isfinite(delta):
        raise ValueError(f"delta must be finite, got {delta}.")
    nll = prediction_nll(
        model, obs, action, next_obs, num_samples=num_samples, sigma_c=sigma_c, generator=generator)
    return nll.mean(0) - delta * model.entropy()


@torch.no_grad()
def nll_surprise(model: BayesianMLP, obs: Tensor, action: Tensor, next_obs: Tensor, *,
                 num_samples: int = 10, sigma_c: float = defaults.SIGMA_C,
                 generator: torch.Generator | None = None) -> Tensor:
    """Surprisal (Achiam & Sastry; paper, Eq. 4): ``−log P(s' | s, a)`` under the model's mixture
    ``(1/N) Σ_n N(s'; f(s, a; θ_n), σ_c² I)``: ``log N − logsumexp_n(−e_n)``, ``e_n = ‖s' −
    f(θ_n)‖² / (2σ_c²)``, without the constant normaliser; by Jensen never above U_VASE (δ = 0).

    Examples:
        >>> import torch
        >>> model = BayesianMLP(3, 2, [32])
        >>> obs, action, next_obs = torch.randn(100, 2), torch.randn(100, 1), torch.randn(100, 2)
        >>> nll_surprise(model, obs, action, next_obs).shape
        torch.Size([100])
    """
    nll = prediction_nll(
        model, obs, action, next_obs, num_samples=num_samples, sigma_c=sigma_c, generator=generator)
    return math.log(num_samples) - torch.logsumexp(-nll, dim=0)


def _inverse_rho_hessian(rho: Tensor) -> Tensor:
    """``1 / H_ρ``, ``H_ρ = 2 e^{2ρ} / ((1 + e^ρ)² softplus(ρ)²) = 2 sigmoid(ρ)² / σ²``: the
    curvature of ``KL(q' ‖ q)`` in ρ at ``q' = q``."""
    return (F.softplus(rho) / torch.sigmoid(rho)).square() / 2


def _sample_pairs(num_samples: int, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The N(N+1)/2 pairs ``n ≤ m`` of weight samples and their weights ``(2 − [n = m]) / N²``
    (an off-diagonal pair stands for both orders), on ``like``'s device and in its dtype."""
    first, second = torch.triu_indices(num_samples, num_samples, device=like.device)
    weight = (2 - (first == second).to(like.dtype)) / num_samples**2
    return first, second, weight


def _sums_over_sample_pairs(out_features: int, in_features: int, num_samples: int) -> bool:
    """Whether a layer's weight terms are cheaper as matrix products over sample pairs: once ``out ·
    in / (out + in) ≥ N + 1`` (Ant's 64-unit layers pay, 2–8-unit ones do not: docs/benchmarks.md).
    """
    return out_features * in_features >= (num_samples + 1) * (out_features + in_features)


class _LayerCurvature(NamedTuple):
    """A layer's noise ε and ``σ²`` (μ's inverse curvature; ρ's, chain rule folded in, is ``σ² /
    2``), and for a layer summed over sample pairs its ``K_nm`` ``[P, out, in]``."""

    noise: tuple[Tensor, Tensor]
    sigma_sq: tuple[Tensor, Tensor]
    pair_kernel: Tensor | None


def _layer_curvatures(
    model: BayesianMLP, noise: Tensor, pairs: tuple[Tensor, Tensor, Tensor]
) -> list[_LayerCurvature]:
    first, second, weight = pairs
    layers = []
    for layer_noise, sigma_sq in zip(model.unflatten(noise),
                                     model.unflatten(model.posterior_std().square()), strict=True):
        kernel = None
        if _sums_over_sample_pairs(*sigma_sq[0].shape, noise.shape[0]):
            eps = layer_noise[0]
            kernel = sigma_sq[0] * (1 + eps[first] * eps[second] / 2) * weight[:, None, None]
        layers.append(_LayerCurvature(layer_noise, sigma_sq, kernel))
    return layers


def _weight_terms_from_outer_products(
    delta: Tensor, h_in: Tensor, layer: _LayerCurvature) -> Tensor:
    """``Σ σ² g_μ² + g_ρ² / H_ρ`` over a layer's weights, ``[T]``, from every
    per-(sample, transition) gradient ``δ_n ⊗ h_n`` as an ``[N, T, out, in]`` tensor."""
    outer = delta.unsqueeze(-1) * h_in.unsqueeze(-2)
    g_mu = outer.mean(0)
    g_rho = (outer * layer.noise[0].unsqueeze(1)).mean(0)
    return ((g_mu.square() + g_rho.square() / 2) * layer.sigma_sq[0]).sum((-2, -1))


def _weight_terms_from_sample_pairs(
    delta: Tensor, h_in: Tensor, layer: _LayerCurvature, pairs: tuple[Tensor, Tensor, Tensor],
    shared_input: Tensor | None,
) -> Tensor:
    """The same sum as ``Σ_{n≤m} (δ_n ⊙ δ_m)ᵀ K_nm (h_n ⊙ h_m)``, ``[T]``: one batched matrix
    product (one plain product where every sample sees the same ``shared_input``, layer 1)."""
    first, second, _ = pairs
    if shared_input is not None:
        errors_by_pair = delta.transpose(0, 1)
        errors_by_pair = errors_by_pair[:, first] * errors_by_pair[:, second]  # [T, P, out]
        weighted = errors_by_pair.flatten(1) @ layer.pair_kernel.flatten(0, 1)
        return (weighted * shared_input.square()).sum(-1)
    errors_by_pair = delta[first] * delta[second]
    inputs_by_pair = h_in[first] * h_in[second]
    return (torch.bmm(errors_by_pair, layer.pair_kernel) * inputs_by_pair).sum((0, 2))


def _information_gain_terms(model: BayesianMLP, x: Tensor, y: Tensor, noise: Tensor, sigma_c: float,
                            layers: list[_LayerCurvature],
                            pairs: tuple[Tensor, Tensor, Tensor]) -> Tensor:
    """``Σ_i g_i² / H_i`` for each transition of ``x [T, in]``, ``y [T, out]``: shape ``[T]``.

    g is the gradient of a transition's mean-over-samples NLL with respect to (μ, ρ). With
    θ_n = μ + σ ⊙ ε_n, a layer's per-(sample, transition) weight gradient is the outer product
    ``δ_n ⊗ h_n`` of its back-propagated error and its input (one batched backward pass over
    all N × T pairs gives every δ), so ``g_μ = mean_n δ_n ⊗ h_n`` and
    ``g_ρ = sigmoid(ρ) ⊙ mean_n (δ_n ⊗ h_n) ⊙ ε_n``. Expanding the squares over sample pairs,
    a layer's weights contribute

        ``σ² g_μ² + g_ρ² / H_ρ = Σ_{n,m} (δ_n ⊙ δ_m)ᵀ K_nm (h_n ⊙ h_m)``,
        ``K_nm = σ² (1 + ε_n ε_m / 2) / N²``  (``sigmoid(ρ)² / H_ρ = σ² / 2``),

    a batched matrix product over the pairs n ≤ m, where forming each transition's gradient
    writes and reads an ``[N, T, out, in]`` tensor: ~N/2 times the multiplications, but in a
    matrix product instead of memory-bound element-wise passes. Each layer takes the cheaper
    form (``_sums_over_sample_pairs``; ``recipes/benchmarks/benchmark_surprise.py`` times both)."""
    num_samples = noise.shape[0]
    weights = [
        (w.contiguous(), b.contiguous())
        for w, b in model.unflatten(model.parameters_from_noise(noise))]

    # Forward over all (sample, transition) pairs, keeping each layer's input and pre-activation.
    inputs, pre_activations = [], []
    h = x.expand(num_samples, *x.shape)
    last = len(weights) - 1
    for i, (weight, bias) in enumerate(weights):
        z = torch.baddbmm(bias.unsqueeze(-2), h, weight.mT)
        if i == 0:
            z.requires_grad_(True)
        inputs.append(h.detach())
        pre_activations.append(z)
        h = model.activations[i](z) if i < last else z
    total = squared_error_nll(h, y, sigma_c).sum()  # the normaliser has no gradient
    errors = torch.autograd.grad(total, pre_activations)

    terms = x.new_zeros(x.shape[0])
    for i, (h_in, delta, layer) in enumerate(zip(inputs, errors, layers, strict=True)):
        if layer.pair_kernel is None:
            terms += _weight_terms_from_outer_products(delta, h_in, layer)
        else:
            shared_input = x if i == 0 else None
            terms += _weight_terms_from_sample_pairs(delta, h_in, layer, pairs, shared_input)
        g_mu_b = delta.mean(0)
        g_rho_b = delta.mul(layer.noise[1].unsqueeze(1)).mean(0)
        terms += (g_mu_b.square() + g_rho_b.square() / 2) @ layer.sigma_sq[1]
    return terms


def _flat_transitions(
    model: BayesianMLP, obs: Tensor, action: Tensor, next_obs: Tensor, sigma_c, step_size
) -> tuple[Tensor, Tensor, torch.Size]:
    """Check VIME's arguments; return ``x [T, in]``, ``y [T, out]`` and the batch shape."""
    if model.local_reparameterization:
        raise ValueError("VIME's information gain is a gradient with respect to the weights: it "
                         "needs weight sampling (a model with sampling='weights').")
    check_positive("step_size", step_size)
    check_sigma_c(sigma_c)
    x, y = _model_inputs(model, obs, action, next_obs)
    return x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1]), x.shape[:-1]


def vime_information_gain(model: BayesianMLP, obs: Tensor, action: Tensor, next_obs: Tensor, *,
                          num_samples: int = 10, sigma_c: float = defaults.SIGMA_C,
                          step_size: float = 0.01, clip: float = 1000.0, chunk_size: int = 256,
                          generator: torch.Generator | None = None) -> Tensor:
    """VIME's Bayesian surprise (Houthooft et al.; paper, Eq. 6) as VIME's code computes it.

    For each transition, g is the gradient of its NLL (mean over N samples) with respect to every
    μ_i and ρ_i, and the gain is ``Σ_i λ² g_i² / H_i`` (λ the step size, ``H_μ = 1/σ²``, ``H_ρ = 2
    e^{2ρ} / ((1 + e^ρ)² softplus(ρ)²)``), clipped to ``[0, clip]``: twice the exact KL after the
    step ``φ ← φ − λ H⁻¹ g`` to second order (VIME omits the ½; tested). All per-transition
    gradients come from one batched backward pass (``chunk_size`` transitions at a time), under
    ``torch.no_grad()`` too; the model's parameters and ``.grad`` are untouched.

    Examples:
        >>> import torch
        >>> model = BayesianMLP(3, 2, [32])
        >>> obs, action, next_obs = torch.randn(100, 2), torch.randn(100, 1), torch.randn(100, 2)
        >>> vime_information_gain(model, obs, action, next_obs).shape
        torch.Size([100])
    """
    clip = check_positive("clip", clip)
    x, y, batch_shape = _flat_transitions(model, obs, action, next_obs, sigma_c, step_size)
    noise = model.sample_noise(num_samples, generator=generator)
    pairs = _sample_pairs(num_samples, x)
    with torch.no_grad():
        layers = _layer_curvatures(model, noise, pairs)
    with torch.enable_grad():
        gain = torch.cat(
            [
                _information_gain_terms(model, x_chunk, y_chunk, noise, sigma_c, layers, pairs)
                .detach()
                for x_chunk, y_chunk in zip(x.split(chunk_size), y.split(chunk_size), strict=True)])
    gain = step_size**2 * gain
    return gain.clamp(0.0, clip).reshape(batch_shape)
