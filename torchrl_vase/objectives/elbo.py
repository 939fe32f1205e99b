"""The variational lower bound (ELBO) that trains the Bayesian dynamics model (paper, Eq. 12),
on ``TransitionLoss``, what every model's loss shares (the ELBO, Disagreement's and ICM's
losses: the transition's keys and the model's preparation of them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import Tensor
from torchrl.objectives.common import LossModule

from torchrl_vase._validation import check_non_negative, check_num_samples, check_positive_int
from torchrl_vase.gaussian import gaussian_nll
from torchrl_vase.modules.bayesian_mlp import BayesianMLP
from torchrl_vase.modules.dynamics import DynamicsModel

_KL_ESTIMATORS = ("analytic", "monte_carlo")


_REDUCTIONS = ("sum", "mean")


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


class VariationalELBOLoss(TransitionLoss):
    """Negative ELBO of a ``BayesianMLP`` dynamics model on transitions.

    The paper (Eq. 12) maximises ``L(φ) = E_q[log P(D | θ)] − KL(q(θ; φ) ‖ P(θ))`` on the pool D;
    on a minibatch B the unbiased estimate of ``L / (|D| / |B|)`` is::

        Σ_{t ∈ B} E_q[log N(s'_t; f(s_t, a_t; θ), σ_c² I)]  −  (|B| / |D|) · KL(q ‖ P)

    so with ``reduction="sum"`` the paper implies ``kl_weight = |B| / |D|`` (VIME's
    ``KL / n_batches``); the VASE authors' script uses ``KL / 5`` (``kl_weight=0.2``). The
    expectation over q is a mean over ``num_samples`` reparameterised samples. It reads
    ``observation``, ``action`` and ``("next", "observation")`` (``set_keys``), prepared by the
    model's ``prepare`` as every bonus on this model is, and returns ``loss_nll``, ``loss_kl``
    (``kl_weight · KL``) and, detached, ``elbo``, ``kl`` and ``entropy``. It never changes the
    model's statistics (the pool's owner does).

    Args:
        model: the ``DynamicsModel``.

    Keyword Args:
        num_samples: samples for the expectation over q (paper: 10).
        kl_weight: factor on the KL term (above). Default ``1.0``.
        kl_estimator: ``"analytic"`` or ``"monte_carlo"`` (``log q − log P`` over the same samples).
        reduction: ``"sum"`` (the ELBO's own) or ``"mean"`` over a batch's transitions.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> model = DynamicsModel.build(obs_dim=3, action_dim=1, num_cells=[32], sigma_c=0.5)
        >>> loss_fn = VariationalELBOLoss(model, num_samples=10, kl_weight=0.2)
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

    out_keys: ClassVar[list[str]] = ["loss_nll", "loss_kl", "elbo", "kl", "entropy"]
    network_class = BayesianMLP

    def __init__(self, model: DynamicsModel, *, num_samples: int = 10, kl_weight: float = 1.0,
                 kl_estimator: Literal["analytic", "monte_carlo"] = "analytic",
                 reduction: Literal["sum", "mean"] = "sum") -> None:
        super().__init__(model)
        self.num_samples = check_num_samples(num_samples)
        kl_weight = check_non_negative("kl_weight", kl_weight)
        for name, value, allowed in (("kl_estimator", kl_estimator, _KL_ESTIMATORS),
                                     ("reduction", reduction, _REDUCTIONS)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
        self.kl_weight = float(kl_weight)
        self.kl_estimator = kl_estimator
        if kl_estimator == "monte_carlo" and model.network.local_reparameterization:
            raise ValueError("kl_estimator='monte_carlo' needs the sampled weights: a model with "
                             "a local sampling draws pre-activations instead; use "
                             "the analytic KL.")
        self.reduction = reduction

    def step_noise_shape(self, rows: int) -> tuple[int, ...]:
        """The shape of one step's noise on ``rows`` transitions (``step_noise``)."""
        network = self.model.network
        if not network.local_reparameterization:
            return (self.num_samples, network.num_parameters)
        width = sum(n_out for _, n_out in network.layer_sizes)
        return (self.num_samples, 1 if network.sampling == "local_shared" else rows, width)

    def step_noise(self, rows: int, *, steps: int | None = None,
                   generator: torch.Generator | None = None) -> Tensor:
        """One ELBO step's standard normal noise on ``rows`` transitions: ``[N, |Θ|]``, or with a
        local ``sampling`` ``[N, rows or 1, Σ layer widths]``; with ``steps``, that many steps' at
        once.
        """
        shape = self.step_noise_shape(rows)
        if steps is not None:
            shape = (check_positive_int("steps", steps), *shape)
        return self.model.network.standard_normal(shape, generator)

    def terms_from_noise(self, x: Tensor, y: Tensor, noise: Tensor
                         ) -> tuple[Tensor, Tensor, Tensor]:
        """``(loss_nll, KL, entropy)`` on prepared data (``x = cat(s, a)``, ``y``: ``model_inputs``)
        with one step's draws (``step_noise(B)``), differentiable in μ and ρ: the loss of
        ``forward`` and of ``ModelTrainer``'s autograd steps (the compiled kernel is tested against
        it).

        Examples:
            >>> import torch
            >>> loss_fn = VariationalELBOLoss(DynamicsModel.build(3, 1, standardize=False))
            >>> x, y = torch.randn(10, 4), torch.randn(10, 3)
            >>> loss_nll, kl, entropy = loss_fn.terms_from_noise(x, y, loss_fn.step_noise(10))
            >>> loss_nll.requires_grad, kl.requires_grad
            (True, True)
        """
        network = self.model.network
        theta = None
        if network.local_reparameterization:
            prediction = network.outputs_from_noise(x, noise)  # [N, B, D]
        else:
            theta = network.parameters_from_noise(noise)  # [N, |Θ|]
            prediction = network.apply_weights(x, network.unflatten(theta))
        nll = gaussian_nll(prediction, y, self.model.sigma_c).mean(0)  # E_q over the N draws
        loss_nll = nll.sum() if self.reduction == "sum" else nll.mean()
        kl = (network.kl_divergence() if theta is None or self.kl_estimator == "analytic"
              else network.log_density_ratio(theta).mean(0))
        return loss_nll, kl, network.entropy().detach()

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        x, y = self.model_inputs(tensordict)
        rows = x.reshape(-1, x.shape[-1])
        loss_nll, kl, entropy = self.terms_from_noise(
            rows, y.reshape(-1, y.shape[-1]), self.step_noise(rows.shape[0]))
        loss_kl = self.kl_weight * kl
        return TensorDict(
            {"loss_nll": loss_nll, "loss_kl": loss_kl, "elbo": -(loss_nll + loss_kl).detach(),
             "kl": kl.detach(), "entropy": entropy},
            batch_size=[],
        )
