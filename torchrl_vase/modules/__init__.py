"""Neural network modules: the Bayesian dynamics model, the policy head and its distribution,
the critic."""

from torchrl_vase.modules.bayesian_mlp import SAMPLINGS, BayesianMLP, LayerWeights
from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.modules.networks import (
                                           ACTIVATIONS,
                                           INITIALIZATIONS,
                                           FiniteLogProbNormal,
                                           StandardizedRegressor,
                                           gaussian_policy,
                                           initialize_,
                                           q_value_network,
                                           tanh_policy,
)

__all__ = ["ACTIVATIONS", "INITIALIZATIONS", "SAMPLINGS", "BayesianMLP", "DynamicsModel",
           "FiniteLogProbNormal", "LayerWeights", "StandardizedRegressor", "gaussian_policy",
           "initialize_", "q_value_network", "tanh_policy"]
