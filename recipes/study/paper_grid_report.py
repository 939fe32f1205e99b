"""The paper's Figure 3 claims judged on the study's exported runs (issue 26): figures and tables.

Reads ``docs/results/paper_grid/<task>/<measure>/seed<k>.csv``
(``recipes/study/paper_grid.py`` writes them; ``runs.csv`` beside them says where and at which
commit each ran) and writes beside them
(``--figures``) and to the results page (``--page``):

* ``figure3.png``: per task, the median extrinsic return (``Return/mean``, the batch's episodes;
  each seed's running mean over 10 iterations) against frames with the interquartile range
  shaded, one line per measure, as the paper draws it;
* ``first_reward.png``: per task, the fraction of seeds that had met the extrinsic reward by
  frame t (a survival curve), and how often the first batch (the initial policy, before any
  bonus) met it on its own;
* ``self_agreement.png``: per task, the bonus's self-agreement (Spearman ρ between two fresh
  evaluations; ``Exploration.self_agreement``) over training, median over seeds, where logged;
* the results page (``docs/results.md``): the claim-by-claim table (the paper says / we
  measured / verdict / budget), the per-task table (final return's IQM with a 95 % bootstrap
  CI, median, first reward) and the paired differences by seed.

Statistics: a seed's *final return* is the mean ``Return/mean`` of its last 10 iterations, its
*early return* that of its first quarter of iterations, its *whole-run return* that of every
iteration (the area under its curve; shown beside the final return, not used for verdicts).
Measures are compared by the paired difference of those per seed (the seeds they share), with a
95 % percentile-bootstrap CI of the mean difference (10,000 resamples). A claim "A above B" is
*reproduced* when that CI lies above 0, *not reproduced* when it lies below 0 (B above A), and
*inconclusive* otherwise; "A best" needs A above every other measure the paper drew (none,
NLL, VIME, VASE), "alike" needs no CI to exclude 0. A comparison with fewer than 5 paired
seeds is *not measured yet*.

    python recipes/study/paper_grid_report.py [--study docs/results/figure3] \\
        [--grid docs/results/paper_grid] [--page docs/results.md]

The page opens with the study at the authors' configuration (issue 38, ``--study``): claims
judged in three windows with unpaired comparisons (``study_statistics.py``), the point robot's
steps to the first reward, per-task curves of the paper's four measures, the extras, and rliable's
aggregates across tasks; the earlier study (``--grid``, described below) follows it.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import os
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import scipy.stats
from compare import iqm_interval  # rliable's IQM and its bootstrap CI (beside this script)
from omegaconf import OmegaConf
from paper_grid import started_on  # the launcher's note (beside this script)
from study_statistics import (  # the statistics of issue 38 (beside this script)
    WINDOWS,
    aggregate_improvement,
    aggregate_iqm,
    compare,
    equivalent,
    holm_signs,
    normalise,
    performance_profile,
    probability_of_improvement,
    verdict,
    window_mean,
)

ROOT = Path(__file__).resolve().parents[2]

TASKS = ("mountain_car", "cartpole_swingup", "double_pendulum", "half_cheetah", "ant",
         "lunar_lander")
TITLES = {"mountain_car": "MountainCar", "cartpole_swingup": "CartpoleSwingup",
          "double_pendulum": "DoublePendulum", "half_cheetah": "HalfCheetah", "ant": "Ant",
          "lunar_lander": "LunarLanderContinuous"}
#: the paper's four curves, then ours
MEASURES = ("none", "vase", "nll", "vime", "rnd", "trpo_authors")
#: VASE's secondaries -> the measure each is paired with: the paper's text settings
#: (``preset=paper``), 50 weight samples, both; reported beside the primary measures, never
#: judged in a claim
SECONDARIES = {"vase_paper": "vase", "vase_n50": "vase", "vase_paper_n50": "vase_paper"}
#: every measure the report reads, in its tables' order
REPORTED = (*MEASURES, *SECONDARIES)
PAPER_MEASURES = ("none", "vase", "nll", "vime")
LABELS = {"none": "TRPO (none)", "vase": "VASE", "nll": "NLL", "vime": "VIME", "rnd": "RND",
          "trpo_authors": "TRPO, authors' settings",
          "vase_paper": "VASE, paper's text settings", "vase_n50": "VASE, N = 50",
          "vase_paper_n50": "VASE, paper's text settings, N = 50"}
SHORT = {"none": "none", "vase": "VASE", "nll": "NLL", "vime": "VIME", "rnd": "RND",
         "trpo_authors": "TRPO (authors')"}  # the claims' measures
COLOURS = {"none": "tab:gray", "vase": "tab:red", "nll": "tab:green", "vime": "tab:blue",
           "rnd": "tab:purple", "trpo_authors": "black", "vase_paper": "tab:orange",
           "vase_n50": "tab:brown", "vase_paper_n50": "tab:olive"}
FINAL, MIN_PAIRS, RESAMPLES = 10, 5, 10_000


@dataclass
class Seed:
    """One exported run: its metrics by frame."""

    seed: int
    frames: np.ndarray
    returns: np.ndarray
    first_reward: float  # the frame of the first extrinsic reward; NaN: never
    agreement: np.ndarray = field(default_factory=lambda: np.array([]))

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


def load(grid: Path) -> dict[str, dict[str, list[Seed]]]:
    """``task -> measure -> seeds`` from the exported CSVs (the measures of ``REPORTED``)."""
    found: dict[str, dict[str, list[Seed]]] = {}
    for task in TASKS:
        for measure in REPORTED:
            seeds = load_cell(grid, task, measure)
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
                          agreement=_column(rows, "bonus/self_agreement")))
    return seeds


@dataclass
class Difference:
    """The mean paired difference ``a − b`` over the seeds both have, with its bootstrap CI."""

    mean: float
    low: float
    high: float
    pairs: int

    @property
    def verdict(self) -> str:
        if self.pairs < MIN_PAIRS:
            return "not measured yet"
        if self.low > 0:
            return "above"
        if self.high < 0:
            return "below"
        return "no difference shown"

    def __str__(self) -> str:
        if self.pairs < 2:
            return f"n = {self.pairs}"
        return f"{self.mean:+.1f} [{self.low:+.1f}, {self.high:+.1f}] (n = {self.pairs})"

    def short(self) -> str:
        """``+1.2 [+0.3, +2.0] (5)``: the claims table's cell."""
        if self.pairs < 2:
            return f"({self.pairs} seeds)"
        return f"{self.mean:+.1f} [{self.low:+.1f}, {self.high:+.1f}] ({self.pairs})"


def paired_difference(a: list[Seed], b: list[Seed], statistic: str = "final",
                      seed: int = 0) -> Difference:
    by_seed = {s.seed: getattr(s, statistic) for s in b}
    diffs = np.array([getattr(s, statistic) - by_seed[s.seed] for s in a if s.seed in by_seed])
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size < 2:
        return Difference(float(diffs.mean()) if diffs.size else math.nan, math.nan, math.nan,
                          int(diffs.size))
    if np.ptp(diffs) == 0:  # every pair equal: the bootstrap has nothing to resample
        return Difference(float(diffs[0]), float(diffs[0]), float(diffs[0]), int(diffs.size))
    result = scipy.stats.bootstrap((diffs,), np.mean, n_resamples=RESAMPLES,
                                   method="percentile", rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return Difference(float(diffs.mean()), float(interval.low), float(interval.high),
                      int(diffs.size))


# ------------------------------------------------------------------------------------------------
# The paper's claims
# ------------------------------------------------------------------------------------------------
@dataclass
class Claim:
    task: str
    says: str
    #: (a, b, statistic): each comparison "a above b" the claim makes
    above: tuple[tuple[str, str, str], ...] = ()
    #: pairs that the claim says are alike
    alike: tuple[tuple[str, str], ...] = ()


#: "no surprise" in a claim is judged against both: plain TRPO at the bonuses' own settings
#: (none: the control) and the paper's TRPO curve, its authors' settings (trpo_authors)
NO_SURPRISE = ("none", "trpo_authors")

CLAIMS = (
    Claim("mountain_car", "VIME performs best",
          above=tuple(("vime", m, "final") for m in ("vase", "nll", *NO_SURPRISE))),
    Claim("double_pendulum", "VIME performs well initially, but is later surpassed by VASE",
          above=(("vime", "vase", "early"), ("vase", "vime", "final"))),
    *[Claim(task, "VASE shows good results (above the other curves)",
            above=tuple(("vase", m, "final") for m in ("vime", "nll", *NO_SURPRISE)))
      for task in ("cartpole_swingup", "half_cheetah", "ant")],
    *[Claim(task, "VASE always performs better than NLL", above=(("vase", "nll", "final"),))
      for task in TASKS],
    Claim("lunar_lander", "all surprise-driven methods behave almost the same as no surprise",
          alike=tuple((m, b) for b in NO_SURPRISE for m in ("vase", "nll", "vime"))),
)


def judge(claim: Claim, runs: dict[str, list[Seed]]) -> tuple[str, list[str]]:
    """The claim's verdict and the statistic behind each of its comparisons."""
    evidence, verdicts = [], []
    for a, b, statistic in claim.above:
        diff = paired_difference(runs.get(a, []), runs.get(b, []), statistic)
        when = "" if statistic == "final" else f", {statistic}"
        evidence.append(f"{SHORT[a]} − {SHORT[b]}{when}: {diff.short()}")
        verdicts.append({"above": "yes", "below": "no", "no difference shown": "?",
                         "not measured yet": "-"}[diff.verdict])
    for a, b in claim.alike:
        diff = paired_difference(runs.get(a, []), runs.get(b, []))
        evidence.append(f"{SHORT[a]} − {SHORT[b]}: {diff.short()}")
        verdicts.append({"above": "no", "below": "no", "no difference shown": "yes",
                         "not measured yet": "-"}[diff.verdict])
    if "-" in verdicts:
        return "not measured yet", evidence
    if "no" in verdicts:
        return "not reproduced", evidence
    if "?" in verdicts:
        return "inconclusive", evidence
    return "reproduced", evidence


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------
# every text of a figure at least 10 px where the docs show it (a 690-px column): 12 pt at 90 dpi
# on a figure at most 11 in wide (990 px, shown at 0.7 x); a click opens it full size
COLUMN_PX, MIN_TEXT_PX, DPI = 690, 10, 90
LEGIBLE = {"font.size": 12, "axes.titlesize": 12, "axes.labelsize": 12, "xtick.labelsize": 12,
           "ytick.labelsize": 12, "legend.fontsize": 12, "legend.title_fontsize": 12,
           "figure.titlesize": 12}


def legible(plot):
    """Run a plot function under ``LEGIBLE``'s font sizes (ticks are drawn at ``savefig``)."""
    @functools.wraps(plot)
    def under_legible_fonts(*args, **kwargs):
        with plt.rc_context(LEGIBLE):
            return plot(*args, **kwargs)
    return under_legible_fonts


def _panels(title: str):
    figure, axes = plt.subplots(2, 3, figsize=(11, 8.2), constrained_layout=True)
    figure.suptitle(textwrap.fill(title, 110))  # the commits' list can be long
    return figure, dict(zip(TASKS, axes.ravel(), strict=True))


def _shared_legend(figure, axes: dict) -> None:
    """One legend for every panel, below them: a legend per panel covers its curves at a
    legible size (the seeds of each cell are in the page's tables)."""
    handles = {}
    for ax in axes.values():
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                handles.setdefault(line.get_label(), line)
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="outside lower center",
                      ncol=min(4, len(handles)), frameon=False)


def running_mean(values: np.ndarray, window: int = FINAL) -> np.ndarray:
    """The trailing mean over ``window`` iterations (fewer at the start) of the finite values:
    an iteration in which no episode ended (LunarLander's 1,000-step episodes in 500-step
    paths) has no return and counts for nothing, as in the final return; NaN where a window
    has none."""
    finite = np.isfinite(values)
    sums = np.cumsum(np.where(finite, values, 0.0))
    counts = np.cumsum(finite)

    def trailing(totals: np.ndarray) -> np.ndarray:
        return totals - np.concatenate([np.zeros(window), totals])[: totals.size]

    with np.errstate(invalid="ignore", divide="ignore"):
        return trailing(sums) / trailing(counts)


@legible
def plot_returns(data: dict, path: Path, caption: str) -> None:
    figure, axes = _panels(f"Extrinsic return: median over seeds of each seed's running mean over "
                           f"{FINAL} iterations, interquartile range shaded ({caption})")
    for task, ax in axes.items():
        ax.set_title(TITLES[task])
        for measure, seeds in data.get(task, {}).items():
            length = min(len(s.returns) for s in seeds)
            curves = np.stack([running_mean(s.returns[:length]) for s in seeds])
            frames = seeds[0].frames[:length] / 1e6
            q1, median, q3 = np.nanpercentile(curves, [25, 50, 75], axis=0)
            ax.plot(frames, median, color=COLOURS[measure], label=LABELS[measure])
            ax.fill_between(frames, q1, q3, color=COLOURS[measure], alpha=0.15)
        ax.set_xlabel("frames (millions)")
        ax.set_ylabel("return")
        if not data.get(task):
            ax.text(0.5, 0.5, "not run yet", ha="center", transform=ax.transAxes)
    _shared_legend(figure, axes)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def first_batch_touches(seeds_by_measure: dict[str, list[Seed]]) -> tuple[int, int]:
    """Runs whose first batch (the initial policy; no bonus acts before the model's first
    update) met the extrinsic reward, and runs."""
    runs = [s for seeds in seeds_by_measure.values() for s in seeds]
    return sum(s.first_reward <= s.frames[0] for s in runs), len(runs)


@legible
def plot_first_reward(data: dict, path: Path, caption: str) -> None:
    figure, axes = _panels("Fraction of seeds that have met the extrinsic reward by frame t ("
                           + caption + ")")
    for task, ax in axes.items():
        ax.set_title(TITLES[task])
        for measure, seeds in data.get(task, {}).items():
            end = max(s.frames[-1] for s in seeds)
            times = np.sort([s.first_reward for s in seeds if np.isfinite(s.first_reward)])
            x = np.concatenate([[0], times, [end]]) / 1e6
            y = np.concatenate([[0], np.arange(1, times.size + 1), [times.size]]) / len(seeds)
            ax.step(x, y, where="post", color=COLOURS[measure], label=LABELS[measure])
        if data.get(task):
            touched, runs = first_batch_touches(data[task])
            ax.text(0.98, 0.03, f"first batch met it: {touched}/{runs}", ha="right",
                    transform=ax.transAxes)
        else:
            ax.text(0.5, 0.5, "not run yet", ha="center", transform=ax.transAxes)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("frames (millions)")
        ax.set_ylabel("fraction of seeds")
    _shared_legend(figure, axes)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


@legible
def plot_self_agreement(data: dict, path: Path, caption: str) -> bool:
    logged = {task: {m: [s for s in seeds if np.isfinite(s.agreement).any()]
                     for m, seeds in runs.items()} for task, runs in data.items()}
    if not any(seeds for runs in logged.values() for seeds in runs.values()):
        return False
    figure, axes = _panels("Bonus self-agreement: Spearman ρ of two fresh evaluations, median "
                           "over seeds (" + caption + ")")
    for task, ax in axes.items():
        ax.set_title(TITLES[task])
        for measure, seeds in logged.get(task, {}).items():
            if not seeds:
                continue
            length = min(len(s.agreement) for s in seeds)
            curves = np.stack([s.agreement[:length] for s in seeds])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # iterations without a bonus
                median = np.nanmedian(curves, axis=0)
            if np.isfinite(median).any():
                ax.plot(seeds[0].frames[:length] / 1e6, median, color=COLOURS[measure],
                        label=LABELS[measure])
        ax.set_ylim(-0.1, 1.05)
        ax.set_xlabel("frames (millions)")
        ax.set_ylabel("ρ")
        if not ax.lines:
            ax.text(0.5, 0.5, "not logged", ha="center", transform=ax.transAxes)
    _shared_legend(figure, axes)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return True


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------
def provenance(grid: Path) -> tuple[list[str], list[str]]:
    """The commits the runs ran at, and the notes on their machines and load."""
    commits, notes = set(), set()
    for path in grid.glob("*/*/runs.csv"):
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                commits.add(row["git_commit"][:7])
                if machine := started_on(row["note"]):
                    notes.add(machine)
    return sorted(commits), sorted(notes)


def budget(runs: dict[str, list[Seed]], measures: tuple[str, ...]) -> str:
    """``"5–10 seeds × 50 iterations"``: the seeds of the claim's measures and their length."""
    counts = [len(runs.get(m, [])) for m in measures]
    lengths = [len(s.returns) for m in measures for s in runs.get(m, [])]
    if not lengths:
        return "–"
    low, high = min(counts), max(counts)
    seeds = f"{low}" if low == high else f"{low}–{high}"
    return f"{seeds} seeds × {min(lengths)} iterations"


def claims_table(data: dict) -> str:
    lines = ["| task | the paper says | we measured: paired difference of final returns, "
             "mean [95 % CI] (seeds) | verdict | budget |", "|---|---|---|---|---|"]
    for claim in CLAIMS:
        runs = data.get(claim.task, {})
        verdict, evidence = judge(claim, runs)
        involved = tuple(dict.fromkeys([m for a, b, _ in claim.above for m in (a, b)]
                                       + [m for pair in claim.alike for m in pair]))
        lines.append(f"| {TITLES[claim.task]} | {claim.says} | {'<br>'.join(evidence)} | "
                     f"**{verdict}** | {budget(runs, involved)} |")
    return "\n".join(lines) + "\n"


def _number(value: float, digits: int = 1) -> str:
    return "–" if not np.isfinite(value) else f"{value:,.{digits}f}"


def task_table(task: str, runs: dict[str, list[Seed]]) -> str:
    lines = ["| measure | seeds | final return: IQM [95 % CI] | median | IQR | met the reward "
             "| first reward (median frame) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for measure in REPORTED:
        seeds = runs.get(measure)
        if not seeds:
            continue
        finals = np.array([s.final for s in seeds])
        point, low, high = iqm_interval(finals, resamples=RESAMPLES)
        met = [s.first_reward for s in seeds if np.isfinite(s.first_reward)]
        q1, median, q3 = np.percentile(finals, [25, 50, 75])
        lines.append(
            f"| {LABELS[measure]} | {len(seeds)} | {_number(point)} [{_number(low)}, "
            f"{_number(high)}] | {_number(median)} | {_number(q3 - q1)} | {len(met)}/{len(seeds)} "
            f"| {_number(float(np.median(met)) if met else math.nan, 0)} |")
    return "\n".join(lines) + "\n"


def pairs_table(task: str, runs: dict[str, list[Seed]]) -> str:
    lines = ["| difference | final return: mean [95 % CI] (n seeds) | | mean return over the "
             "whole run (area under the curve) | |", "|---|---:|---|---:|---|"]
    for a, b in (("vase", "nll"), ("vase", "none"), ("vase", "vime"), ("vime", "none"),
                 ("rnd", "vase"), *SECONDARIES.items()):
        if runs.get(a) and runs.get(b):
            final = paired_difference(runs[a], runs[b])
            whole = paired_difference(runs[a], runs[b], "whole")
            lines.append(f"| {LABELS[a]} − {LABELS[b]} | {final} | {final.verdict} | {whole} | "
                         f"{whole.verdict} |")
    return "\n".join(lines) + "\n"


def agreement_table(data: dict) -> str:
    """Median over seeds of each seed's median self-agreement in the first and last tenth of its
    iterations, where logged."""
    lines = ["| task | measure | seeds logged | ρ, first tenth of training | ρ, last tenth |",
             "|---|---|---:|---:|---:|"]
    for task in TASKS:
        for measure, seeds in data.get(task, {}).items():
            logged = [s for s in seeds if np.isfinite(s.agreement).any()]
            if not logged:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                early = [np.nanmedian(s.agreement[: max(2, len(s.agreement) // 10)])
                         for s in logged]
                late = [np.nanmedian(s.agreement[-max(1, len(s.agreement) // 10):])
                        for s in logged]
            lines.append(f"| {TITLES[task]} | {LABELS[measure]} | {len(logged)} | "
                         f"{_number(float(np.nanmedian(early)), 2)} | "
                         f"{_number(float(np.nanmedian(late)), 2)} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


#: seeds of each measure the issue's bar asks for
BAR = {"mountain_car": 10, "cartpole_swingup": 10, "half_cheetah": 10, "double_pendulum": 5,
       "ant": 5, "lunar_lander": 5}

HEADER = """# The earlier study at the former defaults

The paper's claims about its Figure 3, judged on our first study (issue 26): every task at the
authors' iteration counts and the recipe's defaults of the time, which `preset=former_defaults`
reproduces: a mix of the paper's text and the authors' code, not the authors' configuration.
σ_c = 5 and δ = 1e-3 (the paper's text), BNN means initialised as `torch.nn.Linear` (neither the
paper nor the authors), the bonus centred per batch, PyTorch's initialisation, CG damping 0.1 and
10 backtracks (sb3's), batches of 10 lanes of 500 fresh steps; the authors' tasks, BNN layer and
`advantage=extrinsic`. Seeds 0–9 (5 on some cells), each run exported to
`docs/results/paper_grid/<task>/<measure>/seed<k>.csv` with its commit, machine and load in
`runs.csv` beside it. Its verdicts pair seeds and read one window (the last 10 iterations); the
study above replaces them. Nothing was tuned towards the paper: those defaults were chosen before
it, on other seeds (the [earlier studies](results_history.md)).
This page is written by `python recipes/study/paper_grid_report.py` from those files; the study is
run (and resumed) by `python recipes/study/paper_grid.py` ([how](#how-this-was-run)).

How to read the verdicts: a seed's *final return* is its mean extrinsic return over its last 10
iterations; two measures are compared by the mean of their paired differences over the seeds
both ran, with a 95 % bootstrap CI. *Reproduced*: every comparison the claim makes has its CI on
the claimed side of 0; *not reproduced*: one has it on the other side; *inconclusive*: some CI
straddles 0; *not measured yet*: fewer than 5 paired seeds. "No surprise" has two curves here,
and a claim about it is judged against both: `none`, plain TRPO at the recipe's defaults (the same
TRPO the bonuses use: the control), and `TRPO (authors')`, the paper's TRPO curve as the authors'
script ran it (`preset=authors_trpo`: rllab's defaults γ = 0.99 and λ = 1, where their bonus runs
used 0.995 and 0.95, with rllab's initialisation and line search).
"""


def status_table(data: dict) -> str:
    """Finished seeds per task and measure against the bar."""
    lines = ["| task | iterations | " + " | ".join(LABELS[m] for m in MEASURES) + " | bar |",
             "|---|---:|" + "---:|" * len(MEASURES) + "---:|"]
    for task in TASKS:
        counts = [len(data.get(task, {}).get(m, [])) for m in MEASURES]
        iterations = OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml").iterations
        lines.append(f"| {TITLES[task]} | {iterations} | "
                     + " | ".join(str(c) if c else "–" for c in counts)
                     + f" | {BAR[task]} seeds of the first five |")
    secondaries = [f"{LABELS[m]}: " + ", ".join(
        f"{TITLES[task]} {len(data[task][m])}" for task in TASKS if data.get(task, {}).get(m))
        for m in SECONDARIES if any(data.get(task, {}).get(m) for task in TASKS)]
    if secondaries:
        lines.append("\nSecondaries (seeds): " + "; ".join(secondaries) + ".")
    return "\n".join(lines) + "\n"


def report(grid: Path, page: Path, figures: Path | None = None,
           study: Path | None = None) -> dict[str, Path]:
    """Write the results page ``page``: the study at the authors' configuration (``study``, its
    figures beside its CSVs), then the earlier study (``grid``, its figures into ``figures``,
    default ``grid``)."""
    data = load(grid)
    if not data:
        raise SystemExit(f"no exported runs under {grid} (<task>/<measure>/seed<k>.csv).")
    figures = figures or grid
    figures.mkdir(parents=True, exist_ok=True)
    page.parent.mkdir(parents=True, exist_ok=True)
    link = Path(os.path.relpath(figures, page.parent)).as_posix()
    commits, machines = provenance(grid)
    caption = ("commits " + ", ".join(commits) + " and PROVENANCE.txt's" if commits
               else "commits in PROVENANCE.txt")
    written = {"figure3": figures / "figure3.png", "first_reward": figures / "first_reward.png",
               "report": page}
    plot_returns(data, written["figure3"], caption)
    plot_first_reward(data, written["first_reward"], caption)
    if plot_self_agreement(data, figures / "self_agreement.png", caption):
        written["self_agreement"] = figures / "self_agreement.png"
    notes = grid / "NOTES.md"
    sections = [HEADER, "## The paper's claims\n", claims_table(data)]
    if notes.exists():
        sections.append(notes.read_text())
    sections += ["## Figure 3\n",
                 figure(link, "figure3.png", "Median return per task and measure"),
                 "## Finding the reward\n",
                 figure(link, "first_reward.png",
                        "Fraction of seeds that met the reward by frame t")]
    for task in TASKS:
        if task not in data:
            sections.append(f"## {TITLES[task]}\n\nNot run yet.\n")
            continue
        touched, total = first_batch_touches(data[task])
        sections += [f"## {TITLES[task]}\n", task_table(task, data[task]),
                     f"\nThe first batch (the initial policy, before any bonus) met the reward "
                     f"in {touched} of {total} runs.\n\nPaired by seed:\n",
                     pairs_table(task, data[task])]
    agreement = agreement_table(data)
    sections += ["## Self-agreement of the bonuses\n",
                 "Spearman's ρ between two evaluations of a bonus on the same 500 transitions "
                 "of a batch, each with fresh weight samples (`bonus/self_agreement`, logged "
                 "every iteration by runs since its introduction; older runs lack it).\n",
                 agreement or "Not logged by any exported run yet.\n"]
    if "self_agreement" in written:
        sections.append(figure(link, "self_agreement.png", "Self-agreement over training"))
    sections += ["## How this was run\n",
                 "Finished seeds per task and measure (the study's bar: 10 seeds of none, VASE, "
                 "NLL, VIME and RND on MountainCar, CartpoleSwingup and HalfCheetah, 5 on the "
                 "others):\n", status_table(data),
                 f"\nRuns exported with their provenance (`runs.csv` beside the CSVs: run, "
                 f"commit, start, end, machine, load): commits {', '.join(commits) or '–'}, "
                 f"machines {', '.join(machines) or '–'}; the earlier cells' commits and "
                 "machines, and what ran beside them, are in `PROVENANCE.txt`.\n",
                 "```\n# reruns this study's cells at its settings (--tasks, --seeds take a "
                 "slice)\npython recipes/study/paper_grid.py --overrides preset=former_defaults "
                 "--measures none vase nll vime rnd --seeds 0-9 \\\n    --out "
                 "docs/results/paper_grid --scratch studies/paper_grid\n"
                 "# this page and its figures\npython recipes/study/paper_grid_report.py\n```\n"]
    earlier = "\n".join(sections).replace("\n## ", "\n### ")
    if study is not None:
        part, drawn = study_section(study, study, Path(os.path.relpath(study, page.parent))
                                    .as_posix())
        written.update({f"figure3/{name}": path for name, path in drawn.items()})
        earlier = part + "\n" + earlier.replace("# The earlier study", "## The earlier study", 1)
    page.write_text(earlier)
    return written


# ================================================================================================
# The study as its authors ran it (issue 38): docs/results/figure3/
# ================================================================================================
#: the paper's four curves (its "TRPO" is the authors' plain-TRPO script) and the extras
PAPER_CURVES = ("vase", "nll", "vime", "trpo_authors")
EXTRAS = ("none", "vase_paper", "rnd")
#: Okabe & Ito's colour-blind-safe palette
SAFE = {"vase": "#D55E00", "nll": "#009E73", "vime": "#0072B2", "trpo_authors": "#000000",
        "none": "#999999", "vase_paper": "#E69F00", "rnd": "#CC79A7"}
STUDY_LABELS = {"vase": "VASE", "nll": "NLL", "vime": "VIME", "trpo_authors": "TRPO (authors')",
                "none": "TRPO, the bonuses' own (none)", "vase_paper": "VASE, paper's text",
                "rnd": "RND"}
#: the short names of the tables' cells and the aggregate figure
AGGREGATE_LABELS = {"vase": "VASE", "nll": "NLL", "vime": "VIME", "trpo_authors": "TRPO (authors')",
                    "none": "none (control)", "vase_paper": "VASE (text)", "rnd": "RND"}
#: "no surprise": the paper's TRPO curve (the authors' script) and the control (the bonuses' TRPO)
NO_BONUS = ("trpo_authors", "none")
#: seeds below which a measure is not judged
MIN_SEEDS = 5
#: the equivalence margin of "alike", as a fraction of the task's return range
MARGIN = 0.10
#: the point robot's budget: the study's 500 iterations of 5,000 steps
POINT_ROBOT_BUDGET = 500 * 5000
#: the level of the point robot's log-rank test (one claim, one comparison: no correction)
ALPHA = 0.05
#: the paper's sentences, quoted exactly
QUOTES = {
    "mountain_car": "VIME performs best for sparse MountainCar task.",
    "double_pendulum": "For the sparse DoublePendulum, VIME performs well initially, but is later "
                       "surpassed by VASE.",
    "good": "VASE shows good results in sparse CartpoleSwingup, sparse HalfCheetah and sparse "
            "Ant tasks.",
    "nll": "We can also see that VASE always performs better than NLL (suprisal) in all tasks.",
    "lunar_lander": "Figure 3 (f) shows that in LunarLanderContinuous task that has enough reward "
                    "for the agent, all surprise-driven methods behave almost the same to the "
                    "no-surprise method.",
    "point_robot": "It is clear that random exploration strategy takes a long time (2,059,459 "
                   "steps V.S. 26,663 steps) to find that first non-zero r_e(s_t), whereas VASE "
                   "does not spend time unnecessarily in random states.",
}


def seed_windows(seeds: list[Seed], window: str) -> np.ndarray:
    """Each seed's mean return over ``window`` (``study_statistics.WINDOWS``), or over the first
    quarter of its iterations (``"first quarter"``)."""
    if window == "first quarter":
        return np.array([s.early for s in seeds])
    return np.array([window_mean(s.returns, window) for s in seeds])


def _figure(comparison) -> str:
    """``+1.2 [−0.3, +2.0]``: a difference and the wider of its two intervals."""
    if comparison is None:
        return "–"
    low, high = comparison.interval
    return f"{comparison.difference:+.3g} [{low:+.3g}, {high:+.3g}]"


def judge_window(runs: dict[str, list[Seed]], above: list[tuple[str, str]], window: str,
                 **kwargs) -> tuple[str, list[str]]:
    """One window of a claim "a above b" for each pair (Holm-corrected together); its verdict
    and each comparison's figure."""
    if any(len(runs.get(m, [])) < MIN_SEEDS for pair in above for m in pair):
        return "not measured yet", []
    a_sets = [seed_windows(runs[a], window) for a, _ in above]
    b_sets = [seed_windows(runs[b], window) for _, b in above]
    signs = holm_signs(a_sets, b_sets, **kwargs)
    figures = [f"{STUDY_LABELS[a]} − {STUDY_LABELS[b]} {_figure(compare(x, y, **kwargs))}"
               for (a, b), x, y in zip(above, a_sets, b_sets, strict=True)]
    if all(sign > 0 for sign in signs):
        return "reproduced", figures
    if any(sign < 0 for sign in signs):
        return "not reproduced", figures
    return "inconclusive", figures


def return_margin(runs: dict[str, list[Seed]], measures: tuple[str, ...]) -> float:
    """``MARGIN`` of the task's return range: the span from the 5th to the 95th percentile of
    every iteration's return of every seed of ``measures`` (the range the return covers over
    training, robust to a stray batch)."""
    values = np.concatenate([s.returns for m in measures for s in runs.get(m, [])])
    values = values[np.isfinite(values)]
    if not values.size:
        return math.nan
    low, high = np.percentile(values, [5, 95])
    return MARGIN * float(high - low)


def judge_alike_window(runs: dict[str, list[Seed]], pairs: list[tuple[str, str]], window: str,
                       **kwargs) -> tuple[str, list[str]]:
    """One window of "each pair alike": two one-sided tests against ±``return_margin``."""
    if any(len(runs.get(m, [])) < MIN_SEEDS for pair in pairs for m in pair):
        return "not measured yet", []
    measures = tuple(dict.fromkeys(m for pair in pairs for m in pair))
    margin = return_margin(runs, measures)
    a_sets = [seed_windows(runs[a], window) for a, _ in pairs]
    b_sets = [seed_windows(runs[b], window) for _, b in pairs]
    alike = [equivalent(x, y, margin, **kwargs) for x, y in zip(a_sets, b_sets, strict=True)]
    figures = [f"margin ±{margin:.3g}"] + [
        f"{STUDY_LABELS[a]} − {STUDY_LABELS[b]} {_figure(compare(x, y, **kwargs))}"
        for (a, b), x, y in zip(pairs, a_sets, b_sets, strict=True)]
    if all(alike):
        return "reproduced", figures
    signs = holm_signs(a_sets, b_sets, **kwargs)
    return ("not reproduced" if any(signs) else "inconclusive"), figures


def study_claims(data: dict, **kwargs) -> list[tuple[str, str, dict[str, tuple[str, list[str]]],
                                                      str, str]]:
    """Each claim: (the paper's sentence, the task, per window (verdict, figures), the verdict,
    the seeds it rests on)."""
    rows = []

    def budget_of(task: str, measures: tuple[str, ...]) -> str:
        runs = data.get(task, {})
        return ", ".join(f"{AGGREGATE_LABELS[m]} {len(runs.get(m, []))}" for m in measures)

    def add(quote: str, task: str, measures: tuple[str, ...], judge_one) -> None:
        per_window = {w: judge_one(data.get(task, {}), w) for w in WINDOWS}
        rows.append((quote, task, per_window, verdict({w: v for w, (v, _) in per_window.items()}),
                     budget_of(task, measures)))

    add(QUOTES["mountain_car"], "mountain_car", ("vime", "vase", "nll", *NO_BONUS),
        lambda runs, w: judge_window(runs, [("vime", m) for m in ("vase", "nll", *NO_BONUS)], w,
                                     **kwargs))

    def pendulum(runs, window):
        early = judge_window(runs, [("vime", "vase")], "first quarter", **kwargs)
        late = judge_window(runs, [("vase", "vime")], window, **kwargs)
        both = {early[0], late[0]}
        result = (early[0] if len(both) == 1 else "not measured yet" if "not measured yet" in both
                  else "not reproduced" if "not reproduced" in both else "inconclusive")
        return result, [f"first quarter: {f}" for f in early[1]] + late[1]

    add(QUOTES["double_pendulum"], "double_pendulum", ("vime", "vase"), pendulum)
    for task in ("cartpole_swingup", "half_cheetah", "ant"):
        add(QUOTES["good"], task, ("vase", "vime", "nll", *NO_BONUS),
            lambda runs, w: judge_window(runs, [("vase", m) for m in ("vime", "nll", *NO_BONUS)],
                                         w, **kwargs))
    for task in TASKS:
        add(QUOTES["nll"], task, ("vase", "nll"),
            lambda runs, w: judge_window(runs, [("vase", "nll")], w, **kwargs))
    add(QUOTES["lunar_lander"], "lunar_lander", ("vase", "nll", "vime", *NO_BONUS),
        lambda runs, w: judge_alike_window(
            runs, [(m, b) for b in NO_BONUS for m in ("vase", "nll", "vime")], w, **kwargs))
    return rows


def study_claims_table(data: dict, **kwargs) -> str:
    lines = ["| the paper says | task | we measured (A − B, difference of means [95 % interval]) "
             "| verdict | seeds |", "|---|---|---|---|---|"]
    for quote, task, per_window, final, seeds in study_claims(data, **kwargs):
        cells = [f"*{WINDOWS[window]}*: {result}" + ("; " + "; ".join(figures) if figures else "")
                 for window, (result, figures) in per_window.items()]
        measured = "–" if final == "not measured yet" else "<br>".join(cells)
        lines.append(f"| “{quote}” | {TITLES[task]} | {measured} | **{final}** | {seeds} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# The point robot: steps to the first reward, runs that never found it censored
# ------------------------------------------------------------------------------------------------
def first_reward_steps(seeds: list[Seed], budget: int = POINT_ROBOT_BUDGET) -> np.ndarray:
    """Each run's steps to its first extrinsic reward; ``inf`` for one that never found it within
    ``budget`` (censored: it ran the whole budget)."""
    return np.array([s.first_reward if np.isfinite(s.first_reward) else math.inf for s in seeds])


def kaplan_meier_median(steps: np.ndarray) -> float:
    """The median steps to the first reward with censored runs (``inf``) counted as still
    searching; ``inf`` if fewer than half found it (all censored at the same budget, so this is
    the plain median)."""
    return float(np.median(steps)) if steps.size else math.nan


def point_robot_row(runs: dict[str, list[Seed]]) -> tuple[str, str, str]:
    """(we measured, verdict, seeds) for the paper's exploration claim."""
    vase, none = runs.get("vase", []), runs.get("none", [])
    parts = []
    for measure in ("none", "vase", "nll", "vime"):
        seeds = runs.get(measure, [])
        if not seeds:
            continue
        steps = first_reward_steps(seeds)
        found = np.isfinite(steps)
        median = kaplan_meier_median(steps)
        parts.append(f"{STUDY_LABELS[measure]}: found by {found.sum()} of {len(seeds)} within "
                     f"{POINT_ROBOT_BUDGET:,} steps, median "
                     + (f"{median:,.0f}" if np.isfinite(median) else "beyond the budget"))
    if len(vase) < MIN_SEEDS or len(none) < MIN_SEEDS:
        return "<br>".join(parts) or "–", "not measured yet", f"none {len(none)}, VASE {len(vase)}"
    # P(VASE finds it sooner): runs that never found it tie at the budget (counted half)
    sooner = probability_of_improvement(-first_reward_steps(vase), -first_reward_steps(none))
    comparison = compare(-np.minimum(first_reward_steps(vase), POINT_ROBOT_BUDGET),
                         -np.minimum(first_reward_steps(none), POINT_ROBOT_BUDGET))
    low, high = comparison.improvement_interval
    sooner_p, later_p = (logrank_p(first_reward_steps(vase), first_reward_steps(none), side)
                         for side in ("sooner", "later"))
    parts.append(f"P(VASE finds it sooner than none) {sooner:.2f} [{low:.2f}, {high:.2f}]; "
                 f"log-rank test, one-sided: p = {sooner_p:.2g} (sooner), {later_p:.2g} (later)")
    # the second look: the probability of improvement and the log-rank test must agree
    result = ("reproduced" if low > 0.5 and sooner_p < ALPHA else
              "not reproduced" if high < 0.5 and later_p < ALPHA else "inconclusive")
    return "<br>".join(parts), result, f"none {len(none)}, VASE {len(vase)}"


def logrank_p(steps: np.ndarray, other: np.ndarray, side: str) -> float:
    """The one-sided log-rank test's p-value that runs of ``steps`` find the reward ``side``
    (``"sooner"`` or ``"later"``) than runs of ``other``; ``inf`` entries are runs censored at
    the budget (scipy's ``logrank``: Mantel's statistic on the pooled risk sets)."""
    def censored(values: np.ndarray) -> scipy.stats.CensoredData:
        found = np.isfinite(values)
        return scipy.stats.CensoredData(uncensored=values[found],
                                        right=np.full((~found).sum(), POINT_ROBOT_BUDGET))

    # scipy's "greater": the first group's event rate (finding the reward) above the other's
    alternative = "greater" if side == "sooner" else "less"
    return float(scipy.stats.logrank(censored(steps), censored(other),
                                     alternative=alternative).pvalue)


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------
def smoothed(returns: np.ndarray) -> np.ndarray:
    """A trailing mean over 5 % of the run (at least one iteration)."""
    return running_mean(returns, window=max(1, int(0.05 * returns.size)))


@legible
def plot_curves(data: dict, measures: tuple[str, ...], path: Path, title: str,
                reference: str | None = None) -> None:
    """Per task, each measure's median over seeds (each seed smoothed over 5 % of its run) with
    the interquartile range shaded; ``reference`` dashed, unshaded."""
    figure, axes = plt.subplots(2, 3, figsize=(11, 8.6))
    figure.suptitle(textwrap.fill(title, 110))
    handles = {}
    for task, ax in zip(TASKS, axes.ravel(), strict=True):
        ax.set_title(TITLES[task])
        for measure in (*measures, *([reference] if reference else [])):
            seeds = data.get(task, {}).get(measure, [])
            if not seeds:
                continue
            length = min(len(s.returns) for s in seeds)
            curves = np.stack([smoothed(s.returns[:length]) for s in seeds])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                q1, median, q3 = np.nanpercentile(curves, [25, 50, 75], axis=0)
            steps = np.arange(1, length + 1) * 5000 / 1e6
            dashed = measure == reference and measure not in measures
            (line,) = ax.plot(steps, median, color=SAFE[measure], lw=1.6,
                              ls="--" if dashed else "-")
            if not dashed:
                ax.fill_between(steps, q1, q3, color=SAFE[measure], alpha=0.18, lw=0)
            handles[measure] = (line, len(seeds))
        ax.set_xlabel("steps (millions; 5,000 an iteration)")
        ax.set_ylabel("extrinsic return")
        if not data.get(task):
            ax.text(0.5, 0.5, "not run yet", ha="center", transform=ax.transAxes)
    order = [m for m in (*measures, reference) if m in handles]
    figure.legend([handles[m][0] for m in order],
                  [STUDY_LABELS[m] + (" (dashed, for reference)" if m == reference and
                                      m not in measures else "") for m in order],
                  loc="lower center", ncol=len(order), frameon=False)
    figure.tight_layout(rect=(0, 0.05, 1, 0.96))
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def aggregate(data: dict, measures: tuple[str, ...], window: str = "last10") -> dict:
    """rliable's three views over the tasks every measure ran: IQM of min–max normalised
    scores, performance profiles, P(VASE > rival)."""
    tasks = [t for t in TASKS if all(len(data.get(t, {}).get(m, [])) >= MIN_SEEDS
                                     for m in measures)]
    scores = {t: {m: seed_windows(data[t][m], window) for m in measures} for t in tasks}
    if not tasks:
        return {"tasks": []}
    normalised, ranges = normalise(scores)
    taus = np.linspace(0, 1, 51)
    return {
        "tasks": tasks, "ranges": ranges, "taus": taus,
        "iqm": {m: aggregate_iqm([normalised[t][m] for t in tasks]) for m in measures},
        "profiles": {m: performance_profile([normalised[t][m] for t in tasks], taus)
                     for m in measures},
        "improvement": {m: aggregate_improvement([scores[t]["vase"] for t in tasks],
                                                 [scores[t][m] for t in tasks])
                        for m in measures if m != "vase"},
    }


@legible
def plot_aggregate(result: dict, path: Path, title: str) -> None:
    # the interval panels side by side, the profiles below at full width: three in a row left
    # the rivals' names and the axis labels no room at a legible size
    figure, axes = plt.subplot_mosaic([["iqm", "improvement"], ["profile", "profile"]],
                                      figsize=(11, 8.6), layout="constrained",
                                      height_ratios=[1, 1.1])
    iqm_ax, profile_ax, poi_ax = axes["iqm"], axes["profile"], axes["improvement"]
    figure.suptitle(textwrap.fill(title, 110))
    measures = list(result["iqm"])
    for row, measure in enumerate(measures):
        point, low, high = result["iqm"][measure]
        iqm_ax.barh(row, high - low, left=low, color=SAFE[measure], alpha=0.6, height=0.6)
        iqm_ax.plot([point, point], [row - 0.3, row + 0.3], color="black", lw=2)
    iqm_ax.set_yticks(range(len(measures)), [AGGREGATE_LABELS[m] for m in measures])
    iqm_ax.set_xlim(-0.02, 1.02)
    iqm_ax.set_xlabel("IQM of normalised score\n(95 % stratified bootstrap interval)")
    for measure in measures:
        profile, low, high = result["profiles"][measure]
        profile_ax.plot(result["taus"], profile, color=SAFE[measure],
                        label=AGGREGATE_LABELS[measure])
        profile_ax.fill_between(result["taus"], low, high, color=SAFE[measure], alpha=0.15, lw=0)
    profile_ax.set_xlabel("normalised score τ")
    profile_ax.set_ylabel("fraction of runs with score > τ")
    figure.legend(*profile_ax.get_legend_handles_labels(), loc="outside lower center",
                  ncols=len(measures), frameon=False)
    rivals = list(result["improvement"])
    for row, measure in enumerate(rivals):
        point, low, high = result["improvement"][measure]
        poi_ax.barh(row, high - low, left=low, color=SAFE[measure], alpha=0.6, height=0.6)
        poi_ax.plot([point, point], [row - 0.3, row + 0.3], color="black", lw=2)
    poi_ax.axvline(0.5, color="gray", ls=":")
    poi_ax.set_yticks(range(len(rivals)), [f"VASE vs {AGGREGATE_LABELS[m]}" for m in rivals])
    poi_ax.set_xlim(0, 1)
    poi_ax.set_xlabel("P(VASE > rival), averaged over tasks\n(95 % stratified bootstrap interval)")
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


@legible
def plot_point_robot(runs: dict[str, list[Seed]], path: Path, title: str) -> None:
    """The fraction of runs still searching at each step (a survival curve), per measure."""
    figure, ax = plt.subplots(figsize=(8, 5.6), constrained_layout=True)
    for measure in ("none", "vase", "nll", "vime"):
        seeds = runs.get(measure, [])
        if not seeds:
            continue
        steps = np.sort(first_reward_steps(seeds))
        found = steps[np.isfinite(steps)]
        x = np.concatenate([[1000], found, [POINT_ROBOT_BUDGET]])
        y = 1 - np.concatenate([[0], np.arange(1, found.size + 1), [found.size]]) / len(seeds)
        ax.step(x, y, where="post", color=SAFE[measure],
                label=f"{STUDY_LABELS[measure]} ({len(seeds)} runs)")
    # the paper's two runs, named just left of their lines, low, where no curve runs after the
    # first finds (the curves fall from 1)
    for steps, label in ((2_059_459, "the paper's TRPO run"), (26_663, "the paper's VASE run")):
        ax.axvline(steps, color="gray", ls=":")
        ax.text(steps / 1.1, 0.03, label, rotation=90, ha="right", va="bottom", fontsize=10,
                color="dimgray")
    ax.set_xscale("log")
    ax.set_xlim(1000, POINT_ROBOT_BUDGET * 1.1)
    ax.set_ylim(-0.02, 1.04)
    ax.set_xlabel("steps (log scale; the budget ends the axis)")
    ax.set_ylabel("fraction of runs still searching")
    figure.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2,
                  frameon=False)
    ax.set_title(textwrap.fill(title, 60))
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def load_point_robot(study: Path) -> dict[str, list[Seed]]:
    runs = {measure: load_cell(study, "point_robot", measure)
            for measure in ("none", "vase", "nll", "vime")}
    return {measure: seeds for measure, seeds in runs.items() if seeds}


# ------------------------------------------------------------------------------------------------
# The page's first part
# ------------------------------------------------------------------------------------------------
#: seeds each cell must reach (the issue's bar)
STUDY_BAR = {"vase": 20, "trpo_authors": 20, "nll": 10, "vime": 10, "none": 10, "vase_paper": 10}
STUDY_INTRO = """# Results: the paper's Figure 3

## As its authors ran it

The paper's claims judged on runs at the authors' configuration: the recipe's defaults, which are
the authors' code wherever it and the paper's text differ (σ_c = 0.5, no confidence term δ, BNN
means from N(0, 1), the bonus added uncentred, rllab's TRPO with Glorot initialisation, CG damping
1e-5 and 15 backtracks, its Monte-Carlo extrinsic baseline, and rllab's batches of whole paths:
[the list](concepts.md#where-the-authors-code-differs-from-the-paper)), fixed before the first run
and not tuned towards the paper. Measures: VASE, NLL and VIME (the same model and settings, only
the measure differs), the paper's TRPO curve as the authors' script ran it (`preset=authors_trpo`:
γ = 0.99, λ = 1), and the control `none` (the bonuses' own TRPO, γ = 0.995, λ = 0.95, without a
bonus); VASE at the paper's text settings (`preset=paper`) on three tasks. Seeds 0–19 (the paper:
"over 20 runs with a fixed set of seeds"), each run to the task's full iteration count, exported
to `docs/results/figure3/<task>/<measure>/seed<k>.csv` with its `runs.csv` row (commit, machine,
load, the run's name and config identity), all at one code: commit b2b53df until 2026-11-29
05:45 UTC, then 82a8bde, which is b2b53df with one change, the policy's log-density taken in
rllab's standardised form where torch's leaves float32 (`FiniteLogProbNormal`: four HalfCheetah
VIME runs failed at b2b53df once a learned log-std passed 43, listed below); a run that never
reaches such a std logs the same numbers at both, bit for bit (checked on 20 iterations of
HalfCheetah VIME seed 1). The study runs, and resumes, over several sessions
(`python recipes/study/paper_grid.py`, [the guide](guides/paper_grid.md)); this part of the page
is written by `python recipes/study/paper_grid_report.py` from those files and says how far it has
come.

**How a claim is judged** (stated before any number). Each seed's curve gives three numbers: its
mean extrinsic return over the last 10 iterations, over the last 10 % of iterations, and over the
whole run (the area under the curve). Measures are compared unpaired, every seed counting: the
difference of means with a 95 % percentile-bootstrap interval beside Welch's t-interval, the
verdict reading the wider (their union); the comparisons of one claim are Holm-corrected. A claim
is *reproduced* or *not reproduced* only when all three windows say so, otherwise
*inconclusive*; a measure with fewer than 5 finished seeds is *not measured yet*. "Almost the
same" (LunarLander) is an equivalence claim: each bonus's difference from no surprise must lie
within **±10 % of the task's return range** (the span from the 5th to the 95th percentile of every
iteration's return of the measures compared) by two one-sided tests at 5 %. "No surprise" has
two curves, and a claim about it is judged against both: the authors' TRPO and the control.
The point robot's claim reads each run's steps to its first reward, a run that never found it
censored at the budget: *reproduced* when the probability that a VASE run finds it sooner than a
`none` run has its 95 % interval above 0.5 and a one-sided log-rank test agrees at 5 %, *not
reproduced* when both say the opposite, otherwise *inconclusive*.
"""


def load_failures(study: Path) -> list[dict[str, str]]:
    """Every run of the study that failed (``<task>/<measure>/failures.csv``), its task and
    measure added; by task, measure and seed."""
    rows = []
    for path in study.glob("*/*/failures.csv"):
        with path.open(newline="") as handle:
            rows += [{"task": path.parent.parent.name, "measure": path.parent.name, **row}
                     for row in csv.DictReader(handle)]
    return sorted(rows, key=lambda r: (r["task"], r["measure"], int(r["seed"]), r["start"]))


def failures_table(failures: list[dict[str, str]], study: Path) -> str:
    """The failed runs, and whether each seed has finished since (at the commit its
    ``runs.csv`` row names)."""
    if not failures:
        return "No run has failed.\n"
    lines = ["Runs that failed (each recorded in `failures.csv` beside its cell's CSVs, never "
             "drawn; its seed runs again, and once finished its `runs.csv` row says at which "
             "commit):\n",
             "| cell | seed | commit | at iteration | error | run again |",
             "|---|---:|---|---:|---|---|"]
    for row in failures:
        rerun = study / row["task"] / row["measure"] / f"seed{row['seed']}.csv"
        title = TITLES.get(row["task"], row["task"].replace("_", " "))
        lines.append(f"| {title} {STUDY_LABELS.get(row['measure'], row['measure'])} | "
                     f"{row['seed']} | {row['git_commit'][:7]} | {row['iteration'] or '–'} | "
                     f"{row['error'].replace('|', '/')} | "
                     f"{'finished' if rerun.exists() else 'not yet'} |")
    return "\n".join(lines) + "\n"


#: a final log-std above this (a std of e² ≈ 7.4 half-ranges of the actions) sends nine in ten
#: of that dimension's actions to a bound, at random
RUNAWAY_LOG_STD = 2.0


def policy_spread(study: Path) -> str:
    """The cells whose runs' policies ended with a runaway log-std (``policy_log_std`` in
    ``runs.csv`` and ``failures.csv``; the largest over action dimensions), each with the
    last-10-iteration returns of its finished runs that ran away and of the others; and the
    largest log-std of every other run recorded."""
    largest: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for path in sorted([*study.glob("*/*/runs.csv"), *study.glob("*/*/failures.csv")]):
        how = "failed" if path.name == "failures.csv" else "finished"
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                if row.get("policy_log_std"):
                    cell = largest.setdefault((path.parent.parent.name, path.parent.name),
                                              {"finished": {}, "failed": {}})
                    cell[how][row["seed"]] = max(map(float, row["policy_log_std"].split()))
    if not largest:
        return ""
    recorded = sum(len(runs) for cell in largest.values() for runs in cell.values())
    lines = [f"The policies' final log-std (`policy_log_std` in `runs.csv` and `failures.csv`, "
             f"{recorded} runs recorded; the largest over action dimensions, in [−1, 1] action "
             f"units; above {RUNAWAY_LOG_STD:g}, nine in ten of a dimension's actions are clipped "
             "to a bound at random):\n"]
    calm = []
    for (task, measure), cell in sorted(largest.items()):
        away = {seed: v for seed, v in cell["finished"].items() if v > RUNAWAY_LOG_STD}
        failed = {seed: v for seed, v in cell["failed"].items() if v > RUNAWAY_LOG_STD}
        calm += [v for seed, v in cell["finished"].items() if seed not in away]
        if not away and not failed:
            continue
        line = (f"- {TITLES.get(task, task)} {STUDY_LABELS.get(measure, measure)}: above "
                f"{RUNAWAY_LOG_STD:g} in {len(away)} of {len(cell['finished'])} finished runs ("
                + ", ".join(f"seed {seed}: {v:.1f}" for seed, v in _by_seed(away)) + ")")
        if failed:
            line += ("; before failing, in " + ", ".join(f"seed {seed}: {v:.1f}"
                                                          for seed, v in _by_seed(failed)))
        returns = {seed.seed: seed.final for seed in load_cell(study, task, measure)}
        for name, seeds in (("those finished runs", away),
                            ("the others", set(cell["finished"]) - set(away))):
            finals = [returns[int(seed)] for seed in seeds if int(seed) in returns]
            if finals:
                line += (f"; last-10-iteration return of {name} "
                         f"{min(finals):.1f} to {max(finals):.1f}")
        lines.append(line)
    runaway = len(lines) > 1
    if calm:
        lines.append(f"- every other finished run recorded: at most {max(calm):.1f}")
    if runaway:
        lines.append("- why a bonus pays for it, measured on the HalfCheetah VIME runs with "
                     "`recipes/study/bonus_vs_action_noise.py`, and what the model fed the "
                     "applied (clipped) action does instead (`surprise.model_action=applied`, "
                     "not the authors' code): [the transforms guide]"
                     "(guides/transforms.md#watch-the-policys-std-under-vime)")
    return "\n".join(lines) + "\n"


def _by_seed(values: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(values.items(), key=lambda item: int(item[0]))


def study_status(data: dict, robot: dict[str, list[Seed]]) -> str:
    measures = tuple(STUDY_BAR)
    lines = ["| task | iterations | " + " | ".join(STUDY_LABELS[m] for m in measures) + " |",
             "|---|---:|" + "---:|" * len(measures)]
    for task in TASKS:
        iterations = OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml").iterations
        cells = []
        for measure in measures:
            bar = STUDY_BAR[measure]
            if measure == "vase_paper" and task not in ("cartpole_swingup", "half_cheetah", "ant"):
                cells.append("")
                continue
            cells.append(f"{len(data.get(task, {}).get(measure, []))} / {bar}")
        lines.append(f"| {TITLES[task]} | {iterations} | " + " | ".join(cells) + " |")
    lines.append("| point robot | until the first reward, ≤ 500 | – | – | – | – | "
                 f"{len(robot.get('none', []))} / 20 | – |")
    robot_vase = len(robot.get("vase", []))
    return ("\n".join(lines) + f"\n\nThe point robot's VASE: {robot_vase} / 20 runs.\n")


def figure(link: str, name: str, alt: str) -> str:
    """A figure that opens at its full size when clicked."""
    return f"[![{alt}]({link}/{name})]({link}/{name})\n"


def study_section(study: Path, figures: Path, link: str) -> tuple[str, dict[str, Path]]:
    """The page's first part, and the figures it wrote (into ``figures``)."""
    data = load(study) if study.is_dir() else {}
    robot = load_point_robot(study) if study.is_dir() else {}
    commits, machines = provenance(study) if study.is_dir() else ([], [])
    caption = (f"seeds 0–19 as they finish, commit {', '.join(commits)}" if commits
               else "no run finished yet")
    written: dict[str, Path] = {}
    sections = [STUDY_INTRO, "### The claims\n", study_claims_table(data)]
    measured, result, seeds = point_robot_row(robot)
    sections += ["\nThe exploration experiment (2D point robot; each run stops at its first "
                 f"extrinsic reward, within {POINT_ROBOT_BUDGET:,} steps):\n",
                 "| the paper says | we measured | verdict | runs |", "|---|---|---|---|",
                 f"| “{QUOTES['point_robot']}” | {measured} | **{result}** | {seeds} |\n"]
    if data:
        figures.mkdir(parents=True, exist_ok=True)
        written["curves"] = figures / "figure3_curves.png"
        plot_curves(data, PAPER_CURVES, written["curves"],
                    "Figure 3 at the authors' configuration: median extrinsic return over seeds "
                    "(each smoothed over 5 % of its run), interquartile range shaded; "
                    f"the number of seeds in the status table ({caption})")
        written["extras"] = figures / "figure3_extras.png"
        plot_curves(data, ("none", "vase_paper", "rnd"), written["extras"],
                    "Beside Figure 3: the control (the bonuses' own TRPO without a bonus), VASE at "
                    f"the paper's text settings, RND; VASE dashed ({caption})", reference="vase")
        sections += ["### Figure 3\n", "(Click a figure for its full size.)\n",
                     figure(link, "figure3_curves.png", "The paper's four curves per task"),
                     figure(link, "figure3_extras.png", "The control and VASE's variants")]
        summary = aggregate(data, ("vase", "nll", "vime", "trpo_authors", "none"))
        if summary["tasks"]:
            written["aggregate"] = figures / "figure3_aggregate.png"
            tasks = ", ".join(TITLES[t] for t in summary["tasks"])
            plot_aggregate(summary, written["aggregate"],
                           f"Across tasks ({tasks}): last-10-iteration returns min–max normalised "
                           f"per task over every run of these measures ({caption})")
            sections += ["### Across tasks\n",
                         f"Scores normalised per task to [0, 1] by the lowest and highest "
                         f"last-10-iteration return of any run of the five measures there; tasks "
                         f"with ≥ {MIN_SEEDS} seeds of each: {tasks}.\n",
                         figure(link, "figure3_aggregate.png",
                                "IQM, performance profiles, probability of improvement")]
    if robot:
        figures.mkdir(parents=True, exist_ok=True)
        written["point_robot"] = figures / "point_robot_first_reward.png"
        plot_point_robot(robot, written["point_robot"],
                         f"2D point robot: runs still searching for the reward ({caption})")
        sections.append(figure(link, "point_robot_first_reward.png", "Steps to the first reward"))
    sections += ["### How far the study has come\n",
                 "Finished seeds per task and measure, against the bar:\n",
                 study_status(data, robot),
                 failures_table(load_failures(study) if study.is_dir() else [], study),
                 policy_spread(study) if study.is_dir() else "",
                 f"\nCommits: {', '.join(commits) or '–'}; machines: "
                 f"{', '.join(machines) or '–'}.\n",
                 "Beside this study, the bonuses under an off-policy learner (SAC, not in the "
                 "paper): [SAC with and without a bonus](results/sac.md).\n"]
    return "\n".join(sections), written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=ROOT / "docs" / "results" / "paper_grid")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "results.md",
                        help="the results page to write")
    parser.add_argument("--figures", type=Path, default=None, help="default: --grid")
    parser.add_argument("--study", type=Path, default=ROOT / "docs" / "results" / "figure3",
                        help="the study at the authors' configuration (the page's first part)")
    args = parser.parse_args()
    written = report(args.grid, args.page, args.figures, args.study)
    for name, path in written.items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
