"""The variational lower bound (ELBO) that trains the Bayesian dynamics model (paper, Eq. 12)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, NamedTuple

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import Tensor
from torchrl.objectives.common import LossModule

from torchrl_vase._validation import check_non_negative, check_num_samples, check_positive_int
from torchrl_vase.gaussian import gaussian_nll
from torchrl_vase.modules.bayesian_mlp import BayesianMLP
from torchrl_vase.modules.dynamics import DynamicsModel
from torchrl_vase.objectives.elbo_gradients import (
    ACTIVATION_DERIVATIVES,
    compiled_elbo_gradients,
    elbo_gradients,
    population_elbo_gradients,
)

_KL_ESTIMATORS = ("analytic", "monte_carlo")


class ELBOGradients(NamedTuple):
    """The ELBO's terms on a minibatch and the gradients of the loss with respect to μ and ρ."""

    loss_nll: Tensor
    kl: Tensor
    entropy: Tensor
    grad_mu: Tensor
    grad_rho: Tensor


_REDUCTIONS = ("sum", "mean")


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
    ``set_keys``, nested keys allowed), prepares them with the model's ``prepare`` (dtype, discrete
    actions, target, standardisation: the same as every surprise transform given this model) and
    returns a TensorDict with

    * ``loss_nll``: the expected negative log-likelihood (reduced over the batch),
    * ``loss_kl``: ``kl_weight · KL(q ‖ P)``,
    * ``elbo``: ``−(loss_nll + loss_kl)``, detached, for logging,
    * ``kl`` and ``entropy``: the unweighted KL and ``H(q)``, detached, for logging.

    Args:
        model: the ``DynamicsModel`` (its σ_c, target and standardisation statistics are used).

    Keyword Args:
        num_samples: weight samples for the expectation over q (paper: 10).
        kl_weight: factor on the KL term (see above). Default ``1.0``.
        kl_estimator: ``"analytic"`` (closed form) or ``"monte_carlo"``, the mean of
            ``log q(θ) − log P(θ)`` over the same weight samples as the likelihood.
        reduction: ``"sum"`` (the ELBO's own) or ``"mean"`` over the transitions of a batch.

    The loss never changes the model's standardisation statistics: whoever owns the pool sets
    them (``model.update_statistics``; ``Exploration`` does it once per iteration).

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
        model: DynamicsModel,
        *,
        num_samples: int = 10,
        kl_weight: float = 1.0,
        kl_estimator: Literal["analytic", "monte_carlo"] = "analytic",
        reduction: Literal["sum", "mean"] = "sum",
    ) -> None:
        super().__init__()
        if not isinstance(model, DynamicsModel):
            hint = (
                " Wrap it once, DynamicsModel(bnn, sigma_c=...), and give that one object to the "
                "loss and to the surprise transform, so both see the same standardised data."
                if isinstance(model, BayesianMLP)
                else ""
            )
            raise TypeError(f"model must be a DynamicsModel, got {type(model).__name__}.{hint}")
        self.num_samples = check_num_samples(num_samples)
        kl_weight = check_non_negative("kl_weight", kl_weight)
        for name, value, allowed in (
            ("kl_estimator", kl_estimator, _KL_ESTIMATORS),
            ("reduction", reduction, _REDUCTIONS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
        self.model = model
        self.kl_weight = float(kl_weight)
        self.kl_estimator = kl_estimator
        if kl_estimator == "monte_carlo" and model.network.local_reparameterization:
            raise ValueError("kl_estimator='monte_carlo' needs the sampled weights: a model with "
                             "a local sampling draws pre-activations instead; use "
                             "the analytic KL.")
        self.reduction = reduction

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        pass

    @property
    def in_keys(self) -> list[NestedKey]:
        """The keys ``forward`` reads (``set_keys`` changes them)."""
        keys = self.tensor_keys
        return [keys.observation, keys.action, keys.next_observation]

    def model_inputs(self, tensordict: TensorDictBase) -> tuple[Tensor, Tensor]:
        """``(x, y)``: the network's input ``cat(s, a)`` and target, prepared by the model."""
        keys = self.tensor_keys
        obs = self._get(tensordict, keys.observation, "observation")
        action = self._get(tensordict, keys.action, "action")
        next_obs = self._get(tensordict, keys.next_observation, "next_observation")
        try:
            obs, action, target = self.model.prepare(obs, action, next_obs)
        except (TypeError, ValueError) as error:
            raise type(error)(
                f"{error} (keys: observation {keys.observation!r}, action {keys.action!r}, "
                f"next_observation {keys.next_observation!r})"
            ) from None
        return torch.cat([obs, action], dim=-1), target

    def _get(self, tensordict: TensorDictBase, key: NestedKey, name: str) -> Tensor:
        tensor = tensordict.get(key, None)
        if tensor is None:
            raise KeyError(
                f"{name} key {key!r} not found in the tensordict; set it with "
                f"loss.set_keys({name}=...). Keys present: {list(tensordict.keys(True, True))}."
            )
        return tensor

    # --------------------------------------------------------------------------------------
    # The same ELBO with a hand-written backward pass (the fast path of many small steps)
    # --------------------------------------------------------------------------------------
    def has_analytic_gradients(self) -> bool:
        """Whether ``elbo_gradients`` applies: the closed-form KL and ReLU or tanh activations."""
        activations = self.model.network.activations
        return self.kl_estimator == "analytic" and all(
            type(a) in ACTIVATION_DERIVATIVES for a in activations
        )

    @torch.no_grad()
    def elbo_gradients(self, x: Tensor, y: Tensor, noise: Tensor | None = None) -> ELBOGradients:
        """``loss_nll``, ``kl``, ``entropy`` and the gradients of ``loss_nll + kl_weight · kl``
        with respect to μ and ρ, on prepared data.

        The same objective as ``forward`` (on ``x = cat(s, a)`` and the target ``y`` as
        ``model_inputs`` returns them, ``[B, in]`` and ``[B, out]``), its gradients computed by
        back-propagating through the N sampled networks by hand: for a minibatch of 10 on a small
        model, autograd's per-operation bookkeeping costs more than the arithmetic. ``noise`` is
        the standard normal ε of the N weight samples ``θ = μ + σ ⊙ ε``, ``[N, |Θ|]`` (drawn if
        ``None``). Requires ``has_analytic_gradients()``.

        Examples:
            >>> import torch
            >>> loss_fn = VariationalELBOLoss(DynamicsModel.build(3, 1, standardize=False))
            >>> x, y = torch.randn(10, 4), torch.randn(10, 3)
            >>> noise = loss_fn.model.network.sample_noise(10)
            >>> out = loss_fn.elbo_gradients(x, y, noise)
            >>> out.grad_mu.shape == loss_fn.model.network.mu.shape
            True
        """
        if noise is None:
            noise = self.model.network.sample_noise(self.num_samples)
        terms, grad_mu, grad_rho = self.gradient_terms(x, y, noise)
        return ELBOGradients(*terms.unbind(), grad_mu, grad_rho)

    @torch.no_grad()
    def gradient_terms(
        self, x: Tensor, y: Tensor, noise: Tensor, *, compile: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``elbo_gradients`` as three tensors, ``(stack(loss_nll, kl, entropy), ∂/∂μ, ∂/∂ρ)``,
        for a loop of many steps (``Exploration``).

        With ``compile=True`` the step runs through ``torch.compile`` (one graph, static shapes,
        compiled once per process and shared by every loss): inductor fuses the elementwise work
        over the N parameter samples into a few kernels, which at minibatch 10 is most of a
        step. The first call compiles (seconds to a minute; needs a C++ compiler; cached on disk
        for later processes); the results agree with the eager step to float rounding. The
        settings (``kl_weight``, σ_c, …) are read at every call: a compiled step recompiles for
        new values, which it guards on. Requires ``has_analytic_gradients()``.

        Examples:
            >>> import torch
            >>> loss_fn = VariationalELBOLoss(DynamicsModel.build(3, 1, standardize=False))
            >>> noise = loss_fn.model.network.sample_noise(10)
            >>> terms, grad_mu, grad_rho = loss_fn.gradient_terms(torch.randn(10, 4),
            ...                                                   torch.randn(10, 3), noise)
            >>> terms.shape, grad_rho.shape == loss_fn.model.network.rho.shape
            (torch.Size([3]), True)
        """
        network = self.model.network
        return self.gradient_terms_of(network.mu, network.rho, x, y, noise, compile=compile)

    @torch.no_grad()
    def gradient_terms_of(
        self, mu: Tensor, rho: Tensor, x: Tensor, y: Tensor, noise: Tensor, *,
        compile: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``gradient_terms`` at the posterior parameters ``mu`` and ``rho`` given instead of
        the model's (a pure function of its tensors: ``torch.vmap`` maps it over a population's
        stacked models, ``Exploration.elbo_steps``)."""
        if not self.has_analytic_gradients():
            raise RuntimeError(
                "elbo_gradients needs kl_estimator='analytic' and ReLU or tanh activations."
            )
        network = self.model.network
        step = compiled_elbo_gradients() if compile else elbo_gradients
        return step(
            mu, rho, x, y, noise,
            layer_sizes=tuple(network.layer_sizes),
            activations=tuple(network.activations),
            prior_std=float(network.prior_std),
            sigma_c=float(self.model.sigma_c),
            kl_weight=self.kl_weight,
            reduction=self.reduction,
            local=network.local_reparameterization,
        )

    @torch.no_grad()
    def population_gradient_terms(self, mu: Tensor, rho: Tensor, x: Tensor, y: Tensor,
                                  noise: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``gradient_terms_of`` for K models of this loss's architecture and settings at once
        (``population_elbo_gradients``: ``mu``, ``rho`` ``[K, |Θ|]``, ``x``, ``y`` ``[K, B, ·]``,
        noise ``[K, *step_noise(B).shape]``)."""
        network = self.model.network
        if not self.has_analytic_gradients():
            raise RuntimeError("population_gradient_terms needs the analytic KL and ReLU or "
                               "tanh activations.")
        return population_elbo_gradients(
            mu, rho, x, y, noise, layer_sizes=tuple(network.layer_sizes),
            activations=tuple(network.activations), prior_std=float(network.prior_std),
            sigma_c=float(self.model.sigma_c), kl_weight=self.kl_weight, reduction=self.reduction,
            local=network.local_reparameterization)

    def step_noise_shape(self, rows: int) -> tuple[int, ...]:
        """The shape of one step's noise on ``rows`` transitions (``step_noise``)."""
        network = self.model.network
        if not network.local_reparameterization:
            return (self.num_samples, network.num_parameters)
        width = sum(n_out for _, n_out in network.layer_sizes)
        return (self.num_samples, 1 if network.sampling == "local_shared" else rows, width)

    def step_noise(self, rows: int, *, steps: int | None = None,
                   generator: torch.Generator | None = None) -> Tensor:
        """The standard normal noise of one ``gradient_terms`` step on ``rows`` transitions:
        the N weight samples' ``[N, |Θ|]``, or with the model's local ``sampling`` the
        pre-activations' ``[N, rows, Σ layer widths]`` (``[N, 1, Σ layer widths]`` shared);
        with ``steps``, that many steps' in one draw, ``[steps, ...]``."""
        shape = self.step_noise_shape(rows)
        if steps is not None:
            shape = (check_positive_int("steps", steps), *shape)
        return self.model.network.standard_normal(shape, generator)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        x, y = self.model_inputs(tensordict)
        network = self.model.network
        if self.kl_estimator == "analytic":
            prediction = network.sample_outputs(x, self.num_samples)  # [N, *batch, D]
        else:
            theta = network.sample_parameters(self.num_samples)  # [N, |Θ|]
            prediction = network.apply_weights(x, network.unflatten(theta))
        nll = gaussian_nll(prediction, y, self.model.sigma_c).mean(0)  # E_q over the N samples
        loss_nll = self._reduce_loss(nll, tensordict)
        if self.kl_estimator == "analytic":
            kl = network.kl_divergence()
        else:
            kl = network.log_density_ratio(theta).mean(0)
        loss_kl = self.kl_weight * kl
        return TensorDict(
            {
                "loss_nll": loss_nll,
                "loss_kl": loss_kl,
                "elbo": -(loss_nll + loss_kl).detach(),
                "kl": kl.detach(),
                "entropy": network.entropy().detach(),
            },
            batch_size=[],
        )
