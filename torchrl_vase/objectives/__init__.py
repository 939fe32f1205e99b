"""Loss modules and value estimators."""

from torchrl_vase.objectives.advantage import STRUCTURES, ExplorationGAE, discounted_sum
from torchrl_vase.objectives.elbo import VariationalELBOLoss, gaussian_nll
from torchrl_vase.objectives.elbo_trainer import BACKENDS, ELBOTrainer
from torchrl_vase.objectives.trpo import (
    TRPOLoss,
    conjugate_gradient,
    explained_variance,
    fit_critic,
)

__all__ = [
    "BACKENDS",
    "STRUCTURES",
    "ELBOTrainer",
    "ExplorationGAE",
    "TRPOLoss",
    "VariationalELBOLoss",
    "conjugate_gradient",
    "discounted_sum",
    "explained_variance",
    "fit_critic",
    "gaussian_nll",
]
