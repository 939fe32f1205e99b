"""The training loop as a library object: what every run needs around Algorithm 1.

``TrainingLoop`` owns the counters, the per-iteration seeding, SIGTERM and SIGINT, the checkpoint,
metric-flush and evaluation cadences and the progress display, and calls the algorithm once per
collected batch: ``OnPolicyStep`` (TRPO, PPO), ``OffPolicyStep`` (SAC) or any callable
``batch -> metrics``. Whatever the step, a run killed at any instant and resumed logs the same
history as one never killed; the first signal ends the iteration with a checkpoint, a second
stops at once; each iteration's metrics carry its wall time by phase (``time/*``). What it
guarantees, and why not torchrl's ``Trainer``: docs/guides/training_loop.md.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> class Batches:  # a stand-in for a torchrl collector
    ...     def __iter__(self):
    ...         while True:
    ...             yield TensorDict({"next": {"reward": torch.randn(4, 1)}}, [4])
    ...     def update_policy_weights_(self): pass
    ...     def shutdown(self): pass
    >>> loop = TrainingLoop(Batches(), lambda batch: {"loss": 0.5}, iterations=3, seed=0,
    ...                     progress=False)
    >>> result = loop.run()
    >>> result.iterations_done, result.metrics["train/frames"], result.stopped_by
    (3, 12, None)
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Protocol

import torch
from tensordict import TensorDictBase

from torchrl_vase._random_stream import iteration_seed  # re-exported: the loop seeds by it
from torchrl_vase._validation import check_positive_int
from torchrl_vase.checkpointing import rng_state, set_rng_state
from torchrl_vase.loggers import Logger, Progress
from torchrl_vase.timing import PhaseClock, phase, timing_metrics

__all__ = ["LoopResult", "StopAtOnce", "StopNow", "StopSignals", "TrainingLoop", "check_finite",
           "is_clock", "iteration_seed", "stop_due", "stop_requested"]

# the loop's own metrics: a run's size and the machine's speed (the clocks differ between a run
# and its replay, everything else must not)
FRAMES, ITERATION = "train/frames", "train/iteration"
FPS, WALL_TIME = "train/fps", "train/wall_time"


def is_clock(metric: str) -> bool:
    """Whether a metric is a clock (``train/fps``, ``train/wall_time``, ``time/*``): the values that
    differ between two runs of one seed; every other metric must not.

    Examples:
        >>> is_clock("time/model"), is_clock("train/fps"), is_clock("bonus/mean")
        (True, True, False)
    """
    return metric in (FPS, WALL_TIME) or metric.startswith("time/")


class Stateful(Protocol):
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> Any: ...


def check_finite(value: torch.Tensor, what: str, iteration: int) -> None:
    """Stop at the first non-finite value, naming it: a NaN would otherwise surface much later,
    blamed on the advantages or the policy step."""
    bad = ~torch.isfinite(value)
    if bad.any():
        raise FloatingPointError(
            f"{what} is not finite in {int(bad.sum())} of {value.numel()} transitions of "
            f"iteration {iteration} (e.g. {value[bad].flatten()[0].item()}).")


@dataclass
class LoopResult:
    """How a call of ``TrainingLoop.run`` ended: the iterations done in all (resumed ones
    included), the signal that stopped it (``None``: it finished or met ``stop_when``) and the
    last iteration's metrics."""

    iterations_done: int
    stopped_by: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    #: a signal during a collection: the iterations done since the last checkpoint, dropped
    #: with the partial batch (a resumed run computes them again); ``None`` otherwise
    dropped: int | None = None


Watcher = Callable[[TensorDictBase, int], Mapping[str, float]]


class TrainingLoop:
    """Collect a batch, run the algorithm's step on it, log, checkpoint; ``iterations`` times.

    Per iteration: the random numbers seeded from ``(seed, iteration)`` (and the collector's, with
    ``reseed_collector``); the batch moved to ``device``, its reward checked finite; ``watchers``
    then ``step``; ``collector.update_policy_weights_()``; ``evaluate`` every ``eval_every``
    iterations and at the last. A checkpoint every ``checkpoint_every`` iterations and at the last,
    after which the metrics it covers go to ``logger``. Seed the parts' construction
    (``torch.manual_seed(seed)``): a run killed before its first checkpoint starts again there.

    Args:
        collector: a torchrl collector (endless, with ``update_policy_weights_`` and ``shutdown``).
        step: the algorithm's update on one batch, returning its metrics.
        iterations: the run's total, resumed iterations included.
        seed: the run's seed (``iteration_seed``).
        state: every stateful part by name (``state_dict``/``load_state_dict``; ``None`` for one
            the run lacks): what a checkpoint holds besides the loop's own.
        logger: a ``torchrl_vase.Logger`` (``MLflowTracker``, or any with its methods).
        checkpoint: called with ``state_dict()`` to write it atomically; ``None``: none kept.
        checkpoint_every: iterations between checkpoints.
        watchers: callables ``(batch, frames_before) -> metrics`` on the env's own reward.
        evaluate: ``iteration -> metrics``.
        eval_every: iterations between evaluations (0: none).
        stop_when: checked before the first iteration and after each; true ends the run early.
        reseed_collector: seed the collector every iteration (fresh paths per batch).
        device: where the step runs (batches are collected on the CPU).
        threads: ``torch.set_num_threads`` each iteration (an env's ``close`` may change it).
        progress: a bar on a terminal, a line every ~5 % in a log (labels: ``progress_keys``).
        name: the progress display's label.
        stop_grace: seconds an iteration may run on after a signal before it is abandoned."""

    def __init__(self, collector: Iterable[TensorDictBase], step: Callable[[TensorDictBase], Any],
                 *, iterations: int, seed: int, state: Mapping[str, Stateful | None] | None = None,
                 logger: Logger | None = None, checkpoint: Callable[[dict], Any] | None = None,
                 checkpoint_every: int = 10, watchers: Iterable[Watcher] = (),
                 evaluate: Callable[[int], Any] | None = None, eval_every: int = 0,
                 stop_when: Callable[[], bool] | None = None, reseed_collector: bool = False,
                 device: str | torch.device = "cpu", threads: int | None = None,
                 progress: bool = True, progress_keys: Mapping[str, str] | None = None,
                 name: str = "training", stop_grace: float = 10.0) -> None:
        check_positive_int("iterations", iterations)
        check_positive_int("checkpoint_every", checkpoint_every)
        check_positive_int("eval_every", eval_every, minimum=0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {seed!r}.")
        self.seed, self.logger, self.watchers = seed, logger, list(watchers)
        self.collector, self.step = collector, step
        self.iterations = iterations
        self.state = dict(state or {})
        self.checkpoint, self.checkpoint_every = checkpoint, checkpoint_every
        self.evaluate, self.eval_every = evaluate, eval_every
        self.stop_when = stop_when or (lambda: False)
        self.reseed_collector, self.device, self.threads = reseed_collector, device, threads
        self.progress, self.name = progress, name
        if not (math.isfinite(stop_grace) and stop_grace > 0):
            raise ValueError(f"stop_grace must be a positive number of seconds, got {stop_grace}.")
        self.stop_grace = float(stop_grace)
        self.progress_keys = dict(progress_keys or {})
        #: iterations done, frames collected, seconds spent in earlier processes
        self.iteration, self.frames, self.wall_time = 0, 0, 0.0
        #: (frames, metrics) computed and not yet logged
        self.pending: list[tuple[int, dict[str, float]]] = []

    def state_dict(self) -> dict:
        """The counters, unlogged metrics, random state and every part's ``state_dict``;
        tensors and plain values only (``torch.load(..., weights_only=True)`` reads it)."""
        return {
            "iterations_done": self.iteration,
            "frames": self.frames,
            "wall_time": self.wall_time,
            "pending_metrics": list(self.pending),
            "rng": rng_state(),
            "parts": {name: None if part is None else part.state_dict()
                      for name, part in self.state.items()},
        }

    def load_state_dict(self, state: Mapping) -> None:
        """Continue from ``state_dict()``'s output: every part restored in place."""
        if "parts" not in state or "iterations_done" not in state:
            raise ValueError(
                "the checkpoint was not written by TrainingLoop.state_dict (a checkpoint of "
                "recipes/trpo_vase.py from before its loop became torchrl_vase.TrainingLoop?); "
                "start the run afresh (resume=false).")
        missing = [name for name, part in self.state.items()
                   if part is not None and state["parts"].get(name) is None]
        if missing:
            raise KeyError(f"the checkpoint holds no state for {missing}: it is of another kind "
                           "of run.")
        for name, part in self.state.items():
            if part is not None:
                part.load_state_dict(state["parts"][name])
        self.iteration, self.frames = state["iterations_done"], state["frames"]
        self.wall_time = state["wall_time"]
        self.pending = [(frames, dict(metrics)) for frames, metrics in state["pending_metrics"]]
        set_rng_state(state["rng"])
        self.collector.update_policy_weights_()  # its acting copy, if the policy is on a GPU

    def run(self) -> LoopResult:
        """Train up to ``iterations`` (from where a loaded state left off); returns how it
        ended. The collector is shut down at the end."""
        self._log(self._unlogged_after_resume())
        self.pending = []
        result = LoopResult(self.iteration, None)
        progress = Progress(self.iterations, self.name, initial=self.iteration,
                            enabled=self.progress)
        started, before = time.perf_counter(), self.wall_time
        batches = iter(self.collector) if self.iteration < self.iterations else iter(())
        clock = PhaseClock()
        try:
            # a collection is abandoned where it is (torchrl's collector has no safe point to
            # ask at); the step's long loops ask ``stop_due`` between their updates
            with StopSignals(interrupt=lambda: clock.current() == "collection",
                             grace=self.stop_grace) as signals, clock.running():
                while self.iteration < self.iterations and not self.stop_when():
                    metrics = self._iteration(batches)
                    # read once: a signal arriving after this is handled after the next iteration
                    result.stopped_by = signals.received
                    # a signal ends this process, not the run: no evaluation off the schedule,
                    # which the resumed run would log and an uninterrupted one would not
                    ends = self.iteration >= self.iterations or self.stop_when()
                    last = ends or result.stopped_by is not None
                    if self.evaluate is not None and self.eval_every and (
                        self.iteration % self.eval_every == 0 or ends):
                        with phase("evaluation"):
                            metrics.update(self.evaluate(self.iteration - 1))
                    self.wall_time = before + time.perf_counter() - started
                    metrics[WALL_TIME] = self.wall_time
                    # the lap ends here so that the checkpoint holds this iteration's times:
                    # its checkpoint, logging and progress fall in the next iteration's lap
                    times = clock.lap()
                    metrics.update(timing_metrics(times))
                    self._save_and_flush(metrics, last)
                    result.metrics = metrics
                    with phase("logging"):
                        progress.update(self.iteration - 1, {
                            label: metrics.get(key, math.nan)
                            for label, key in self.progress_keys.items()} | _slowest(times))
                    if result.stopped_by is not None:
                        break
        except StopNow as stop:
            # in an iteration's work: what changed since the last checkpoint is not saved or
            # logged
            result.stopped_by, result.dropped = stop.signal_name, len(self.pending)
        finally:
            progress.close()
            self.collector.shutdown()
            if self.threads is not None:
                torch.set_num_threads(self.threads)
        # after a dropped collection, the run is where its last checkpoint left it
        result.iterations_done = self.iteration - (result.dropped or 0)
        return result

    def _iteration(self, batches: Iterator[TensorDictBase]) -> dict[str, float]:
        tick = time.perf_counter()
        iteration = self.iteration
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        seed = iteration_seed(self.seed, iteration)
        torch.manual_seed(seed)
        if self.reseed_collector:
            self.collector.set_seed(seed)
        with phase("collection"):
            batch = next(batches).to(self.device)  # the rollout: after the seeding
        check_finite(batch["next", "reward"], "the env's reward ('next', 'reward')", iteration)
        frames_before, self.frames = self.frames, self.frames + batch.numel()
        metrics: dict[str, float] = {}
        with phase("watchers"):
            for watch in self.watchers:
                metrics.update(watch(batch, frames_before))
        metrics.update(self.step(batch))
        # not "collection": a signal here must not drop the iteration just computed
        self.collector.update_policy_weights_()
        self.iteration += 1
        fps = batch.numel() / (time.perf_counter() - tick)
        return metrics | {FRAMES: self.frames, ITERATION: iteration, FPS: fps}

    def _save_and_flush(self, metrics: dict[str, float], last: bool) -> None:
        self.pending.append((self.frames, metrics))
        due = self.iteration % self.checkpoint_every == 0 or last
        if self.checkpoint is not None and due:
            with phase("checkpoint"):
                self.checkpoint(self.state_dict())
        if self.checkpoint is None or due:
            with phase("logging"):
                self._log(self.pending)
            self.pending = []

    def _unlogged_after_resume(self) -> list[tuple[int, dict[str, float]]]:
        """What a killed process computed and checkpointed but had not logged yet: the pending
        steps after the last one the logger holds (all of them for a logger that cannot say)."""
        if not self.pending:
            return []
        logged = (self.logger.last_logged_step(FRAMES)
                  if hasattr(self.logger, "last_logged_step") else -1)
        return [(step, metrics) for step, metrics in self.pending if step > logged]

    def _log(self, steps: list[tuple[int, dict[str, float]]]) -> None:
        if self.logger is not None and steps:
            self.logger.log(steps)


def _slowest(times: Mapping[str, float]) -> dict[str, str]:
    """The progress display's ``slowest``: the lap's largest phase and its seconds."""
    name = max(times, key=times.__getitem__)
    return {"slowest": f"{name} {times[name]:.2g}s"}


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

    The first signal sets ``received``; the loop checkpoints between iterations and ends the run
    killed. Inside ``interrupt()`` (a collection) it also arms a timer: work still running ``grace``
    seconds later gets ``StopNow``; work with safe points of its own asks ``stop_due``. A second
    signal raises ``KeyboardInterrupt``. Outside the main thread it does nothing.

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
    """The signal whose grace has run out, else ``None``: what a long loop of updates asks between
    two of them (a safe point), raising ``StopNow`` with it.

    Examples:
        >>> stop_due() is None  # no signal received
        True
    """
    now = time.monotonic()
    return next((s.received for s in reversed(_ACTIVE)
                 if s.deadline is not None and now >= s.deadline), None)
