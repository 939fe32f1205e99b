"""Where a loop's metrics go: the ``Logger`` protocol MLflow's tracker meets, and ``Progress`` on
the terminal (a bar, or a line every few iterations in a piped log).

``TrainingLoop`` hands its logger whole steps, ``log([(frames, metrics), ...])``, only once the
checkpoint that holds the state they describe is written, and asks ``last_logged_step(key)``
(where the logger has it) when it resumes, so that no step is logged twice. Any object with
these methods is a logger: ``torchrl_vase.tracking.MLflowTracker`` (one MLflow run) is the
library's; a wrapper of torchrl's ``CSVLogger`` or a wandb one is a few lines
(docs/guides/training_loop.md)."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Protocol, TextIO, runtime_checkable

from tqdm import tqdm

__all__ = ["Logger", "Progress"]


@runtime_checkable
class Logger(Protocol):
    """What ``TrainingLoop`` calls on its logger (``last_logged_step`` is optional: without it
    a resumed run logs again what a killed one logged after its last checkpoint)."""

    def log(self, steps: Iterable[tuple[int, Mapping[str, float]]]) -> None:
        """Log each ``(step, metrics)``: a step is the frames collected so far."""

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        """Keep the file at ``path`` with the run (under ``artifact_path``)."""


def _format(value: float | str) -> str:
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


class Progress:
    """tqdm's bar on a terminal; in a log, a line every ``every`` iterations (about 20 a run by
    default) and at the last, flushed at once.

    Args:
        total: the iterations of the whole run.
        name: the label (e.g. ``"mountain_car/vase seed 0"``).
        initial: iterations already done (a resumed run).
        every: iterations between records in a log.
        enabled: ``False`` shows nothing.
        stream: where to write (default ``sys.stderr``)."""

    def __init__(self, total: int, name: str, *, initial: int = 0, every: int | None = None,
                 enabled: bool = True, stream: TextIO | None = None) -> None:
        self.total = total
        self.name = name
        self.stream = sys.stderr if stream is None else stream
        self.every = every if every is not None else max(1, math.ceil(total / 20))
        terminal = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.lines = enabled and not terminal
        self.bar = tqdm(total=total, initial=initial, desc=name, file=self.stream,
                        disable=not enabled or not terminal)
        self.started = time.perf_counter()

    def update(self, iteration: int, values: Mapping[str, float | str]) -> None:
        """Iteration ``iteration`` (0-based) is done; ``values`` are shown beside it."""
        self.bar.set_postfix({key: _format(value) for key, value in values.items()},
                             refresh=False)
        self.bar.update(1)
        done = iteration + 1
        if self.lines and (done % self.every == 0 or done == self.total):
            shown = ", ".join(f"{key} {_format(value)}" for key, value in values.items())
            elapsed = time.perf_counter() - self.started
            print(f"{self.name}: iteration {done}/{self.total} ({done / self.total:.0%}), "
                  f"{shown}, elapsed {elapsed:,.0f}s", file=self.stream, flush=True)

    def close(self) -> None:
        self.bar.close()
