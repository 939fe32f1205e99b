"""torchrl-vase: Variational Assorted Surprise Exploration (Xu, McCane & Szymanski) on TorchRL."""

from torchrl_vase.modules import BayesianMLP, LayerWeights
from torchrl_vase.objectives import VariationalELBOLoss, gaussian_nll

__version__ = "0.1.0"

__all__ = [
    "BayesianMLP",
    "LayerWeights",
    "VariationalELBOLoss",
    "gaussian_nll",
]
