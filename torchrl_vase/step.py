"""The step of Algorithm 1 that follows each rollout (lines 5-9), with TRPO's or PPO's update.

``OnPolicyStep`` enters each collaborator once, in order: the bonus (``Exploration.reward``),
the model's fit on its pool (``Exploration.fit``), the advantage (``ExplorationGAE``), the policy
update (``TRPOUpdate`` or ``PPOUpdate``) and the critic fit (``CriticFit``). Metrics: ``bonus/``,
``bnn/`` or ``rnd/``, ``trpo/`` or ``ppo/``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl.modules import ValueOperator
    >>> from torchrl_vase import CriticFit, ExplorationGAE, TRPOLoss, gaussian_policy
    >>> actor = gaussian_policy(3, 1, [8])
    >>> critic = ValueOperator(torch.nn.Linear(3, 1), in_keys=["observation"])
    >>> loss = TRPOLoss(actor, critic, max_kl=0.01)
    >>> _ = loss.make_value_estimator(ExplorationGAE("combined", gamma=0.99, lmbda=0.95,
    ...                                              value_network=critic))
    >>> fit = CriticFit(loss, torch.optim.Adam(critic.parameters()), minibatch_size=8)
    >>> step = OnPolicyStep(loss.value_estimator, TRPOUpdate(loss), fit)
    >>> observation = torch.randn(2, 16, 3)
    >>> with torch.no_grad():
    ...     batch = actor(TensorDict({"observation": observation}, [2, 16]))
    >>> batch["next"] = TensorDict({"observation": torch.randn(2, 16, 3),
    ...     "reward": torch.randn(2, 16, 1), "done": torch.zeros(2, 16, 1, dtype=torch.bool),
    ...     "terminated": torch.zeros(2, 16, 1, dtype=torch.bool)}, [2, 16])
    >>> metrics = step(batch)
    >>> metrics["trpo/kl"] <= 0.01 * 1.5, "trpo/explained_variance" in metrics
    (True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from tensordict import TensorDictBase
from torch import nn
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import ValueEstimatorBase

from torchrl_vase._validation import check_positive_int
from torchrl_vase.diagnostics import advantage_alignment
from torchrl_vase.exploration import Exploration
from torchrl_vase.objectives.trpo import TRPOLoss
from torchrl_vase.timing import phase

__all__ = ["OnPolicyStep", "PPOUpdate", "TRPOUpdate"]

class TRPOUpdate:
    """One natural-gradient step of ``TRPOLoss`` on the batch (its advantages computed):
    ``trpo/kl``, ``trpo/surrogate_before``/``_after``, ``trpo/step_accepted``, ``trpo/backtracks``,
    ``trpo/entropy``. Stateless."""

    def __init__(self, loss: TRPOLoss) -> None:
        if not isinstance(loss, TRPOLoss):
            raise TypeError(f"loss must be a TRPOLoss, got {type(loss).__name__}.")
        self.loss = loss

    def __call__(self, batch: TensorDictBase) -> dict[str, float]:
        step = self.loss.natural_gradient_step(batch)
        return {f"trpo/{key}": float(step[key]) for key in
                ("kl", "surrogate_before", "surrogate_after", "step_accepted", "backtracks",
                 "entropy")}


class PPOUpdate(nn.Module):
    """``epochs`` passes of shuffled minibatches of torchrl's ``ClipPPOLoss`` (built with
    ``critic_coeff=0``: ``CriticFit`` fits the critic after, as for TRPO), gradients clipped to
    ``max_grad_norm``. Returns ``ppo/loss_objective``, ``ppo/entropy``, ``ppo/kl_approx`` and
    ``ppo/clip_fraction`` over the last epoch; its ``state_dict`` is the optimiser's.

    Args:
        loss: a ``ClipPPOLoss`` (or any ``PPOLoss``) without a critic term.
        optimizer: over the actor's parameters.
        epochs: passes over the batch.
        minibatch_size: transitions per gradient step.
        max_grad_norm: gradient-norm clip (``None``: none)."""

    LOGGED = ("loss_objective", "entropy", "kl_approx", "clip_fraction")

    def __init__(self, loss: ClipPPOLoss, optimizer: torch.optim.Optimizer, *, epochs: int = 10,
                 minibatch_size: int = 64, max_grad_norm: float | None = 0.5) -> None:
        super().__init__()
        if getattr(loss, "_has_critic", False):
            raise ValueError("PPOUpdate trains the policy only: build the loss with "
                             "critic_coeff=0 (torchrl then leaves the critic out) and fit the "
                             "critic with CriticFit.")
        check_positive_int("epochs", epochs)
        check_positive_int("minibatch_size", minibatch_size)
        self.loss, self.optimizer = loss, optimizer
        self.epochs, self.minibatch_size, self.max_grad_norm = epochs, minibatch_size, max_grad_norm
        self._parameters_clipped = [p for g in optimizer.param_groups for p in g["params"]]

    def forward(self, batch: TensorDictBase) -> dict[str, float]:
        data = batch.reshape(-1)
        for _ in range(self.epochs):
            last = []
            for index in torch.randperm(data.shape[0], device=data.device).split(
                    self.minibatch_size):
                out = self.loss(data[index])
                objective = out["loss_objective"] + out.get("loss_entropy", 0.0)
                self.optimizer.zero_grad()
                objective.backward()
                if self.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(self._parameters_clipped, self.max_grad_norm)
                self.optimizer.step()
                present = set(out.keys())
                last.append([out[key].detach() for key in self.LOGGED if key in present])
        logged = [key for key in self.LOGGED if key in present]
        means = torch.stack([torch.stack(values) for values in last]).float().mean(0)
        return {f"ppo/{key}": float(value) for key, value in zip(logged, means, strict=True)}

    def state_dict(self, *args, **kwargs) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: Mapping, *args, **kwargs) -> None:
        self.optimizer.load_state_dict(state)


class OnPolicyStep:
    """Algorithm 1 after the rollout, on one batch: bonus, advantage, policy, critic.

    Args:
        value_estimator: writes ``advantage`` and the value targets (``ExplorationGAE``; with a
            bonus also ``bonus_advantage``, read by the alignment diagnostic).
        policy_update: ``TRPOUpdate``, ``PPOUpdate`` or any callable ``batch -> metrics``.
        critic_fit: ``CriticFit`` (``None``: the policy update trains the critic itself).
        exploration: the exploration side (``None``: no bonus, plain TRPO/PPO)."""

    def __init__(self, value_estimator: ValueEstimatorBase,
                 policy_update: Callable[[TensorDictBase], dict[str, float]],
                 critic_fit: Callable[[TensorDictBase], dict[str, float]] | None = None,
                 exploration: Exploration | None = None) -> None:
        self.value_estimator = value_estimator
        self.policy_update, self.critic_fit = policy_update, critic_fit
        self.exploration = exploration

    def __call__(self, batch: TensorDictBase) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if self.exploration is not None:
            metrics |= self.exploration.reward(batch)
            metrics |= self.exploration.fit(batch)
        with torch.no_grad(), phase("advantage"):
            self.value_estimator(batch)
        if self.exploration is not None and metrics.get("bonus/std", 0) > 0:
            with phase("diagnostics"):
                alignment = advantage_alignment(batch["advantage"], batch["bonus_advantage"])
            metrics |= {"bonus/advantage_corr": alignment["correlation"],
                        "bonus/advantage_share": alignment["bonus_share"]}
        with phase("policy"):
            metrics |= self.policy_update(batch)
        if self.critic_fit is not None:
            with phase("critic"):
                metrics |= self.critic_fit(batch)
        return metrics
