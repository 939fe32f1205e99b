"""The Gaussian policy head of rllab's TRPO: a network for the mean, a learned log-std vector."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class StateIndependentScale(nn.Module):
    """Wraps a mean network: returns ``(loc, scale)`` with ``scale = exp(log_std)`` per action dim.

    The log-std is a parameter, not a function of the state, as in rllab's ``GaussianMLPPolicy``
    that the paper's TRPO uses.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, IndependentNormal, ProbabilisticActor
        >>> head = StateIndependentScale(MLP(3, 2, num_cells=[32]), action_dim=2, init_std=1.0)
        >>> actor = ProbabilisticActor(
        ...     TensorDictModule(head, ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"], distribution_class=IndependentNormal,
        ...     return_log_prob=True)
        >>> loc, scale = head(torch.zeros(5, 3))
        >>> scale.shape, bool((scale == 1).all())
        (torch.Size([5, 2]), True)
    """

    def __init__(self, mean_network: nn.Module, action_dim: int, init_std: float = 1.0) -> None:
        super().__init__()
        if init_std <= 0:
            raise ValueError(f"init_std must be > 0, got {init_std}.")
        self.mean_network = mean_network
        self.log_std = nn.Parameter(torch.full((action_dim,), float(torch.tensor(init_std).log())))

    def forward(self, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        loc = self.mean_network(*inputs)
        return loc, self.log_std.exp().expand_as(loc)
