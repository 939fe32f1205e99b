"""The isotropic Gaussian likelihood ``N(s'; f, σ_c² I)`` of the paper's Eq. 11, in one place::

    −log N(s'; f, σ_c² I) = ‖s' − f‖² / (2σ_c²)  +  D·log(√(2π) σ_c)
                            ─ squared_error_nll ─    ─ log_normaliser ─

The ELBO's loss (``gaussian_nll``) keeps the constant; the bonuses leave it out, as the authors'
code does (uncentred, it would pay ``η·D·log(√(2π) σ_c)`` a step for staying alive). Also the
factorised posterior's entropy (VASE's confidence term, Eq. 10) and KL to the prior (Eq. 12), in
closed form; the compiled kernel reads its constants from here."""

from __future__ import annotations

import math

from torch import Tensor

__all__ = ["HALF_LOG_2PI_E", "entropy", "gaussian_nll", "kl_to_prior", "log_normaliser",
           "squared_error_nll"]

#: ``½ log(2πe)``: a unit Gaussian's entropy, each parameter's share of ``entropy``
HALF_LOG_2PI_E = 0.5 * math.log(2 * math.pi * math.e)


def squared_error_nll(prediction: Tensor, target: Tensor, sigma_c: float) -> Tensor:
    """``‖target − prediction‖² / (2σ_c²)``, summed over the last (feature) dim: the Gaussian's
    NLL without its normaliser, the authors' surprise of one weight sample.

    Examples:
        >>> import torch
        >>> squared_error_nll(torch.zeros(2), torch.tensor([1.0, 2.0]), sigma_c=0.5)  # 5 / 0.5
        tensor(10.)
    """
    return (target - prediction).square().sum(-1) / (2 * sigma_c**2)


def log_normaliser(dim: int, sigma_c: float) -> float:
    """``D·log(√(2π) σ_c)``, the log of the D-dimensional isotropic Gaussian's normaliser.

    Examples:
        >>> round(log_normaliser(2, 0.5), 4)  # MountainCar's at the authors' σ_c, in nats
        0.4516
    """
    return dim * (math.log(sigma_c) + 0.5 * math.log(2 * math.pi))


def gaussian_nll(prediction: Tensor, target: Tensor, sigma_c: float) -> Tensor:
    """``−log N(target; prediction, σ_c² I)`` summed over the features, with the full normaliser
    ``(2πσ_c²)^{−D/2}`` (Eq. 11; the text writes the 1-D one): the ELBO's data term.

    Examples:
        >>> import torch
        >>> gaussian_nll(torch.zeros(2), torch.zeros(2), sigma_c=1.0)  # D/2 · log(2π)
        tensor(1.8379)
    """
    return (squared_error_nll(prediction, target, sigma_c)
            + log_normaliser(target.shape[-1], sigma_c))


def entropy(std: Tensor) -> Tensor:
    """``H(q) = ½ Σ_i log(2πe σ_i²)`` of a factorised Gaussian with stds ``std`` (flat).

    Examples:
        >>> import torch
        >>> entropy(torch.ones(3))  # three unit Gaussians: 3 · ½ log(2πe)
        tensor(4.2568)
    """
    return std.log().sum() + HALF_LOG_2PI_E * std.numel()


def kl_to_prior(mean: Tensor, std: Tensor, prior_std: float) -> Tensor:
    """``KL(Π N(μ_i, σ_i²) ‖ Π N(0, σ_m²))`` summed: ``Σ_i log(σ_m / σ_i) + (σ_i² + μ_i²) /
    (2σ_m²) − ½``.

    Examples:
        >>> import torch
        >>> kl_to_prior(torch.zeros(4), torch.full((4,), 0.5), prior_std=0.5)  # q = P
        tensor(0.)
    """
    ratio = (std.square() + mean.square()) / (2 * prior_std**2)
    return (math.log(prior_std) - std.log() + ratio - 0.5).sum()
