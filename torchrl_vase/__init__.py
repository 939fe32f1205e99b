"""torchrl-vase: Variational Assorted Surprise Exploration (Xu, McCane & Szymanski) on TorchRL."""

from torchrl_vase import envs  # registers the sparse envs with gymnasium
from torchrl_vase.modules import BayesianMLP, LayerWeights, StateIndependentScale
from torchrl_vase.objectives import (
    TRPOLoss,
    VariationalELBOLoss,
    conjugate_gradient,
    fit_critic,
    gaussian_nll,
)
from torchrl_vase.surprise import (
    nll_surprise,
    prediction_nll,
    vase_surprise,
    vime_information_gain,
    vime_information_gain_exact,
)
from torchrl_vase.transforms import (
    NLLRewardTransform,
    RecentMedianNormalizer,
    SurpriseRewardTransform,
    VASERewardTransform,
    VIMERewardTransform,
)

__version__ = "0.1.0"

__all__ = [
    "BayesianMLP",
    "LayerWeights",
    "NLLRewardTransform",
    "RecentMedianNormalizer",
    "StateIndependentScale",
    "SurpriseRewardTransform",
    "TRPOLoss",
    "VASERewardTransform",
    "VIMERewardTransform",
    "VariationalELBOLoss",
    "conjugate_gradient",
    "envs",
    "fit_critic",
    "gaussian_nll",
    "nll_surprise",
    "prediction_nll",
    "vase_surprise",
    "vime_information_gain",
    "vime_information_gain_exact",
]
