"""Surprise bonuses as TorchRL transforms: ``TransformedEnv(env, VASERewardTransform())``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import Tensor, nn
from torchrl.data import Categorical, Composite, OneHot, Unbounded
from torchrl.envs.transforms import Transform
from torchrl.envs.transforms.rnd import RunningMeanStd

from torchrl_vase._validation import check_non_negative, check_num_samples, check_positive
from torchrl_vase.modules.bayesian_mlp import BayesianMLP
from torchrl_vase.objectives.elbo import dynamics_data
from torchrl_vase.surprise import nll_surprise, vase_surprise, vime_information_gain

MEASURES = ("vase", "nll", "vime")
REWARD_NORMALIZATIONS = (None, "median", "std")
_TARGETS = ("next_observation", "delta")


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
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}.")
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
        scale = self.medians[:filled].mean().clamp_min(1e-8)
        return values / scale.to(values.dtype)


class SurpriseRewardTransform(Transform):
    """Adds a surprise bonus from a Bayesian dynamics model to an environment's reward.

    For each transition ``(s_t, a_t, s_{t+1})`` it computes the surprise ``U`` of the chosen
    ``measure`` under a ``BayesianMLP`` (one batched call for all transitions
    it is given), writes it to ``("next", intrinsic_reward_key)``, copies the environment's
    reward to ``("next", extrinsic_reward_key)`` and sets ``("next", reward_key)`` to
    ``r_e + η·U`` (paper, Algorithm 1). With ``mix_reward=False`` the reward is left alone and only
    the intrinsic reward is written, for a user who mixes it later.

    Measures (see ``torchrl_vase.surprise``): ``"vase"`` (U_VASE, Eq. 10), ``"nll"``
    (surprisal, Eq. 4), ``"vime"`` (VIME's information gain, Eq. 6).

    Two places to use it, with the same numbers for the same model and weight samples:

    * per step, inside an env: ``TransformedEnv(env, VASERewardTransform(...))`` (``_step``);
    * on a batch: a collector's ``postproc``, ``ReplayBuffer(transform=...)``, or a direct call
      ``transform(batch)`` on collected data (``forward``). This is the fast path: one model
      evaluation for the whole batch. Mixing always starts from the extrinsic reward, so calling
      it again on the same data recomputes the bonus instead of adding a second one.

    With ``model=None`` a ``BayesianMLP`` (``num_cells``, ``activation_class``,
    ``prior_std``; the paper's classic defaults) is built from the parent env's observation and
    action specs when the transform is attached to an env; read it back as ``transform.model``
    (to train it with ``VariationalELBOLoss``). A given model is checked
    against the specs at that same point. Discrete actions (``Categorical`` or ``OneHot`` specs)
    are one-hot encoded for the model. Observations are cast to the model's dtype.

    The model must see what ``VariationalELBOLoss`` trained it on: pass the
    loss's ``target`` and normalisation statistics (``input_stats``, ``target_stats``), or build
    the transform with ``from_loss``.

    Args:
        model: the dynamics model, input ``cat(observation, action)``, output ``observation``.
            ``None`` builds one from the parent env's specs.

    Keyword Args:
        measure: ``"vase"``, ``"nll"`` or ``"vime"``.
        eta: η ≥ 0, the weight of the bonus in the reward (authors' script: 1e-4).
        delta: δ ≥ 0 of U_VASE's confidence term (paper: best in [1e-4, 1e-2]; default 1e-3).
        sigma_c: σ_c of the likelihood (paper: 5.0).
        num_samples: N weight samples per evaluation (paper: 10).
        mix_reward: write ``r_e + η·U`` to the reward key (default) or leave it alone.
        reward_normalization: ``None`` (paper), ``"median"`` (VIME: divide by the mean of the last
            10 per-batch medians) or ``"std"`` (divide by a running std, like torchrl's RND).
            Statistics are buffers, updated only in training mode; the normalised bonus is what
            is written to the intrinsic reward key.
        observation_key: where s lives (nested keys allowed); s_{t+1} is read from
            ``("next", observation_key)``.
        action_key: where a lives.
        reward_key: the env reward, under ``"next"``.
        intrinsic_reward_key: where U is written, under ``"next"``.
        extrinsic_reward_key: where r_e is copied, under ``"next"``.
        target: what the model predicts: ``"next_observation"`` (paper) or ``"delta"`` (s' − s).
        input_stats: running statistics to standardise the model's inputs with
            (``VariationalELBOLoss(...).input_stats``).
        target_stats: the same for its targets (``.target_stats``).
        num_cells: hidden widths of the model built when ``model=None``.
        activation_class: its activation.
        prior_std: its σ_m.
        vime_step_size: λ of VIME's information gain.
        vime_clip: the upper clip of VIME's information gain.
        seed: if given, every evaluation draws the same N weight samples (a generator re-seeded
            per call): the bonus is then a deterministic function of q and the transition.

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), VASERewardTransform(eta=1e-4))
        >>> rollout = env.rollout(5)
        >>> rollout["next", "intrinsic_reward"].shape
        torch.Size([5, 1])
        >>> torch.allclose(
        ...     rollout["next", "reward"],
        ...     rollout["next", "extrinsic_reward"] + 1e-4 * rollout["next", "intrinsic_reward"])
        True
    """

    def __init__(
        self,
        model: BayesianMLP | None = None,
        *,
        measure: str = "vase",
        eta: float = 1e-4,
        delta: float = 1e-3,
        sigma_c: float = 5.0,
        num_samples: int = 10,
        mix_reward: bool = True,
        reward_normalization: str | None = None,
        observation_key: NestedKey = "observation",
        action_key: NestedKey = "action",
        reward_key: NestedKey = "reward",
        intrinsic_reward_key: NestedKey = "intrinsic_reward",
        extrinsic_reward_key: NestedKey = "extrinsic_reward",
        target: str = "next_observation",
        input_stats: RunningMeanStd | None = None,
        target_stats: RunningMeanStd | None = None,
        num_cells: Sequence[int] = (32,),
        activation_class: type[nn.Module] = nn.ReLU,
        prior_std: float = 0.5,
        vime_step_size: float = 0.01,
        vime_clip: float = 1000.0,
        seed: int | None = None,
    ) -> None:
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}.")
        if reward_normalization not in REWARD_NORMALIZATIONS:
            raise ValueError(
                f"reward_normalization must be one of {REWARD_NORMALIZATIONS}, "
                f"got {reward_normalization!r}."
            )
        if target not in _TARGETS:
            raise ValueError(f"target must be one of {_TARGETS}, got {target!r}.")
        eta = check_non_negative("eta", eta)
        delta = check_non_negative("delta", delta)
        if model is not None and not isinstance(model, BayesianMLP):
            raise TypeError(f"model must be a BayesianMLP or None, got {type(model).__name__}.")
        out_keys = [intrinsic_reward_key]
        if mix_reward:
            out_keys += [extrinsic_reward_key, reward_key]
        super().__init__(in_keys=[observation_key, action_key, reward_key], out_keys=out_keys)
        self.model = model
        self.measure = measure
        self.eta = float(eta)
        self.delta = float(delta)
        self.sigma_c = check_positive("sigma_c", sigma_c)
        self.num_samples = check_num_samples(num_samples)
        self.mix_reward = bool(mix_reward)
        self.observation_key = observation_key
        self.action_key = action_key
        self.reward_key = reward_key
        self.intrinsic_reward_key = intrinsic_reward_key
        self.extrinsic_reward_key = extrinsic_reward_key
        self.target = target
        self.input_stats = input_stats
        self.target_stats = target_stats
        self.num_cells = list(num_cells)
        self.activation_class = activation_class
        self.prior_std = check_positive("prior_std", prior_std)
        self.vime_step_size = check_positive("vime_step_size", vime_step_size)
        self.vime_clip = check_positive("vime_clip", vime_clip)
        self.seed = seed
        self.reward_normalization = reward_normalization
        if reward_normalization == "median":
            self.bonus_stats = RecentMedianNormalizer(window=10)
        elif reward_normalization == "std":
            self.bonus_stats = RunningMeanStd(shape=())
        else:
            self.bonus_stats = None
        #: Classes of a discrete action space (one-hot encoded for the model); None: continuous.
        self.num_action_classes: int | None = None
        self._action_is_index = False

    @classmethod
    def from_loss(cls, loss, **kwargs) -> SurpriseRewardTransform:
        """A transform sharing a ``VariationalELBOLoss``'s model, keys,
        target, σ_c and normalisation statistics.

        Examples:
            >>> from torchrl_vase import VariationalELBOLoss
            >>> loss = VariationalELBOLoss(BayesianMLP(4, 3), normalize_inputs=True)
            >>> transform = VASERewardTransform.from_loss(loss, eta=1e-3)
            >>> transform.model is loss.model and transform.input_stats is loss.input_stats
            True
        """
        keys = loss.tensor_keys
        shared = {
            "sigma_c": loss.sigma_c,
            "target": loss.target,
            "input_stats": loss.input_stats,
            "target_stats": loss.target_stats,
            "observation_key": keys.observation,
            "action_key": keys.action,
        }
        return cls(loss.model, **{**shared, **kwargs})

    # ----------------------------------------------------------------------------------------
    # Specs: bind the model to the parent env
    # ----------------------------------------------------------------------------------------
    def set_container(self, container) -> None:
        super().set_container(container)
        parent = self.parent
        if parent is not None:
            self._bind_to_env(parent)

    def _bind_to_env(self, env) -> None:
        """Read observation and action sizes from the env's specs; build or check the model."""
        batch_dims = len(env.batch_size)
        obs_spec = self._spec_entry(env.full_observation_spec, self.observation_key, "observation")
        action_spec = self._spec_entry(env.full_action_spec, self.action_key, "action")
        self._spec_entry(env.full_reward_spec, self.reward_key, "reward")
        feature_shape = obs_spec.shape[batch_dims:]
        if len(feature_shape) != 1:
            raise ValueError(
                f"observation key {self.observation_key!r} has feature shape "
                f"{tuple(feature_shape)} (spec shape {tuple(obs_spec.shape)}); surprise needs a "
                "vector observation [*batch, obs_dim]. Flatten it or add a feature extractor "
                "before this transform."
            )
        if not obs_spec.dtype.is_floating_point:
            raise TypeError(
                f"observation key {self.observation_key!r} has dtype {obs_spec.dtype}; the "
                "dynamics model needs real-valued observations."
            )
        obs_dim = feature_shape[0]
        action_dim = self._action_features(action_spec, batch_dims)
        if self.model is None:
            self.model = BayesianMLP(
                obs_dim + action_dim,
                obs_dim,
                self.num_cells,
                self.activation_class,
                prior_std=self.prior_std,
            )
        elif (self.model.in_features, self.model.out_features) != (obs_dim + action_dim, obs_dim):
            raise ValueError(
                f"the model (in_features={self.model.in_features}, "
                f"out_features={self.model.out_features}) does not fit the env: observation "
                f"{self.observation_key!r} has {obs_dim} features and action {self.action_key!r} "
                f"{action_dim}, so the model needs in_features={obs_dim + action_dim}, "
                f"out_features={obs_dim}."
            )

    @staticmethod
    def _spec_entry(spec: Composite, key: NestedKey, what: str):
        try:
            return spec[key]
        except KeyError:
            raise KeyError(
                f"{what} key {key!r} is not in the env's specs (keys: "
                f"{list(spec.keys(True, True))}); pass {what}_key=..."
            ) from None

    def _action_features(self, action_spec, batch_dims: int) -> int:
        if isinstance(action_spec, Categorical):
            self.num_action_classes = int(action_spec.space.n)
            self._action_is_index = True
            return self.num_action_classes
        if isinstance(action_spec, OneHot):
            self.num_action_classes = int(action_spec.shape[-1])
            return self.num_action_classes
        feature_shape = action_spec.shape[batch_dims:]
        if len(feature_shape) != 1 or not action_spec.dtype.is_floating_point:
            raise ValueError(
                f"action key {self.action_key!r} has spec {type(action_spec).__name__} with "
                f"feature shape {tuple(feature_shape)} and dtype {action_spec.dtype}; supported: "
                "continuous vector actions, Categorical and OneHot."
            )
        return feature_shape[0]

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        reference = reward_spec[self.reward_key]
        bonus_spec = Unbounded(
            shape=reference.shape, device=reference.device, dtype=reference.dtype
        )
        reward_spec[self.intrinsic_reward_key] = bonus_spec.clone()
        if self.mix_reward:
            reward_spec[self.extrinsic_reward_key] = reference.clone()
            # r_e + η·U can leave the env's reward bounds
            reward_spec[self.reward_key] = bonus_spec.clone()
        return reward_spec

    # ----------------------------------------------------------------------------------------
    # Computing the bonus
    # ----------------------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase):
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase):
        return self._add_bonus(tensordict, next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Add the bonus to a batch of transitions (with their ``"next"`` entries), in place."""
        next_tensordict = tensordict.get("next", None)
        if next_tensordict is None:
            raise KeyError(
                "forward needs transitions with a 'next' entry (as collectors and replay "
                f"buffers store them); got keys {list(tensordict.keys())}."
            )
        self._add_bonus(tensordict, next_tensordict)
        return tensordict

    def _add_bonus(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase):
        obs = self._read(tensordict, self.observation_key, "observation")
        action = self._read(tensordict, self.action_key, "action")
        next_obs = self._read(next_tensordict, self.observation_key, "next observation")
        bonus = self.surprise(obs, action, next_obs)
        if self.bonus_stats is not None:
            if self.training:
                self.bonus_stats.update(bonus)
            bonus = self._normalize_bonus(bonus)

        extrinsic = next_tensordict.get(self.extrinsic_reward_key, None)
        if extrinsic is None:
            extrinsic = self._read(next_tensordict, self.reward_key, "reward", check_finite=False)
        bonus = self._like_reward(bonus, extrinsic)
        next_tensordict.set(self.intrinsic_reward_key, bonus)
        if self.mix_reward:
            next_tensordict.set(self.extrinsic_reward_key, extrinsic)
            next_tensordict.set(self.reward_key, extrinsic + self.eta * bonus)
        return next_tensordict

    def _normalize_bonus(self, bonus: Tensor) -> Tensor:
        if isinstance(self.bonus_stats, RunningMeanStd):
            return bonus / self.bonus_stats.var.clamp_min(1e-8).sqrt().to(bonus.dtype)
        return self.bonus_stats.normalize(bonus)

    def _like_reward(self, bonus: Tensor, reward: Tensor) -> Tensor:
        batch = bonus.shape
        if reward.shape[: len(batch)] != batch or reward.numel() != bonus.numel():
            raise ValueError(
                f"reward key {self.reward_key!r} has shape {tuple(reward.shape)}, which does not "
                f"match the transitions' batch {tuple(batch)}."
            )
        return bonus.reshape(reward.shape).to(reward.dtype)

    def _read(
        self, tensordict: TensorDictBase, key: NestedKey, what: str, check_finite: bool = True
    ) -> Tensor:
        value = tensordict.get(key, None)
        if value is None:
            raise KeyError(
                f"{what} key {key!r} not found; keys present: "
                f"{list(tensordict.keys(True, True))}."
            )
        if check_finite and value.dtype.is_floating_point and not torch.isfinite(value).all():
            raise ValueError(
                f"{what} key {key!r} (shape {tuple(value.shape)}) contains non-finite values."
            )
        return value

    def _require_model(self) -> BayesianMLP:
        if self.model is None:
            raise RuntimeError(
                "this transform has no model yet: pass model=... or append the transform to an "
                "env (TransformedEnv) so it can build one from the specs."
            )
        return self.model

    def encode_action(self, action: Tensor) -> Tensor:
        """The action as the model sees it: one-hot for discrete spaces, the model's dtype."""
        model = self._require_model()
        if self._action_is_index:
            if action.shape[-1:] == (1,):
                action = action.squeeze(-1)
            action = F.one_hot(action.long(), self.num_action_classes)
        elif self.num_action_classes is None and not action.dtype.is_floating_point:
            raise TypeError(
                f"action key {self.action_key!r} has integer dtype {action.dtype} but the "
                "transform was not bound to a discrete action spec; attach it to the env first."
            )
        return action.to(model.mu.dtype)

    def model_inputs(
        self, obs: Tensor, action: Tensor, next_obs: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``(obs, action, target)`` as the model was trained on them: cast, encoded, normalised."""
        model = self._require_model()
        obs, next_obs = obs.to(model.mu.dtype), next_obs.to(model.mu.dtype)
        action = self.encode_action(action)
        if obs.shape[-1:] != (model.out_features,) or action.shape[:-1] != obs.shape[:-1]:
            raise ValueError(
                f"observation {self.observation_key!r} of shape {tuple(obs.shape)} and action "
                f"{self.action_key!r} of shape {tuple(action.shape)} (as encoded) do not fit the "
                f"model (in_features={model.in_features}, out_features={model.out_features})."
            )
        x, target = dynamics_data(
            obs,
            action,
            next_obs,
            target=self.target,
            input_stats=self.input_stats,
            target_stats=self.target_stats,
        )
        return x[..., : obs.shape[-1]], x[..., obs.shape[-1] :], target

    def surprise(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> Tensor:
        """The raw (un-normalised) surprise of each transition, shape ``[*batch]``."""
        model = self._require_model()
        obs, action, target = self.model_inputs(obs, action, next_obs)
        generator = None
        if self.seed is not None:
            generator = torch.Generator(device=model.mu.device).manual_seed(self.seed)
        common = {"num_samples": self.num_samples, "sigma_c": self.sigma_c, "generator": generator}
        if self.measure == "vase":
            return vase_surprise(model, obs, action, target, delta=self.delta, **common)
        if self.measure == "nll":
            return nll_surprise(model, obs, action, target, **common)
        return vime_information_gain(
            model, obs, action, target, step_size=self.vime_step_size, clip=self.vime_clip, **common
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(measure={self.measure!r}, eta={self.eta}, "
            f"delta={self.delta}, sigma_c={self.sigma_c}, num_samples={self.num_samples}, "
            f"mix_reward={self.mix_reward}, reward_normalization={self.reward_normalization!r})"
        )


class VASERewardTransform(SurpriseRewardTransform):
    """The VASE bonus (paper, Eq. 10): ``SurpriseRewardTransform`` with ``measure="vase"``.

    See ``SurpriseRewardTransform`` for every argument.

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("MountainCarContinuous-v0"), VASERewardTransform())
        >>> env.transform.model.in_features, env.transform.model.out_features
        (3, 2)
    """

    def __init__(self, model: BayesianMLP | None = None, **kwargs) -> None:
        kwargs.setdefault("measure", "vase")
        super().__init__(model, **kwargs)


class NLLRewardTransform(SurpriseRewardTransform):
    """The surprisal bonus (Achiam & Sastry): ``SurpriseRewardTransform(measure="nll")``.

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), NLLRewardTransform(eta=1e-3))
        >>> env.rollout(3)["next", "intrinsic_reward"].shape
        torch.Size([3, 1])
    """

    def __init__(self, model: BayesianMLP | None = None, **kwargs) -> None:
        kwargs.setdefault("measure", "nll")
        super().__init__(model, **kwargs)


class VIMERewardTransform(SurpriseRewardTransform):
    """VIME's information-gain bonus: ``SurpriseRewardTransform(measure="vime")``.

    VIME's own recipe also scales the bonus by recent medians: pass
    ``reward_normalization="median"``.

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> transform = VIMERewardTransform(reward_normalization="median")
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), transform)
        >>> bool((env.rollout(3)["next", "intrinsic_reward"] >= 0).all())
        True
    """

    def __init__(self, model: BayesianMLP | None = None, **kwargs) -> None:
        kwargs.setdefault("measure", "vime")
        super().__init__(model, **kwargs)
