"""Where a loop's metrics go: the ``Logger`` protocol, ``CSVLogger`` beside MLflow's tracker, and
``Progress`` on the terminal (a bar, or a line every few iterations in a piped log).

``TrainingLoop`` hands its logger whole steps, ``log([(frames, metrics), ...])``, only once the
checkpoint that holds the state they describe is written, and asks ``last_logged_step(key)``
(where the logger has it) when it resumes, so that no step is logged twice. Any object with
these methods is a logger: ``torchrl_vase.tracking.MLflowTracker`` (one MLflow run) and
``CSVLogger`` (torchrl's CSV files) are two; a wandb or TensorBoard one is a few lines."""

from __future__ import annotations

import csv
import math
import os
import shutil
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, TextIO, runtime_checkable

from torchrl.record.loggers import CSVLogger as TorchRLCSVLogger
from tqdm import tqdm

__all__ = ["CSVLogger", "Logger", "Progress", "csv_last_step"]


def csv_history(directory: str | os.PathLike, key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of every value of ``key`` a ``CSVLogger`` wrote into ``directory``, in
    order; nothing created (the resume guards read it before any logger exists)."""
    file = Path(directory) / "scalars" / f"{key}.csv"
    if not file.exists():
        return []
    with file.open(newline="") as rows:
        return [(int(step), float(value)) for step, value in csv.reader(rows)]


def csv_last_step(directory: str | os.PathLike, key: str) -> int:
    """The last step of ``key`` a ``CSVLogger`` wrote into ``directory`` (-1 if none)."""
    return max((step for step, _ in csv_history(directory, key)), default=-1)


@runtime_checkable
class Logger(Protocol):
    """What ``TrainingLoop`` calls on its logger (``last_logged_step`` is optional: without it
    a resumed run logs again what a killed one logged after its last checkpoint)."""

    def log(self, steps: Iterable[tuple[int, Mapping[str, float]]]) -> None:
        """Log each ``(step, metrics)``: a step is the frames collected so far."""

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        """Keep the file at ``path`` with the run (under ``artifact_path``)."""


class CSVLogger:
    """A run's metrics as torchrl's ``CSVLogger`` writes them, one ``scalars/<key>.csv`` of
    ``step,value`` lines per metric (``Return/mean`` in ``scalars/Return/mean.csv``), and its
    artifacts copied under ``artifacts/``; all in ``<log_dir>/<name>/``.

    ``last_logged_step`` reads the files, so a resumed run (another process) continues them
    without logging a step twice. NaN is written as ``nan``, as MLflow keeps it.

    Examples:
        >>> import tempfile
        >>> logger = CSVLogger("run-0", log_dir=tempfile.mkdtemp())
        >>> logger.log([(64, {"Return/mean": 0.5}), (128, {"Return/mean": 1.0})])
        >>> logger.last_logged_step("Return/mean"), logger.history("Return/mean")
        (128, [(64, 0.5), (128, 1.0)])
    """

    def __init__(self, name: str, log_dir: str | os.PathLike = "csv_logs") -> None:
        self.directory = Path(log_dir) / name
        self._writer = TorchRLCSVLogger(exp_name=name, log_dir=str(log_dir))

    def log(self, steps: Iterable[tuple[int, Mapping[str, float]]]) -> None:
        for step, metrics in steps:
            for key, value in metrics.items():
                self._writer.log_scalar(key, float(value), step=int(step))

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        target = self.directory / "artifacts" / (artifact_path or "")
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / Path(path).name)

    def history(self, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of every logged value of ``key``, in the order logged."""
        return csv_history(self.directory, key)

    def last_logged_step(self, key: str) -> int:
        """The last step logged for ``key`` (-1 if none)."""
        return csv_last_step(self.directory, key)

    def logged_keys(self) -> list[str]:
        """Every metric logged so far."""
        scalars = self.directory / "scalars"
        return sorted(str(file.relative_to(scalars).with_suffix(""))
                      for file in scalars.rglob("*.csv"))

    def __repr__(self) -> str:
        return f"CSVLogger({str(self.directory)!r})"


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
