"""Loss modules and value estimators."""

from torchrl_vase.objectives.advantage import STRUCTURES, ExplorationGAE, discounted_sum
from torchrl_vase.objectives.elbo import VariationalELBOLoss, gaussian_nll
from torchrl_vase.objectives.elbo_steps import BACKENDS, CompiledELBOSteps, eager_elbo_steps
from torchrl_vase.objectives.trpo import (
    TRPOLoss,
    conjugate_gradient,
    explained_variance,
    fit_critic,
)

__all__ = [
    "BACKENDS",
    "STRUCTURES",
    "CompiledELBOSteps",
    "ExplorationGAE",
    "TRPOLoss",
    "VariationalELBOLoss",
    "conjugate_gradient",
    "discounted_sum",
    "eager_elbo_steps",
    "explained_variance",
    "fit_critic",
    "gaussian_nll",
]
