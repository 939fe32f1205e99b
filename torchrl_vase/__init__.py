"""torchrl-vase: Variational Assorted Surprise Exploration (Xu, McCane & Szymanski) on TorchRL."""

# envs: registers the sparse envs
from torchrl_vase import checkpointing, diagnostics, envs, tracking, watchers
from torchrl_vase.algorithm import CriticFit, OnPolicyStep, PPOUpdate, TRPOUpdate
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.evaluation import evaluate, load_policy
from torchrl_vase.exploration import Exploration
from torchrl_vase.loop import LoopResult, OnPolicyLoop
from torchrl_vase.modules import (
    BayesianMLP,
    DynamicsModel,
    LayerWeights,
    StandardizedRegressor,
    gaussian_policy,
    initialize_,
)
from torchrl_vase.objectives import (
    ExplorationGAE,
    TRPOLoss,
    VariationalELBOLoss,
    conjugate_gradient,
    discounted_sum,
    explained_variance,
    fit_critic,
    gaussian_nll,
)
from torchrl_vase.runs import TrainingRun
from torchrl_vase.surprise import (
    nll_surprise,
    prediction_nll,
    vase_surprise,
    vime_information_gain,
    vime_information_gain_exact,
)
from torchrl_vase.transforms import (
    IntrinsicRewardTransform,
    NLLRewardTransform,
    RecentMedianNormalizer,
    RNDRewardTransform,
    SurpriseRewardTransform,
    VASERewardTransform,
    VIMERewardTransform,
)

__version__ = "0.1.0"

__all__ = [
    "BayesianMLP",
    "CriticFit",
    "DynamicsModel",
    "Exploration",
    "ExplorationGAE",
    "IntrinsicRewardTransform",
    "LayerWeights",
    "LoopResult",
    "NLLRewardTransform",
    "OnPolicyLoop",
    "OnPolicyStep",
    "PPOUpdate",
    "RNDRewardTransform",
    "RecentMedianNormalizer",
    "StandardizedRegressor",
    "SurpriseRewardTransform",
    "TRPOLoss",
    "TRPOUpdate",
    "TrainingRun",
    "VASERewardTransform",
    "VIMERewardTransform",
    "VariationalELBOLoss",
    "VectorEnvCollector",
    "checkpointing",
    "conjugate_gradient",
    "diagnostics",
    "discounted_sum",
    "envs",
    "evaluate",
    "explained_variance",
    "fit_critic",
    "gaussian_nll",
    "gaussian_policy",
    "initialize_",
    "load_policy",
    "nll_surprise",
    "prediction_nll",
    "tracking",
    "vase_surprise",
    "vime_information_gain",
    "vime_information_gain_exact",
    "watchers",
]
