"""A stream of random numbers of one's own, for code that draws through torch's default generators
but must not move them: inside ``RandomStream.active()`` they draw from the stream and are left
as they were. A learner after the bonus then draws what it would without it, so η = 0 trains
the policy bit for bit as no bonus (an exact control).

    >>> import torch
    >>> stream = RandomStream(seed=7)
    >>> _ = torch.manual_seed(0)
    >>> with stream.active():
    ...     drawn = torch.rand(2)
    >>> torch.equal(drawn, torch.rand(2, generator=torch.Generator().manual_seed(7)))
    True
    >>> torch.equal(torch.rand(1), torch.rand(1, generator=torch.Generator().manual_seed(0)))
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import numpy as np
import torch

__all__ = ["RandomStream", "iteration_seed"]

#: ``iteration_seed``'s streams besides training's (0): the evaluation's, the exploration's
EVALUATION_STREAM, EXPLORATION_STREAM = 1, 0x766173


def iteration_seed(seed: int, iteration: int, stream: int = 0) -> int:
    """The seed of one iteration of a run: a function of the run's seed and the iteration only;
    ``stream`` > 0 gives independent seeds for other uses of the same iteration (evaluation).

    Examples:
        >>> iteration_seed(0, 3) == iteration_seed(0, 3) != iteration_seed(0, 3, stream=1)
        True
    """
    entropy = [seed, iteration] + ([stream] if stream else [])
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


class RandomStream:
    """Random numbers of one's own: inside ``active(device)`` torch's default CPU generator (and
    the default generator of ``device``, where it is a GPU) draw from this stream, which
    continues from one ``active()`` block to the next; after the block they are as they were
    before it.

    Its state (the seed and each generator's state) is a ``state_dict`` of plain tensors, so a
    checkpoint holding it resumes the stream exactly. Nested ``active()`` blocks are one block.

    Args:
        seed: the stream's seed (a GPU's stream starts from it at the first block there)."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self._states: dict[str, torch.Tensor] = {"cpu": self._seeded(torch.device("cpu"))}
        self._depth = 0

    def _seeded(self, device: torch.device) -> torch.Tensor:
        # a fresh generator's state: seeding the default one would also move every other GPU's
        return torch.Generator(device=device).manual_seed(self.seed).get_state()

    @contextlib.contextmanager
    def active(self, device: torch.device | str | None = None) -> Iterator[None]:
        """Draw from this stream inside the block (on the CPU, and on ``device`` if a GPU); the
        default generators untouched after it."""
        if self._depth:  # nested: already drawing from the stream
            yield
            return
        device = torch.device(device if device is not None else "cpu")
        cuda = []
        if device.type == "cuda":
            cuda = [device.index if device.index is not None else torch.cuda.current_device()]
            if "cuda" not in self._states:
                self._states["cuda"] = self._seeded(torch.device("cuda", cuda[0]))
        self._depth += 1
        try:
            with torch.random.fork_rng(devices=cuda):
                torch.set_rng_state(self._states["cpu"])
                if cuda:
                    torch.cuda.set_rng_state(self._states["cuda"], cuda[0])
                try:
                    yield
                finally:
                    self._states["cpu"] = torch.get_rng_state()
                    if cuda:
                        self._states["cuda"] = torch.cuda.get_rng_state(cuda[0])
        finally:
            self._depth -= 1

    def state_dict(self) -> dict:
        return {"seed": self.seed, **{key: state.clone() for key, state in self._states.items()}}

    def load_state_dict(self, state: Mapping) -> None:
        if "cpu" not in state or "seed" not in state:
            raise ValueError("not a random stream's state: it needs 'seed' and 'cpu'.")
        self.seed = int(state["seed"])
        self._states = {key: state[key].clone().to(torch.uint8)
                        for key in ("cpu", "cuda") if key in state}
