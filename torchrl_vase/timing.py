"""Where a training iteration's wall time goes: the ``time/<phase>`` metrics of every run.

``TrainingLoop`` runs each iteration inside a ``PhaseClock``; the library's parts mark their work
with ``phase(name)``, which times it on the running clock (nothing when none runs). Each second
counts once, in the innermost open phase; what no phase covers is ``other``, so the phases add
up to ``time/iteration``. A clock read at a dozen edges costs microseconds, where cProfile's
overhead inflates the Python-heavy phases several-fold (docs/benchmarks.md).

Examples:
    >>> import time
    >>> clock = PhaseClock()
    >>> with clock.running():
    ...     with phase("model"):
    ...         time.sleep(0.02)
    ...         with phase("bonus"):  # nested: its time is the bonus's, not the model's
    ...             time.sleep(0.01)
    >>> times = clock.lap()
    >>> sorted(times)
    ['bonus', 'model', 'other']
    >>> 0.01 <= times["bonus"] < times["model"] and abs(sum(times.values()) - clock.last) < 1e-9
    True
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["EXPLORATION_PHASES", "PhaseClock", "phase", "timing_metrics"]

#: the phases of the exploration side (Algorithm 1's additions to the policy gradient): what
#: ``time/exploration_share`` adds up
EXPLORATION_PHASES = ("bonus", "diagnostics", "pool", "model")

_RUNNING: ContextVar[PhaseClock | None] = ContextVar("torchrl_vase_phase_clock", default=None)


class PhaseClock:
    """Wall-clock seconds per phase, nested phases excluded, between two ``lap`` calls:
    ``running()`` makes it ``phase``'s clock; ``lap()`` returns each phase's seconds since the
    previous lap with ``other`` outside every phase (0 for a phase absent from this lap)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._seen: dict[str, None] = {}
        #: the length of the previous lap, seconds
        self.last = 0.0
        self._open: list[str] = []
        self._mark = self._lap_start = time.perf_counter()

    @contextmanager
    def running(self) -> Iterator[PhaseClock]:
        """Report ``phase`` calls here while the block runs; the first lap starts now."""
        token = _RUNNING.set(self)
        self.seconds, self._open, self._seen = {}, [], {}
        self._mark = self._lap_start = time.perf_counter()
        try:
            yield self
        finally:
            _RUNNING.reset(token)

    def current(self) -> str | None:
        """The innermost phase open now (``None``: none)."""
        return self._open[-1] if self._open else None

    def enter(self, name: str) -> None:
        self._charge()
        self._open.append(name)

    def exit(self) -> None:
        self._charge()
        self._open.pop()

    def _charge(self) -> None:
        """The time since the last edge goes to the innermost open phase (or to no phase)."""
        now = time.perf_counter()
        if self._open:
            name = self._open[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + now - self._mark
        self._mark = now

    def lap(self) -> dict[str, float]:
        """The seconds of each phase since the last lap, ``other`` included (their sum is
        the lap's length, ``last``); a phase still open is split at this instant."""
        self._charge()
        now = self._mark
        self.last = now - self._lap_start
        self._seen.update(dict.fromkeys(self.seconds))
        times = {name: self.seconds.get(name, 0.0) for name in self._seen}
        self.seconds, self._lap_start = {}, now
        times["other"] = max(self.last - sum(times.values()), 0.0)
        return times


class phase:  # lower case: a context manager, like torch.no_grad
    """Time the block as phase ``name`` on the running ``PhaseClock`` (about a microsecond); nothing
    without one."""

    __slots__ = ("_clock", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._clock: PhaseClock | None = None

    def __enter__(self) -> None:
        self._clock = _RUNNING.get()
        if self._clock is not None:
            self._clock.enter(self.name)

    def __exit__(self, *exc) -> None:
        if self._clock is not None:
            self._clock.exit()


def timing_metrics(times: Mapping[str, float]) -> dict[str, float]:
    """A lap's phases as metrics: ``time/<phase>``, ``time/iteration`` (their sum) and
    ``time/exploration_share``, the share of the exploration side's phases
    (``EXPLORATION_PHASES``) where any ran.

    Examples:
        >>> metrics = timing_metrics({"collection": 0.3, "model": 0.1, "other": 0.0})
        >>> metrics["time/iteration"], metrics["time/exploration_share"]
        (0.4, 0.25)
    """
    total = sum(times.values())
    metrics = {f"time/{name}": seconds for name, seconds in sorted(times.items())}
    metrics["time/iteration"] = total
    exploring = [times[name] for name in EXPLORATION_PHASES if name in times]
    if exploring and total > 0:
        metrics["time/exploration_share"] = sum(exploring) / total
    return metrics
