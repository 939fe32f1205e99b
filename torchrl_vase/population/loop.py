"""``OnPolicyLoop`` for a population: K members trained in lockstep in one process."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl_vase.loop import FPS, FRAMES, ITERATION, OnPolicyLoop, check_finite, iteration_seed
from torchrl_vase.population.streams import MemberStreams

__all__ = ["MemberParts", "PopulationLoop"]

MemberMetrics = list[dict[str, float]]


class MemberParts:
    """The members' stateful parts (one ``{name: part}`` per member) as one part of a loop's
    state: ``state_dict`` is the list of the members' states, each a single run's ``parts``."""

    def __init__(self, members: Sequence[Mapping[str, Any]]) -> None:
        self.members = [dict(parts) for parts in members]

    def state_dict(self) -> list[dict]:
        return [{name: None if part is None else part.state_dict()
                 for name, part in parts.items()} for parts in self.members]

    def load_state_dict(self, state: Sequence[Mapping]) -> None:
        if len(state) != len(self.members):
            raise ValueError(f"the checkpoint holds {len(state)} members, not "
                             f"{len(self.members)}.")
        for parts, saved in zip(self.members, state, strict=True):
            for name, part in parts.items():
                if part is not None:
                    part.load_state_dict(saved[name])


class PopulationLoop(OnPolicyLoop):
    """``OnPolicyLoop`` whose batch has a leading member dim ``[K, ...]``: a
    ``PopulationCollector``'s, a ``PopulationStep`` returning one metrics dict per member, one
    logger and one list of watchers per member, ``evaluate(iteration)`` returning one metrics
    dict per member.

    Everything else is the single loop's: one checkpoint for the population (``state`` holds
    ``streams`` and the members' parts, ``MemberParts``), written every ``checkpoint_every``
    iterations and on SIGTERM/SIGINT, metrics logged only once checkpointed, exact resume.
    Member k is seeded as the single run with seed ``streams.seeds[k]`` (its stream reseeded
    from ``iteration_seed(seeds[k], i)`` each iteration, its envs too with
    ``reseed_collector``), so its logged history is that run's; ``frames`` counts one member's.

    Args:
        collector: the population's collector (batches ``[K, ...]``).
        step: ``batches -> [metrics per member]`` (``PopulationStep``).
        streams: the members' random streams.
        loggers: one per member (``None``: none).
        member_watchers: per member, its watchers (``(batch, frames_before) -> metrics``).
        **kwargs: as ``OnPolicyLoop`` (``iterations``, ``state``, ``checkpoint``, ...).
    """

    def __init__(self, collector: Iterable[TensorDictBase],
                 step: Callable[[Sequence[TensorDictBase]], MemberMetrics], *,
                 streams: MemberStreams, loggers: Sequence[Any] | None = None,
                 member_watchers: Sequence[Sequence[Callable]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(collector, step, seed=streams.seeds[0], **kwargs)
        self.streams = streams
        self.loggers = list(loggers) if loggers is not None else [None] * len(streams)
        self.member_watchers = [list(w) for w in (member_watchers or [()] * len(streams))]
        if len(self.loggers) != len(streams) or len(self.member_watchers) != len(streams):
            raise ValueError(f"one logger and one list of watchers per member "
                             f"({len(streams)}).")

    def _seed_iteration(self, iteration: int) -> None:
        self.streams.seed_iteration(iteration)
        if self.reseed_collector:
            self.collector.set_seed([iteration_seed(s, iteration) for s in self.streams.seeds])

    def _iteration(self, batches: Iterator[TensorDictBase]) -> MemberMetrics:
        tick = time.perf_counter()
        iteration = self.iteration
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        self._seed_iteration(iteration)
        batch = next(batches).to(self.device)
        check_finite(batch["next", "reward"], "the env's reward ('next', 'reward')", iteration)
        members = batch.unbind(0)
        frames_before, self.frames = self.frames, self.frames + members[0].numel()
        metrics: MemberMetrics = [{} for _ in members]
        for k, member in enumerate(members):
            for watch in self.member_watchers[k]:
                metrics[k].update(watch(member, frames_before))
        for k, computed in enumerate(self.step(members)):
            metrics[k].update(computed)
        self.collector.update_policy_weights_()
        self.iteration += 1
        fps = members[0].numel() / (time.perf_counter() - tick)
        return [m | {FRAMES: self.frames, ITERATION: iteration, FPS: fps} for m in metrics]

    def _add(self, metrics: MemberMetrics, more) -> None:
        for k, member in enumerate(metrics):
            member.update(more[k] if isinstance(more, Sequence) else more)

    def _progress_values(self, metrics: MemberMetrics) -> dict[str, float]:
        """The members' mean of each shown metric."""
        return {label: sum(m.get(key, math.nan) for m in metrics) / len(metrics)
                for label, key in self.progress_keys.items()}

    def _flush_resumed(self) -> None:
        for k, logger in enumerate(self.loggers):
            logged = -1
            if logger is not None and hasattr(logger, "last_logged_step"):
                logged = logger.last_logged_step(FRAMES)
            if logger is not None:
                steps = [(step, metrics[k]) for step, metrics in self.pending if step > logged]
                if steps:
                    logger.log(steps)
        self.pending = []

    def _log(self, steps: list[tuple[int, MemberMetrics]]) -> None:
        for k, logger in enumerate(self.loggers):
            if logger is not None and steps:
                logger.log([(step, metrics[k]) for step, metrics in steps])
