"""Figure 3 as its authors ran it (issue 38): the claims in three windows, the point robot's
first reward, the figures and how far the study has come.

Reads ``docs/results/figure3/<task>/<measure>/seed<k>.csv`` (``recipes/study/paper_grid.py``
writes them; ``runs.csv`` says where and at which commit each ran, ``failures.csv`` which runs
failed) and writes the results page's first part and its figures beside the CSVs:
``figure3_curves.png`` (the paper's four curves per task), ``figure3_extras.png`` (the control,
VASE at the text settings, RND), ``figure3_aggregate.png`` (rliable's views across tasks) and
``point_robot_first_reward.png`` (runs still searching for the reward).

The claims are judged in ``figure3_claims.py``; how far the study has come and what to know
about its runs is ``figure3_status.py``'s; this module draws the figures and puts the page
together.

    >>> smoothed(np.arange(40.0))[:3]  # a trailing mean over 5 % of the run: 2 iterations
    array([0. , 0.5, 1.5])
"""

from __future__ import annotations

import math
import textwrap
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from ant_scale import FOLLOW_UP, VARIANTS, cell_eta, scale_section, scale_summary
from bonus_constant import cell_rows  # beside this script, as are the others
from bonus_constant import markdown as constant_table
from figure3_claims import (  # the claims' judgement (beside this script)
    AGGREGATE_LABELS,
    EXTRAS,
    MIN_SEEDS,
    PAPER_CURVES,
    POINT_ROBOT_BUDGET,
    STUDY_LABELS,
    STUDY_MEASURES,
    claims_summary,
    first_reward_steps,
    load_point_robot,
    seed_windows,
    study_claims,
    study_claims_table,
)
from figure3_status import (  # how far the study has come (beside this script)
    cell_processors,
    failures_table,
    load_failures,
    policy_spread,
    rechecks,
    study_status,
)
from omegaconf import OmegaConf
from robot_placebo import SHUFFLED, placebo_answer, placebo_section
from study_figures import DPI, figure, legible, running_mean
from study_runs import OBSERVATION_DIMS, ROOT, TASKS, TITLES, Seed, load, provenance
from study_statistics import (  # the statistics of issue 38 (beside this script)
    PRIMARY_WINDOW,
    aggregate_improvement,
    aggregate_iqm,
    normalise,
    performance_profile,
)

#: Okabe & Ito's colour-blind-safe palette
SAFE = {"vase": "#D55E00", "nll": "#009E73", "vime": "#0072B2", "trpo_authors": "#000000",
        "none": "#999999", "vase_paper": "#E69F00", "rnd": "#CC79A7",
        "vase_linear_init": "#56B4E9", "vase_eta_tenth": "#F0E442",
        "vase_linear_eta_tenth": "#882255"}  # Tol's wine: Okabe & Ito's eight are taken


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------
def smoothed(returns: np.ndarray) -> np.ndarray:
    """A trailing mean over 5 % of the run (at least one iteration)."""
    return running_mean(returns, window=max(1, int(0.05 * returns.size)))


#: where the envs guide says how the Ant's two rewards differ
ANT_ENV_DOCS = "guides/envs.md#ant-v-envsant_env_xpy-r-vendormujoco_modelsantxml"


def text_reward(task: str) -> str:
    """The env arguments by which the paper's text settings (``preset=paper``) change ``task``'s
    reward, as ``"goal=position"`` ("" where they keep the authors' reward: every task but
    Ant). Their runs' returns are then on another reward than the other measures'."""
    paper = OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml").get("paper") or {}
    return ", ".join(f"{k}={v}" for k, v in (paper.get("make_kwargs") or {}).items())


@legible
def plot_curves(data: dict, measures: tuple[str, ...], path: Path, title: str,
                reference: str | None = None) -> None:
    """Per task, each measure's median over seeds (each seed smoothed over 5 % of its run) with
    the interquartile range shaded; ``reference`` dashed, unshaded. VASE at the text settings
    where they change the task's reward (``text_reward``) on an axis of its own, right."""
    # constrained layout: it makes room for a twin axis, which tight_layout did not (the right
    # column's labels ran past the edge)
    figure, axes = plt.subplots(2, 3, figsize=(11, 8.6), layout="constrained")
    figure.suptitle(textwrap.fill(title, 110))
    handles = {}
    for task, panel in zip(TASKS, axes.ravel(), strict=True):
        panel.set_title(TITLES[task])
        for measure in (*measures, *([reference] if reference else [])):
            seeds = data.get(task, {}).get(measure, [])
            if not seeds:
                continue
            ax = panel
            if measure == "vase_paper" and text_reward(task):
                ax = panel.twinx()
                ax.set_ylabel(f"{AGGREGATE_LABELS[measure]}, {text_reward(task)}",
                              color=SAFE[measure])
                ax.tick_params(axis="y", colors=SAFE[measure])
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
        panel.set_xlabel("steps (millions; 5,000 an iteration)")
        panel.set_ylabel("extrinsic return")
        if not data.get(task):
            panel.text(0.5, 0.5, "not run yet", ha="center", transform=panel.transAxes)
    order = [m for m in (*measures, reference) if m in handles]
    figure.legend([handles[m][0] for m in order],
                  [STUDY_LABELS[m] + (" (dashed, for reference)" if m == reference and
                                      m not in measures else "") for m in order],
                  # five long labels in one row ran past the figure's edges
                  loc="outside lower center", ncol=len(order) if len(order) <= 4 else 3,
                  frameon=False)
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


def aggregate_table(result: dict) -> str:
    """The aggregate figure's intervals as numbers: each measure's IQM and VASE's probability
    of improving on it, with their 95 % stratified-bootstrap intervals."""
    lines = ["The figure's intervals (95 %, stratified bootstrap):\n",
             "| measure | IQM of normalised score | P(VASE > it), averaged over tasks |",
             "|---|---:|---:|"]
    for measure, (point, low, high) in result["iqm"].items():
        improvement = result["improvement"].get(measure)
        poi = ("–" if improvement is None else
               "{:.2f} [{:.2f}, {:.2f}]".format(*improvement))
        lines.append(f"| {AGGREGATE_LABELS[measure]} | {point:.2f} [{low:.2f}, {high:.2f}] "
                     f"| {poi} |")
    return "\n".join(lines) + "\n"


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
    for measure in ("none", "vase", "nll", "vime", SHUFFLED):
        seeds = runs.get(measure, [])
        if not seeds:
            continue
        steps = np.sort(first_reward_steps(seeds))
        found = steps[np.isfinite(steps)]
        x = np.concatenate([[1000], found, [POINT_ROBOT_BUDGET]])
        y = 1 - np.concatenate([[0], np.arange(1, found.size + 1), [found.size]]) / len(seeds)
        # the placebo in VASE's colour, dashed
        ax.step(x, y, where="post", color=SAFE["vase" if measure == SHUFFLED else measure],
                ls="--" if measure == SHUFFLED else "-",
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



# ------------------------------------------------------------------------------------------------
# The page's first part
# ------------------------------------------------------------------------------------------------
STUDY_INTRO = """# Results: the paper's Figure 3

## As its authors ran it

The paper's claims judged on runs at the authors' configuration (the recipe's defaults: the
authors' code wherever it and the paper's text differ,
[the list](concepts.md#where-the-authors-code-differs-from-the-paper)), fixed before the first run
and not tuned towards the paper; seeds 0–19, each run to the task's full iteration count. Which
measures, settings and commits, and how far the study has come:
[how the study was run](#how-the-study-was-run).

**The bonus, rerun (from 2026-12-04).** Until then VASE's and NLL's bonus carried the Gaussian's
normaliser `D·log(√(2π)σ_c)`, a constant the authors' code removes; uncentred, it paid every
step a reward, 5–40 % of the bonus at the authors' σ_c and nearly all of it at the text's
([which cells it touched](#the-constant-in-the-bonus)). Every VASE and NLL cell runs again at a
commit that differs from the study's in the bonus alone: at the authors' configuration all of
them have their 20 seeds, the paper's text settings and Ant's three variants of scale their 10
(every cell since 2026-12-07; [how far the study has come](#how-far-the-study-has-come)). A
claim reads a cell once it has 5 seeds. The verdicts at the former bonus, by the rule of their
day, are in the [earlier results](results_history.md#figure-3-with-the-normaliser-in-the-bonus).

**How a claim is judged** (written on 2026-12-04, before any rerun cell reached 5 seeds; the
same for every claim):

- Each seed's curve gives one number a window: its mean extrinsic return over the window. The
  **primary window is the whole run** (the area under the curve: the paper's claims are about
  its curves); the **last 10 %** of the run is the sensitivity check, and a claim whose verdict
  differs there is flagged ⚑.
- The statistic is the paper's: the **median over seeds** (Figure 3 shows medians with
  interquartile bands). A − B is the difference of the two measures' medians, every seed
  counting (unpaired), with a percentile bootstrap (10,000 resamples of each measure's seeds);
  the mean difference and the probability of improvement P(A > B) stand beside it, unjudged.
- Each task has a **smallest effect of interest**, the margin m: 10 % of its return range (the
  span from the 5th to the 95th percentile of every iteration's return of the paper's four
  curves and the control there).
- "A better than B" is **reproduced** when A − B > 0 with 95 % confidence (a one-sided
  bootstrap test); **not reproduced** when A − B < m with 95 % confidence (no useful
  advantage, or worse; this takes precedence, so an advantage shown but smaller than m is not
  reproduced); **inconclusive** otherwise. A
  claim with several comparisons ("VASE above each of the others") is reproduced when every
  one is, not reproduced when one is, Holm-corrected within the claim (each direction).
- "Almost the same" (LunarLander) is an equivalence claim: **reproduced** when each pair's
  difference lies inside ±m by two one-sided tests, **not reproduced** when one lies outside
  ±m with 95 % confidence, otherwise inconclusive (Holm within the claim).
- DoublePendulum's "performs well initially, but is later surpassed" reads the first quarter
  of the run for "initially" and the last quarter for "later" (its last 10 % the sensitivity
  check).
- "No surprise" has two curves, and a claim about it is judged against both: the authors' TRPO
  and the control. A measure with fewer than 5 finished seeds is *not measured yet*.
- The point robot's claim reads each run's steps to its first reward, a run that never found it
  censored at the budget: *reproduced* when the probability that a VASE run finds it sooner than
  a `none` run has its 95 % interval above 0.5 and a one-sided log-rank test agrees at 5 %, *not
  reproduced* when both say the opposite, otherwise *inconclusive*.
- The earlier rule's verdict stands beside each (means, three windows that had to agree, "not
  reproduced" only on a reversal), so that the change of rule shows.
"""

#: how the study was run: its measures, settings, files and commits
STUDY_RUNS = """\
- **Configuration**: the recipe's defaults, which are the authors' code wherever it and the
  paper's text differ: σ_c = 0.5, no confidence term δ, BNN means from N(0, 1), the bonus added
  uncentred, rllab's TRPO with Glorot initialisation, CG damping 1e-5 and 15 backtracks, its
  Monte-Carlo extrinsic baseline, and rllab's batches of whole paths
  ([the list](concepts.md#where-the-authors-code-differs-from-the-paper)); fixed before the first
  run and not tuned towards the paper.
- **Measures**: VASE, NLL and VIME (the same model and settings, only the measure differs); the
  paper's TRPO curve as the authors' script ran it (`preset=authors_trpo`: γ = 0.99, λ = 1); the
  control `none` (the bonuses' own TRPO, γ = 0.995, λ = 0.95, without a bonus); VASE at the
  paper's text settings (`preset=paper`: σ_c = 5, δ = 1e-3, observations normalised, tanh models
  on HalfCheetah and Ant, and on Ant the text's reward, for its position, not the authors' for
  its speed) on three tasks.
- **Seeds**: 0–19 (the paper: "over 20 runs with a fixed set of seeds"), each run to the task's
  full iteration count, exported to `docs/results/figure3/<task>/<measure>/seed<k>.csv` with its
  `runs.csv` row (commit, machine, load, the run's name and config identity).
- **Code**: VASE's and NLL's cells (all of them rerun since 2026-12-04) and Ant's three scale
  checks at 01cdad2, which is 82a8bde with one change: the bonus without the Gaussian's
  normaliser, as the authors compute it ([the constant in the bonus](#the-constant-in-the-bonus);
  their plain-TRPO and VIME code is 82a8bde's, line for line). The other cells at commit b2b53df
  until 2026-11-29 05:45 UTC, then 82a8bde, which is b2b53df with one change: the policy's
  log-density taken in rllab's standardised form where torch's leaves float32
  (`FiniteLogProbNormal`: four HalfCheetah VIME runs failed at b2b53df once a learned
  log-std passed 43, listed below). A run that never reaches such a std logs the same numbers at
  both, bit for bit (checked on 20 iterations of HalfCheetah VIME seed 1). Whole runs drawn at
  random were rerun at 82a8bde ("Rechecked" below), and a rerun that parts from the study's run
  at b2b53df on the same machine too, which tells the commit from the machine the study's run
  first ran on. The one run-to-run difference found on one machine is in VIME's logged KL terms,
  between a process that compiled the ELBO kernel and one that loaded it from numba's cache
  (fixed in the library since, not in the study's commit:
  [benchmarks](benchmarks.md#the-elbos-steps-in-one-compiled-call)).
- **How it runs**: over several sessions, each resuming where the last stopped
  (`python recipes/study/paper_grid.py`, [the guide](guides/paper_grid.md)); this part of the
  page is written by `python recipes/study/paper_grid_report.py` from those files.
"""


#: the iterations at a run's end that ``bonus_reach`` reads
LATE = 50
#: the bonuses' weight η at the authors' configuration, every task
ETA = 1e-4


def _late(seed: Seed, metric: str, how) -> float:
    """``how`` (``np.mean``, ``np.median``) of ``metric`` over the seed's last ``LATE``
    iterations that logged it; NaN if none did."""
    late = getattr(seed, metric)[-LATE:]
    late = late[np.isfinite(late)]
    return float(how(late)) if late.size else math.nan


def _median_of(values: np.ndarray, mask: np.ndarray) -> str:
    """``"4.2 (3)"``: the median of ``values[mask]`` and how many; ``"–"`` for none."""
    return f"{np.median(values[mask]):.3g} ({mask.sum()})" if mask.any() else "–"


def bonus_reach(data: dict) -> str:
    """Per task, for VASE, NLL and VIME: how much of the advantage TRPO used was the bonus's at
    the end of training (``bonus/advantage_share``, the ratio of the variances), the final
    returns of the runs it drove and of the others, and the bonus's size per step (η ×
    ``bonus/mean``)."""
    rows = []
    for task in TASKS:
        for measure in ("vase", "nll", "vime"):
            seeds = [s for s in data.get(task, {}).get(measure, [])
                     if np.isfinite(_late(s, "advantage_share", np.mean))]
            if not seeds:
                continue
            shares = np.array([_late(s, "advantage_share", np.mean) for s in seeds])
            driven = shares >= 0.5
            finals = np.array([s.final for s in seeds])
            size = np.median([_late(s, "bonus_mean", np.median) for s in seeds])
            rows.append(f"| {TITLES[task]} ({OBSERVATION_DIMS[task]}) | {STUDY_LABELS[measure]} "
                        f"| {len(seeds)} | {np.median(shares):.2f} [{shares.min():.2f}, "
                        f"{shares.max():.2f}] | {_median_of(finals, driven)} | "
                        f"{_median_of(finals, ~driven)} | {ETA * size:.2g} |")
    if not rows:
        return ""
    return (f"Over each run's last {LATE} iterations: the bonus's share of the variance of the "
            "advantage TRPO used (`bonus/advantage_share`: the variance of the bonus's own "
            "advantage over that of the advantage used), its mean over those iterations. It is "
            "1 in an iteration whose batch met no extrinsic reward (the bonus is then all the "
            "update sees) and smaller in one that met it, near 0 where the extrinsic returns "
            "vary far more than the bonus's. Beside it, the last-10-iteration "
            "return of the runs the bonus still drove (share ≥ 0.5) and of the others, and the "
            f"bonus a step, η = {ETA:g} times its median `bonus/mean` (VIME's an information "
            "gain, on another scale). VASE's and NLL's surprise sums a squared error over the "
            "observation's dimensions (their number beside the task; [how a run's splits over "
            "them](guides/diagnostics.md#2c-where-a-bonus-comes-from)).\n\n"
            "| task (observation dimensions) | measure | seeds | bonus's share: median over "
            "seeds [range] | return of the runs it drove (runs) | return of the others (runs) "
            "| η·U a step |\n|---|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n")


#: the runs with the normaliser in the bonus, and the table of its share (bonus_constant.py)
FORMER_BONUS = ROOT / "docs" / "results" / "figure3_normaliser"


def constant_section(former: Path = FORMER_BONUS) -> str:
    """What the normaliser was in the former runs' bonus, cell by cell, and why they rerun."""
    rows = cell_rows(former) if former.is_dir() else []
    if not rows:
        return ""
    return ("Up to the study's commit 82a8bde, VASE's U was `mean_n −log N(s'; f_n, σ_c² I)`, "
            "the Gaussian's normaliser `c = D·log(√(2π)σ_c)` included (D the observation's "
            "dimensions), and NLL's the same family; the authors' `surprise()` adds the "
            "normaliser back, so their U is `mean_n ‖s' − f_n‖² / (2σ_c²)` and holds no "
            "constant. Added uncentred (`r = r_e + η·U`), a constant is a reward of `η·c` a "
            "step: a payment for staying alive that reaches the policy where a path can end "
            "early (MountainCar's goal, Ant's fall, LunarLander's landing) and through the "
            "advantage's standardisation. From each former run's logged `bonus/mean`, the "
            "constant's share `c / U` of its bonus (issue 77's rule, fixed before the table: a "
            "cell is rerun when c ≥ 1 % of the mean bonus in ≥ 10 % of a run's iterations; "
            "`python recipes/study/bonus_constant.py`); where the text's confidence term δ·H(q) "
            "is on, its share of the surprise beside it (it, too, is the same for every "
            "transition of a batch).\n\n" + constant_table(rows)
            + "\nEvery VASE and NLL cell crossed the bar, so all rerun; VIME's bonus (a KL) "
            "holds no normaliser, and plain TRPO none: their cells stay. The former runs are "
            "kept under `docs/results/figure3_normaliser/`.\n")


def study_section(study: Path, figures: Path, link: str) -> tuple[str, dict[str, Path]]:
    """The page's first part, and the figures it wrote (into ``figures``)."""
    data = load(study, STUDY_MEASURES) if study.is_dir() else {}
    robot = load_point_robot(study) if study.is_dir() else {}
    # the figures' captions name the curves' commits (the placebo is not among the curves)
    commits, _ = provenance(study, skip=(SHUFFLED,)) if study.is_dir() else ([], [])
    every_commit, machines = provenance(study) if study.is_dir() else ([], [])
    caption = (f"seeds 0–19 as they finish, commit {', '.join(commits)}" if commits
               else "no run finished yet")
    written: dict[str, Path] = {}
    claims = study_claims(data)
    summary = claims_summary(claims, robot)
    if (placebo := placebo_answer(robot)) != "not measured yet":
        summary = (summary.rstrip("\n") + " The point robot's, VASE's one reproduced effect of "
                   "its own, has a placebo (VASE's bonus shuffled across each iteration's "
                   "transitions): does the bonus's content or its size and spread find the "
                   f"reward sooner? Its rule answers **{placebo}** "
                   "([the placebo](#point-robot-placebo)).\n")
    ant_etas = {m: cell_eta(study, "ant", m) for m in ("vase", *VARIANTS, FOLLOW_UP)}
    if (ant := data.get("ant")) and (scale := scale_summary(ant, ant_etas)):
        summary = summary.rstrip("\n") + f" {scale}\n"
    sections = [STUDY_INTRO, summary, "### The claims\n",
                study_claims_table(data, robot, claims)]
    if data:
        figures.mkdir(parents=True, exist_ok=True)
        written["curves"] = figures / "figure3_curves.png"
        plot_curves(data, PAPER_CURVES, written["curves"],
                    "Figure 3 at the authors' configuration: median extrinsic return over seeds "
                    "(each smoothed over 5 % of its run), interquartile range shaded; "
                    f"the number of seeds in the status table ({caption})")
        written["extras"] = figures / "figure3_extras.png"
        plot_curves(data, EXTRAS, written["extras"],
                    "Beside Figure 3: the control (the bonuses' own TRPO without a bonus), VASE at "
                    "the paper's text settings (on Ant on the text's reward, right axis), RND; "
                    f"VASE dashed ({caption})", reference="vase")
        sections += ["### Figure 3\n", "(Click a figure for its full size.)\n",
                     figure(link, "figure3_curves.png", "The paper's four curves per task"),
                     figure(link, "figure3_extras.png", "The control and VASE's variants")]
        if text_reward("ant") and data.get("ant", {}).get("vase_paper"):
            sections.append(
                f"On Ant the paper's text settings also change the reward (`{text_reward('ant')}`"
                ": 1 a step while the torso's x exceeds 3 m, where the authors' code rewards an "
                f"x-velocity above 3 m/s; [the envs]({ANT_ENV_DOCS})), so the text settings' "
                "curve there has an axis of its own, right: its returns are not comparable with "
                "the other curves'.\n")
        if ant:
            sections += ["### Ant: the method or its first scale? {: #ant-scale }\n",
                         scale_section(ant, ant_etas),
                         "Processors (each cell's runs, by where they started): "
                         + cell_processors(study, "ant", ("none", "vase", *VARIANTS, FOLLOW_UP))
                         + ". A processor rounds a run differently from its first iteration on, "
                         "as another seed would ([which kernels](benchmarks.md#which-kernel-"
                         "choices-change-a-runs-bits-recipesbenchmarkskernel_roundingpy)): the "
                         "follow-up's first η·U is a tenth of the Linear init's seed by seed "
                         "only where the two ran on one processor.\n"]
        summary = aggregate(data, ("vase", "nll", "vime", "trpo_authors", "none"),
                            window=PRIMARY_WINDOW)
        if summary["tasks"]:
            written["aggregate"] = figures / "figure3_aggregate.png"
            tasks = ", ".join(TITLES[t] for t in summary["tasks"])
            plot_aggregate(summary, written["aggregate"],
                           f"Across tasks ({tasks}): whole-run mean returns min–max normalised "
                           f"per task over every run of these measures ({caption})")
            sections += ["### Across tasks\n",
                         f"Scores (each run's mean return over the whole run) normalised per "
                         f"task to [0, 1] by the lowest and highest of any run of the five "
                         f"measures there; tasks "
                         f"with ≥ {MIN_SEEDS} seeds of each: {tasks}. Each task weighs alike in "
                         f"every view: in the IQM a run weighs 1 / its task's runs, as in "
                         f"rliable's runs × tasks matrix, which holds as many runs a task.\n",
                         figure(link, "figure3_aggregate.png",
                                "IQM, performance profiles, probability of improvement"),
                         aggregate_table(summary)]
    if robot:
        figures.mkdir(parents=True, exist_ok=True)
        written["point_robot"] = figures / "point_robot_first_reward.png"
        plot_point_robot(robot, written["point_robot"],
                         "2D point robot: runs still searching for the reward (seeds 0–19 as "
                         f"they finish, commit {', '.join(every_commit)})")
        sections.append(figure(link, "point_robot_first_reward.png", "Steps to the first reward"))
        sections += ["### The point robot: does the bonus's content matter? "
                     "{: #point-robot-placebo }\n", placebo_section(robot),
                     "Processors: the placebo's runs ran on an AMD EPYC, VASE's 20 on an "
                     "Intel Xeon, none's seeds 10–19 on an AMD EPYC and 0–9 on a machine whose "
                     "processor was not recorded. A processor rounds a run differently from its "
                     "first iteration on, as another seed would ([which kernels]"
                     "(benchmarks.md#which-kernel-choices-change-a-runs-bits-recipesbenchmarks"
                     "kernel_roundingpy)); the placebo's commit trains as "
                     "the rerun's where the switch is off, bit for bit on one machine "
                     "(`recheck_01cdad2_placebo_pin.csv`, below).\n"]
    if reach := bonus_reach(data):
        sections += ["### What the policy update sees of the bonus\n", reach]
    if constant := constant_section():
        sections += ["### The constant in the bonus\n", constant]
    sections += ["### How the study was run\n", STUDY_RUNS,
                 "### How far the study has come\n",
                 "Finished seeds per task and measure, against the bar:\n",
                 study_status(data, robot),
                 failures_table(load_failures(study) if study.is_dir() else [], study),
                 policy_spread(study) if study.is_dir() else "",
                 f"\nCommits: {', '.join(every_commit) or '–'}; machines: "
                 f"{', '.join(machines) or '–'}.\n",
                 rechecks(study) if study.is_dir() else "",
                 "Beside this study, the bonuses under an off-policy learner (SAC, not in the "
                 "paper): [SAC with and without a bonus](results/sac.md).\n"]
    return "\n".join(sections), written

