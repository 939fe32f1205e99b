"""The step of Algorithm 1 that follows each rollout, with TRPO's or PPO's policy update.

``OnPolicyStep`` is what ``TrainingLoop`` calls once per batch (paper, Algorithm 1, lines 5-9):
the exploration side (the bonus ``r = r_e + η·U`` over the whole batch, the pool, the model's
standardisation and its ELBO steps: ``Exploration.step``), the advantage (an ``ExplorationGAE``
structure), the policy update (``TRPOUpdate``: one natural-gradient step; ``PPOUpdate``: epochs of
torchrl's ``ClipPPOLoss`` on minibatches), the critic fit (``CriticFit``) and the diagnostics of
whether the bonus steers the policy. Each piece is a small object; the step only orders them and
names their metrics as the recipe logs them:

- ``bonus/``: the intrinsic reward (``mean``, ``std``), its novelty correlation and its share of
  the advantage (``advantage_corr``, ``advantage_share``);
- ``bnn/`` or ``rnd/``: the bonus's model (its losses);
- ``trpo/`` or ``ppo/``: the policy step and the critic fit.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl.modules import ValueOperator
    >>> from torchrl_vase import ExplorationGAE, TRPOLoss, gaussian_policy
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
from torchrl_vase.objectives.trpo import TRPOLoss, fit_critic, loggable_fit
from torchrl_vase.timing import phase

__all__ = ["CriticFit", "OnPolicyStep", "PPOUpdate", "TRPOUpdate", "logged_model_metrics"]

# Exploration.step's metrics as the recipe logs them; the model's own go under bnn/ or rnd/
EXPLORATION_METRICS = {
    "bonus_mean": "bonus/mean",
    "bonus_std": "bonus/std",
    "novelty_spearman": "bonus/novelty_spearman",
    "self_agreement": "bonus/self_agreement",
    "confidence": "bonus/confidence",
    "confidence_share": "bonus/confidence_share",
}


def logged_model_metrics(exploration: Exploration, metrics: Mapping[str, float]
                         ) -> dict[str, float]:
    """``Exploration``'s metrics as the recipe logs them: ``bonus/…``, the model's under its
    bonus's ``metric_prefix`` (``bnn/``, the ELBO's; ``rnd/``)."""
    prefix = exploration.bonus.metric_prefix
    return {EXPLORATION_METRICS.get(key, prefix + key): value for key, value in metrics.items()}


class TRPOUpdate:
    """One natural-gradient step of ``TRPOLoss`` on the batch (its advantages computed); returns
    ``trpo/kl``, ``trpo/surrogate_before``/``_after``, ``trpo/step_accepted``,
    ``trpo/backtracks``, ``trpo/entropy`` (the policy's, after the step). Stateless: the step
    depends on the batch and the policy alone."""

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
    """``epochs`` passes of shuffled minibatches of torchrl's ``ClipPPOLoss`` (objective plus
    entropy term) with one optimiser, gradients clipped to ``max_grad_norm``.

    The critic is not in the loss (build it with ``critic_coeff=0``): ``CriticFit`` fits it
    after the policy epochs, on the targets of the run's advantage structure, as for TRPO.
    Returns ``ppo/loss_objective``, ``ppo/entropy``, ``ppo/kl_approx`` and ``ppo/clip_fraction``,
    means over the last epoch. Its ``state_dict`` is the optimiser's.

    Args:
        loss: a ``ClipPPOLoss`` (or any ``PPOLoss``) without a critic term.
        optimizer: over the actor's parameters.
        epochs: passes over the batch.
        minibatch_size: transitions per gradient step.
        max_grad_norm: gradient-norm clip (``None``: none).
    """

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


class CriticFit:
    """``fit_critic``: the critic (and the dual structure's intrinsic critic) regressed on the
    batch's value targets; returns ``<prefix>critic_loss`` and ``<prefix>explained_variance``
    (``intrinsic_`` versions with an intrinsic critic; no explained variance while every target
    is 0: ``loggable_fit``). Its ``state_dict`` is the optimiser's."""

    def __init__(self, loss, optimizer: torch.optim.Optimizer, *, epochs: int = 5,
                 minibatch_size: int = 500, prefix: str = "trpo/") -> None:
        self.loss, self.optimizer = loss, optimizer
        self.epochs, self.minibatch_size, self.prefix = epochs, minibatch_size, prefix

    def __call__(self, batch: TensorDictBase) -> dict[str, float]:
        fit = fit_critic(self.loss, batch, self.optimizer, epochs=self.epochs,
                         minibatch_size=self.minibatch_size)
        return loggable_fit({self.prefix + ("critic_loss" if key == "loss_critic" else key):
                             float(value) for key, value in fit.items()})

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: Mapping) -> None:
        self.optimizer.load_state_dict(state)


class OnPolicyStep:
    """Algorithm 1 after the rollout, on one batch: bonus, advantage, policy, critic.

    Args:
        value_estimator: writes ``advantage`` and the value targets (``ExplorationGAE``; with a
            bonus also ``bonus_advantage``, read by the alignment diagnostic).
        policy_update: ``TRPOUpdate``, ``PPOUpdate`` or any callable ``batch -> metrics``.
        critic_fit: ``CriticFit`` (``None``: the policy update trains the critic itself).
        exploration: the exploration side (``None``: no bonus, plain TRPO/PPO).
    """

    def __init__(self, value_estimator: ValueEstimatorBase,
                 policy_update: Callable[[TensorDictBase], dict[str, float]],
                 critic_fit: Callable[[TensorDictBase], dict[str, float]] | None = None,
                 exploration: Exploration | None = None) -> None:
        self.value_estimator = value_estimator
        self.policy_update, self.critic_fit = policy_update, critic_fit
        self.exploration = exploration

    def __call__(self, batch: TensorDictBase) -> dict[str, float]:
        metrics, sample = self.observe(batch)
        metrics.update(self.train_model(sample))
        metrics.update(self.advantage(batch, metrics))
        with phase("policy"):
            metrics.update(self.policy_update(batch))
        if self.critic_fit is not None:
            with phase("critic"):
                metrics.update(self.critic_fit(batch))
        return metrics

    # the phases of __call__
    def observe(self, batch: TensorDictBase) -> tuple[dict[str, float], TensorDictBase | None]:
        """r = r_e + η·U written into the batch, the bonus's diagnostics, the pool; the metrics
        and the model's minibatches (``Exploration.observe``)."""
        if self.exploration is None:
            return {}, None
        metrics, sample = self.exploration.observe(batch)
        return self.model_metrics(metrics), sample

    def train_model(self, sample: TensorDictBase | None) -> dict[str, float]:
        """The bonus's model trained on ``observe``'s minibatches."""
        if self.exploration is None:
            return {}
        return self.model_metrics(self.exploration.update_model(sample))

    def model_metrics(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """``Exploration``'s metrics as logged: ``bonus/…``, the model's under ``bnn/`` or
        ``rnd/``."""
        return logged_model_metrics(self.exploration, metrics)

    def advantage(self, batch: TensorDictBase, metrics: Mapping[str, float]) -> dict[str, float]:
        """The advantage written into the batch; with a bonus that varies (``bonus/std`` of
        ``metrics``), how much of it the bonus makes."""
        with torch.no_grad(), phase("advantage"):
            self.value_estimator(batch)
        if self.exploration is None or not metrics.get("bonus/std", 0) > 0:
            return {}
        with phase("diagnostics"):
            alignment = advantage_alignment(batch["advantage"], batch["bonus_advantage"])
        return {"bonus/advantage_corr": alignment["correlation"],
                "bonus/advantage_share": alignment["bonus_share"]}
