"""The isotropic Gaussian likelihood ``N(s'; f, σ_c² I)`` of the paper's Eq. 11, in one place.

Its negative log-density splits into the data term and a constant::

    −log N(s'; f, σ_c² I) = ‖s' − f‖² / (2σ_c²)  +  D·log(√(2π) σ_c)
                            ─ squared_error_nll ─    ─ log_normaliser ─

The ELBO's loss (``gaussian_nll``) keeps the constant: it changes no gradient and makes the loss
the true NLL. The surprise bonuses (``torchrl_vase.surprise``) leave it out, as the authors' code
does (their ``surprise()`` adds it back to the mean NLL): added uncentred to the reward, a
constant is a reward of ``η·D·log(√(2π) σ_c)`` a step, paid for staying alive, not for surprise.
"""

from __future__ import annotations

import math

from torch import Tensor

__all__ = ["gaussian_nll", "log_normaliser", "squared_error_nll"]


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
    """``−log N(target; prediction, σ_c² I)``, summed over the last (feature) dim.

    The likelihood of the paper's Eq. 11 with the isotropic multivariate Gaussian's full
    normaliser ``(2πσ_c²)^{−D/2}`` (the paper's text writes the 1-D one): the ELBO's data term.

    Examples:
        >>> import torch
        >>> gaussian_nll(torch.zeros(2), torch.zeros(2), sigma_c=1.0)  # D/2 · log(2π)
        tensor(1.8379)
    """
    return (squared_error_nll(prediction, target, sigma_c)
            + log_normaliser(target.shape[-1], sigma_c))
