"""Neural network modules: the Bayesian dynamics model, Disagreement's ensemble and ICM's
networks, the policy head and its distribution, the critic."""

from torchrl_vase.modules.bayesian_mlp import SAMPLINGS, BayesianMLP, LayerWeights
from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.modules.forward_models import EnsembleMLP, ICMNetwork
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
           "EnsembleMLP", "FiniteLogProbNormal", "ICMNetwork", "LayerWeights",
           "StandardizedRegressor", "gaussian_policy", "initialize_", "q_value_network",
           "tanh_policy"]
