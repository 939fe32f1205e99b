"""A training loop's progress: a bar on a terminal, a line every few iterations in a piped log.

Examples:
    >>> import io
    >>> stream = io.StringIO()  # not a terminal: records, not a bar
    >>> progress = Progress(total=4, name="mountain_car/vase", every=2, stream=stream)
    >>> for iteration in range(4):
    ...     progress.update(iteration, {"return": 0.5 * iteration, "frames/s": 3000.0})
    >>> progress.close()
    >>> print(stream.getvalue().replace("\\r", ""), end="")  # doctest: +ELLIPSIS
    mountain_car/vase: iteration 2/4 (50%), return 0.5, frames/s 3,000, elapsed ...s
    mountain_car/vase: iteration 4/4 (100%), return 1.5, frames/s 3,000, elapsed ...s
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import TextIO

from tqdm import tqdm

__all__ = ["Progress"]


def _format(value: float | str) -> str:
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


class Progress:
    """tqdm's bar where ``stream`` is a terminal; elsewhere (a cluster job's log, ``| tee``) a
    one-line record every ``every`` iterations and at the last, flushed at once, instead of a
    bar's carriage returns.

    Args:
        total: the iterations of the whole run.
        name: what the lines and the bar are called (e.g. ``"mountain_car/vase seed 0"``).
        initial: iterations already done (a resumed run).
        every: iterations between records in a log; ``None``: about 20 records per run.
        enabled: ``False`` shows nothing.
        stream: where to write (default ``sys.stderr``).
    """

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
