"""The ELBO's gradients with respect to μ and σ by hand, in torch (paper, Eq. 12): the reference
of the compiled kernel (``elbo_kernel``) and the eager path of ``VariationalELBOLoss``'s steps,
for one model or K stacked ones (a population's).

Each function takes the model's flat parameters (μ, ρ) and a minibatch and returns the loss terms
and gradients; ``VariationalELBOLoss.gradient_terms`` and ``population_gradient_terms`` call them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ACTIVATION_DERIVATIVES", "compiled_elbo_gradients", "elbo_gradients",
           "population_elbo_gradients"]

_HALF_LOG_2PI_E = 0.5 * math.log(2 * math.pi * math.e)

# d activation / d z, from the pre-activation z or the activation's output h
ACTIVATION_DERIVATIVES = {
    nn.ReLU: lambda z, h: z > 0,  # a boolean mask multiplies as 0/1
    nn.Tanh: lambda z, h: 1 - h.square(),
}


@functools.cache
def compiled_elbo_gradients() -> Callable[..., tuple[Tensor, Tensor, Tensor]]:
    """``elbo_gradients`` through ``torch.compile``, built once per process (dynamo compiles
    per shape and setting it is called with, ``local`` among them, and guards on them)."""
    return torch.compile(elbo_gradients, fullgraph=True, dynamic=False)


@torch.no_grad()
def elbo_gradients(
    mu: Tensor,
    rho: Tensor,
    x: Tensor,
    y: Tensor,
    noise: Tensor,
    *,
    layer_sizes: tuple[tuple[int, int], ...],
    activations: tuple[nn.Module, ...],
    prior_std: float,
    sigma_c: float,
    kl_weight: float,
    reduction: str,
    local: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """The body of ``VariationalELBOLoss.elbo_gradients`` (see ``gradient_terms``): the data
    term and its gradients with respect to μ and σ by hand, through the N weight samples
    (``_weight_data_term``) or with ``local`` the row-wise pre-activations
    (``_local_data_term``); the KL and entropy in closed form."""
    sigma = F.softplus(rho)
    data_term = _local_data_term if local else _weight_data_term
    loss_nll, grad_mean, grad_sigma = data_term(mu, sigma, x, y, noise, layer_sizes, activations,
                                                sigma_c, reduction)
    return _with_prior(mu, rho, sigma, loss_nll, grad_mean, grad_sigma, prior_std, kl_weight)


def _with_prior(mu, rho, sigma, loss_nll, grad_mean, grad_sigma, prior_std, kl_weight):
    """The KL and entropy in closed form, added to the data term's gradients; ∂/∂σ → ∂/∂ρ."""
    kl, entropy = _closed_form_kl(mu, sigma, prior_std)
    prior_var = prior_std**2
    grad_mu = grad_mean + kl_weight * mu / prior_var
    grad_sigma = grad_sigma + kl_weight * (sigma / prior_var - 1 / sigma)
    return torch.stack([loss_nll, kl, entropy]), grad_mu, grad_sigma * torch.sigmoid(rho)


def _weight_data_term(mu, sigma, x, y, noise, layer_sizes, activations, sigma_c, reduction):
    """The N networks ``θ = μ + σ ⊙ ε`` (``noise`` ε ``[N, |Θ|]``) forward, then back by hand:
    ``(loss_nll, ∂/∂μ, ∂/∂σ)``. Not ``_population_weight_data_term`` of one model: its
    per-member stacking costs one model time for nothing; the two give the same numbers, bit
    for bit (tested)."""
    num_samples = noise.shape[0]
    theta = torch.addcmul(mu, sigma, noise)
    output, backward = _sampled_networks(theta, x.expand(num_samples, *x.shape), layer_sizes,
                                         activations)
    loss_nll, grad_z = _gaussian_nll_term(output - y, sigma_c, reduction)
    grad_theta = backward(grad_z)
    return loss_nll, grad_theta.sum(0), (grad_theta * noise).sum(0)


def _sampled_networks(theta: Tensor, h: Tensor, layer_sizes, activations):
    """S networks of flat weights ``theta`` ``[S, |Θ|]`` on inputs ``h`` ``[S, B, in]``: their
    outputs and ``backward(∂loss/∂outputs) → ∂loss/∂theta`` ``[S, |Θ|]`` by hand."""
    num_samples = theta.shape[0]
    layers, offset = [], 0
    for n_in, n_out in layer_sizes:
        weight = theta[:, offset : offset + n_out * n_in].view(num_samples, n_out, n_in)
        offset += n_out * n_in
        layers.append((weight, theta[:, offset : offset + n_out]))
        offset += n_out
    # forward through the S networks, keeping each layer's input and pre-activation
    inputs, pre_activations = [], []
    last = len(layers) - 1
    for i, (weight, bias) in enumerate(layers):
        z = torch.baddbmm(bias.unsqueeze(-2), h, weight.mT)
        inputs.append(h)
        pre_activations.append(z)
        h = activations[i](z) if i < last else z

    def backward(grad_z: Tensor) -> Tensor:  # from d loss / d z of the output layer, layer by layer
        grads = [None] * len(layers)
        for i in range(last, -1, -1):
            weight, _ = layers[i]
            grads[i] = (torch.bmm(grad_z.mT, inputs[i]), grad_z.sum(-2))
            if i > 0:
                derivative = ACTIVATION_DERIVATIVES[type(activations[i - 1])]
                grad_z = torch.bmm(grad_z, weight) * derivative(pre_activations[i - 1], inputs[i])
        return torch.cat([part.reshape(num_samples, -1) for pair in grads for part in pair],
                         dim=-1)

    return h, backward


@torch.no_grad()
def population_elbo_gradients(
    mu: Tensor, rho: Tensor, x: Tensor, y: Tensor, noise: Tensor, *,
    layer_sizes: tuple[tuple[int, int], ...], activations: tuple[nn.Module, ...],
    prior_std: float, sigma_c: float, kl_weight: float, reduction: str, local: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """``elbo_gradients`` of K models at once: ``mu``, ``rho`` ``[K, |Θ|]``, each model's
    minibatch ``x`` ``[K, B, in]``, ``y`` ``[K, B, out]`` and noise ``[K, N, |Θ|]`` (weight
    sampling) or, with ``local``, ``[K, N, B or 1, Σ widths]``; returns
    ``([K, 3], [K, |Θ|], [K, |Θ|])``.

    The K·N sampled networks (or the K models' locally drawn pre-activations) run forward and
    back as one batch (batched products give each model the numbers it gets alone), the sums
    and the prior's terms on all members' ``[K, …]`` tensors at once, except the elementwise
    steps whose kernels round an element by its place in the tensor (a vectorised body, with
    fused multiply-adds or a vectorised exp, against a scalar tail): ``softplus``,
    ``θ = μ + σ ⊙ ε``, ``sigmoid`` and a tanh activation run per member on its own tensors.
    Each member's outputs are then bit for bit its own ``elbo_gradients``' (tested over 500
    steps), so a population's member trains as the single run of its seed."""
    members = mu.shape[0]
    sigma = torch.stack([F.softplus(rho[k]) for k in range(members)])
    data_term = _population_local_data_term if local else _population_weight_data_term
    loss_nll, grad_mean, grad_sigma = data_term(mu, sigma, x, y, noise, layer_sizes, activations,
                                                sigma_c, reduction)
    kl, entropy = _closed_form_kl(mu, sigma, prior_std)
    prior_var = prior_std**2
    grad_mu = grad_mean + kl_weight * mu / prior_var
    grad_sigma = grad_sigma + kl_weight * (sigma / prior_var - 1 / sigma)
    grad_rho = torch.stack([grad_sigma[k] * torch.sigmoid(rho[k]) for k in range(members)])
    return torch.stack([loss_nll, kl, entropy], dim=-1), grad_mu, grad_rho


def _population_weight_data_term(mu, sigma, x, y, noise, layer_sizes, activations, sigma_c,
                                 reduction):
    """``_weight_data_term`` of K models: the K·N networks ``θ = μ + σ ⊙ ε`` (each member's
    ``addcmul`` on its own tensors) as one batch of networks."""
    members, num_samples = noise.shape[:2]
    theta = torch.cat([torch.addcmul(mu[k], sigma[k], noise[k]) for k in range(members)])
    h = x.unsqueeze(1).expand(members, num_samples, *x.shape[1:]).flatten(0, 1)
    output, backward = _sampled_networks(theta, h, layer_sizes, activations)
    residual = output.view(members, num_samples, *output.shape[1:]) - y.unsqueeze(1)
    loss_nll, grad_output = _population_nll_term(residual, sigma_c, reduction)
    grad_theta = backward(grad_output.flatten(0, 1)).view(members, num_samples, -1)
    return loss_nll, grad_theta.sum(1), (grad_theta * noise).sum(1)


def _population_nll_term(residual: Tensor, sigma_c: float, reduction: str
                         ) -> tuple[Tensor, Tensor]:
    """``_gaussian_nll_term`` of K models' residuals ``[K, N, B, D]``: ``[K]`` and the
    gradient with respect to the predictions."""
    num_samples, batch, dims = residual.shape[-3:]
    per_row = 1.0 if reduction == "sum" else 1.0 / batch
    normaliser = dims * (math.log(sigma_c) + 0.5 * math.log(2 * math.pi))
    loss_nll = per_row * (residual.square().sum((1, 2, 3)) / (2 * sigma_c**2 * num_samples)
                          + batch * normaliser)
    return loss_nll, residual * (per_row / (sigma_c**2 * num_samples))


def _local_data_term(mu, sigma, x, y, noise, layer_sizes, activations, sigma_c, reduction):
    """Local reparameterisation for one model: ``_population_local_data_term`` of a
    population of one (the same kernels, so a population's member is its single run)."""
    loss_nll, grad_mean, grad_sigma = _population_local_data_term(
        mu[None], sigma[None], x[None], y[None], noise[None], layer_sizes, activations, sigma_c,
        reduction)
    return loss_nll[0], grad_mean[0], grad_sigma[0]


def _population_local_data_term(mu, sigma, x, y, noise, layer_sizes, activations, sigma_c,
                                reduction):
    """Local reparameterisation of K models: ``noise`` ξ ``[K, N, B or 1, Σ widths]`` draws
    every layer's pre-activations ``z = h M + b_μ + sqrt(h² S + b_σ²) ⊙ ξ`` (M, S the weights'
    means and variances; ξ per row, or one per unit shared by the rows), then back by hand:
    ``∂z/∂M = h``, ``∂z/∂S = h² ξ / (2 sqrt(·))``, ``∂z/∂h = M + h S ξ / sqrt(·)``, and
    ``∂/∂σ = 2σ ∂/∂S``: ``(loss_nll [K], ∂/∂μ [K, |Θ|], ∂/∂σ [K, |Θ|])``. The first layer's
    input is the same for the N draws: its mean and std are computed once per row and its
    gradients summed over the draws before the product with the rows. Only correctly rounded
    elementwise operations run on the stacked tensors (no fused multiply-add), and a tanh per
    member."""
    members, num_samples = noise.shape[:2]
    batch = x.shape[-2]
    variance = sigma.square()
    layers, offset, width_offset = [], 0, 0
    for n_in, n_out in layer_sizes:
        span = slice(offset, offset + n_out * n_in)
        bias = slice(span.stop, span.stop + n_out)
        layers.append((mu[:, span].view(members, n_out, n_in),
                       variance[:, span].view(members, n_out, n_in),
                       mu[:, None, None, bias], variance[:, None, None, bias],
                       noise[..., width_offset : width_offset + n_out]))
        offset, width_offset = bias.stop, width_offset + n_out
    # the first layer's input x is every draw's: its mean and std once per row, [K, 1, B, W]
    h, cache, last = x, [], len(layers) - 1
    for i, (mean_w, var_w, mean_b, var_b, xi) in enumerate(layers):
        rows_h = h.reshape(members, -1, h.shape[-1])  # [K, B, in], then [K, N·B, in]
        shape = (members, 1 if i == 0 else num_samples, batch, mean_w.shape[1])
        rows_square = rows_h.square()
        std = (torch.bmm(rows_square, var_w.mT).view(shape) + var_b).sqrt()
        z = torch.bmm(rows_h, mean_w.mT).view(shape) + mean_b + std * xi
        cache.append((rows_h, rows_square, std, z))
        h = _per_member(activations[i], z) if i < last else z
    loss_nll, grad_z = _population_nll_term(h - y.unsqueeze(1), sigma_c, reduction)
    grads_mean: list[Tensor] = [torch.empty(0)] * len(layers)
    grads_var: list[Tensor] = [torch.empty(0)] * len(layers)
    for i in range(last, -1, -1):
        mean_w, var_w, _, _, xi = layers[i]
        rows_h, rows_square, std, _ = cache[i]
        width = mean_w.shape[1]
        grad_var_z = grad_z * xi / (2 * std)
        if i == 0:  # x's rows: the N draws' gradients summed first
            grad_z, grad_var_z = grad_z.sum(1), grad_var_z.sum(1)
        rows_z = grad_z.reshape(members, -1, width)
        rows_var = grad_var_z.reshape(members, -1, width)
        grads_mean[i] = torch.cat([torch.bmm(rows_z.mT, rows_h).flatten(1), rows_z.sum(1)], 1)
        grads_var[i] = torch.cat([torch.bmm(rows_var.mT, rows_square).flatten(1),
                                  rows_var.sum(1)], 1)
        if i > 0:
            derivative = ACTIVATION_DERIVATIVES[type(activations[i - 1])]
            grad_h = torch.bmm(rows_z, mean_w) + 2 * rows_h * torch.bmm(rows_var, var_w)
            z_below = cache[i - 1][3]
            grad_z = grad_h.view(z_below.shape) * derivative(z_below,
                                                              rows_h.view(z_below.shape))
    return loss_nll, torch.cat(grads_mean, 1), 2 * sigma * torch.cat(grads_var, 1)


def _per_member(activation: nn.Module, z: Tensor) -> Tensor:
    """An activation on K members' ``[K, …]`` pre-activations: ReLU at once (exact anywhere),
    others (tanh: a vectorised body and a scalar tail round differently) member by member."""
    if isinstance(activation, nn.ReLU):
        return activation(z)
    return torch.stack([activation(member) for member in z])


def _closed_form_kl(mu: Tensor, sigma: Tensor, prior_std: float) -> tuple[Tensor, Tensor]:
    """``KL(q ‖ P)`` and ``H(q)``, summed over the parameters (the last dim), in closed form."""
    log_sigma = sigma.log().sum(-1)
    size = mu.shape[-1]
    kl = (size * (math.log(prior_std) - 0.5) - log_sigma
          + (sigma.square() + mu.square()).sum(-1) / (2 * prior_std**2))
    return kl, log_sigma + size * _HALF_LOG_2PI_E


def _gaussian_nll_term(residual: Tensor, sigma_c: float, reduction: str) -> tuple[Tensor, Tensor]:
    """The ELBO's data term on the N × B residuals ``[N, B, D]`` (the mean over the N draws,
    summed or averaged over the B rows) and its gradient with respect to the predictions."""
    num_samples, batch, dims = residual.shape
    per_row = 1.0 if reduction == "sum" else 1.0 / batch
    normaliser = dims * (math.log(sigma_c) + 0.5 * math.log(2 * math.pi))
    loss_nll = per_row * (
        residual.square().sum() / (2 * sigma_c**2 * num_samples) + batch * normaliser
    )
    return loss_nll, residual * (per_row / (sigma_c**2 * num_samples))
