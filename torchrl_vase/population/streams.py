"""One random stream per member of a population: member k draws what a single run seeded
``seeds[k]`` draws."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from torchrl_vase.loop import iteration_seed

__all__ = ["MemberStreams", "check_seeds"]


def check_seeds(seeds: Sequence[int]) -> list[int]:
    """A population's seeds: a non-empty list of distinct non-negative ints."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise ValueError(f"seeds must be a non-empty list of ints, got {seeds!r}.")
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int) or s < 0]
    if bad:
        raise ValueError(f"seeds must be non-negative ints, got {bad}.")
    repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
    if repeated:
        raise ValueError(f"seeds {repeated} appear more than once: two members would be the "
                         "same run.")
    return list(seeds)


class MemberStreams:
    """A ``torch.Generator`` per member, seeded each iteration as ``TrainingLoop`` seeds the
    global one (``iteration_seed(seeds[k], i)``).

    Code that takes a generator draws from ``generators[k]``; library code that draws from the
    global stream runs inside ``member(k)``, which lends it member k's state and takes it back.
    Either way member k's numbers come in the order a single run draws them, so its agent is
    the single run's.

    Examples:
        >>> streams = MemberStreams([3, 7])
        >>> streams.seed_iteration(0)
        >>> with streams.member(1):
        ...     drawn = torch.rand(2)
        >>> _ = torch.manual_seed(iteration_seed(7, 0))
        >>> torch.equal(drawn, torch.rand(2))
        True
    """

    def __init__(self, seeds: Sequence[int]) -> None:
        self.seeds = check_seeds(seeds)
        self.generators = [torch.Generator().manual_seed(seed) for seed in self.seeds]

    def __len__(self) -> int:
        return len(self.seeds)

    def seed_iteration(self, iteration: int) -> None:
        for generator, seed in zip(self.generators, self.seeds, strict=True):
            generator.manual_seed(iteration_seed(seed, iteration))

    @contextmanager
    def member(self, k: int) -> Iterator[None]:
        """The global torch stream is member k's inside (and restored after)."""
        saved = torch.get_rng_state()
        torch.set_rng_state(self.generators[k].get_state())
        try:
            yield
        finally:
            self.generators[k].set_state(torch.get_rng_state())
            torch.set_rng_state(saved)

    def state_dict(self) -> dict:
        return {"seeds": list(self.seeds), "states": [g.get_state() for g in self.generators]}

    def load_state_dict(self, state: dict) -> None:
        if list(state["seeds"]) != self.seeds:
            raise ValueError(f"the state is of the seeds {state['seeds']}, not {self.seeds}.")
        for generator, saved in zip(self.generators, state["states"], strict=True):
            generator.set_state(saved)
