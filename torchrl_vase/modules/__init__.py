"""Neural network modules: the Bayesian dynamics model."""

from torchrl_vase.modules.bayesian_mlp import BayesianMLP, LayerWeights
from torchrl_vase.modules.policy import StateIndependentScale

__all__ = ["BayesianMLP", "LayerWeights", "StateIndependentScale"]
