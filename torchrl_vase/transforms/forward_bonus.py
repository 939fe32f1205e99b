"""Today's prediction bonuses beside VASE, as the same kind of transform: Disagreement (Pathak,
Gandhi & Gupta 2019) and ICM (Pathak et al. 2017), each a ``DynamicsModel`` (its standardisation
of ``(s, a, s')`` by the pool, as VASE's) around a deterministic forward model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.modules.forward_models import (
    EnsembleMLP,
    ICMNetwork,
    check_feature_dim,
    check_members,
)
from torchrl_vase.objectives.forward_losses import EnsembleLoss, ICMLoss
from torchrl_vase.transforms.surprise_reward import ModelBonusTransform

__all__ = ["DisagreementRewardTransform", "ICMRewardTransform"]


class DisagreementRewardTransform(ModelBonusTransform):
    """The Disagreement bonus: ``U = Σ_d Var_k f_k(s, a)_d``, the variance over the members of an
    ``EnsembleMLP`` of their predictions of the standardised ``s'``, summed over its features
    (Pathak, Gandhi & Gupta 2019, Eq. 4: ``E_k ‖f_k − E_k f_k‖²``; rllte takes the mean over
    features instead), trained by ``EnsembleLoss``.

    Args:
        model: a ``DynamicsModel`` of an ``EnsembleMLP``, or ``None`` to build one from the
            parent env's specs.

    Keyword Args:
        members: the ensemble's size when it is built (the paper's 5; at least 2).
        num_cells: its members' hidden widths when built.
        standardize: standardise ``(s, a, s')`` by the pool's statistics when built.
        **kwargs: ``eta``, ``mix_reward``, ``reward_normalization`` and the keys.

    Examples:
        >>> import torch
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), DisagreementRewardTransform(eta=1e-2))
        >>> bool((env.rollout(5)["next", "intrinsic_reward"] >= 0).all())
        True
        >>> env.transform.make_loss().model is env.transform.model
        True
    """

    metric_prefix = "disagreement/"
    loss_class = EnsembleLoss

    def __init__(self, model: DynamicsModel | None = None, *, members: int = 5,
                 num_cells: Sequence[int] = (64, 64), standardize: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self._build = {"members": check_members(members), "num_cells": list(num_cells),
                       "standardize": standardize}

    def _build_model(self, obs_dim: int, action_dim: int, classes: int | None) -> DynamicsModel:
        network = EnsembleMLP(obs_dim + action_dim, obs_dim, self._build["num_cells"],
                              members=self._build["members"])
        return DynamicsModel(network, standardize=self._build["standardize"],
                             action_classes=classes)

    def bonus(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> Tensor:
        s, a, _ = self.prepare(obs, action, next_obs)
        return self.model.network(s, a).var(0, unbiased=False).sum(-1)


class ICMRewardTransform(ModelBonusTransform):
    """ICM's bonus: ``U = ½ ‖f(φ(s), a) − φ(s')‖²``, the forward model's error in the inverse
    model's feature space (Pathak et al. 2017, Eq. 6), trained by ``ICMLoss`` (β = 0.2).

    Args:
        model: a ``DynamicsModel`` of an ``ICMNetwork``, or ``None`` to build one from the parent
            env's specs.

    Keyword Args:
        feature_dim: φ's size when built (> 0).
        num_cells: the hidden widths of its three MLPs when built.
        standardize: standardise ``(s, a, s')`` by the pool's statistics when built.
        **kwargs: ``eta``, ``mix_reward``, ``reward_normalization`` and the keys.

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), ICMRewardTransform(eta=1e-2))
        >>> bool((env.rollout(5)["next", "intrinsic_reward"] >= 0).all())
        True
        >>> env.transform.make_loss(beta=0.2).beta
        0.2
    """

    metric_prefix = "icm/"
    loss_class = ICMLoss

    def __init__(self, model: DynamicsModel | None = None, *, feature_dim: int = 64,
                 num_cells: Sequence[int] = (64,), standardize: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self._build = {"feature_dim": check_feature_dim(feature_dim), "num_cells": list(num_cells),
                       "standardize": standardize}

    def _build_model(self, obs_dim: int, action_dim: int, classes: int | None) -> DynamicsModel:
        network = ICMNetwork(obs_dim + action_dim, obs_dim,
                             feature_dim=self._build["feature_dim"],
                             num_cells=self._build["num_cells"], activation_class=nn.ReLU)
        return DynamicsModel(network, standardize=self._build["standardize"],
                             action_classes=classes)

    def bonus(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> Tensor:
        predicted, features, _ = self.model.network(*self.prepare(obs, action, next_obs))
        return 0.5 * (predicted - features).square().sum(-1)
