"""What every bonus model's loss shares: the transition's keys and the model's preparation of
them (``TransitionLoss``), and the deterministic forward models' losses: the ensemble's
regression (Disagreement) and ICM's inverse and forward losses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import Tensor
from torchrl.objectives.common import LossModule

from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.modules.forward_models import EnsembleMLP, ICMNetwork

__all__ = ["EnsembleLoss", "ICMLoss", "TransitionLoss"]


class TransitionLoss(LossModule):
    """A loss on ``(observation, action, ("next", "observation"))`` transitions of a
    ``DynamicsModel``, read through ``set_keys`` and prepared by the model (standardised by its
    pool statistics), as every bonus on that model sees them. Subclasses compute the loss."""

    @dataclass
    class _AcceptedKeys:
        """Configurable tensordict keys: ``observation``, ``action`` and ``next_observation``
        (``("next", "observation")``)."""

        observation: NestedKey = "observation"
        action: NestedKey = "action"
        next_observation: NestedKey = ("next", "observation")

    default_keys = _AcceptedKeys
    tensor_keys: _AcceptedKeys
    #: the model's network class a subclass trains (``None``: any)
    network_class: ClassVar[type | None] = None

    def __init__(self, model: DynamicsModel) -> None:
        super().__init__()
        if not isinstance(model, DynamicsModel):
            raise TypeError(
                f"model must be a DynamicsModel, got {type(model).__name__}: wrap the network "
                "once, DynamicsModel(network, ...), and give that one object to the loss and to "
                "the bonus transform, so both see the same standardised data.")
        if self.network_class is not None and not isinstance(model.network, self.network_class):
            raise TypeError(f"{type(self).__name__} trains a {self.network_class.__name__}; this "
                            f"model holds a {type(model.network).__name__}.")
        self.model = model

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        pass

    @property
    def in_keys(self) -> list[NestedKey]:
        """The keys ``forward`` reads (``set_keys`` changes them)."""
        keys = self.tensor_keys
        return [keys.observation, keys.action, keys.next_observation]

    def prepared(self, tensordict: TensorDictBase) -> tuple[Tensor, Tensor, Tensor]:
        """``(s, a, y)`` as the model prepares them."""
        keys = self.tensor_keys
        obs, action, next_obs = (self._get(tensordict, key, name) for key, name in (
            (keys.observation, "observation"), (keys.action, "action"),
            (keys.next_observation, "next_observation")))
        try:
            return self.model.prepare(obs, action, next_obs)
        except (TypeError, ValueError) as error:
            raise type(error)(
                f"{error} (keys: observation {keys.observation!r}, action {keys.action!r}, "
                f"next_observation {keys.next_observation!r})") from None

    def model_inputs(self, tensordict: TensorDictBase) -> tuple[Tensor, Tensor]:
        """``(x, y)``: the network's input ``cat(s, a)`` and target, prepared by the model."""
        obs, action, target = self.prepared(tensordict)
        return torch.cat([obs, action], dim=-1), target

    def _get(self, tensordict: TensorDictBase, key: NestedKey, name: str) -> Tensor:
        tensor = tensordict.get(key, None)
        if tensor is None:
            raise KeyError(
                f"{name} key {key!r} not found in the tensordict; set it with "
                f"loss.set_keys({name}=...). Keys present: {list(tensordict.keys(True, True))}.")
        return tensor


class EnsembleLoss(TransitionLoss):
    """Each member of an ``EnsembleMLP`` regressed on the prepared target:
    ``loss_forward = mean_k mean_t ‖f_k(s_t, a_t) − y_t‖² / D`` (the members see the same
    minibatch and differ by their initialisation; their gradients are independent).

    Examples:
        >>> model = DynamicsModel(EnsembleMLP(4, 3, [16]), standardize=False)
        >>> batch = TensorDict({"observation": torch.randn(8, 3), "action": torch.randn(8, 1),
        ...                     ("next", "observation"): torch.randn(8, 3)}, [8])
        >>> EnsembleLoss(model)(batch)["loss_forward"].shape
        torch.Size([])
    """

    network_class = EnsembleMLP
    out_keys: ClassVar[list[str]] = ["loss_forward"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        obs, action, target = self.prepared(tensordict)
        error = (self.model.network(obs, action) - target).square().mean()
        return TensorDict({"loss_forward": error}, batch_size=[])


class ICMLoss(TransitionLoss):
    """ICM's loss (Pathak et al. 2017, Eq. 7): ``(1 − β) L_I + β L_F`` with the inverse model's
    ``L_I = mean ‖â − a‖² / |a|`` (a continuous action) and the forward model's ``L_F = mean ½
    ‖φ̂(s') − φ(s')‖²``, β = 0.2; the encoder learns from both, as in the authors' code.

    Examples:
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
        obs, action, next_obs = self.prepared(tensordict)
        predicted, features, inverse = self.model.network(obs, action, next_obs)
        forward_error = 0.5 * (predicted - features).square().sum(-1).mean()
        inverse_error = (inverse - action).square().mean()
        return TensorDict({"loss_inverse": (1 - self.beta) * inverse_error,
                           "loss_forward": self.beta * forward_error}, batch_size=[])
