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

    The phases that are many small operations run for all members at once: the ELBO's 500
    minibatch steps (``Exploration.elbo_steps`` over stacked models), TRPO's step
    (``population_trpo_step``) and the critic fit (``population_critic_fit``). The bonus, the
    pool, the diagnostics and the advantage (one call per member on the whole batch) run member
    by member, as does anything without a batched form (RND's and VIME's training, PPO's epochs,
    the dual structure's two critics): those are right for every config and fast where it
    counts. A population of one runs its member's ``OnPolicyStep`` as it is.

    Per member the batched phases compute the single run's numbers up to float rounding (their
    batched kernels sum in another order than the single ones where a layer has one output), so
    member k's first iteration is the single run's to ~1e-6 and its later ones are statistically,
    not bitwise, the single run's.

    Args:
        steps: one ``OnPolicyStep`` per member, built alike (their seeds apart).
        streams: the members' random streams.
    """

    def __init__(self, steps: Sequence[OnPolicyStep], streams: MemberStreams) -> None:
        if len(steps) != len(streams):
            raise ValueError(f"{len(steps)} steps for {len(streams)} members.")
        self.steps, self.streams = list(steps), streams
        explorations = [step.exploration for step in self.steps]
        self.batched_model = all(e is not None and e.uses_elbo_gradients() and not e.compile
                                 and not e.loss.model.network.local_reparameterization
                                 for e in explorations)
        self.batched_policy = all(isinstance(step.policy_update, TRPOUpdate)
                                  for step in self.steps)
        fits = [step.critic_fit for step in self.steps]
        self.batched_critic = all(fits) and batched_critic_fit_applies(fits)

    def __call__(self, batches: Sequence[TensorDictBase]) -> list[dict[str, float]]:
        """Each member's metrics on its batch (``batches[k]``, written in place as
        ``OnPolicyStep`` writes a single run's)."""
        members = range(len(self.steps))
        if len(self.steps) == 1:  # nothing to batch: the single run's step itself
            return self._each(lambda k: self.steps[k](batches[k]))
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
        networks = [e.loss.model.network for e in explorations]
        samples_n = explorations[0].loss.num_samples

        def noise() -> torch.Tensor:  # each member's step draw, from its stream
            return torch.stack([n.sample_noise(samples_n, generator=g) for n, g in
                                zip(networks, self.streams.generators, strict=True)])

        trained = Exploration.elbo_steps(x, y, noise, explorations)
        return [step.model_metrics(e.count_steps(m)) for step, e, m in
                zip(self.steps, explorations, trained, strict=True)]
