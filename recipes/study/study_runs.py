"""The Figure 3 studies' exported runs read back: each run's curve, and where the runs ran.

``recipes/study/paper_grid.py`` exports every finished run to
``<study>/<task>/<measure>/seed<k>.csv`` (one row an iteration: ``frames``, ``Return/mean``,
``train/first_reward_step``, …) with a ``runs.csv`` row beside it (commit, machine, load). The
reports (``earlier_study_report.py``, ``figure3_report.py``) read them through this module.

    >>> from pathlib import Path
    >>> load(Path("docs/results/figure3"), ("none",))["ant"]["none"][0].seed
    0
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from study_timing import started_on  # the launcher's note (beside this script)

ROOT = Path(__file__).resolve().parents[2]

TASKS = ("mountain_car", "cartpole_swingup", "double_pendulum", "half_cheetah", "ant",
         "lunar_lander")
TITLES = {"mountain_car": "MountainCar", "cartpole_swingup": "CartpoleSwingup",
          "double_pendulum": "DoublePendulum", "half_cheetah": "HalfCheetah", "ant": "Ant",
          "lunar_lander": "LunarLanderContinuous", "point_robot": "point robot"}
#: each task's observation size, the dimensions a surprise sums over (checked against the envs
#: by tests/test_paper_grid_report.py)
OBSERVATION_DIMS = {"mountain_car": 2, "cartpole_swingup": 4, "double_pendulum": 6,
                    "half_cheetah": 20, "ant": 125, "lunar_lander": 8, "point_robot": 2}
#: the iterations of a seed's *final return*
FINAL = 10


@dataclass
class Seed:
    """One exported run: its metrics by frame."""

    seed: int
    frames: np.ndarray
    returns: np.ndarray
    first_reward: float  # the frame of the first extrinsic reward; NaN: never
    agreement: np.ndarray = field(default_factory=lambda: np.array([]))
    #: the rank correlation of the bonus with the k-NN novelty of s' (``bonus/novelty_spearman``)
    novelty: np.ndarray = field(default_factory=lambda: np.array([]))
    #: the bonus's share of the policy's advantage variance, and its mean (U, before η)
    advantage_share: np.ndarray = field(default_factory=lambda: np.array([]))
    bonus_mean: np.ndarray = field(default_factory=lambda: np.array([]))
    #: the share of the iteration's episodes that reached the goal (MountainCar's success)
    success_rate: np.ndarray = field(default_factory=lambda: np.array([]))
    #: an off-policy learner's (SAC's): the mean reward of its sampled batches (bonus included)
    #: and of their bonus U (before η), the spread of U over the collected batch, the
    #: temperature α and the policy's entropy, each the iteration's mean over its updates
    sampled_reward: np.ndarray = field(default_factory=lambda: np.array([]))
    sampled_bonus: np.ndarray = field(default_factory=lambda: np.array([]))
    bonus_std: np.ndarray = field(default_factory=lambda: np.array([]))
    alpha: np.ndarray = field(default_factory=lambda: np.array([]))
    entropy: np.ndarray = field(default_factory=lambda: np.array([]))

    @property
    def final(self) -> float:
        return float(np.nanmean(self.returns[-FINAL:]))

    @property
    def whole(self) -> float:
        """The mean return over every iteration (the area under the curve, per iteration)."""
        return float(np.nanmean(self.returns))

    @property
    def early(self) -> float:
        return float(np.nanmean(self.returns[: max(1, len(self.returns) // 4)]))


def _column(rows: list[dict], name: str) -> np.ndarray:
    return np.array([float(row[name]) if row.get(name, "") != "" else np.nan for row in rows])


def load(study: Path, measures: tuple[str, ...]) -> dict[str, dict[str, list[Seed]]]:
    """``task -> measure -> seeds`` from the exported CSVs of ``measures`` (cells with none
    left out)."""
    found: dict[str, dict[str, list[Seed]]] = {}
    for task in TASKS:
        for measure in measures:
            seeds = load_cell(study, task, measure)
            if seeds:
                found.setdefault(task, {})[measure] = seeds
    return found


def load_cell(grid: Path, task: str, measure: str) -> list[Seed]:
    """One cell's exported runs, by seed (an empty CSV skipped)."""
    seeds = []
    for path in sorted((grid / task / measure).glob("seed*.csv"),
                       key=lambda p: int(p.stem.removeprefix("seed"))):
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        if not rows:
            continue
        first = _column(rows, "train/first_reward_step")
        first = first[np.isfinite(first)]
        seeds.append(Seed(seed=int(path.stem.removeprefix("seed")), frames=_column(rows, "frames"),
                          returns=_column(rows, "Return/mean"),
                          first_reward=float(first[0]) if first.size else math.nan,
                          agreement=_column(rows, "bonus/self_agreement"),
                          novelty=_column(rows, "bonus/novelty_spearman"),
                          advantage_share=_column(rows, "bonus/advantage_share"),
                          bonus_mean=_column(rows, "bonus/mean"),
                          success_rate=_column(rows, "Return/success_rate"),
                          sampled_reward=_column(rows, "sac/sampled_reward"),
                          sampled_bonus=_column(rows, "bonus/sampled_mean"),
                          bonus_std=_column(rows, "bonus/std"),
                          alpha=_column(rows, "sac/alpha"), entropy=_column(rows, "sac/entropy")))
    return seeds



def provenance(grid: Path, skip: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """The commits the runs ran at, and the notes on their machines and load; the cells of
    the measures in ``skip`` left out."""
    commits, notes = set(), set()
    for path in grid.glob("*/*/runs.csv"):
        if path.parent.name in skip:
            continue
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                commits.add(row["git_commit"][:7])
                if machine := started_on(row["note"]):
                    notes.add(machine)
    return sorted(commits), sorted(notes)

