"""Random Network Distillation (Burda et al., 2018) from torchrl's own pieces, on batches too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import Tensor, nn
from torchrl.envs.transforms.rnd import RNDTransform, RunningMeanStd
from torchrl.modules import MLP
from torchrl.objectives.rnd import RNDLoss

from torchrl_vase._validation import check_positive_int, module_device
from torchrl_vase.transforms.intrinsic import IntrinsicRewardTransform


class RNDRewardTransform(IntrinsicRewardTransform):
    """The RND bonus with the same interface as the surprise transforms.

    U is torchrl's ``RNDTransform``'s (a trainable predictor's squared error against a frozen
    random network on the next observation, running observation and bonus normalisation), trained
    by torchrl's ``RNDLoss`` (``make_loss``, sharing the observation statistics). What this class
    adds: a ``forward`` for batches, the mixing ``r_e + η·U`` and the extrinsic reward key.

    Args:
        observation_dim: the observation's feature count.

    Keyword Args:
        num_cells: hidden widths of the target and predictor MLPs built when none are given.
        embedding_dim: their output size.
        target_network: the frozen random network (built from the two above if ``None``).
        predictor_network: the trained network (likewise).
        normalize_obs: standardise observations by running statistics (clipped to ±5).
        normalize_reward: divide the bonus by its running std (clipped to 5).
        **kwargs: ``eta``, ``mix_reward``, ``reward_normalization`` and the keys
            (``IntrinsicRewardTransform``).

    Examples:
        >>> import torch
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> transform = RNDRewardTransform(observation_dim=3, eta=1e-2)
        >>> rollout = TransformedEnv(GymEnv("Pendulum-v1"), transform).rollout(5)
        >>> bool((rollout["next", "intrinsic_reward"] >= 0).all())
        True
        >>> loss = transform.make_loss()
        >>> loss.obs_rms is transform.obs_rms
        True
    """

    metric_prefix = "rnd/"

    def __init__(self, observation_dim: int, *, num_cells: Sequence[int] = (64, 64),
                 embedding_dim: int = 64, target_network: nn.Module | None = None,
                 predictor_network: nn.Module | None = None, normalize_obs: bool = True,
                 normalize_reward: bool = True, **kwargs: Any) -> None:
        check_positive_int("observation_dim", observation_dim)
        check_positive_int("embedding_dim", embedding_dim)
        super().__init__(**kwargs)

        def network() -> nn.Module:
            return MLP(observation_dim, embedding_dim, num_cells=list(num_cells))

        self.observation_dim = observation_dim
        self.rnd = RNDTransform(target_network if target_network is not None else network(),
                                predictor_network if predictor_network is not None else network(),
                                in_keys=[self.observation_key], out_keys=["_rnd_bonus"],
                                normalize_obs=normalize_obs, normalize_reward=normalize_reward)
        # torchrl creates these at the first step; up front, the loss can hold them from the start
        if normalize_obs:
            self.rnd._obs_rms = RunningMeanStd(shape=(observation_dim,))
        if normalize_reward:
            self.rnd._reward_rms = RunningMeanStd(shape=())

    @property
    def predictor_network(self) -> nn.Module:
        return self.rnd.predictor_network

    @property
    def target_network(self) -> nn.Module:
        return self.rnd.target_network

    @property
    def obs_rms(self) -> RunningMeanStd | None:
        """The running observation statistics shared with the loss."""
        return self.rnd.obs_rms

    @property
    def transition_keys(self) -> tuple:
        return (("next", self.observation_key),)

    def set_container(self, container) -> None:
        super().set_container(container)
        if self.parent is not None:
            obs_dim = self._observation_features(self.parent)
            if obs_dim != self.observation_dim:
                raise ValueError(
                    f"observation {self.observation_key!r} has {obs_dim} features, the transform "
                    f"was built for observation_dim={self.observation_dim}.")

    def make_loss(self, **kwargs: Any) -> RNDLoss:
        """torchrl's ``RNDLoss`` on this transform's networks, statistics and key."""
        loss = RNDLoss(
            self.predictor_network, self.target_network, obs_rms=self.obs_rms, **kwargs)
        loss.set_keys(observation=("next", self.observation_key))
        return loss

    def check_loss(self, loss) -> None:
        if not isinstance(loss, RNDLoss):
            raise TypeError(f"an RND bonus is trained by an RNDLoss, got {type(loss).__name__}.")
        if (
            loss.predictor_network is not self.predictor_network
            or loss.target_network is not self.target_network
            or loss.obs_rms is not self.obs_rms):
            raise ValueError(
                "the RNDLoss does not hold this transform's predictor, target and observation "
                "statistics; build it with transform.make_loss().")

    def intrinsic_reward(
        self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> Tensor:
        next_obs = self._read(next_tensordict, self.observation_key, "next observation")
        device = module_device(self.predictor_network)  # the data may come from CPU envs
        scratch = next_tensordict.empty().to(device)
        scratch.set(self.observation_key, next_obs.to(device))
        with torch.no_grad():
            self.rnd._step(tensordict, scratch)
        return scratch.get("_rnd_bonus").squeeze(-1)
