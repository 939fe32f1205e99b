"""The variational lower bound (ELBO) that trains the Bayesian dynamics model (paper, Eq. 12)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import Tensor
from torchrl.envs.transforms.rnd import RunningMeanStd
from torchrl.objectives.common import LossModule

from torchrl_vase._validation import check_non_negative, check_num_samples, check_positive
from torchrl_vase.modules.bayesian_mlp import BayesianMLP

_TARGETS = ("next_observation", "delta")
_KL_ESTIMATORS = ("analytic", "monte_carlo")
_REDUCTIONS = ("sum", "mean")


def gaussian_nll(prediction: Tensor, target: Tensor, sigma_c: float) -> Tensor:
    """``−log N(target; prediction, σ_c² I)``, summed over the last (feature) dim.

    The likelihood of the paper's Eq. 11, written with the isotropic multivariate Gaussian's full
    normaliser ``(2πσ_c²)^{−D/2}`` (the paper's text writes the 1-D one; the two differ by a
    constant that changes neither gradients nor rankings).

    Examples:
        >>> import torch
        >>> gaussian_nll(torch.zeros(2), torch.zeros(2), sigma_c=1.0)  # D/2 · log(2π)
        tensor(1.8379)
    """
    dim = target.shape[-1]
    squared_error = (target - prediction).square().sum(-1)
    log_normaliser = dim * (math.log(sigma_c) + 0.5 * math.log(2 * math.pi))
    return squared_error / (2 * sigma_c**2) + log_normaliser


def dynamics_data(
    obs: Tensor,
    action: Tensor,
    next_obs: Tensor,
    *,
    target: str = "next_observation",
    input_stats: RunningMeanStd | None = None,
    target_stats: RunningMeanStd | None = None,
) -> tuple[Tensor, Tensor]:
    """``(x, y)``: the dynamics model's input ``cat(s, a)`` and target (s' or s' − s), each
    standardised by its statistics when given.

    The one definition shared by ``VariationalELBOLoss`` (training) and the surprise
    transforms (evaluation), so the model is always evaluated on what it was trained on.

    Examples:
        >>> import torch
        >>> x, y = dynamics_data(torch.ones(4, 2), torch.zeros(4, 1), 3 * torch.ones(4, 2),
        ...                      target="delta")
        >>> x.shape, y[0]
        (torch.Size([4, 3]), tensor([2., 2.]))
    """
    x = torch.cat([obs, action], dim=-1)
    y = next_obs - obs if target == "delta" else next_obs
    if input_stats is not None:
        x = input_stats.normalize(x).to(obs.dtype)
    if target_stats is not None:
        y = target_stats.normalize(y).to(obs.dtype)
    return x, y


class VariationalELBOLoss(LossModule):
    """Negative ELBO of a ``BayesianMLP`` dynamics model on transitions.

    The paper (Eq. 12) maximises ``L(φ) = E_q[log P(D | θ)] − KL(q(θ; φ) ‖ P(θ))`` on the whole
    replay pool D. On a minibatch B drawn from D, the unbiased estimate of ``L / (|D| / |B|)`` is::

        Σ_{t ∈ B} E_q[log N(s'_t; f(s_t, a_t; θ), σ_c² I)]  −  (|B| / |D|) · KL(q ‖ P)

    so with ``reduction="sum"`` (the default) the paper's ELBO implies ``kl_weight = |B| / |D|``,
    i.e. KL divided by the number of minibatches in the pool, which is what VIME's code does
    (``KL / n_batches``). The VASE authors' script uses a fixed ``KL / 5`` per minibatch
    (``kl_weight=0.2``). With ``reduction="mean"`` the data term is averaged over the batch and the
    paper's weight becomes ``1 / |D|``. The expectation over q is a Monte-Carlo mean over
    ``num_samples`` reparameterised weight samples.

    Reads ``observation``, ``action`` and ``("next", "observation")`` (configurable with
    ``set_keys``, nested keys allowed) and returns a TensorDict with

    * ``loss_nll``: the expected negative log-likelihood (reduced over the batch),
    * ``loss_kl``: ``kl_weight · KL(q ‖ P)``,
    * ``elbo``: ``−(loss_nll + loss_kl)``, detached, for logging,
    * ``kl`` and ``entropy``: the unweighted KL and ``H(q)``, detached, for logging.

    Args:
        model: the Bayesian dynamics model; its input is ``cat(observation, action)``.

    Keyword Args:
        sigma_c: σ_c, the likelihood std (paper: 5.0; the authors' script defaults to 0.5).
        num_samples: weight samples for the expectation over q (paper: 10).
        kl_weight: factor on the KL term (see above). Default ``1.0``.
        target: ``"next_observation"`` to predict s' (paper) or ``"delta"`` to predict s' − s.
        kl_estimator: ``"analytic"`` (closed form) or ``"monte_carlo"``, the mean of
            ``log q(θ) − log P(θ)`` over the same weight samples as the likelihood.
        reduction: ``"sum"`` (the ELBO's own) or ``"mean"`` over the transitions of a batch.
        normalize_inputs: standardise ``(s, a)`` by running statistics (as VIME normalises by
            the replay pool's mean and std). Off by default, as in the paper.
        normalize_targets: likewise for the target; σ_c is then in standardised units.

    The running statistics are buffers (``input_stats``, ``target_stats``, ``None`` when off),
    saved in ``state_dict`` and updated by every forward call in training mode; call ``.eval()``
    to freeze them.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> bnn = BayesianMLP(in_features=3 + 1, out_features=3, num_cells=[32])
        >>> loss_fn = VariationalELBOLoss(bnn, num_samples=10, kl_weight=0.2)
        >>> batch = TensorDict(
        ...     {"observation": torch.randn(10, 3), "action": torch.randn(10, 1),
        ...      ("next", "observation"): torch.randn(10, 3)},
        ...     batch_size=[10],
        ... )
        >>> out = loss_fn(batch)
        >>> (out["loss_nll"] + out["loss_kl"]).backward()
        >>> sorted(out.keys())
        ['elbo', 'entropy', 'kl', 'loss_kl', 'loss_nll']
    """

    @dataclass
    class _AcceptedKeys:
        """Configurable tensordict keys.

        Attributes:
            observation: the state s_t. Defaults to ``"observation"``.
            action: the action a_t. Defaults to ``"action"``.
            next_observation: the state s_{t+1}. Defaults to ``("next", "observation")``.
        """

        observation: NestedKey = "observation"
        action: NestedKey = "action"
        next_observation: NestedKey = ("next", "observation")

    default_keys = _AcceptedKeys
    tensor_keys: _AcceptedKeys
    out_keys: ClassVar[list[str]] = ["loss_nll", "loss_kl", "elbo", "kl", "entropy"]

    def __init__(
        self,
        model: BayesianMLP,
        *,
        sigma_c: float = 5.0,
        num_samples: int = 10,
        kl_weight: float = 1.0,
        target: Literal["next_observation", "delta"] = "next_observation",
        kl_estimator: Literal["analytic", "monte_carlo"] = "analytic",
        reduction: Literal["sum", "mean"] = "sum",
        normalize_inputs: bool = False,
        normalize_targets: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(model, BayesianMLP):
            raise TypeError(f"model must be a BayesianMLP, got {type(model).__name__}.")
        self.sigma_c = check_positive("sigma_c", sigma_c)
        self.num_samples = check_num_samples(num_samples)
        kl_weight = check_non_negative("kl_weight", kl_weight)
        for name, value, allowed in (
            ("target", target, _TARGETS),
            ("kl_estimator", kl_estimator, _KL_ESTIMATORS),
            ("reduction", reduction, _REDUCTIONS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
        if target == "delta" and model.out_features >= model.in_features:
            raise ValueError(
                "target='delta' predicts s' − s, so the model needs in_features = obs_dim + "
                f"action_dim > out_features = obs_dim; got in_features={model.in_features}, "
                f"out_features={model.out_features}."
            )
        self.model = model
        self.kl_weight = float(kl_weight)
        self.target = target
        self.kl_estimator = kl_estimator
        self.reduction = reduction
        self.input_stats = RunningMeanStd((model.in_features,)) if normalize_inputs else None
        self.target_stats = RunningMeanStd((model.out_features,)) if normalize_targets else None

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        pass

    def model_inputs(self, tensordict: TensorDictBase) -> tuple[Tensor, Tensor]:
        """Read, check and (if enabled) normalise ``(x, y)`` = (model input, target).

        In training mode, normalisation statistics are first updated with this batch.
        """
        keys = self.tensor_keys
        obs = self._get(tensordict, keys.observation, "observation")
        action = self._get(tensordict, keys.action, "action")
        next_obs = self._get(tensordict, keys.next_observation, "next_observation")
        obs_dim = self.model.out_features
        action_dim = self.model.in_features - obs_dim
        batch_shape = obs.shape[:-1]
        for name, key, tensor, dim in (
            ("observation", keys.observation, obs, obs_dim),
            ("action", keys.action, action, action_dim),
            ("next_observation", keys.next_observation, next_obs, obs_dim),
        ):
            if tensor.dim() == 0 or tensor.shape[-1] != dim or tensor.shape[:-1] != batch_shape:
                raise ValueError(
                    f"{name} (key {key!r}) has shape {tuple(tensor.shape)}; the model "
                    f"(in_features={self.model.in_features}, out_features={obs_dim}) needs "
                    f"[*batch, {dim}] with the observation's batch {tuple(batch_shape)}."
                )
        if self.training and (self.input_stats is not None or self.target_stats is not None):
            raw_x, raw_y = dynamics_data(obs, action, next_obs, target=self.target)
            with torch.no_grad():
                for stats, value in ((self.input_stats, raw_x), (self.target_stats, raw_y)):
                    if stats is not None:
                        stats.update(value)
        return dynamics_data(
            obs,
            action,
            next_obs,
            target=self.target,
            input_stats=self.input_stats,
            target_stats=self.target_stats,
        )

    def _get(self, tensordict: TensorDictBase, key: NestedKey, name: str) -> Tensor:
        tensor = tensordict.get(key, None)
        if tensor is None:
            raise KeyError(
                f"{name} key {key!r} not found in the tensordict; set it with "
                f"loss.set_keys({name}=...). Keys present: {list(tensordict.keys(True, True))}."
            )
        param_dtype = self.model.mu.dtype
        if not tensor.dtype.is_floating_point:
            raise TypeError(
                f"{name} (key {key!r}) has dtype {tensor.dtype}; expected floating point "
                "(one-hot encode discrete actions first)."
            )
        if tensor.dtype != param_dtype:
            raise TypeError(
                f"{name} (key {key!r}) has dtype {tensor.dtype} but the model is {param_dtype}."
            )
        if not torch.isfinite(tensor).all():
            raise ValueError(f"{name} (key {key!r}) contains non-finite values (nan or inf).")
        return tensor

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        x, y = self.model_inputs(tensordict)
        theta = self.model.sample_parameters(self.num_samples)  # [N, |Θ|]
        prediction = self.model.apply_weights(x, self.model.unflatten(theta))  # [N, *batch, D]
        nll = gaussian_nll(prediction, y, self.sigma_c).mean(0)  # E_q over the N samples
        loss_nll = self._reduce_loss(nll, tensordict)
        if self.kl_estimator == "analytic":
            kl = self.model.kl_divergence()
        else:
            kl = self.model.log_density_ratio(theta).mean(0)
        loss_kl = self.kl_weight * kl
        return TensorDict(
            {
                "loss_nll": loss_nll,
                "loss_kl": loss_kl,
                "elbo": -(loss_nll + loss_kl).detach(),
                "kl": kl.detach(),
                "entropy": self.model.entropy().detach(),
            },
            batch_size=[],
        )
