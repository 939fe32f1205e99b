"""Algorithm 1 after the rollout for every member of a population: ``OnPolicyStep``'s phases,
the costly ones for all members at once."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from torchrl_vase.algorithm import OnPolicyStep, TRPOUpdate
from torchrl_vase.exploration import Exploration
from torchrl_vase.population.streams import MemberStreams
from torchrl_vase.population.updates import (
    batched_critic_fit_applies,
    population_critic_fit,
    population_trpo_step,
)

__all__ = ["PopulationStep"]


class PopulationStep:
    """The members' ``OnPolicyStep``s on their batches: what a single run computes, member by
    member, with every random draw from the member's stream (``MemberStreams``).

    The ELBO's 500 minibatch steps run for all members in one call (``Exploration.elbo_steps``:
    the compiled kernel steps each member's model in turn, or the eager path runs the K·N
    sampled networks as one batch; each member's numbers are its own steps', bit for bit);
    everything else
    runs member by member under the member's stream: the bonus, the pool, the diagnostics, the
    advantage (one call per member on the whole batch), TRPO's step and the critic fit, and
    whatever has no batched form (RND's and VIME's training, PPO's epochs, an ELBO
    step through torch.compile). So member k's whole metric history is, value for value, the single
    run's with seed ``streams.seeds[k]`` (tested).

    TRPO's step and the critic fit also exist for all members at once (``population_trpo_step``,
    ``population_critic_fit``; each member's numbers equal its own to float rounding, tested):
    ``batch_policy_update`` and ``batch_critic_fit`` use them. They are off by default: measured on
    two CPU cores (``docs/benchmarks.md``), the batched TRPO step (``torch.vmap`` and a double
    backward through it) took 1.2-2x the time of ten single steps, and the batched critic fit,
    1.4-1.9x faster than ten single fits, saves about 3 % of an iteration while its float rounding
    (its batched kernels sum a one-output layer in another order) parts a member's trajectory
    from the single run's within a few iterations.

    Args:
        steps: one ``OnPolicyStep`` per member, built alike (their seeds apart).
        streams: the members' random streams.

    Keyword Args:
        batch_policy_update: TRPO's step for all members at once.
        batch_critic_fit: the critic fit for all members at once.
    """

    def __init__(self, steps: Sequence[OnPolicyStep], streams: MemberStreams, *,
                 batch_policy_update: bool = False, batch_critic_fit: bool = False) -> None:
        if len(steps) != len(streams):
            raise ValueError(f"{len(steps)} steps for {len(streams)} members.")
        self.steps, self.streams = list(steps), streams
        explorations = [step.exploration for step in self.steps]
        self.batched_model = all(e is not None and e.uses_elbo_gradients()
                                 and e.steps_backend in ("numba", "eager")
                                 and e.steps_backend == explorations[0].steps_backend
                                 for e in explorations)
        self.batched_policy = batch_policy_update and all(
            isinstance(step.policy_update, TRPOUpdate) for step in self.steps)
        fits = [step.critic_fit for step in self.steps]
        self.batched_critic = (batch_critic_fit and all(fits)
                               and batched_critic_fit_applies(fits))

    def __call__(self, batches: Sequence[TensorDictBase]) -> list[dict[str, float]]:
        """Each member's metrics on its batch (``batches[k]``, written in place as
        ``OnPolicyStep`` writes a single run's)."""
        members = range(len(self.steps))
        if len(self.steps) == 1 and not (self.batched_policy or self.batched_critic):
            return self._each(lambda k: self.steps[k](batches[k]))  # the single run's step
        observed = []
        for k in members:
            with self.streams.member(k):
                observed.append(self.steps[k].observe(batches[k]))
        metrics = [dict(m) for m, _ in observed]
        samples = [sample for _, sample in observed]
        for k, trained in enumerate(self._train_models(samples)):
            metrics[k].update(trained)
        for k in members:
            metrics[k].update(self.steps[k].advantage(batches[k], metrics[k]))
        if self.batched_policy:
            updates = population_trpo_step([s.policy_update.loss for s in self.steps], batches)
        else:
            updates = self._each(lambda k: self.steps[k].policy_update(batches[k]))
        if self.batched_critic:
            fits = population_critic_fit([s.critic_fit for s in self.steps], batches,
                                         self.streams.generators)
        else:
            fits = self._each(lambda k: self.steps[k].critic_fit(batches[k])
                              if self.steps[k].critic_fit is not None else {})
        for k in members:
            metrics[k].update(updates[k])
            metrics[k].update(fits[k])
        return metrics

    def _each(self, phase) -> list[dict[str, float]]:
        out = []
        for k in range(len(self.steps)):
            with self.streams.member(k):
                out.append(phase(k))
        return out

    def _train_models(self, samples: list[TensorDictBase | None]) -> list[dict[str, float]]:
        """The bonus's models: the ELBO's steps for all members at once when they all train
        this iteration, else each member's ``train_model``."""
        if not (self.batched_model and all(sample is not None for sample in samples)):
            return self._each(lambda k: self.steps[k].train_model(samples[k]))
        explorations: list[Exploration] = [step.exploration for step in self.steps]
        inputs = [e.loss.model_inputs(sample) for e, sample in zip(explorations, samples,
                                                                   strict=True)]
        x = torch.stack([x for x, _ in inputs])
        y = torch.stack([y for _, y in inputs])
        rows = explorations[0].batch_size

        def noise(steps: int) -> torch.Tensor:  # each member's draws, from its stream
            return torch.stack([e.loss.step_noise(rows, steps=steps, generator=g) for e, g in
                                zip(explorations, self.streams.generators, strict=True)])

        trained = Exploration.elbo_steps(x, y, noise, explorations)
        return [step.model_metrics(e.count_steps(m)) for step, e, m in
                zip(self.steps, explorations, trained, strict=True)]
