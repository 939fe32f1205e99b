"""A population as the loop's ``Members``: K runs trained by one ``TrainingLoop`` in lockstep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensordict import TensorDictBase

from torchrl_vase.loop import MemberMetrics, Watcher, iteration_seed
from torchrl_vase.population.streams import MemberStreams

__all__ = ["MemberParts", "PopulationMembers"]


class PopulationMembers:
    """The members of a population for ``TrainingLoop(members=...)``: batches with a leading
    member dim ``[K, ...]`` (a ``PopulationCollector``'s), one random stream, logger and list of
    watchers per member; the step (``PopulationStep``) and the evaluation return one metrics
    dict per member.

    Member k is seeded as the single run with seed ``streams.seeds[k]`` (its stream reseeded
    from ``iteration_seed(seeds[k], i)`` each iteration, its envs too with the loop's
    ``reseed_collector``), so its logged history is that run's; the loop's ``frames`` counts one
    member's.

    Args:
        streams: the members' random streams.
        loggers: one per member (``None``: none logs).
        watchers: per member, its watchers (``(batch, frames_before) -> metrics``).

    Examples:
        >>> members = PopulationMembers(MemberStreams([3, 7]))
        >>> members.seed_iteration(0) == [iteration_seed(3, 0), iteration_seed(7, 0)]
        True
        >>> members.per_member([{"loss": 1.0}, {"loss": 2.0}])
        [{'loss': 1.0}, {'loss': 2.0}]
    """

    def __init__(self, streams: MemberStreams, loggers: Sequence[Any] | None = None,
                 watchers: Sequence[Sequence[Watcher]] | None = None) -> None:
        self.streams = streams
        self.loggers = list(loggers) if loggers is not None else [None] * len(streams)
        self.watchers = [list(w) for w in (watchers or [()] * len(streams))]
        if len(self.loggers) != len(streams) or len(self.watchers) != len(streams):
            raise ValueError(f"one logger and one list of watchers per member "
                             f"({len(streams)}).")

    def seed_iteration(self, iteration: int) -> list[int]:
        self.streams.seed_iteration(iteration)
        return [iteration_seed(seed, iteration) for seed in self.streams.seeds]

    def unbind(self, batch: TensorDictBase) -> tuple[TensorDictBase, ...]:
        return batch.unbind(0)

    def per_member(self, metrics: Sequence[Mapping[str, float]]) -> MemberMetrics:
        if isinstance(metrics, Mapping) or len(metrics) != len(self.streams):
            raise ValueError(f"a population's step and evaluation return one metrics dict per "
                             f"member ({len(self.streams)}).")
        return [dict(m) for m in metrics]


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
