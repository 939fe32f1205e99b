"""Algorithm 1 after the rollout for every member of a population: ``OnPolicyStep``'s phases,
member by member, and the model's ELBO steps for all members at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase

from torchrl_vase.objectives.elbo_steps import run_elbo_steps
from torchrl_vase.population.streams import MemberStreams
from torchrl_vase.step import OnPolicyStep

__all__ = ["PopulationStep"]


class PopulationStep:
    """The members' ``OnPolicyStep``s on their batches: what a single run computes, member by
    member, with every random draw from the member's stream (``MemberStreams``).

    The ELBO's minibatch steps of an iteration run for all members in one call
    (``run_elbo_steps``: the compiled kernel steps each member's model in turn, or the eager
    path runs the K·N sampled networks as one batch; each member's numbers are its own steps',
    bit for bit); everything else runs member by member under the member's stream: the bonus,
    the pool, the diagnostics, the advantage, the policy's update and the critic fit, and what
    has no batched form (RND's and VIME's training, an ELBO step through torch.compile). So
    member k's whole metric history is, value for value, the single run's with seed
    ``streams.seeds[k]`` (tested). What that saves over K single runs: ``docs/benchmarks.md``.

    Args:
        steps: one ``OnPolicyStep`` per member, built alike (their seeds apart).
        streams: the members' random streams.
    """

    def __init__(self, steps: Sequence[OnPolicyStep], streams: MemberStreams) -> None:
        if len(steps) != len(streams):
            raise ValueError(f"{len(steps)} steps for {len(streams)} members.")
        self.steps, self.streams = list(steps), streams
        explorations = [step.exploration for step in self.steps]
        self.batched_model = all(e is not None and e.uses_elbo_gradients()
                                 and e.steps_backend in ("numba", "eager")
                                 and e.steps_backend == explorations[0].steps_backend
                                 for e in explorations)

    def __call__(self, batch: TensorDictBase) -> list[dict[str, float]]:
        """Each member's metrics on its batch (``batch[k]``, the members' batches ``[K, ...]``;
        each member's view written as ``OnPolicyStep`` writes a single run's)."""
        batches = batch.unbind(0)
        if len(self.steps) == 1:
            return self._each(lambda k: self.steps[k](batches[k]))  # the single run's step
        observed = self._each(lambda k: self.steps[k].observe(batches[k]))
        metrics = [dict(m) for m, _ in observed]
        for k, trained in enumerate(self._train_models([sample for _, sample in observed])):
            metrics[k].update(trained)
        for k, step in enumerate(self.steps):
            metrics[k].update(step.advantage(batches[k], metrics[k]))
        updates = self._each(lambda k: self.steps[k].policy_update(batches[k]))
        fits = self._each(lambda k: self.steps[k].critic_fit(batches[k])
                          if self.steps[k].critic_fit is not None else {})
        for k in range(len(self.steps)):
            metrics[k].update(updates[k])
            metrics[k].update(fits[k])
        return metrics

    def _each(self, phase: Callable[[int], object]) -> list:
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
        explorations = [step.exploration for step in self.steps]
        inputs = [e.loss.model_inputs(sample) for e, sample in zip(explorations, samples,
                                                                   strict=True)]
        rows = explorations[0].batch_size

        def noise(steps: int) -> torch.Tensor:  # each member's draws, from its stream
            return torch.stack([e.loss.step_noise(rows, steps=steps, generator=g) for e, g in
                                zip(explorations, self.streams.generators, strict=True)])

        first = explorations[0]
        trained = run_elbo_steps(
            first.loss, [e.loss.model.network for e in explorations],
            [e.optimizer for e in explorations], torch.stack([x for x, _ in inputs]),
            torch.stack([y for _, y in inputs]), noise, batch_size=rows,
            backend=first.steps_backend)
        return [step.model_metrics(e.count_steps(m)) for step, e, m in
                zip(self.steps, explorations, trained, strict=True)]
