"""The bonus under an off-policy learner: SAC's updates on a replay buffer whose samples carry
``r = r_e + η·U`` under the model as it is when they are sampled.

``OffPolicyStep`` is ``TrainingLoop``'s step for SAC: the batch joins the replay buffer
(extrinsic reward), ``Exploration`` fits the model on the buffer, then ``SACUpdate`` takes its
gradient steps on samples that ``ReplayBonus`` rewards. torchrl's ``SACLoss`` is unchanged: the
bonus reaches it as the reward. Metrics: ``sac/*`` (means over the iteration's updates),
``sac/sampled_reward`` and ``bonus/sampled_mean`` besides ``Exploration``'s
(docs/guides/off_policy.md).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
    >>> from torchrl.objectives import SACLoss, SoftUpdate
    >>> from torchrl_vase import q_value_network, tanh_policy
    >>> actor, q = tanh_policy(3, 1, [16]), q_value_network(3, 1, [16])
    >>> loss = SACLoss(actor, q, action_spec=actor.spec)
    >>> _ = loss.make_value_estimator(gamma=0.99)
    >>> buffer = ReplayBuffer(storage=LazyTensorStorage(1000), batch_size=32)
    >>> update = SACUpdate(loss, buffer, torch.optim.Adam(loss.parameters(), lr=3e-4),
    ...                    SoftUpdate(loss, tau=0.005))
    >>> step = OffPolicyStep(buffer, update)
    >>> batch = TensorDict({"observation": torch.randn(64, 3), "action": torch.rand(64, 1),
    ...     "next": {"observation": torch.randn(64, 3), "reward": torch.randn(64, 1),
    ...              "done": torch.zeros(64, 1, dtype=torch.bool),
    ...              "terminated": torch.zeros(64, 1, dtype=torch.bool)}}, [64])
    >>> metrics = step(batch)
    >>> len(buffer), metrics["sac/updates"]
    (64, 64.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch
from tensordict import TensorDictBase
from torchrl.data import ReplayBuffer
from torchrl.objectives import SACLoss, SoftUpdate

from torchrl_vase._validation import check_positive_int
from torchrl_vase.exploration import Exploration, ReplayBonus
from torchrl_vase.loop import StopNow, stop_due
from torchrl_vase.timing import phase

__all__ = ["TRANSITION_KEYS", "OffPolicyStep", "SACUpdate"]

#: what a transition keeps in the replay buffer: SAC's inputs and the bonus's
TRANSITION_KEYS = ("observation", "action", ("next", "observation"), ("next", "reward"),
                   ("next", "done"), ("next", "terminated"))

_LOSS_METRICS = ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")


class SACUpdate:
    """``utd_ratio × frames`` gradient steps of torchrl's ``SACLoss`` as torchrl's SAC example takes
    them (a sample of ``replay``, its transforms applied; the three losses summed; one step of the
    grouped Adams; the targets' soft update). Returns the means of the loss's outputs; between steps
    it asks ``stop_due``. Its ``state_dict`` holds the optimiser and the loss.

    Args:
        loss: a ``SACLoss`` with its value estimator made.
        replay: the buffer the batches come from (its ``batch_size`` set).
        optimizer: over the loss's parameters (actor, critics, ``log_alpha``).
        target_updater: torchrl's ``SoftUpdate`` (or ``HardUpdate``) of the loss.
        utd_ratio: updates per collected frame (torchrl's example: 1)."""

    def __init__(self, loss: SACLoss, replay: ReplayBuffer, optimizer: torch.optim.Optimizer,
                 target_updater: SoftUpdate, *, utd_ratio: float = 1.0) -> None:
        if not isinstance(loss, SACLoss):
            raise TypeError(f"loss must be torchrl's SACLoss, got {type(loss).__name__}.")
        if not (math.isfinite(utd_ratio) and utd_ratio > 0):
            raise ValueError(f"utd_ratio must be a positive number, got {utd_ratio}.")
        self.loss, self.replay, self.optimizer = loss, replay, optimizer
        self.target_updater, self.utd_ratio = target_updater, float(utd_ratio)

    def __call__(self, frames: int) -> dict[str, float]:
        updates = max(1, round(frames * self.utd_ratio))
        totals = torch.zeros(len(_LOSS_METRICS) + 2)
        for _ in range(updates):
            if (signal_name := stop_due()) is not None:  # a signal's grace ran out: drop them
                raise StopNow(signal_name)
            sample = self.replay.sample()
            out = self.loss(sample)
            (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.target_updater.step()
            with torch.no_grad():
                totals += torch.stack([
                    *(out[key].detach().float().mean() for key in _LOSS_METRICS),
                    sample["next", "reward"].float().mean(),
                    sample.get(("next", "intrinsic_reward"), torch.full((1,), math.nan)
                               ).float().mean()])
        means = (totals / updates).tolist()
        metrics = {f"sac/{key}": value for key, value in zip(_LOSS_METRICS, means, strict=False)}
        metrics |= {"sac/updates": float(updates), "sac/sampled_reward": means[-2]}
        if not math.isnan(means[-1]):
            metrics["bonus/sampled_mean"] = means[-1]
        return metrics

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "loss": self.loss.state_dict()}

    def load_state_dict(self, state: Mapping) -> None:
        self.loss.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])


class OffPolicyStep:
    """One iteration of an off-policy learner with a bonus on its replay buffer (see the module).

    Args:
        replay: the buffer, the run's one store of transitions (``ReplayBonus`` is appended here).
        update: ``SACUpdate`` (or any callable ``frames -> metrics`` that samples ``replay``).
        exploration: the bonus's side, built with ``pool=replay`` (``None``: no bonus).
        learning_starts: no update until the buffer holds this many transitions."""

    def __init__(self, replay: ReplayBuffer, update: Callable[[int], dict[str, float]],
                 exploration: Exploration | None = None, *, learning_starts: int = 0) -> None:
        if exploration is not None:
            if exploration.pool is not replay:
                raise ValueError("the bonus's model must train on the learner's replay buffer: "
                                 "build the Exploration with pool=replay.")
            replay.append_transform(ReplayBonus(exploration))
        self.replay, self.update, self.exploration = replay, update, exploration
        self.learning_starts = check_positive_int("learning_starts", learning_starts, minimum=0)

    def __call__(self, batch: TensorDictBase) -> dict[str, float]:
        flat = batch.reshape(-1)
        # stored as collected (the extrinsic reward): the bonus is the sample's, not the buffer's
        transitions = flat.select(*TRANSITION_KEYS).clone()
        metrics: dict[str, float] = {}
        # the bonus against the buffer as it was, then the model fitted on
        # the buffer the batch has joined
        if self.exploration is not None:
            metrics |= self.exploration.reward(flat)
        with phase("replay"):  # the learner's store, not the bonus's
            self.replay.extend(transitions)
        if self.exploration is not None:
            metrics |= self.exploration.fit(flat)
        if len(self.replay) >= self.learning_starts:
            with phase("policy"):  # the bonus on its samples: time/bonus
                metrics |= self.update(flat.numel())
        return metrics
