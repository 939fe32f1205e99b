"""The paper's claims judged on the Figure 3 study's runs (issue 38): each claim in three windows,
the point robot's steps to its first reward, and the page's table of them.

The statistics are ``study_statistics.py``'s: measures compared unpaired, every seed counting,
in three windows (the last 10 iterations, the last 10 %, the whole run); a claim is reproduced or
not only when all three agree (the page's "How a claim is judged" says it in full).
``figure3_report.py`` puts the table on the results page.

    >>> import numpy as np
    >>> kaplan_meier_median(np.array([30_000.0, 50_000.0, np.inf]))  # one run never found it
    50000.0
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import scipy.stats
from study_runs import TASKS, TITLES, Seed, load_cell
from study_statistics import (  # the statistics of issue 38 (beside this script)
    WINDOWS,
    compare,
    equivalent,
    holm_signs,
    probability_of_improvement,
    verdict,
    window_mean,
)

#: the paper's four curves (its "TRPO" is the authors' plain-TRPO script) and the extras
PAPER_CURVES = ("vase", "nll", "vime", "trpo_authors")
EXTRAS = ("none", "vase_paper", "rnd")
#: every measure the study runs
STUDY_MEASURES = (*PAPER_CURVES, *EXTRAS)
#: the measures' names in the figures and the status table
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


#: the point robot's claim's anchor on the page
POINT_ROBOT_ANCHOR = "claim-point-robot"


#: each claim in a few words, for the page's summary
CLAIM_NAMES = {"mountain_car": "VIME performs best", "double_pendulum":
               "VIME first, VASE later", "good": "VASE shows good results", "nll":
               "VASE better than NLL", "lunar_lander": "all alike",
               "point_robot": "VASE finds the first reward sooner"}


def claims_summary(claims: list, robot: dict[str, list[Seed]]) -> str:
    """The verdicts counted, the claims reproduced and not reproduced named with their tasks
    (``claims``: ``study_claims``'s; the point robot's from ``robot``)."""
    verdicts = [(key, TITLES[task], final) for quote, task, _, final, _ in claims
                for key, text in QUOTES.items() if text == quote]
    verdicts.append(("point_robot", "the point robot", point_robot_row(robot)[1]))
    parts = []
    for result in ("reproduced", "not reproduced", "inconclusive", "not measured yet"):
        named = {}
        for key, task, final in verdicts:
            if final == result:
                named.setdefault(key, []).append(task)
        count = sum(len(tasks) for tasks in named.values())
        if not count:
            continue
        which = "; ".join(f"“{CLAIM_NAMES[key]}” on {' and '.join(tasks)}"
                          for key, tasks in named.items())
        parts.append(f"{count} {result}" + (f" ({which})" if result in (
            "reproduced", "not reproduced") else ""))
    return (f"**In short:** of the paper's {len(verdicts)} claims (a claim on each task it "
            f"names), {', '.join(parts)}.\n")


def study_claims_table(data: dict, robot: dict[str, list[Seed]] | None = None,
                       claims: list | None = None, **kwargs) -> str:
    """The claims: a table of the verdicts, each with its three windows' verdicts and a link to
    its numbers, the point robot's steps to its first reward last (from ``robot``, the runs of
    ``load_point_robot``); then, per claim, the numbers: each comparison (rows) in each window
    (columns), the window's verdict last, and the point robot's runs. ``claims``:
    ``study_claims(data)`` where already computed."""
    claims = study_claims(data, **kwargs) if claims is None else claims
    short = {"last10": "last 10 iterations", "last10pct": "last 10 %", "whole": "whole run"}
    lines = ["| the paper says | task | verdict | the three windows ("
             + " · ".join(short.values()) + ") | seeds |", "|---|---|---|---|---|"]
    for quote, task, per_window, final, seeds in claims:
        results = [result for result, _ in per_window.values()]
        windows = "the same in all three" if len(set(results)) == 1 else " · ".join(results)
        link = ("–" if final == "not measured yet"
                else f"{windows} ([the numbers](#{_claim_anchor(quote, task)}))")
        lines.append(f"| “{quote}” | {TITLES[task]} | **{final}** | {link} | {seeds} |")
    if robot is not None:
        measured, robot_final, robot_seeds = point_robot_row(robot)
        found = found_summary(robot)
        link = f"{found} ([the numbers](#{POINT_ROBOT_ANCHOR}))" if found else "–"
        lines.append(f"| “{QUOTES['point_robot']}” | point robot (steps to the first reward) | "
                     f"**{robot_final}** | {link} | {robot_seeds} |")
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
    if robot:
        details += [f"**Point robot**, “{QUOTES['point_robot']}” ({robot_seeds}): "
                    f"**{robot_final}**",
                    f"{{: #{POINT_ROBOT_ANCHOR} }}\n",
                    f"Each run stops at its first extrinsic reward, within {POINT_ROBOT_BUDGET:,} "
                    "steps; a run that never found it counts as censored at the budget.\n",
                    *[f"- {part}" for part in measured.split("<br>")], ""]
    return "\n".join(lines) + "\n" + "\n".join(details)


def found_summary(runs: dict[str, list[Seed]]) -> str:
    """How many runs of ``none`` and VASE found the point robot's reward, in a few words."""
    found = {measure: (int(np.isfinite(first_reward_steps(runs[measure])).sum()),
                       len(runs[measure]))
             for measure in ("none", "vase") if runs.get(measure)}
    names = {"none": "none", "vase": "VASE"}
    return ", ".join(f"{names[m]} found it in {k} of {n} runs" for m, (k, n) in found.items())


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



def load_point_robot(study: Path) -> dict[str, list[Seed]]:
    runs = {measure: load_cell(study, "point_robot", measure)
            for measure in ("none", "vase", "nll", "vime")}
    return {measure: seeds for measure, seeds in runs.items() if seeds}
