"""Signals that end a run cleanly: SIGTERM and SIGINT ask the training loop to stop at a safe
point (``StopSignals``, which ``TrainingLoop`` opens around its iterations); long work asks
``stop_due`` between its steps, a wait asks ``stop_requested`` before waiting on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from types import FrameType

__all__ = ["StopAtOnce", "StopNow", "StopSignals", "stop_due", "stop_requested"]


class StopNow(BaseException):
    """Raised by ``StopSignals`` on the first signal where the running work may be abandoned
    (``interrupt``): a collection, whose partial batch is dropped. A ``BaseException``, like
    ``KeyboardInterrupt``, so that no ``except Exception`` on the way swallows it."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"{signal_name}: stopping now")
        self.signal_name = signal_name


class StopAtOnce(KeyboardInterrupt):
    """A second signal: the run stops where it is (its last checkpoint holds it)."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"second {signal_name}: stopped at once; the last checkpoint holds the "
                         "run (resume=true continues it)")
        self.signal_name = signal_name


class StopSignals:
    """A context in which SIGTERM and SIGINT ask the loop to stop instead of killing it.

    The first signal sets ``received`` (its name); the loop checks it between iterations, saves
    a checkpoint and ends the run as killed. Where ``interrupt()`` says the running work may be
    abandoned (the loop: a collection, which can take minutes), the first signal also arms a
    timer: if that work is still running ``grace`` seconds later, ``StopNow`` is raised there
    (an ordinary collection ends first, and the iteration is kept). Work with a safe point of
    its own (SAC's updates) asks ``stop_due`` there instead. A second
    signal raises ``KeyboardInterrupt`` at once, for a user who does not want to wait. The
    previous handlers come back on exit. Outside the main thread (where Python allows no
    handlers) it does nothing.

    Examples:
        >>> import os, signal
        >>> with StopSignals() as stop:
        ...     os.kill(os.getpid(), signal.SIGTERM)
        ...     stop.received
        'SIGTERM'
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, interrupt: Callable[[], bool] | None = None, grace: float = 10.0) -> None:
        self.received: str | None = None
        self.deadline: float | None = None  # when the running work is due to be abandoned
        self.interrupt, self.grace = interrupt, grace
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            raise StopAtOnce(signal.Signals(signum).name)
        self.received = signal.Signals(signum).name
        self.deadline = time.monotonic() + self.grace
        # at once, whatever the iteration is doing (os.write: a print here could re-enter a
        # print the signal interrupted)
        dropped = (f"an iteration still running in {self.grace:g} s is dropped; "
                   if self.interrupt is not None else "")
        os.write(2, f"{self.received}: stopping after this iteration ({dropped}a second "
                    "signal stops at once)\n".encode())
        if self.interrupt is not None and signal.SIGALRM in self._previous:
            signal.setitimer(signal.ITIMER_REAL, self.grace)

    def _deadline(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupt is not None and self.interrupt():
            raise StopNow(self.received)

    def __enter__(self) -> StopSignals:
        _ACTIVE.append(self)
        with contextlib.suppress(ValueError):  # not the main thread
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
            if self.interrupt is not None:
                self._previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._deadline)
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(ValueError):
            _ACTIVE.remove(self)
        if signal.SIGALRM in self._previous:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


#: the ``StopSignals`` contexts open now, innermost last
_ACTIVE: list[StopSignals] = []


def stop_requested() -> str | None:
    """The signal a ``StopSignals`` open now has received (``"SIGTERM"``), else ``None``: what a
    wait (a store's retries) asks before waiting on."""
    return next((s.received for s in reversed(_ACTIVE) if s.received is not None), None)


def stop_due() -> str | None:
    """The signal whose grace has run out (the running work is to be abandoned), else
    ``None``: what a long loop of updates asks between two of them, raising ``StopNow`` with it
    (a safe point, where an exception leaves no library's context half-exited).

    Examples:
        >>> stop_due() is None  # no signal received
        True
    """
    now = time.monotonic()
    return next((s.received for s in reversed(_ACTIVE)
                 if s.deadline is not None and now >= s.deadline), None)
