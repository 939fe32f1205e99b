"""Exported runs as ``recipes/study/paper_grid.py`` writes them, for the study reports' tests:
a CSV a seed, one row an iteration."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path


def write_run(path: Path, returns: Sequence[float], *, frames_per_batch: int = 5000,
              first_reward: float | None = None,
              metrics: Mapping[str, Sequence[float | None]] | None = None) -> None:
    """``returns`` (``Return/mean``) one an iteration of ``frames_per_batch`` frames;
    ``train/first_reward_step`` from the first iteration whose frames reach ``first_reward``;
    each of ``metrics`` as a column of its own (``None``: not logged that iteration)."""
    metrics = dict(metrics or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frames", "Return/mean", "train/first_reward_step", *metrics])
        for i, value in enumerate(returns):
            frames = (i + 1) * frames_per_batch
            found = first_reward if first_reward is not None and frames >= first_reward else ""
            writer.writerow([frames, value, found,
                             *("" if column[i] is None else column[i]
                               for column in metrics.values())])
