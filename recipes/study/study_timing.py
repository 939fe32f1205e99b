"""How long a study's runs took, and so how long a job of it should take: what
``paper_grid.py --until`` starts by (``expected_minutes``), ``recheck.py`` budgets by, and the
machine a ``runs.csv`` note names (``machine``, as a run's tag names it, and ``started_on``).

A run's time is its own clock: the ``train/wall_time`` of its exported CSV's last row, the
pauses of a resumed run left out.

Examples:
    >>> started_on("started on vm (2 cores, AMD EPYC), load average 1.0 1.0 1.0; ended ...")
    'vm (2 cores, AMD EPYC)'
    >>> like_costs("vase_paper")
    ['vase_paper', 'vase', 'nll']
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from torchrl_vase.provenance import machine
from torchrl_vase.runs import git_commit


def study_setup(code: Path) -> tuple[str, str]:
    """The commit the jobs run (``code``'s checkout) and this ``machine()``: the runs whose
    times time a job first (``expected_minutes``)."""
    return git_commit(code), machine()


def started_on(note: str) -> str:
    """The machine a ``runs.csv`` note says its run started on (``"started on vm (2 cores, AMD
    EPYC), load average …; ended …"`` → ``"vm (2 cores, AMD EPYC)"``); ``""`` for a note that
    names none (e.g. a run exported by hand)."""
    if not note.startswith("started on "):
        return ""
    return note.removeprefix("started on ").split(", load average")[0].split(";")[0]


#: a measure without finished runs of its own is timed by a measure of like cost on its task
LIKE_COST = {"nll": "vase", "vime": "vase", "vase_paper": "vase", "rnd": "vase", "vase": "nll",
             "vase_linear_init": "vase", "vase_eta_tenth": "vase", "vase_eta0": "vase",
             "vase_linear_eta_tenth": "vase",
             "vase_shuffled": "vase",
             "none": "trpo_authors", "trpo_authors": "none"}
#: a job's expected minutes are its measure's median run times this, plus a start and export
TIME_MARGIN, START_MINUTES = 1.25, 2.0


def whole_runs(cell: Path, setup: tuple[str, str] | None = None) -> list[tuple[float, int]]:
    """``(minutes, frames)`` of each whole run exported under ``cell`` (each CSV's last
    ``train/wall_time``: the run's own clock, resumed runs' pauses left out, and its last
    ``frames``); with ``setup`` (a commit and a ``machine()``), only those its ``runs.csv`` row
    says ran at that commit and started on that machine."""
    seeds = None
    if setup is not None:
        seeds = set()
        if (cell / "runs.csv").exists():
            with (cell / "runs.csv").open(newline="") as handle:
                seeds = {f"seed{row['seed']}.csv" for row in csv.DictReader(handle)
                         if (row["git_commit"], started_on(row["note"])) == setup}
    runs = []
    for path in sorted(cell.glob("seed*.csv")):
        if seeds is not None and path.name not in seeds:
            continue
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        if rows and rows[-1].get("train/wall_time"):
            runs.append((float(rows[-1]["train/wall_time"]) / 60, int(float(rows[-1]["frames"]))))
    return runs


def run_minutes(out: Path, task: str, measure: str,
                setup: tuple[str, str] | None = None) -> list[float]:
    """The wall-clock minutes of the whole runs of ``measure`` on ``task`` under ``out``
    (``whole_runs``)."""
    return [minutes for minutes, _ in whole_runs(out / task / measure, setup)]


def slowest_rate(out: Path, setup: tuple[str, str] | None = None) -> float | None:
    """The most minutes a frame any whole run under ``out`` took, whatever its task and measure
    (``whole_runs``); ``None`` when none has finished."""
    rates = [minutes / frames for cell in sorted(out.glob("*/*")) if cell.is_dir()
             for minutes, frames in whole_runs(cell, setup) if frames > 0]
    return max(rates, default=None)


def like_costs(measure: str) -> list[str]:
    """``measure`` and, in turn, the measures of like cost that time it (``LIKE_COST``)."""
    chain = [measure]
    while (like := LIKE_COST.get(chain[-1])) is not None and like not in chain:
        chain.append(like)
    return chain


def expected_minutes(out: Path, task: str, measure: str, seeds: int = 1, left: float = 1.0,
                     setup: tuple[str, str] | None = None,
                     frames: int | None = None) -> float | None:
    """How long a job of ``seeds`` seeds of ``measure`` on ``task`` should take: the median
    whole run of that task and measure (else of a measure of like cost, ``like_costs``) for each
    seed, with a margin, times the fraction of the run ``left`` (a resumed run's). With
    ``setup`` (the study's commit and this ``machine()``) the runs of that setup are asked
    first, then all the study's: the same cell has run two to four times faster at one commit
    and machine than at another, and a stale estimate leaves cores idle at the end of a session.
    A cell with no such run, given its whole run's ``frames``, is timed by the slowest rate of
    any of the study's runs (``slowest_rate``): an overestimate leaves a core idle at worst,
    where no estimate would keep the job out of every ``--until`` launch until a run of its
    kind finishes elsewhere (the SAC study's cells cost alike per frame: SAC's updates); without
    ``frames``, or with no run finished at all, ``None``."""
    for pick in ((setup, None) if setup is not None else (None,)):
        for like in like_costs(measure):
            if minutes := run_minutes(out, task, like, pick):
                return TIME_MARGIN * statistics.median(minutes) * seeds * left + START_MINUTES
    if frames is not None and (rate := slowest_rate(out)) is not None:
        return TIME_MARGIN * rate * frames * seeds * left + START_MINUTES
    return None
