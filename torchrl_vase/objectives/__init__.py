"""Loss modules."""

from torchrl_vase.objectives.elbo import VariationalELBOLoss, gaussian_nll

__all__ = ["VariationalELBOLoss", "gaussian_nll"]
