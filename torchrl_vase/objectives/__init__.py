"""Loss modules and value estimators."""

from torchrl_vase.objectives.advantage import (
    STRUCTURES,
    ExplorationGAE,
    discounted_sum,
    generalized_advantage,
)
from torchrl_vase.objectives.critic_fit import CriticFit, explained_variance, fit_critic
from torchrl_vase.objectives.elbo import TransitionLoss, VariationalELBOLoss, gaussian_nll
from torchrl_vase.objectives.forward_losses import EnsembleLoss, ICMLoss
from torchrl_vase.objectives.sac import FusedSACLoss
from torchrl_vase.objectives.trainer import BACKENDS, ModelTrainer
from torchrl_vase.objectives.trpo import TRPOLoss, conjugate_gradient

__all__ = ["BACKENDS", "STRUCTURES", "CriticFit", "EnsembleLoss", "ExplorationGAE", "FusedSACLoss",
           "ICMLoss", "ModelTrainer", "TRPOLoss", "TransitionLoss", "VariationalELBOLoss",
           "conjugate_gradient", "discounted_sum", "explained_variance", "fit_critic",
           "gaussian_nll", "generalized_advantage"]
