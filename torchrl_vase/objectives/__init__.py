"""Loss modules."""

from torchrl_vase.objectives.elbo import VariationalELBOLoss, gaussian_nll
from torchrl_vase.objectives.trpo import TRPOLoss, conjugate_gradient, fit_critic

__all__ = ["TRPOLoss", "VariationalELBOLoss", "conjugate_gradient", "fit_critic", "gaussian_nll"]
