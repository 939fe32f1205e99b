"""torchrl-vase: Variational Assorted Surprise Exploration (Xu, McCane & Szymanski) on TorchRL."""

from typing import TYPE_CHECKING

# envs: registers the sparse envs
from torchrl_vase import checkpointing, diagnostics, envs, population, watchers
from torchrl_vase.algorithm import CriticFit, OnPolicyStep, PPOUpdate, TRPOUpdate
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.evaluation import evaluate, load_policy
from torchrl_vase.exploration import Exploration
from torchrl_vase.loop import LoopResult, OnPolicyLoop
from torchrl_vase.modules import (
    SAMPLINGS,
    BayesianMLP,
    DynamicsModel,
    FiniteLogProbNormal,
    LayerWeights,
    StandardizedRegressor,
    gaussian_policy,
    initialize_,
)
from torchrl_vase.objectives import (
    BACKENDS,
    CompiledELBOSteps,
    ExplorationGAE,
    TRPOLoss,
    VariationalELBOLoss,
    conjugate_gradient,
    discounted_sum,
    explained_variance,
    fit_critic,
    gaussian_nll,
)
from torchrl_vase.population import (
    MemberStreams,
    PopulationCollector,
    PopulationLoop,
    PopulationStep,
)
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

if TYPE_CHECKING:  # imported on first use: they import MLflow (2 s), which not every user needs
    from torchrl_vase import tracking
    from torchrl_vase.runs import PopulationRun, TrainingRun

_LAZY = {"tracking": ("torchrl_vase.tracking", None),
         "TrainingRun": ("torchrl_vase.runs", "TrainingRun"),
         "PopulationRun": ("torchrl_vase.runs", "PopulationRun")}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'torchrl_vase' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "SAMPLINGS",
    "BayesianMLP",
    "CompiledELBOSteps",
    "CriticFit",
    "DynamicsModel",
    "Exploration",
    "ExplorationGAE",
    "FiniteLogProbNormal",
    "IntrinsicRewardTransform",
    "LayerWeights",
    "LoopResult",
    "MemberStreams",
    "NLLRewardTransform",
    "OnPolicyLoop",
    "OnPolicyStep",
    "PPOUpdate",
    "PopulationCollector",
    "PopulationLoop",
    "PopulationRun",
    "PopulationStep",
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
    "population",
    "prediction_nll",
    "tracking",
    "vase_surprise",
    "vime_information_gain",
    "vime_information_gain_exact",
    "watchers",
]
