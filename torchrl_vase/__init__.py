"""torchrl-vase: Variational Assorted Surprise Exploration (Xu, McCane & Szymanski) on TorchRL."""

from typing import TYPE_CHECKING

# envs: registers the sparse envs
from torchrl_vase import checkpointing, defaults, diagnostics, envs, gaussian, watchers
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.defaults import PAPER_TEXT
from torchrl_vase.evaluation import evaluate, load_policy
from torchrl_vase.exploration import Exploration, ReplayBonus
from torchrl_vase.loggers import Logger
from torchrl_vase.loop import LoopResult, TrainingLoop
from torchrl_vase.modules import (
    SAMPLINGS,
    BayesianMLP,
    DynamicsModel,
    EnsembleMLP,
    FiniteLogProbNormal,
    ICMNetwork,
    LayerWeights,
    StandardizedRegressor,
    gaussian_policy,
    initialize_,
    q_value_network,
    tanh_policy,
)
from torchrl_vase.objectives import (
    BACKENDS,
    CriticFit,
    EnsembleLoss,
    ExplorationGAE,
    ICMLoss,
    ModelTrainer,
    TRPOLoss,
    VariationalELBOLoss,
    conjugate_gradient,
    discounted_sum,
    explained_variance,
    fit_critic,
    gaussian_nll,
)
from torchrl_vase.off_policy import OffPolicyStep, SACUpdate
from torchrl_vase.replay import ReplayJournal
from torchrl_vase.step import OnPolicyStep, PPOUpdate, TRPOUpdate
from torchrl_vase.surprise import nll_surprise, prediction_nll, vase_surprise, vime_information_gain
from torchrl_vase.timing import PhaseClock, phase
from torchrl_vase.transforms import (
    DisagreementRewardTransform,
    ICMRewardTransform,
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
    from torchrl_vase.runs import TrainingRun

_LAZY = {"tracking": ("torchrl_vase.tracking", None),
         "TrainingRun": ("torchrl_vase.runs", "TrainingRun")}


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

__all__ = ["BACKENDS", "PAPER_TEXT", "SAMPLINGS", "BayesianMLP", "CriticFit",
           "DisagreementRewardTransform", "DynamicsModel", "EnsembleLoss", "EnsembleMLP",
           "Exploration", "ExplorationGAE", "FiniteLogProbNormal", "ICMLoss", "ICMNetwork",
           "ICMRewardTransform", "IntrinsicRewardTransform", "LayerWeights", "Logger", "LoopResult",
           "ModelTrainer", "NLLRewardTransform", "OffPolicyStep", "OnPolicyStep", "PPOUpdate",
           "PhaseClock", "RNDRewardTransform", "RecentMedianNormalizer", "ReplayBonus",
           "ReplayJournal", "SACUpdate", "StandardizedRegressor", "SurpriseRewardTransform",
           "TRPOLoss", "TRPOUpdate", "TrainingLoop", "TrainingRun", "VASERewardTransform",
           "VIMERewardTransform", "VariationalELBOLoss", "VectorEnvCollector", "checkpointing",
           "conjugate_gradient", "defaults", "diagnostics", "discounted_sum", "envs", "evaluate",
           "explained_variance", "fit_critic", "gaussian", "gaussian_nll", "gaussian_policy",
           "initialize_", "load_policy", "nll_surprise", "phase", "prediction_nll",
           "q_value_network", "tanh_policy", "tracking", "vase_surprise", "vime_information_gain",
           "watchers"]
