"""The deterministic forward models' losses: the ensemble's regression (Disagreement) and ICM's
inverse and forward losses, on ``TransitionLoss`` (``objectives.elbo``: what every model's
loss shares)."""

from __future__ import annotations

from typing import ClassVar

from tensordict import TensorDict, TensorDictBase
from torch import Tensor

from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.modules.forward_models import EnsembleMLP, ICMNetwork
from torchrl_vase.objectives.elbo import TransitionLoss

__all__ = ["EnsembleLoss", "ICMLoss"]


class EnsembleLoss(TransitionLoss):
    """Each member of an ``EnsembleMLP`` regressed on the prepared target:
    ``loss_forward = mean_k mean_t ‖f_k(s_t, a_t) − y_t‖² / D`` (the members see the same
    minibatch and differ by their initialisation; their gradients are independent).

    Examples:
        >>> import torch
        >>> model = DynamicsModel(EnsembleMLP(4, 3, [16]), standardize=False)
        >>> batch = TensorDict({"observation": torch.randn(8, 3), "action": torch.randn(8, 1),
        ...                     ("next", "observation"): torch.randn(8, 3)}, [8])
        >>> EnsembleLoss(model)(batch)["loss_forward"].shape
        torch.Size([])
    """

    network_class = EnsembleMLP
    out_keys: ClassVar[list[str]] = ["loss_forward"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        return self.loss_of(*self.prepared(tensordict))

    def loss_of(self, obs: Tensor, action: Tensor, target: Tensor) -> TensorDict:
        """The loss of a transition the model has prepared (``prepared``): a trainer prepares
        its whole sample once and steps on slices of it."""
        error = (self.model.network(obs, action) - target).square().mean()
        return TensorDict({"loss_forward": error}, batch_size=[])


class ICMLoss(TransitionLoss):
    """ICM's loss (Pathak et al. 2017, Eq. 7): ``(1 − β) L_I + β L_F`` with the inverse model's
    ``L_I = mean ‖â − a‖² / |a|`` (a continuous action) and the forward model's ``L_F = mean ½
    ‖φ̂(s') − φ(s')‖²``, β = 0.2; the encoder learns from both, as in the authors' code.

    Examples:
        >>> import torch
        >>> model = DynamicsModel(ICMNetwork(4, 3, feature_dim=8), standardize=False)
        >>> batch = TensorDict({"observation": torch.randn(8, 3), "action": torch.randn(8, 1),
        ...                     ("next", "observation"): torch.randn(8, 3)}, [8])
        >>> sorted(ICMLoss(model)(batch).keys())
        ['loss_forward', 'loss_inverse']
    """

    network_class = ICMNetwork
    out_keys: ClassVar[list[str]] = ["loss_inverse", "loss_forward"]

    def __init__(self, model: DynamicsModel, *, beta: float = 0.2) -> None:
        super().__init__(model)
        if not 0 <= beta <= 1:
            raise ValueError(f"beta weighs the forward loss against the inverse one: it must be "
                             f"in [0, 1], got {beta}.")
        if model.target != "next_observation":
            raise ValueError("ICM encodes s' itself: build its model with "
                             "target='next_observation'.")
        self.beta = float(beta)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        return self.loss_of(*self.prepared(tensordict))

    def loss_of(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> TensorDict:
        """The loss of a transition the model has prepared (``prepared``)."""
        predicted, features, inverse = self.model.network(obs, action, next_obs)
        forward_error = 0.5 * (predicted - features).square().sum(-1).mean()
        inverse_error = (inverse - action).square().mean()
        return TensorDict({"loss_inverse": (1 - self.beta) * inverse_error,
                           "loss_forward": self.beta * forward_error}, batch_size=[])
