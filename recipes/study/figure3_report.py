"""Figure 3 as its authors ran it (issue 38): the claims in three windows, the point robot's
first reward, the figures and how far the study has come.

Reads ``docs/results/figure3/<task>/<measure>/seed<k>.csv`` (``recipes/study/paper_grid.py``
writes them; ``runs.csv`` says where and at which commit each ran, ``failures.csv`` which runs
failed) and writes the results page's first part and its figures beside the CSVs:
``figure3_curves.png`` (the paper's four curves per task), ``figure3_extras.png`` (the control,
VASE at the text settings, RND), ``figure3_aggregate.png`` (rliable's views across tasks) and
``point_robot_first_reward.png`` (runs still searching for the reward).

The statistics are ``study_statistics.py``'s: measures compared unpaired, every seed counting,
in three windows (the last 10 iterations, the last 10 %, the whole run); a claim is reproduced or
not only when all three agree (the page's "How a claim is judged" says it in full).

    >>> import numpy as np
    >>> kaplan_meier_median(np.array([30_000.0, 50_000.0, np.inf]))  # one run never found it
    50000.0
"""

from __future__ import annotations

import csv
import math
import textwrap
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import scipy.stats
from omegaconf import OmegaConf
from study_figures import DPI, figure, legible, running_mean
from study_runs import ROOT, TASKS, TITLES, Seed, load, load_cell, provenance
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

#: iterations between the evaluations of the deterministic policy (the recipe's ``eval.every``)
EVAL_EVERY = OmegaConf.load(ROOT / "conf" / "trpo_vase.yaml").eval.every
#: recheck.py's result for a rerun equal but for an evaluation one of the two runs made alone
EQUAL_WHERE_BOTH_LOGGED = "equal where both logged"
#: the paper's four curves (its "TRPO" is the authors' plain-TRPO script) and the extras
PAPER_CURVES = ("vase", "nll", "vime", "trpo_authors")
EXTRAS = ("none", "vase_paper", "rnd")
#: every measure the study runs
STUDY_MEASURES = (*PAPER_CURVES, *EXTRAS)
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


#: a comparison's row of the claims' numbers: ("A − B", its figure)
Figure = tuple[str, str]


def judge_window(runs: dict[str, list[Seed]], above: list[tuple[str, str]], window: str,
                 **kwargs) -> tuple[str, list[Figure]]:
    """One window of a claim "a above b" for each pair (Holm-corrected together); its verdict
    and each comparison's figure."""
    if any(len(runs.get(m, [])) < MIN_SEEDS for pair in above for m in pair):
        return "not measured yet", []
    a_sets = [seed_windows(runs[a], window) for a, _ in above]
    b_sets = [seed_windows(runs[b], window) for _, b in above]
    signs = holm_signs(a_sets, b_sets, **kwargs)
    figures = [(f"{AGGREGATE_LABELS[a]} − {AGGREGATE_LABELS[b]}",
                _figure(compare(x, y, **kwargs)))
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
                       **kwargs) -> tuple[str, list[Figure]]:
    """One window of "each pair alike": two one-sided tests against ±``return_margin``."""
    if any(len(runs.get(m, [])) < MIN_SEEDS for pair in pairs for m in pair):
        return "not measured yet", []
    measures = tuple(dict.fromkeys(m for pair in pairs for m in pair))
    margin = return_margin(runs, measures)
    a_sets = [seed_windows(runs[a], window) for a, _ in pairs]
    b_sets = [seed_windows(runs[b], window) for _, b in pairs]
    alike = [equivalent(x, y, margin, **kwargs) for x, y in zip(a_sets, b_sets, strict=True)]
    figures = [("equivalence margin", f"±{margin:.3g}")] + [
        (f"{AGGREGATE_LABELS[a]} − {AGGREGATE_LABELS[b]}", _figure(compare(x, y, **kwargs)))
        for (a, b), x, y in zip(pairs, a_sets, b_sets, strict=True)]
    if all(alike):
        return "reproduced", figures
    signs = holm_signs(a_sets, b_sets, **kwargs)
    return ("not reproduced" if any(signs) else "inconclusive"), figures


def study_claims(data: dict, **kwargs) -> list[tuple[str, str, dict[str, tuple[str, list[Figure]]],
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
        return result, [(f"first quarter: {label}", value) for label, value in early[1]] + late[1]

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


def _claim_anchor(quote: str, task: str) -> str:
    key = next(key for key, text in QUOTES.items() if text == quote)
    return f"claim-{key}-{task}".replace("_", "-")


def study_claims_table(data: dict, **kwargs) -> str:
    """The claims: a table of the verdicts, each with its three windows' verdicts and a link to
    its numbers; then, per claim, the numbers: each comparison (rows) in each window
    (columns), the window's verdict last."""
    claims = study_claims(data, **kwargs)
    short = {"last10": "last 10 iterations", "last10pct": "last 10 %", "whole": "whole run"}
    lines = ["| the paper says | task | verdict | the three windows ("
             + " · ".join(short.values()) + ") | seeds |", "|---|---|---|---|---|"]
    for quote, task, per_window, final, seeds in claims:
        results = [result for result, _ in per_window.values()]
        windows = "the same in all three" if len(set(results)) == 1 else " · ".join(results)
        link = ("–" if final == "not measured yet"
                else f"{windows} ([the numbers](#{_claim_anchor(quote, task)}))")
        lines.append(f"| “{quote}” | {TITLES[task]} | **{final}** | {link} | {seeds} |")
    details = ["\nEach claim's numbers: A − B is the difference of two measures' mean returns "
               "(each seed's mean over the window, averaged over the measure's seeds) [the "
               "wider of its 95 % percentile-bootstrap and Welch t-intervals]; a window's "
               "verdict Holm-corrects the claim's comparisons together.\n"]
    for quote, task, per_window, final, seeds in claims:
        if final == "not measured yet":
            continue
        rows = {label: {} for _, figures in per_window.values() for label, _ in figures}
        for window, (_, figures) in per_window.items():
            for label, value in figures:
                rows[label][window] = value
        details += [f"**{TITLES[task]}**, “{quote}” ({seeds}): **{final}**",
                    f"{{: #{_claim_anchor(quote, task)} }}\n",
                    "| A − B | " + " | ".join(WINDOWS.values()) + " |",
                    "|---|" + "---:|" * len(WINDOWS)]
        details += [f"| {label} | " + " | ".join(values.get(w, "–") for w in WINDOWS) + " |"
                    for label, values in rows.items()]
        details.append("| *the window's verdict* | "
                       + " | ".join(f"*{result}*" for result, _ in per_window.values()) + " |\n")
    return "\n".join(lines) + "\n" + "\n".join(details)


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
                  loc="outside lower center", ncol=len(order), frameon=False)
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
bonus); VASE at the paper's text settings (`preset=paper`: σ_c = 5, δ = 1e-3, observations
normalised, tanh models on HalfCheetah and Ant, and on Ant the text's reward, for its position,
not the authors' for its speed) on three tasks. Seeds 0–19 (the paper:
"over 20 runs with a fixed set of seeds"), each run to the task's full iteration count, exported
to `docs/results/figure3/<task>/<measure>/seed<k>.csv` with its `runs.csv` row (commit, machine,
load, the run's name and config identity), all at one code: commit b2b53df until 2026-11-29
05:45 UTC, then 82a8bde, which is b2b53df with one change, the policy's log-density taken in
rllab's standardised form where torch's leaves float32 (`FiniteLogProbNormal`: four HalfCheetah
VIME runs failed at b2b53df once a learned log-std passed 43, listed below); a run that never
reaches such a std logs the same numbers at both, bit for bit (checked on 20 iterations of
HalfCheetah VIME seed 1; for a random draw of whole runs, rerun at 82a8bde, see "Rechecked" below:
a rerun that parts from the study's run is rerun at b2b53df on the same machine too, which tells
the commit from the machine the study's run first ran on; the one run-to-run difference found on
one machine is in VIME's logged KL, by one float32 step, between a process that compiled the ELBO
kernel and one that loaded it from numba's cache, the training alike (fixed in the library
since, not in the study's commit:
[benchmarks](benchmarks.md#the-elbos-steps-in-one-compiled-call))). The study runs, and
resumes, over several sessions (`python recipes/study/paper_grid.py`,
[the guide](guides/paper_grid.md)); this part of the page
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


def _first_three(names: str) -> str:
    """``"a b c d"`` → ``"a, b, c and 1 more"``: a differing run's metrics, shortly."""
    names = names.split()
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def _parting(text: str) -> str:
    """``"iteration 3: a b c d"`` (recheck.py's ``first_difference``) → ``"from iteration 3 (a,
    b, c and 1 more)"``."""
    where, _, names = text.partition(": ")
    return f"from {where}" + (f" ({_first_three(names)})" if names else "")


def _differing_rerun(row: dict[str, str]) -> str:
    """A rerun that differs from the study's run: where they part and, where it was rerun at
    the earlier commit on this machine too, whether that one parts from the newer."""
    where = (_parting(row["first_difference"]) if row.get("first_difference")
             else _first_three(row["metrics_differing"]) or "config identity")
    text = (f"{TITLES.get(row['task'], row['task'])} "
            f"{STUDY_LABELS.get(row['measure'], row['measure'])} seed {row['seed']} ({where}")
    here = row.get("earlier_here", "")
    if here == "equal":
        text += (f"; {row['earlier_commit'][:7]} rerun here equals {row['commit']} here: not "
                 "the commit")
    elif here.startswith(EQUAL_WHERE_BOTH_LOGGED):
        text += (f"; {row['earlier_commit'][:7]} rerun here equals {row['commit']} here "
                 "wherever both evaluated, one of them evaluating off the schedule at "
                 f"{here.partition('(')[2].partition(':')[0]}: not the commit")
    elif here:
        parting = here.removeprefix("DIFFERENT from ").partition(":")[0]
        text += (f"; {row['earlier_commit'][:7]} rerun here differs from {row['commit']} here "
                 f"in {_first_three(row['earlier_here_differing'])}, from {parting}")
    return text + ")"


def rechecks(study: Path) -> str:
    """What ``recipes/study/recheck.py`` found (``recheck_<commit>.csv`` beside the cells): runs
    finished at an earlier commit of the study, drawn at random and rerun whole at the later
    one, each equal in every metric (clocks aside) and in its config identity, or not."""
    lines = []
    for path in sorted(study.glob("recheck_*.csv")):
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        if not rows:
            continue
        equal = [r for r in rows if r["result"] == "equal"]
        alike = [r for r in rows if r["result"] == EQUAL_WHERE_BOTH_LOGGED]
        differing = [r for r in rows if r["result"] == "DIFFERENT"]
        cells = len({(r["task"], r["measure"]) for r in rows})
        line = (f"Rechecked ({path.name}, `python recipes/study/recheck.py`): {len(rows)} runs "
                f"that finished at {rows[0]['earlier_commit'][:7]}, drawn at random from {cells} "
                f"cells, rerun whole at {', '.join(sorted({r['commit'] for r in rows}))}: "
                f"{len(equal)} equal to the study's in every metric (clocks aside) and in their "
                f"config identity")
        if alike:
            line += (f"; {len(alike)} equal in every value, the evaluation's wherever both runs "
                     "evaluated, one of the two evaluating off the schedule (" + "; ".join(
                         f"{TITLES.get(r['task'], r['task'])} "
                         f"{STUDY_LABELS.get(r['measure'], r['measure'])} seed {r['seed']}, "
                         f"{r['logged_by_one_run'].partition(':')[0]}" for r in alike) + ")")
        if differing:
            line += "; **different**: " + "; ".join(_differing_rerun(r) for r in differing)
        lines.append(line + ".")
    if lines:
        paused, runs = off_schedule_evaluations(study)
        lines.append(
            f"Up to 82a8bde, the study's commit, a run stopped by a signal evaluated its policy "
            f"at the stop (67d98e2 ended that): a run paused by `figure3.sh stop` carries one "
            f"evaluation off the {EVAL_EVERY}-iteration schedule, which a rerun that was not "
            f"paused there lacks. {paused} of the study's {runs} runs carry at least one; no "
            "figure or verdict on this page reads an evaluation's metric (`eval/*`).")
    return "\n".join(lines) + "\n" if lines else ""


def off_schedule_evaluations(study: Path) -> tuple[int, int]:
    """How many of the study's runs (``seed<k>.csv``) evaluated off the schedule (an
    ``eval/return`` at an iteration ``i`` with ``i + 1`` not a multiple of ``eval.every``,
    other than the run's last), and how many runs there are."""
    paused = runs = 0
    for path in sorted(study.glob("*/*/seed*.csv")):
        with path.open(newline="") as handle:
            evaluated = [row.get("eval/return", "") != "" for row in csv.DictReader(handle)]
        runs += 1
        paused += any(done and (i + 1) % EVAL_EVERY and i != len(evaluated) - 1
                      for i, done in enumerate(evaluated))
    return paused, runs


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
    # the point robot's bar: 20 seeds of VASE and none; NLL and VIME "if cheap" (no bar); the
    # authors' TRPO and the text settings are not run there
    robot_cells = {"vase": "{} / 20", "nll": "{}", "vime": "{}", "none": "{} / 20"}
    lines.append("| point robot | until the first reward, ≤ 500 | " + " | ".join(
        robot_cells[m].format(len(robot.get(m, []))) if m in robot_cells else "–"
        for m in measures) + " |")
    return "\n".join(lines) + "\n"


#: each task's observation size, the dimensions a surprise sums over (checked against the envs
#: by tests/test_paper_grid_report.py)
OBSERVATION_DIMS = {"mountain_car": 2, "cartpole_swingup": 4, "double_pendulum": 6,
                    "half_cheetah": 20, "ant": 125, "lunar_lander": 8}
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


def study_section(study: Path, figures: Path, link: str) -> tuple[str, dict[str, Path]]:
    """The page's first part, and the figures it wrote (into ``figures``)."""
    data = load(study, STUDY_MEASURES) if study.is_dir() else {}
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
    if reach := bonus_reach(data):
        sections += ["### What the policy update sees of the bonus\n", reach]
    sections += ["### How far the study has come\n",
                 "Finished seeds per task and measure, against the bar:\n",
                 study_status(data, robot),
                 failures_table(load_failures(study) if study.is_dir() else [], study),
                 policy_spread(study) if study.is_dir() else "",
                 f"\nCommits: {', '.join(commits) or '–'}; machines: "
                 f"{', '.join(machines) or '–'}.\n",
                 rechecks(study) if study.is_dir() else "",
                 "Beside this study, the bonuses under an off-policy learner (SAC, not in the "
                 "paper): [SAC with and without a bonus](results/sac.md).\n"]
    return "\n".join(sections), written

