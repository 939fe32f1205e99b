"""Surprise bonuses as TorchRL transforms: ``TransformedEnv(env, VASERewardTransform())``; and
``ModelBonusTransform``, what every bonus on a ``DynamicsModel`` shares (the surprise measures
here, Disagreement and ICM in ``transforms.forward_bonus``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from tensordict import TensorDictBase
from torch import Tensor, nn
from torchrl.data import Categorical, OneHot

from torchrl_vase import defaults
from torchrl_vase._validation import check_num_samples, check_positive, check_sigma_c
from torchrl_vase.modules.bayesian_mlp import INIT_MEANS, SAMPLINGS
from torchrl_vase.modules.dynamics import TARGETS, DynamicsModel
from torchrl_vase.objectives.elbo import TransitionLoss, VariationalELBOLoss
from torchrl_vase.surprise import nll_surprise, vase_surprise, vime_information_gain
from torchrl_vase.transforms.intrinsic import IntrinsicRewardTransform

MEASURES = ("vase", "nll", "vime")
_VIME_NEEDS_WEIGHTS = ("measure='vime' needs weight sampling: VIME's information gain is a "
                       "gradient with respect to the weights")
# settings of the model a transform builds for itself (the library's rule: the authors' code,
# torchrl_vase.defaults); with a given model they are the model's
_BUILD_DEFAULTS = {"num_cells": (32,), "activation_class": nn.ReLU, "prior_std": 0.5,
                   "init_mean": defaults.INIT_MEAN, "sigma_c": defaults.SIGMA_C,
                   "target": "next_observation", "standardize": True}


class ModelBonusTransform(IntrinsicRewardTransform):
    """A bonus computed by a model of transitions: one ``DynamicsModel`` (its data's
    standardisation by the pool, its network) that the transform evaluates and ``loss_class``
    trains (``make_loss``), so the two cannot see different data. With ``model=None`` the model is
    built from the parent env's specs when the transform is attached (``_build_model``); a given
    model is checked against them. A subclass gives ``bonus(obs, action, next_obs)``, the raw U.

    Args:
        model: the ``DynamicsModel``, or ``None`` to build one from the parent env's specs.
        **kwargs: ``eta``, ``mix_reward``, ``reward_normalization`` and the keys
            (``IntrinsicRewardTransform``)."""

    #: the loss that trains the model (its ``network_class``: the network the model must hold)
    loss_class: ClassVar[type[TransitionLoss]]

    def __init__(self, model: DynamicsModel | None = None, **kwargs: Any) -> None:
        if model is not None:
            network_class = self.loss_class.network_class
            if not isinstance(model, DynamicsModel):
                raise TypeError(f"model must be a DynamicsModel or None, got "
                                f"{type(model).__name__}: wrap the {network_class.__name__} "
                                "once, DynamicsModel(network, ...), and give that one object to "
                                "the transform and to its loss.")
            if not isinstance(model.network, network_class):
                raise TypeError(f"{type(self).__name__} evaluates a {network_class.__name__}; "
                                f"this model holds a {type(model.network).__name__}.")
        super().__init__(**kwargs)
        self.model = model

    def make_loss(self, **kwargs: Any) -> TransitionLoss:
        """The ``loss_class`` on this transform's model and keys."""
        loss = self.loss_class(self._require_model(), **kwargs)
        loss.set_keys(observation=self.observation_key, action=self.action_key,
                      next_observation=("next", self.observation_key))
        return loss

    def check_loss(self, loss) -> None:
        """Raise unless ``loss`` is a ``loss_class`` on this transform's model and keys."""
        if not isinstance(loss, self.loss_class):
            raise TypeError(f"{type(self).__name__}'s model is trained by a "
                            f"{self.loss_class.__name__}, got {type(loss).__name__}.")
        if loss.model is not self._require_model():
            raise ValueError(
                "the loss and the transform hold different DynamicsModel objects, so the loss "
                "would train one model (and its standardisation statistics) and the bonus "
                "evaluate another; build the loss with transform.make_loss().")
        keys = loss.tensor_keys
        expected = (self.observation_key, self.action_key, ("next", self.observation_key))
        if (keys.observation, keys.action, keys.next_observation) != expected:
            raise ValueError(
                f"the loss reads {keys.observation!r}, {keys.action!r}, "
                f"{keys.next_observation!r} but the transform {expected}; use "
                "transform.make_loss() or loss.set_keys(...).")

    def fit_statistics(self, transitions: TensorDictBase, *, new: int | None = None) -> None:
        """Set the model's standardisation statistics from a pool (``new``: only its last rows are
        new)."""
        model = self._require_model()
        if model.standardize:
            obs, action, next_obs = (
                transitions.get(key) for key in self.transition_keys)
            model.update_statistics(obs, action, next_obs, new=new)

    # -- Specs: bind the model to the parent env
    def set_container(self, container) -> None:
        super().set_container(container)
        parent = self.parent
        if parent is not None:
            self._bind_to_env(parent)

    def _bind_to_env(self, env) -> None:
        """Read observation and action sizes from the env's specs; build or check the model."""
        obs_dim = self._observation_features(env)
        action_spec = self._spec_entry(env.full_action_spec, self.action_key, "action")
        action_dim, classes = self._action_features(action_spec, len(env.batch_size))
        if self.model is None:
            self.model = self._build_model(obs_dim, action_dim, classes)
            return
        model = self.model
        if (model.observation_dim, model.action_dim) != (obs_dim, action_dim):
            raise ValueError(
                f"the model (observation_dim={model.observation_dim}, "
                f"action_dim={model.action_dim}) does not fit the env: observation "
                f"{self.observation_key!r} has {obs_dim} features and action {self.action_key!r} "
                f"{action_dim}.")
        if classes is not None and model.action_classes != classes:
            raise ValueError(
                f"the env's action {self.action_key!r} is discrete with {classes} classes; build "
                f"the model with action_classes={classes}.")

    def _action_features(self, action_spec, batch_dims: int) -> tuple[int, int | None]:
        if isinstance(action_spec, Categorical):
            classes = int(action_spec.space.n)
            return classes, classes
        if isinstance(action_spec, OneHot):
            classes = int(action_spec.shape[-1])
            return classes, classes
        feature_shape = action_spec.shape[batch_dims:]
        if len(feature_shape) != 1 or not action_spec.dtype.is_floating_point:
            raise ValueError(
                f"action key {self.action_key!r} has spec {type(action_spec).__name__} with "
                f"feature shape {tuple(feature_shape)} and dtype {action_spec.dtype}; supported: "
                "continuous vector actions, Categorical and OneHot.")
        return int(feature_shape[0]), None

    def _require_model(self) -> DynamicsModel:
        if self.model is None:
            raise RuntimeError(
                "this transform has no model yet: pass model=... or append the transform to an "
                "env (TransformedEnv) so it can build one from the specs.")
        return self.model

    def intrinsic_reward(
        self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> Tensor:
        obs = self._read(tensordict, self.observation_key, "observation")
        action = self._read(tensordict, self.action_key, "action")
        next_obs = self._read(next_tensordict, self.observation_key, "next observation")
        return self.bonus(obs, action, next_obs)

    def bonus(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> Tensor:
        """The raw U of each transition, shape ``[*batch]``."""
        raise NotImplementedError

    def prepare(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> tuple[Tensor, ...]:
        """``(s, a, y)`` as the model prepares them, a refusal naming the transform's keys."""
        try:
            return self._require_model().prepare(obs, action, next_obs)
        except (TypeError, ValueError) as error:
            raise type(error)(
                f"{error} (keys: observation {self.observation_key!r}, action "
                f"{self.action_key!r})") from None

    def _build_model(self, obs_dim: int, action_dim: int, classes: int | None) -> DynamicsModel:
        """The model a transform given none builds for the env's sizes."""
        raise NotImplementedError

class SurpriseRewardTransform(ModelBonusTransform):
    """Adds a surprise bonus from a Bayesian dynamics model to an environment's reward.

    For each transition it computes the surprise U of ``measure`` under a ``DynamicsModel`` (one
    batched call), writes it to ``("next", intrinsic_reward_key)``, copies the reward to
    ``("next", extrinsic_reward_key)`` and sets ``("next", reward_key)`` to ``r_e + η·U`` (paper,
    Algorithm 1); ``IntrinsicRewardTransform`` has the step and batch paths, mixing and scaling.
    Measures (``torchrl_vase.surprise``): ``"vase"`` (Eq. 10), ``"nll"`` (Eq. 4), ``"vime"``
    (Eq. 6). The model's ``prepare`` feeds the network as ``VariationalELBOLoss``'s does: give both
    the same ``DynamicsModel`` (``make_loss`` does).

    With ``model=None`` a model is built from the parent env's specs when the transform is attached
    (``num_cells``, ``activation_class``, ``prior_std``, ``init_mean``, ``sigma_c``, ``sampling``,
    ``target``, ``standardize``: ``DynamicsModel.build``'s, ``measure="vime"`` needing
    ``sampling="weights"``; the authors' defaults, ``torchrl_vase.defaults``; the paper's text:
    ``**PAPER_TEXT``), read back as ``transform.model``; a given model is checked against the
    specs there, and those settings must be left out. Discrete actions are one-hot encoded.

    Args:
        model: the ``DynamicsModel``, or ``None`` to build one from the parent env's specs.

    Keyword Args:
        measure: ``"vase"``, ``"nll"`` or ``"vime"``.
        delta: δ ≥ 0 of U_VASE's confidence term (the authors' 0; the paper's text: 1e-3).
        num_samples: N weight samples per evaluation (paper: 10).
        vime_step_size: λ of VIME's information gain.
        vime_clip: the upper clip of VIME's information gain.
        seed: every evaluation draws the same N samples (a CPU generator re-seeded per call): the
            bonus is then a deterministic function of q and the transition.
        **kwargs: ``eta``, ``mix_reward``, ``reward_normalization`` and the keys
            (``IntrinsicRewardTransform``).

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

    metric_prefix = "bnn/"
    loss_class = VariationalELBOLoss

    def __init__(self, model: DynamicsModel | None = None, *, measure: str = "vase",
                 delta: float = defaults.DELTA, num_samples: int = 10,
                 num_cells: Sequence[int] | None = None,
                 activation_class: type[nn.Module] | None = None, prior_std: float | None = None,
                 init_mean: str | None = None, sigma_c: float | None = None,
                 target: str | None = None, standardize: bool | None = None,
                 sampling: str | None = None, vime_step_size: float = 0.01,
                 vime_clip: float = 1000.0, seed: int | None = None, **kwargs: Any) -> None:
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}.")
        build = {"num_cells": num_cells, "activation_class": activation_class,
                 "prior_std": prior_std, "init_mean": init_mean, "sigma_c": sigma_c,
                 "target": target, "standardize": standardize, "sampling": sampling}
        super().__init__(model, **kwargs)  # the model's kind checked
        if model is not None:
            _check_given_model(model, measure, build)
        else:
            build = _build_settings(measure, build)
        delta = float(delta)
        if not delta >= 0 or delta == float("inf"):
            raise ValueError(f"delta must be a finite number >= 0, got {delta}.")
        self.measure = measure
        self.delta = delta
        self.num_samples = check_num_samples(num_samples)
        self._build = build
        self.vime_step_size = check_positive("vime_step_size", vime_step_size)
        self.vime_clip = check_positive("vime_clip", vime_clip)
        self.seed = seed

    def _build_model(self, obs_dim: int, action_dim: int, classes: int | None) -> DynamicsModel:
        build = dict(self._build)
        return DynamicsModel.build(obs_dim, action_dim, build.pop("num_cells"),
                                   build.pop("activation_class"), action_classes=classes, **build)

    def bonus(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> Tensor:
        return self.surprise(obs, action, next_obs)

    def surprise(self, obs: Tensor, action: Tensor, next_obs: Tensor, *,
                 generator: torch.Generator | None = None) -> Tensor:
        """The raw (un-normalised) surprise of each transition, shape ``[*batch]``; the weight
        samples from ``generator`` if given (else from ``seed``'s, else the global RNG)."""
        model = self._require_model()
        obs, action, target = self.prepare(obs, action, next_obs)
        if generator is None and self.seed is not None:
            # on the CPU whatever the model's device: a seeded bonus is the same number on a GPU
            generator = torch.Generator().manual_seed(self.seed)
        common = {"num_samples": self.num_samples, "sigma_c": model.sigma_c, "generator": generator}
        network = model.network
        if self.measure == "vase":
            return vase_surprise(network, obs, action, target, delta=self.delta, **common)
        if self.measure == "nll":
            return nll_surprise(network, obs, action, target, **common)
        return vime_information_gain(
            network, obs, action, target, step_size=self.vime_step_size, clip=self.vime_clip,
            **common,
        )

    def confidence_term(self) -> float | None:
        """VASE's ``δ·H(q)``, the part of U shared by a batch's transitions; ``None`` without one
        (another measure, ``delta=0``) or when the bonus is rescaled."""
        if self.measure != "vase" or self.delta == 0 or self.reward_normalization is not None:
            return None
        with torch.no_grad():
            return self.delta * self._require_model().network.entropy().item()

    def settings(self) -> str:
        sigma_c = self.model.sigma_c if self.model is not None else None
        return f"measure={self.measure!r}, sigma_c={sigma_c}, eta={self.eta}, delta={self.delta}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(measure={self.measure!r}, eta={self.eta}, "
            f"delta={self.delta}, num_samples={self.num_samples}, mix_reward={self.mix_reward}, "
            f"reward_normalization={self.reward_normalization!r})")


class VASERewardTransform(SurpriseRewardTransform):
    """The VASE bonus (paper, Eq. 10): ``SurpriseRewardTransform`` with ``measure="vase"``.

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("MountainCarContinuous-v0"), VASERewardTransform())
        >>> env.transform.model.observation_dim, env.transform.model.action_dim
        (2, 1)
    """

    def __init__(self, model: DynamicsModel | None = None, **kwargs: Any) -> None:
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

    def __init__(self, model: DynamicsModel | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("measure", "nll")
        super().__init__(model, **kwargs)


class VIMERewardTransform(SurpriseRewardTransform):
    """VIME's information-gain bonus: ``SurpriseRewardTransform(measure="vime")`` (VIME's recipe
    also scales it by recent medians: ``reward_normalization="median"``).

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> transform = VIMERewardTransform(reward_normalization="median")
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), transform)
        >>> bool((env.rollout(3)["next", "intrinsic_reward"] >= 0).all())
        True
    """

    def __init__(self, model: DynamicsModel | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("measure", "vime")
        super().__init__(model, **kwargs)


def _check_given_model(model: DynamicsModel, measure: str, build: dict[str, Any]) -> None:
    """A given model: one the measure can use, no building setting beside it."""
    if measure == "vime" and model.network.local_reparameterization:
        raise ValueError(_VIME_NEEDS_WEIGHTS + " (build the model with sampling='weights').")
    given = sorted(name for name, value in build.items() if value is not None)
    if given:
        raise ValueError(
            f"{', '.join(given)} describe the model a transform builds for itself; with "
            "a given model they are the model's own (set them on the DynamicsModel).")


def _build_settings(measure: str, build: dict[str, Any]) -> dict[str, Any]:
    """The settings of the model a transform builds: each one given, else the library's
    default (the authors' code; the sampling by measure), checked."""
    settings = {**_BUILD_DEFAULTS, "sampling": defaults.sampling_for(measure)}
    build = {k: settings[k] if v is None else v for k, v in build.items()}
    if build["sampling"] not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {build['sampling']!r}.")
    if measure == "vime" and build["sampling"] != defaults.VIME_SAMPLING:
        raise ValueError(_VIME_NEEDS_WEIGHTS + " (sampling='weights', its default).")
    check_sigma_c(build["sigma_c"])
    check_positive("prior_std", build["prior_std"])
    if build["target"] not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {build['target']!r}.")
    if build["init_mean"] not in INIT_MEANS:
        raise ValueError(f"init_mean must be one of {INIT_MEANS}, got {build['init_mean']!r}.")
    return build
