"""Neural network modules: the Bayesian dynamics model, the policy head, the critic."""

from torchrl_vase.modules.bayesian_mlp import BayesianMLP, LayerWeights
from torchrl_vase.modules.critic import StandardizedRegressor
from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.modules.policy import StateIndependentScale

__all__ = [
    "BayesianMLP",
    "DynamicsModel",
    "LayerWeights",
    "StandardizedRegressor",
    "StateIndependentScale",
]
