"""Neural network modules: the Bayesian dynamics model, the policy head and its distribution,
the critic."""

from torchrl_vase.modules.bayesian_mlp import SAMPLINGS, BayesianMLP, LayerWeights
from torchrl_vase.modules.critic import StandardizedRegressor
from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.modules.policy import (
    INITIALIZATIONS,
    FiniteLogProbNormal,
    gaussian_policy,
    initialize_,
)

__all__ = [
    "INITIALIZATIONS",
    "SAMPLINGS",
    "BayesianMLP",
    "DynamicsModel",
    "FiniteLogProbNormal",
    "LayerWeights",
    "StandardizedRegressor",
    "gaussian_policy",
    "initialize_",
]
