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
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import scipy.stats
from study_runs import TASKS, TITLES, Seed, load_cell
from study_statistics import (  # the statistics of issues 38 and 77 (beside this script)
    PRIMARY_WINDOW,
    SENSITIVITY_WINDOW,
    WINDOW_LABELS,
    WINDOWS,
    MedianComparison,
    compare,
    equivalent,
    holm_signs,
    judge_better,
    judge_equivalent,
    median_comparison,
    probability_of_improvement,
    verdict,
    window_mean,
)

#: the paper's four curves (its "TRPO" is the authors' plain-TRPO script) and the extras
PAPER_CURVES = ("vase", "nll", "vime", "trpo_authors")
EXTRAS = ("none", "vase_paper", "rnd", "vase_linear_init", "vase_eta_tenth",
          "vase_linear_eta_tenth")
#: every measure the study runs
STUDY_MEASURES = (*PAPER_CURVES, *EXTRAS)
#: the measures' names in the figures and the status table
STUDY_LABELS = {"vase": "VASE", "nll": "NLL", "vime": "VIME", "trpo_authors": "TRPO (authors')",
                "none": "TRPO, the bonuses' own (none)", "vase_paper": "VASE, paper's text",
                "rnd": "RND", "vase_linear_init": "VASE, means as torch.nn.Linear",
                "vase_eta_tenth": "VASE, η / 10",
                "vase_linear_eta_tenth": "VASE, means as torch.nn.Linear and η / 10",
                "vase_shuffled": "VASE, bonus shuffled"}
#: the short names of the tables' cells and the aggregate figure
AGGREGATE_LABELS = {"vase": "VASE", "nll": "NLL", "vime": "VIME", "trpo_authors": "TRPO (authors')",
                    "none": "none (control)", "vase_paper": "VASE (text)", "rnd": "RND",
                    "vase_linear_init": "VASE (Linear init)", "vase_eta_tenth": "VASE (η / 10)",
                    "vase_linear_eta_tenth": "VASE (Linear init, η / 10)",
                    "vase_shuffled": "VASE (shuffled)"}
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
    """Each seed's mean return over ``window`` (``study_statistics.WINDOW_LABELS``), or over the
    first quarter of its iterations (``"first quarter"``, the earlier rule's name)."""
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
    curves = [s.returns for m in measures for s in runs.get(m, [])]
    values = np.concatenate(curves) if curves else np.array([])
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


@dataclass(frozen=True)
class Part:
    """One comparison of a claim: ``a`` better than (or alike to) ``b`` in a primary window and
    a sensitivity window."""

    a: str
    b: str
    primary: str = PRIMARY_WINDOW
    sensitivity: str = SENSITIVITY_WINDOW

    @property
    def label(self) -> str:
        return f"{AGGREGATE_LABELS[self.a]} − {AGGREGATE_LABELS[self.b]}"


@dataclass(frozen=True)
class Claim:
    """A claim judged by the three-outcome rule: its verdict in the primary window (the whole
    run) and in the sensitivity window (the last 10 %), each comparison's numbers in both, the
    task's margin, and the earlier rule's verdict beside."""

    key: str  # QUOTES' key
    task: str
    kind: str  # "better" or "alike"
    verdict: str  # the primary window's
    sensitivity: str  # the sensitivity window's verdict
    comparisons: tuple[tuple[Part, MedianComparison | None, MedianComparison | None], ...]
    margin: float
    seeds: str
    earlier: str = "–"

    @property
    def quote(self) -> str:
        return QUOTES[self.key]

    @property
    def flagged(self) -> bool:
        """Whether the sensitivity window disagrees with the primary one."""
        return self.verdict != "not measured yet" and self.sensitivity != self.verdict


#: the measures whose every iteration's return sets a task's return range (the margin's scale)
MARGIN_MEASURES = (*PAPER_CURVES, "none")


def task_margin(runs: dict[str, list[Seed]]) -> float:
    """The task's smallest effect of interest: ``MARGIN`` (10 %) of its return range, the span
    from the 5th to the 95th percentile of every iteration's return of every seed of the paper's
    four curves and the control that ran there."""
    return return_margin(runs, MARGIN_MEASURES)


def judge_claim(key: str, task: str, runs: dict[str, list[Seed]], parts: list[Part],
                kind: str = "better", **kwargs) -> Claim:
    """A claim's verdict in each window: ``judge_better`` (or ``judge_equivalent`` for
    ``kind="alike"``) over its parts' median comparisons, Holm within the claim."""
    measures = tuple(dict.fromkeys(m for part in parts for m in (part.a, part.b)))
    seeds = ", ".join(f"{AGGREGATE_LABELS[m]} {len(runs.get(m, []))}" for m in measures)
    margin = task_margin(runs)
    if any(len(runs.get(m, [])) < MIN_SEEDS for m in measures) or not margin > 0:
        return Claim(key, task, kind, "not measured yet", "not measured yet", (), margin, seeds)
    judge = judge_better if kind == "better" else judge_equivalent
    comparisons, verdicts = [], []
    for window in ("primary", "sensitivity"):
        judged = [median_comparison(seed_windows(runs[p.a], getattr(p, window)),
                                    seed_windows(runs[p.b], getattr(p, window)), margin,
                                    **kwargs) for p in parts]
        comparisons.append(judged)
        verdicts.append(judge(judged))
    return Claim(key, task, kind, verdicts[0], verdicts[1],
                 tuple(zip(parts, *comparisons, strict=True)), margin, seeds)


def study_claims(data: dict, **kwargs) -> list[Claim]:
    """Every claim of the paper's Figure 3 on the study's runs, by the three-outcome rule, with
    the earlier rule's verdict beside each."""
    rows = []

    def add(key: str, task: str, parts: list[Part], kind: str = "better") -> None:
        rows.append(judge_claim(key, task, data.get(task, {}), parts, kind, **kwargs))

    add("mountain_car", "mountain_car",
        [Part("vime", m) for m in ("vase", "nll", *NO_BONUS)])
    # "performs well initially, but is later surpassed": the first quarter, then the last
    # (its last 10 % the sensitivity check); the first quarter in both windows
    add("double_pendulum", "double_pendulum",
        [Part("vime", "vase", "first25pct", "first25pct"),
         Part("vase", "vime", "last25pct", SENSITIVITY_WINDOW)])
    for task in ("cartpole_swingup", "half_cheetah", "ant"):
        add("good", task, [Part("vase", m) for m in ("vime", "nll", *NO_BONUS)])
    for task in TASKS:
        add("nll", task, [Part("vase", "nll")])
    add("lunar_lander", "lunar_lander",
        [Part(m, b) for b in NO_BONUS for m in ("vase", "nll", "vime")], kind="alike")
    earlier = {(quote, task): final
               for quote, task, _, final, _ in earlier_rule_claims(data, **kwargs)}
    return [replace(claim, earlier=earlier[claim.quote, claim.task]) for claim in rows]


def earlier_rule_claims(data: dict, **kwargs) -> list[tuple[str, str, dict[str, tuple[
        str, list[Figure]]], str, str]]:
    """The claims by the rule of 2026-12-02 to 12-04 (issue 38), shown once beside the new
    verdicts so the change of rule is visible: means, three windows that must agree, a claim
    refuted only by a reversal. Each: (the paper's sentence, the task, per window (verdict,
    figures), the verdict, the seeds it rests on)."""
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


def claims_summary(claims: list[Claim], robot: dict[str, list[Seed]]) -> str:
    """The verdicts counted, the claims reproduced and not reproduced named with their tasks
    (``claims``: ``study_claims``'s; the point robot's from ``robot``), and how many the
    sensitivity window would change."""
    verdicts = [(c.key, TITLES[c.task], c.verdict) for c in claims]
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
    flagged = [c for c in claims if c.flagged]
    sensitivity = (f" The last 10 % of the run gives another verdict for {len(flagged)} of them "
                   f"(⚑ in the table)." if flagged else
                   " The last 10 % of the run gives the same verdicts."
                   if any(c.verdict != "not measured yet" for c in claims) else "")
    return (f"**In short:** of the paper's {len(verdicts)} claims (a claim on each task it "
            f"names), {', '.join(parts)}.{sensitivity}\n")


def median_figure(comparison: MedianComparison | None) -> str:
    """``+1.2 [−0.3, +2.0]``: the difference of medians and its one-sided 95 % bounds."""
    if comparison is None:
        return "–"
    low, high = comparison.interval
    return f"{comparison.median_difference:+.3g} [{low:+.3g}, {high:+.3g}]"


def _part_label(part: Part) -> str:
    """The comparison's name, with its windows where they are not the claims' usual two."""
    if (part.primary, part.sensitivity) == (PRIMARY_WINDOW, SENSITIVITY_WINDOW):
        return part.label
    windows = (WINDOW_LABELS[part.primary] if part.primary == part.sensitivity else
               f"{WINDOW_LABELS[part.primary]}; sensitivity: {WINDOW_LABELS[part.sensitivity]}")
    return f"{part.label} ({windows})"


def _claim_numbers(claim: Claim) -> list[str]:
    """A claim's numbers: a row a comparison (the primary window's median difference, mean
    difference and P(A > B), then the sensitivity window's median difference), the verdicts
    last."""
    what = ("equivalence margin" if claim.kind == "alike" else "smallest effect of interest")
    lines = [f"**{TITLES[claim.task]}**, “{claim.quote}” ({claim.seeds}): **{claim.verdict}**",
             f"{{: #{_claim_anchor(claim.quote, claim.task)} }}\n",
             f"The task's {what}: ±{claim.margin:.3g} (10 % of its return range).\n",
             "| A − B | median [5 %, 95 %] | mean | P(A > B) | last 10 %: median [5 %, 95 %] |",
             "|---|---:|---:|---:|---:|"]
    for part, primary, sensitivity in claim.comparisons:
        lines.append(f"| {_part_label(part)} | {median_figure(primary)} | "
                     f"{primary.mean_difference:+.3g} | {primary.improvement:.2f} | "
                     f"{median_figure(sensitivity)} |")
    lines.append(f"| *verdict* | *{claim.verdict}* | | | *{claim.sensitivity}* |\n")
    return lines


def study_claims_table(data: dict, robot: dict[str, list[Seed]] | None = None,
                       claims: list[Claim] | None = None, **kwargs) -> str:
    """The claims: a table of the verdicts (the whole run's, the last 10 %'s beside, flagged ⚑
    where they differ, and the earlier rule's), each linked to its numbers, the point robot's
    steps to its first reward last (from ``robot``, the runs of ``load_point_robot``); then,
    per claim, the numbers. ``claims``: ``study_claims(data)`` where already computed."""
    claims = study_claims(data, **kwargs) if claims is None else claims
    lines = ["| the paper says | task | verdict: whole run, medians | last 10 % | the earlier "
             "rule's | seeds |", "|---|---|---|---|---|---|"]
    for c in claims:
        verdict_cell = (f"**{c.verdict}**" if c.verdict == "not measured yet" else
                        f"**{c.verdict}** ([the numbers](#{_claim_anchor(c.quote, c.task)}))")
        sensitivity = ("–" if c.verdict == "not measured yet" else
                       f"⚑ {c.sensitivity}" if c.flagged else c.sensitivity)
        lines.append(f"| “{c.quote}” | {TITLES[c.task]} | {verdict_cell} | {sensitivity} | "
                     f"{c.earlier} | {c.seeds} |")
    if robot is not None:
        measured, robot_final, robot_seeds = point_robot_row(robot)
        found = found_summary(robot)
        link = f" ({found}; [the numbers](#{POINT_ROBOT_ANCHOR}))" if found else ""
        lines.append(f"| “{QUOTES['point_robot']}” | point robot (steps to the first reward) | "
                     f"**{robot_final}**{link} | – | {robot_final} (the same rule) | "
                     f"{robot_seeds} |")
    details = ["\nEach claim's numbers: A − B is the difference of the two measures' medians "
               "over their seeds (each seed's mean return over the window), in brackets the 5th "
               "and 95th percentiles of its bootstrap (seeds resampled within each measure): "
               "each a one-sided 95 % bound, the bound a verdict's one-sided test reads (Holm's "
               "adjustment within the claim aside); beside it "
               "the difference of means and the probability of improvement P(A > B) (the share "
               "of seed pairs where A's is higher, ties counting half), in the whole run; then "
               "the median difference over the last 10 % of the run.\n"]
    for claim in claims:
        if claim.verdict != "not measured yet":
            details += _claim_numbers(claim)
    if robot:
        details += [f"**Point robot**, “{QUOTES['point_robot']}” ({robot_seeds}): "
                    f"**{robot_final}**",
                    f"{{: #{POINT_ROBOT_ANCHOR} }}\n",
                    f"Each run stops at its first extrinsic reward, within {POINT_ROBOT_BUDGET:,} "
                    "steps; a run that never found it counts as censored at the budget.\n",
                    *[f"- {part}" for part in measured.split("<br>")], ""]
    return "\n".join(lines) + "\n" + "\n".join(details)


def found_summary(runs: dict[str, list[Seed]]) -> str:
    """How many runs of ``none``, VASE and VASE's shuffled placebo found the point robot's
    reward, in a few words."""
    found = {measure: (int(np.isfinite(first_reward_steps(runs[measure])).sum()),
                       len(runs[measure]))
             for measure in ("none", "vase", "vase_shuffled") if runs.get(measure)}
    names = {"none": "none", "vase": "VASE",
             "vase_shuffled": "[its placebo](#point-robot-placebo), VASE's bonus shuffled,"}
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


def found_text(seeds: list[Seed]) -> str:
    """How many of a cell's runs found the point robot's reward, and their median steps."""
    steps = first_reward_steps(seeds)
    median = kaplan_meier_median(steps)
    return (f"found by {int(np.isfinite(steps).sum())} of {len(seeds)} within "
            f"{POINT_ROBOT_BUDGET:,} steps, median "
            + (f"{median:,.0f}" if np.isfinite(median) else "beyond the budget"))


def point_robot_row(runs: dict[str, list[Seed]]) -> tuple[str, str, str]:
    """(we measured, verdict, seeds) for the paper's exploration claim."""
    vase, none = runs.get("vase", []), runs.get("none", [])
    parts = []
    for measure in ("none", "vase", "nll", "vime"):
        seeds = runs.get(measure, [])
        if not seeds:
            continue
        parts.append(f"{STUDY_LABELS[measure]}: {found_text(seeds)}")
    if len(vase) < MIN_SEEDS or len(none) < MIN_SEEDS:
        return "<br>".join(parts) or "–", "not measured yet", f"none {len(none)}, VASE {len(vase)}"
    test = sooner(vase, none)
    low, high = test.interval
    parts.append(f"P(VASE finds it sooner than none) {test.probability:.2f} [{low:.2f}, "
                 f"{high:.2f}]; log-rank test, one-sided: p = {test.sooner_p:.2g} (sooner), "
                 f"{test.later_p:.2g} (later)")
    result = {"sooner": "reproduced", "later": "not reproduced"}.get(test.reading,
                                                                     "inconclusive")
    return "<br>".join(parts), result, f"none {len(none)}, VASE {len(vase)}"


@dataclass(frozen=True)
class Sooner:
    """Do runs of A find the point robot's first reward sooner than runs of B?"""

    probability: float  # P(a run of A finds it sooner than one of B), never-found runs tied
    interval: tuple[float, float]  # its 95 % bootstrap interval
    sooner_p: float  # one-sided log-rank p: A sooner
    later_p: float  # one-sided log-rank p: A later
    reading: str  # "sooner", "later" or "not shown"


def sooner(a: list[Seed], b: list[Seed], **kwargs) -> Sooner:
    """The point robot claim's test of A against B: "sooner" when P(A sooner) has its 95 %
    interval above 0.5 and the one-sided log-rank test agrees at 5 %, "later" when both say
    the opposite, "not shown" otherwise (``kwargs``: ``compare``'s)."""
    steps_a, steps_b = first_reward_steps(a), first_reward_steps(b)
    # runs that never found it tie at the budget (counted half)
    probability = probability_of_improvement(-steps_a, -steps_b)
    comparison = compare(-np.minimum(steps_a, POINT_ROBOT_BUDGET),
                         -np.minimum(steps_b, POINT_ROBOT_BUDGET), **kwargs)
    low, high = comparison.improvement_interval
    sooner_p, later_p = (logrank_p(steps_a, steps_b, side) for side in ("sooner", "later"))
    # the second look: the probability of improvement and the log-rank test must agree
    reading = ("sooner" if low > 0.5 and sooner_p < ALPHA else
               "later" if high < 0.5 and later_p < ALPHA else "not shown")
    return Sooner(probability, (low, high), sooner_p, later_p, reading)


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
            for measure in ("none", "vase", "nll", "vime", "vase_shuffled")}
    return {measure: seeds for measure, seeds in runs.items() if seeds}
