"""What every intrinsic-reward transform shares: keys, specs, reward mixing, bonus scaling.

``IntrinsicRewardTransform`` computes a bonus ``U`` for each transition, writes it to
``("next", "intrinsic_reward")``, keeps the environment's reward in ``("next", "extrinsic_reward")``
and sets ``("next", "reward")`` to ``r_e + η·U`` (paper, Algorithm 1). Subclasses say how ``U`` is
computed (``intrinsic_reward``) and which loss trains the model behind it (``make_loss``)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import Tensor, nn
from torchrl.data import Composite, Unbounded
from torchrl.envs.transforms import Transform
from torchrl.envs.transforms.rnd import RunningMeanStd
from torchrl.objectives.common import LossModule

from torchrl_vase._validation import check_non_negative, check_positive_int

REWARD_NORMALIZATIONS = (None, "median", "std")


class RecentMedianNormalizer(nn.Module):
    """VIME's reward scaling: divide by the mean of the last ``window`` per-batch medians.

    ``update(u)`` appends ``median(u)`` to a ring of the last ``window`` medians (buffers, saved in
    ``state_dict``); ``normalize(u)`` divides by their mean, as VIME's code does after appending
    the current batch's median.

    Examples:
        >>> import torch
        >>> normalizer = RecentMedianNormalizer(window=10)
        >>> normalizer.update(torch.tensor([1.0, 2.0, 9.0]))
        >>> normalizer.normalize(torch.tensor([4.0]))
        tensor([2.])
    """

    def __init__(self, window: int = 10) -> None:
        super().__init__()
        check_positive_int("window", window)
        self.register_buffer("medians", torch.zeros(window))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def update(self, values: Tensor) -> None:
        """Record the median of a batch of bonuses."""
        slot = int(self.count) % self.medians.numel()
        self.medians[slot] = values.detach().median().to(self.medians.dtype)
        self.count += 1

    def normalize(self, values: Tensor) -> Tensor:
        """Divide by the mean of the recorded medians (identity before the first update)."""
        filled = min(int(self.count), self.medians.numel())
        if filled == 0:
            return values
        # VIME's bonus is non-negative; for one that is not, divide by the medians' magnitude
        scale = self.medians[:filled].mean().abs().clamp_min(1e-8)
        return values / scale.to(values.dtype)


class IntrinsicRewardTransform(Transform):
    """Base class of the bonus transforms: ``r = r_e + η·U`` for every transition it is given.

    Per step inside an env (``TransformedEnv(env, transform)``) or on a batch (a collector's
    ``postproc``, ``ReplayBuffer(transform=...)``, ``transform(batch)``: one model evaluation),
    with the same numbers. Mixing starts from the extrinsic reward, so a second call recomputes the
    bonus instead of adding another. Subclasses implement ``intrinsic_reward``, ``make_loss`` and
    ``check_loss``.

    Keyword Args:
        eta: η ≥ 0, the bonus's weight in the reward (authors' script: 1e-4).
        mix_reward: write ``r_e + η·U`` to the reward key (default), or only the intrinsic reward.
        reward_normalization: ``None`` (paper), ``"median"`` (VIME: the mean of the last 10 batch
            medians) or ``"std"`` (a running std); statistics updated in training mode only.
        observation_key: where s lives (s' under ``"next"``).
        action_key: where a lives.
        reward_key: the env reward, under ``"next"``.
        intrinsic_reward_key: where U is written, under ``"next"``.
        extrinsic_reward_key: where r_e is copied, under ``"next"``."""

    #: the namespace of the model's training metrics when logged (a subclass names its own:
    #: ``bnn/elbo``, ``rnd/loss``)
    metric_prefix = "model/"

    def __init__(self, *, eta: float = 1e-4, mix_reward: bool = True,
                 reward_normalization: str | None = None,
                 observation_key: NestedKey = "observation", action_key: NestedKey = "action",
                 reward_key: NestedKey = "reward",
                 intrinsic_reward_key: NestedKey = "intrinsic_reward",
                 extrinsic_reward_key: NestedKey = "extrinsic_reward") -> None:
        if reward_normalization not in REWARD_NORMALIZATIONS:
            raise ValueError(
                f"reward_normalization must be one of {REWARD_NORMALIZATIONS}, "
                f"got {reward_normalization!r}.")
        eta = check_non_negative("eta", eta)
        out_keys = [intrinsic_reward_key]
        if mix_reward:
            out_keys += [extrinsic_reward_key, reward_key]
        super().__init__(in_keys=[observation_key, action_key, reward_key], out_keys=out_keys)
        self.eta = float(eta)
        self.mix_reward = bool(mix_reward)
        self.observation_key = observation_key
        self.action_key = action_key
        self.reward_key = reward_key
        self.intrinsic_reward_key = intrinsic_reward_key
        self.extrinsic_reward_key = extrinsic_reward_key
        self.reward_normalization = reward_normalization
        if reward_normalization == "median":
            self.bonus_stats = RecentMedianNormalizer(window=10)
        elif reward_normalization == "std":
            self.bonus_stats = RunningMeanStd(shape=())
        else:
            self.bonus_stats = None

    # -- What a subclass provides
    def intrinsic_reward(
        self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> Tensor:
        """The raw bonus ``U`` of each transition, shape ``[*batch]``."""
        raise NotImplementedError

    def make_loss(self, **kwargs: Any) -> LossModule:
        """The loss module that trains the model behind this bonus, with this transform's keys."""
        raise NotImplementedError

    def check_loss(self, loss: LossModule) -> None:
        """Raise a ``ValueError`` unless ``loss`` trains the very model this bonus evaluates."""
        raise NotImplementedError

    @property
    def transition_keys(self) -> tuple[NestedKey, ...]:
        """The entries of a transition that training the bonus's model needs."""
        return (self.observation_key, self.action_key, ("next", self.observation_key))

    def fit_statistics(self, transitions: TensorDictBase, *, new: int | None = None) -> None:
        """Refresh data statistics from a pool of transitions (nothing by default); ``new``:
        the pool grew by its last ``new`` rows since the last call (a cheaper update)."""

    # -- Specs
    @staticmethod
    def _spec_entry(spec: Composite, key: NestedKey, what: str):
        try:
            return spec[key]
        except KeyError:
            raise KeyError(
                f"{what} key {key!r} is not in the env's specs (keys: "
                f"{list(spec.keys(True, True))}); pass {what}_key=...") from None

    def _observation_features(self, env) -> int:
        """The observation's feature count from the env's specs; vector observations only."""
        batch_dims = len(env.batch_size)
        obs_spec = self._spec_entry(env.full_observation_spec, self.observation_key, "observation")
        self._spec_entry(env.full_reward_spec, self.reward_key, "reward")
        feature_shape = obs_spec.shape[batch_dims:]
        if len(feature_shape) != 1:
            raise ValueError(
                f"observation key {self.observation_key!r} has feature shape "
                f"{tuple(feature_shape)} (spec shape {tuple(obs_spec.shape)}); the bonus needs a "
                "vector observation [*batch, obs_dim]. Flatten it or add a feature extractor "
                "before this transform.")
        if not obs_spec.dtype.is_floating_point:
            raise TypeError(
                f"observation key {self.observation_key!r} has dtype {obs_spec.dtype}; the "
                "bonus needs real-valued observations.")
        return int(feature_shape[0])

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        reference = reward_spec[self.reward_key]
        bonus_spec = Unbounded(
            shape=reference.shape, device=reference.device, dtype=reference.dtype)
        reward_spec[self.intrinsic_reward_key] = bonus_spec.clone()
        if self.mix_reward:
            reward_spec[self.extrinsic_reward_key] = reference.clone()
            # r_e + η·U can leave the env's reward bounds
            reward_spec[self.reward_key] = bonus_spec.clone()
        return reward_spec

    # -- Computing and writing the bonus
    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase):
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase):
        return self._add_bonus(tensordict, next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Add the bonus to a batch of transitions (with their ``"next"`` entries), in place."""
        self._add_bonus(tensordict, self._next_of(tensordict))
        return tensordict

    @staticmethod
    def _next_of(tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict = tensordict.get("next", None)
        if next_tensordict is None:
            raise KeyError(
                "a batch of transitions needs a 'next' entry (as collectors and replay "
                f"buffers store them); got keys {list(tensordict.keys())}.")
        return next_tensordict

    def _add_bonus(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase):
        bonus = self.intrinsic_reward(tensordict, next_tensordict)
        self._check_finite(bonus, "the bonus")
        if self.bonus_stats is not None:
            if self.training:
                self.bonus_stats.update(bonus)
            bonus = self._normalize_bonus(bonus)
        return self.write_bonus(next_tensordict, bonus)

    def write_bonus(self, next_tensordict: TensorDictBase, bonus: Tensor) -> TensorDictBase:
        """Write ``bonus`` (``[*batch]``) as the intrinsic reward and, if mixing, the reward
        ``r_e + η·bonus``; the extrinsic reward is kept (or read back if already kept)."""
        extrinsic = next_tensordict.get(self.extrinsic_reward_key, None)
        if extrinsic is None:
            extrinsic = self._read(next_tensordict, self.reward_key, "reward")
        bonus = self._like_reward(bonus, extrinsic)
        next_tensordict.set(self.intrinsic_reward_key, bonus)
        if self.mix_reward:
            reward = extrinsic + self.eta * bonus
            self._check_finite(reward, "the reward r_e + eta * bonus")
            next_tensordict.set(self.extrinsic_reward_key, extrinsic)
            next_tensordict.set(self.reward_key, reward)
        return next_tensordict

    def confidence_term(self) -> float | None:
        """The part of the bonus that is the same for every transition of a batch (VASE's
        ``δ·H(q)``), where a measure has one and the bonus is not rescaled; ``None`` here."""
        return None

    def settings(self) -> str:
        """The settings that scale the bonus, for error messages (subclasses add their own)."""
        return f"eta={self.eta}"

    def _check_finite(self, value: Tensor, what: str) -> None:
        bad = ~torch.isfinite(value)
        if bad.any():
            raise FloatingPointError(
                f"{what} is not finite for {int(bad.sum())} of {value.numel()} transitions "
                f"(e.g. {value[bad].flatten()[0].item()}), with {self.settings()}: a setting "
                "that makes it overflow (a tiny sigma_c, a huge eta) or non-finite inputs.")

    def write_no_bonus(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write a zero bonus (``r = r_e``), for iterations before the model has learnt anything
        (the authors add none in the first)."""
        next_tensordict = self._next_of(tensordict)
        reward = self._read(next_tensordict, self.reward_key, "reward")
        self.write_bonus(next_tensordict, reward.new_zeros(reward.shape))
        return tensordict

    def _normalize_bonus(self, bonus: Tensor) -> Tensor:
        if isinstance(self.bonus_stats, RunningMeanStd):
            return bonus / self.bonus_stats.var.clamp_min(1e-8).sqrt().to(bonus.dtype)
        return self.bonus_stats.normalize(bonus)

    def _like_reward(self, bonus: Tensor, reward: Tensor) -> Tensor:
        if reward.shape[: bonus.dim()] != bonus.shape or reward.numel() != bonus.numel():
            raise ValueError(
                f"reward key {self.reward_key!r} has shape {tuple(reward.shape)}, which does not "
                f"match the transitions' batch {tuple(bonus.shape)}.")
        return bonus.reshape(reward.shape).to(reward.device, reward.dtype)

    def _read(
        self, tensordict: TensorDictBase, key: NestedKey, what: str, check_finite: bool = True
    ) -> Tensor:
        value = tensordict.get(key, None)
        if value is None:
            raise KeyError(
                f"{what} key {key!r} not found; keys present: "
                f"{list(tensordict.keys(True, True))}.")
        if check_finite and value.dtype.is_floating_point and not torch.isfinite(value).all():
            raise ValueError(
                f"{what} key {key!r} (shape {tuple(value.shape)}) contains non-finite values.")
        return value
