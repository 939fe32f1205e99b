"""Neural network modules: the Bayesian dynamics model."""

from torchrl_vase.modules.bayesian_mlp import BayesianMLP, LayerWeights

__all__ = ["BayesianMLP", "LayerWeights"]
