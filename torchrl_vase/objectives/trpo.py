"""Trust-region policy optimisation (Schulman et al., 2015) as a TorchRL loss module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import Tensor
from torch.distributions import Distribution, kl_divergence
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torchrl.modules.distributions.utils import has_analytic_kl
from torchrl.objectives import PPOLoss

from torchrl_vase._validation import check_non_negative, check_positive, check_positive_int

__all__ = ["TRPOLoss", "conjugate_gradient"]


def conjugate_gradient(
    matvec: Callable[[Tensor], Tensor], b: Tensor, *, iters: int = 10, tol: float = 1e-10
) -> tuple[Tensor, Tensor]:
    """Solve ``A x = b`` for a symmetric positive-definite ``A`` given only ``v ↦ A v``.

    Returns ``(x, ‖b − A x‖)`` after at most ``iters`` iterations (fewer once the squared residual
    is below ``tol``).

    Examples:
        >>> import torch
        >>> a = torch.tensor([[4.0, 1.0], [1.0, 3.0]])
        >>> x, residual = conjugate_gradient(lambda v: a @ v, torch.tensor([1.0, 2.0]), iters=2)
        >>> torch.allclose(a @ x, torch.tensor([1.0, 2.0])), residual < 1e-5
        (True, tensor(True))
    """
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = r @ r
    for _ in range(iters):
        if rr <= tol:
            break
        ap = matvec(p)
        alpha = rr / (p @ ap)
        x = x + alpha * p
        r = r - alpha * ap
        new_rr = r @ r
        p = r + (new_rr / rr) * p
        rr = new_rr
    return x, rr.sqrt()


class TRPOLoss(PPOLoss):
    """TRPO for TorchRL: a natural-gradient policy step inside a KL trust region, and a critic loss.

    ``natural_gradient_step(batch)`` maximises the surrogate ``E[π_θ(a|s) / π_old(a|s) · A]``
    subject to ``E_s[KL(π_old ‖ π_θ)] ≤ max_kl``: the surrogate's flat gradient g; Fisher-vector
    products by double back-propagation through the analytic KL (a Monte-Carlo KL where no closed
    form exists, e.g. a Student-t; a ``TanhNormal``'s is its Gaussian's); conjugate gradient for
    ``F x = g``; the step ``√(2 max_kl / xᵀFx) · x``; a backtracking line search that accepts a
    step only if its KL is at most ``max_kl`` and the surrogate improved, and restores the
    parameters otherwise.
    ``forward`` returns ``loss_critic`` (differentiable; ``fit_critic``) and, detached,
    ``surrogate``, ``kl``, ``entropy`` and ``explained_variance``. Keys, value estimators and
    ``set_keys`` work as in ``PPOLoss``; π_old is rebuilt from the batch's distribution parameters
    (``loc``, ``scale``) or, if absent, taken to be the current policy.

    Args:
        actor_network: a ``ProbabilisticActor`` (any module with ``get_dist``).
        critic_network: a value network writing ``state_value``.

    Keyword Args:
        max_kl: δ, the trust region on the mean KL of the whole action distribution (paper: 0.01
            classic, 0.05 locomotion; sb3-contrib averages over a Gaussian's d dimensions: its
            ``target_kl=δ, cg_damping=λ`` is ``max_kl=d·δ, cg_damping=d·λ`` here).
        cg_iters: conjugate-gradient iterations.
        cg_damping: λ in ``(F + λ I) x = g``.
        line_search_backtracks: step sizes tried: ``1, s, s², …`` (this many).
        line_search_shrink: s, the backtracking factor.
        normalize_advantage: standardise advantages per batch (as rllab's TRPO).
        samples_mc_kl: samples of π_old for the Monte-Carlo KL fallback.
        loss_critic_type: ``"l2"`` (default), ``"l1"`` or ``"smooth_l1"``.
        **kwargs: passed to ``PPOLoss``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torch import nn
        >>> from torchrl.envs import GymEnv
        >>> from torchrl.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
        >>> from torchrl.objectives import ValueEstimators
        >>> env = GymEnv("CartPole-v1")
        >>> actor = ProbabilisticActor(
        ...     TensorDictModule(nn.Linear(4, 2), ["observation"], ["logits"]),
        ...     in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True,
        ...     spec=env.action_spec)
        >>> critic = ValueOperator(nn.Linear(4, 1), in_keys=["observation"])
        >>> loss = TRPOLoss(actor, critic, max_kl=0.01)
        >>> loss.make_value_estimator(ValueEstimators.GAE, gamma=0.99, lmbda=0.95)
        >>> with torch.no_grad():
        ...     batch = env.rollout(50, actor)
        >>> info = loss.natural_gradient_step(batch)
        >>> bool(info["kl"] <= 0.01)
        True
    """

    def __init__(self, actor_network: TensorDictModule, critic_network: TensorDictModule, *,
                 max_kl: float = 0.01, cg_iters: int = 10, cg_damping: float = 0.1,
                 line_search_backtracks: int = 10, line_search_shrink: float = 0.8,
                 normalize_advantage: bool = True, samples_mc_kl: int = 16,
                 loss_critic_type: str = "l2", **kwargs: Any) -> None:
        max_kl = check_positive("max_kl", max_kl)
        check_positive_int("cg_iters", cg_iters)
        check_positive_int("line_search_backtracks", line_search_backtracks)
        check_positive_int("samples_mc_kl", samples_mc_kl)
        cg_damping = check_non_negative("cg_damping", cg_damping)
        if not 0 < line_search_shrink < 1:
            raise ValueError(f"line_search_shrink must be in (0, 1), got {line_search_shrink}.")
        if not callable(getattr(actor_network, "get_dist", None)):
            raise TypeError(
                f"actor_network ({type(actor_network).__name__}) has no get_dist: TRPO needs a "
                "probabilistic actor (torchrl.modules.ProbabilisticActor) to compute log-probs "
                "and KL divergences.")
        super().__init__(
            actor_network,
            critic_network,
            entropy_bonus=False,
            normalize_advantage=False,  # standardised here, once per batch
            loss_critic_type=loss_critic_type,
            critic_coeff=1.0,
            functional=False,
            **kwargs,
        )
        self.max_kl = float(max_kl)
        self.cg_iters = cg_iters
        self.cg_damping = float(cg_damping)
        self.line_search_backtracks = line_search_backtracks
        self.line_search_shrink = float(line_search_shrink)
        self.standardize_advantage = bool(normalize_advantage)
        self.samples_mc_kl = samples_mc_kl

    # -- Pieces of the objective
    def _policy_parameters(self) -> list[Tensor]:
        return [p for p in self.actor_network.parameters() if p.requires_grad]

    def _advantage(self, tensordict: TensorDictBase) -> Tensor:
        advantage = tensordict.get(self.tensor_keys.advantage, None)
        if advantage is None:
            with torch.no_grad():
                self.value_estimator(tensordict)
            advantage = tensordict.get(self.tensor_keys.advantage)
        if not torch.isfinite(advantage).all():
            raise ValueError(
                f"advantages (key {self.tensor_keys.advantage!r}) contain non-finite values.")
        if advantage.shape[-1:] == (1,):
            advantage = advantage.squeeze(-1)
        if self.standardize_advantage and advantage.numel() > 1:
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        return advantage

    def _old_log_prob(self, tensordict: TensorDictBase, shape: torch.Size) -> Tensor:
        log_prob = tensordict.get(self.tensor_keys.sample_log_prob, None)
        if log_prob is None:
            raise KeyError(
                f"the log-prob key {self.tensor_keys.sample_log_prob!r} is missing: collect with "
                "ProbabilisticActor(..., return_log_prob=True).")
        if not torch.isfinite(log_prob).all():
            raise ValueError(
                f"log-probs (key {self.tensor_keys.sample_log_prob!r}) contain non-finite values. "
                "A Gaussian policy whose log-std passed ~43 overflows torch's Normal.log_prob in "
                "float32: torchrl_vase.FiniteLogProbNormal (gaussian_policy's distribution) "
                "computes it in rllab's standardised form.")
        return log_prob.reshape(shape)

    def _old_distribution(self, tensordict: TensorDictBase) -> Distribution:
        try:
            return self.actor_network.build_dist_from_params(tensordict.detach())
        except (KeyError, AttributeError):
            with torch.no_grad():
                return self.actor_network.get_dist(tensordict)

    def _surrogate(self, tensordict, advantage: Tensor, old_log_prob: Tensor) -> Tensor:
        dist = self.actor_network.get_dist(tensordict)
        log_prob = dist.log_prob(tensordict.get(self.tensor_keys.action)).reshape(advantage.shape)
        return ((log_prob - old_log_prob).exp() * advantage).mean()

    def _kl_function(
        self, tensordict: TensorDictBase, old_dist: Distribution) -> Callable[[], Tensor]:
        """``θ ↦ mean_s KL(π_old ‖ π_θ)``: analytic when torch has it, else Monte-Carlo."""
        new_dist = self.actor_network.get_dist(tensordict)
        if has_analytic_kl(old_dist, new_dist):

            def mean_kl() -> Tensor:
                return kl_divergence(old_dist, self.actor_network.get_dist(tensordict)).mean()

            return mean_kl
        with torch.no_grad():
            samples = old_dist.sample((self.samples_mc_kl,))
            old_log_prob = old_dist.log_prob(samples)

        def mean_kl_monte_carlo() -> Tensor:
            new_log_prob = self.actor_network.get_dist(tensordict).log_prob(samples)
            return (old_log_prob - new_log_prob).mean()

        return mean_kl_monte_carlo

    def fisher_vector_product(self, mean_kl: Callable[[], Tensor]) -> Callable[[Tensor], Tensor]:
        """``v ↦ (F + λ I) v``, F the mean KL's Hessian, by double back-propagation."""
        params = self._policy_parameters()
        kl_grad = torch.autograd.grad(mean_kl(), params, create_graph=True)
        flat_kl_grad = torch.cat([g.reshape(-1) for g in kl_grad])

        def product(vector: Tensor) -> Tensor:
            hessian_vector = torch.autograd.grad(flat_kl_grad @ vector, params, retain_graph=True)
            flat = torch.cat([h.reshape(-1) for h in hessian_vector])
            return flat + self.cg_damping * vector

        return product

    # -- The update
    def natural_gradient_step(self, tensordict: TensorDictBase) -> TensorDict:
        """One TRPO policy update on a batch. Returns ``step_accepted``, ``kl`` (after the update),
        ``surrogate_before``/``_after``, ``expected_improvement``, ``backtracks``,
        ``step_fraction``, ``cg_residual``, ``step_norm`` and ``entropy``. A failed line search
        restores the parameters bit for bit (``step_accepted`` False)."""
        tensordict = tensordict.clone(False)
        advantage = self._advantage(tensordict)
        old_log_prob = self._old_log_prob(tensordict, advantage.shape)
        old_dist = self._old_distribution(tensordict)
        params = self._policy_parameters()

        surrogate = self._surrogate(tensordict, advantage, old_log_prob)
        gradient = torch.cat(
            [g.reshape(-1) for g in torch.autograd.grad(surrogate, params, allow_unused=False)])
        surrogate_before = surrogate.detach()
        mean_kl = self._kl_function(tensordict, old_dist)
        fvp = self.fisher_vector_product(mean_kl)
        direction, residual = conjugate_gradient(fvp, gradient, iters=self.cg_iters)
        curvature = direction @ fvp(direction).detach()
        direction = direction.detach()

        start = parameters_to_vector(params).detach().clone()
        accepted, backtracks, fraction = False, self.line_search_backtracks, 0.0
        kl_after, surrogate_after = surrogate_before.new_zeros(()), surrogate_before
        expected = surrogate_before.new_zeros(())
        if torch.isfinite(curvature) and curvature > 0:
            full_step = direction * torch.sqrt(2 * self.max_kl / curvature)
            expected = gradient.detach() @ full_step
            with torch.no_grad():
                for k in range(self.line_search_backtracks):
                    step_fraction = self.line_search_shrink**k
                    vector_to_parameters(start + step_fraction * full_step, params)
                    kl = mean_kl()
                    new_surrogate = self._surrogate(tensordict, advantage, old_log_prob)
                    if kl <= self.max_kl and new_surrogate > surrogate_before:
                        accepted, backtracks, fraction = True, k, step_fraction
                        kl_after, surrogate_after = kl, new_surrogate
                        break
        if not accepted:
            with torch.no_grad():
                vector_to_parameters(start, params)
        return TensorDict(
            {
                "step_accepted": torch.tensor(accepted),
                "kl": kl_after.detach(),
                "surrogate_before": surrogate_before,
                "surrogate_after": surrogate_after.detach(),
                "expected_improvement": expected.detach(),
                "backtracks": torch.tensor(backtracks),
                "step_fraction": torch.tensor(fraction),
                "cg_residual": residual.detach(),
                # the parameters' move: the fraction taken of the full step (not of the CG
                # direction, which the step rescales to the trust region's radius)
                "step_norm": (fraction * full_step.norm()).detach()
                if accepted
                else direction.new_zeros(()),
                "entropy": self._analytic_entropy(tensordict),
            },
            batch_size=[],
        )

    @torch.no_grad()
    def _analytic_entropy(self, tensordict: TensorDictBase) -> Tensor:
        """The policy's mean entropy where its distribution has a closed form, else NaN (a
        Monte-Carlo estimate would move the global generator)."""
        try:
            return self.actor_network.get_dist(tensordict).entropy().float().mean()
        except NotImplementedError:
            return torch.tensor(float("nan"))

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The critic loss (differentiable); the surrogate, KL and entropy (detached)."""
        tensordict = tensordict.clone(False)
        advantage = self._advantage(tensordict)
        old_log_prob = self._old_log_prob(tensordict, advantage.shape)
        old_dist = self._old_distribution(tensordict)
        with torch.no_grad():
            surrogate = self._surrogate(tensordict, advantage, old_log_prob)
            kl = self._kl_function(tensordict, old_dist)()
            dist = self.actor_network.get_dist(tensordict)
            entropy = self._get_entropy(dist, adv_shape=advantage.shape).mean()
        loss_critic, _, explained_variance = self.loss_critic(tensordict)
        out = {"loss_critic": self._reduce_loss(loss_critic, tensordict).squeeze(-1),
               "surrogate": surrogate, "kl": kl, "entropy": entropy}
        if explained_variance is not None:
            out["explained_variance"] = explained_variance.mean()
        return TensorDict(out, batch_size=[])
