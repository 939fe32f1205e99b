"""Ant: does VASE hurt because of the method or because of its first iterations' scale?
(issue 77, item 6)

At the authors' configuration VASE's bonus on Ant starts huge: at the first iteration with a
model, η·U is hundreds a step (U sums a squared error over 125 observation dimensions, and the
model's means are drawn from N(0, 1)), against an extrinsic reward of at most 1 a step. Two
variants of VASE change only that scale, 10 seeds each: the model's means initialised as
``torch.nn.Linear`` initialises them (``surprise.init_mean=uniform``) and η / 10
(``surprise.eta=1e-5``). ``RULE`` is the question's rule, written before any run of either
variant finished; ``scale_section`` applies it with the claims' statistics
(``study_statistics.median_comparison``: medians over seeds, unpaired percentile bootstrap, the
task's smallest effect of interest from ``figure3_claims.task_margin``). ``FOLLOW_UP_RULE``
asks it again of both changes together (``FOLLOW_UP``), after the two variants' answer was
"undecided" for want of a variant at the reward's scale.

    >>> import numpy as np
    >>> from study_runs import Seed
    >>> run = Seed(0, np.array([5e3, 1e4, 1.5e4]), np.zeros(3), np.nan,
    ...            bonus_mean=np.array([0.0, 5e6, 10.0]))
    >>> first_bonus(run, eta=1e-4), iterations_above(run, eta=1e-4, level=1.0)
    (500.0, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from figure3_claims import (
    AGGREGATE_LABELS,
    MIN_SEEDS,
    median_figure,
    seed_windows,
    task_margin,
)
from figure3_status import STUDY_BAR  # the seeds each cell runs, all of them read
from omegaconf import OmegaConf
from study_runs import Seed
from study_statistics import (
    ALPHA,
    PRIMARY_WINDOW,
    SENSITIVITY_WINDOW,
    MedianComparison,
    holm_rejects,
    median_comparison,
)

#: VASE at the authors' configuration and its two variants of scale
VASE = "vase"
VARIANTS = ("vase_linear_init", "vase_eta_tenth")
#: both changes together, asked after the two variants' answer (``FOLLOW_UP_RULE``)
FOLLOW_UP = "vase_linear_eta_tenth"
#: the control: the bonuses' own TRPO without a bonus (VASE's runs but for the bonus)
CONTROL = "none"
#: the most Ant's extrinsic reward pays a step (1 while the x-velocity exceeds 3 m/s)
REWARD_SCALE = 1.0
#: the answers the rule can give
ANSWERS = ("the scale", "partly the scale", "the method", "undecided", "nothing to explain",
           "not measured yet")

RULE = """\
At the authors' configuration VASE's bonus on Ant starts far above the task's reward: at the
first iteration with a model, η·U is hundreds a step (U sums a squared error over the
observation's 125 dimensions, and the model's means are drawn from N(0, 1)), while the extrinsic
reward pays at most 1 a step. Is VASE's result on Ant the method's, or that first scale's? Two
variants change only the scale, 10 seeds each: the model's means initialised as
`torch.nn.Linear` does (`surprise.init_mean=uniform`), and η / 10 (`surprise.eta=1e-5`).

**The rule** (written on 2026-12-05, before any run of either variant finished; VASE's and the
control's 20 seeds had finished, its comparison not yet drawn). The claims' statistics: each
seed's mean return over the whole run (the last 10 % as the sensitivity check, ⚑ where it
answers otherwise), medians over seeds, unpaired percentile bootstrap, 95 % one-sided, the
task's smallest effect of interest m; Holm over the two variants in each test.

1. **VASE hurts Ant** when control − VASE > 0 (the control: the same TRPO without a bonus).
2. A variant **brings the bonus to the reward's scale** when the median over its seeds of η·U a
   step, at its first iteration with a model, is at most 1. It **recovers** when
   variant − VASE > 0; it is **as good as the control** when control − variant < m; it **still
   hurts** when control − variant > 0.
3. The answer: **the scale** when a variant recovers and is as good as the control; else
   **partly the scale** when a variant recovers; else **the method** when a variant brought
   the bonus to the reward's scale and every such variant still hurts; **undecided**
   otherwise. **Nothing to explain** when step 1 does not find VASE hurting (the variants'
   numbers are shown all the same).
"""

FOLLOW_UP_RULE = """\
**Follow-up: both changes together** (written on 2026-12-06, after the answer above and before
any run of this variant). Neither variant brought the bonus to the reward's scale (the Linear
init's median first η·U a step was 1.76), so the rule could not tell the method from the
scale. A third variant makes both changes, 10 seeds: the means as `torch.nn.Linear` does and
η / 10 (`surprise.init_mean=uniform surprise.eta=1e-5`). The bonus U of the first iteration
with a model does not depend on η (the model's first fit comes before any bonus is paid), so
its first η·U is a tenth of the Linear init's seed by seed where the two compute alike: about
0.18 a step, expected at the reward's scale by construction (the table's row checks it). It is
read by the rule above with this variant alone, in its own Holm family (it is asked after the
first two were answered): step 1 as above; **the scale** when it recovers and is as good as
the control, **partly the scale** when it recovers only, **the method** when it is at the
reward's scale, does not recover and still hurts, **undecided** otherwise.
"""


def first_bonus(seed: Seed, eta: float) -> float:
    """η·U a step at the run's first iteration with a bonus (the model's first), NaN if none."""
    bonus = seed.bonus_mean[np.isfinite(seed.bonus_mean) & (seed.bonus_mean > 0)]
    return float(eta * bonus[0]) if bonus.size else math.nan


def iterations_above(seed: Seed, eta: float, level: float = REWARD_SCALE) -> int:
    """How many of the run's iterations paid a bonus above ``level`` a step."""
    bonus = seed.bonus_mean[np.isfinite(seed.bonus_mean)]
    return int((eta * bonus > level).sum())


def cell_eta(study: Path, task: str, measure: str) -> float:
    """The bonus weight η every finished run of a cell ran with, read from the resolved
    configurations beside its CSVs; NaN for a cell with none."""
    etas = {float(OmegaConf.load(path).surprise.eta)
            for path in (study / task / measure).glob("seed*.config.yaml")}
    if len(etas) > 1:
        raise ValueError(f"{task}/{measure}: runs with different η {sorted(etas)}.")
    return etas.pop() if etas else math.nan


@dataclass(frozen=True)
class ScaleAnswer:
    """The rule's answer in one window, with every comparison it read."""

    answer: str
    hurts: MedianComparison | None  # control − VASE
    recovers: dict[str, MedianComparison | None]  # variant − VASE
    versus_control: dict[str, MedianComparison | None]  # control − variant
    at_scale: dict[str, bool]  # the variant's first bonus at most the reward's scale
    why: str = ""  # which of the rule's steps gave the answer, in the page's words


def _names(variants: list[str]) -> str:
    """Variants by the page's labels, joined."""
    return " and ".join(AGGREGATE_LABELS[v] for v in variants)


def judge_scale(runs: dict[str, list[Seed]], etas: dict[str, float], window: str,
                margin: float, alpha: float = ALPHA, variants: tuple[str, ...] = VARIANTS,
                **kwargs) -> ScaleAnswer:
    """``RULE`` in one window (``study_statistics.WINDOW_LABELS``), over ``variants`` (one Holm
    family: ``VARIANTS``, or ``(FOLLOW_UP,)`` for ``FOLLOW_UP_RULE``)."""
    asked = variants
    measured = [m for m in (VASE, CONTROL, *asked) if len(runs.get(m, [])) >= MIN_SEEDS]
    if VASE not in measured or CONTROL not in measured or not margin > 0:
        return ScaleAnswer("not measured yet", None, {}, {}, {})
    values = {m: seed_windows(runs[m], window) for m in measured}
    hurts = median_comparison(values[CONTROL], values[VASE], margin, **kwargs)
    variants = [v for v in asked if v in measured]
    recovers = {v: median_comparison(values[v], values[VASE], margin, **kwargs) for v in variants}
    versus = {v: median_comparison(values[CONTROL], values[v], margin, **kwargs)
              for v in variants}
    at_scale = {v: bool(np.nanmedian([first_bonus(s, etas[v]) for s in runs[v]])
                        <= REWARD_SCALE) for v in variants}
    answer = ScaleAnswer("", hurts, recovers, versus, at_scale)
    if not holm_rejects([hurts.p_above_zero], alpha)[0]:
        return replace(answer, answer="nothing to explain",
                       why="control − VASE is not shown above 0")
    if len(variants) < len(asked):
        return replace(answer, answer="not measured yet",
                       why=f"{_names([v for v in asked if v not in variants])} "
                           f"below {MIN_SEEDS} seeds")
    better = dict(zip(variants, holm_rejects([recovers[v].p_above_zero for v in variants],
                                             alpha), strict=True))
    as_good = dict(zip(variants, holm_rejects([versus[v].p_below_margin for v in variants],
                                              alpha), strict=True))
    still = dict(zip(variants, holm_rejects([versus[v].p_above_zero for v in variants], alpha),
                     strict=True))
    recovered = [v for v in variants if better[v]]
    if any(as_good[v] for v in recovered):
        return replace(answer, answer="the scale",
                       why=f"{_names([v for v in recovered if as_good[v]])} recovers and is as "
                           "good as the control")
    if recovered:
        return replace(answer, answer="partly the scale",
                       why=f"{_names(recovered)} recovers, not shown as good as the control")
    scaled = [v for v in variants if at_scale[v]]
    if scaled and all(still[v] for v in scaled):
        return replace(answer, answer="the method",
                       why=f"no variant recovers; {_names(scaled)} brought the bonus to the "
                           "reward's scale and still hurts")
    if not scaled:
        firsts = ", ".join(
            f"{AGGREGATE_LABELS[v]} {np.nanmedian([first_bonus(s, etas[v]) for s in runs[v]]):.3g}"
            for v in variants)
        why = ("no variant recovers, and none brought the bonus to the reward's scale (η·U a "
               f"step at the first iteration with a model, median: {firsts}; the scale: at most "
               f"{REWARD_SCALE:g}), so none tells the method from the scale")
    else:
        why = (f"no variant recovers; {_names([v for v in scaled if not still[v]])} at the "
               "reward's scale is not shown to still hurt")
    return replace(answer, answer="undecided", why=why)


def _figure(comparison: MedianComparison | None) -> str:
    """The claims' figure of a difference of medians, with P(A > B) beside."""
    if comparison is None:
        return "–"
    return f"{median_figure(comparison)} (P {comparison.improvement:.2f})"


def _scale_row(runs: dict[str, list[Seed]], etas: dict[str, float], measure: str) -> str:
    """A cell's row of the scale table: η, seeds, its first η·U a step (median [range]) and
    the iterations that paid more than the reward's scale."""
    seeds, eta = runs.get(measure, []), etas.get(measure, math.nan)
    label = AGGREGATE_LABELS[measure]
    if not seeds or not math.isfinite(eta):
        return f"| {label} | – | {len(seeds)} | – | – |"
    first = np.array([first_bonus(s, eta) for s in seeds])
    above = np.array([iterations_above(s, eta) for s in seeds])
    return (f"| {label} | {eta:g} | {len(seeds)} | {np.nanmedian(first):.3g} "
            f"[{np.nanmin(first):.3g}, {np.nanmax(first):.3g}] | {np.median(above):.0f} |")


SCALE_TABLE = ("| cell | η | seeds | η·U a step at the first iteration with a model: median "
               "[range] | iterations with η·U > 1 (median) |", "|---|---:|---:|---:|---:|")
COMPARISON_TABLE = ("| A − B | whole run | last 10 % |", "|---|---:|---:|")


def _variant_rows(primary: ScaleAnswer, sensitivity: ScaleAnswer, variant: str) -> list[str]:
    """A variant's two comparisons (against VASE, and the control against it), both windows."""
    label = AGGREGATE_LABELS
    return [f"| {label[variant]} − {label[VASE]} | {_figure(primary.recovers.get(variant))} | "
            f"{_figure(sensitivity.recovers.get(variant))} |",
            f"| {label[CONTROL]} − {label[variant]} | "
            f"{_figure(primary.versus_control.get(variant))} | "
            f"{_figure(sensitivity.versus_control.get(variant))} |"]


def _answer_line(primary: ScaleAnswer, sensitivity: ScaleAnswer) -> str:
    flag = "" if sensitivity.answer == primary.answer else " ⚑"
    return (f"**Answer: {primary.answer}** (the whole run: {primary.why}); the last 10 %: "
            f"{sensitivity.answer}{flag}.\n")


def answers(runs: dict[str, list[Seed]], etas: dict[str, float], margin: float,
            variants: tuple[str, ...] = VARIANTS, **kwargs) -> tuple[ScaleAnswer, ScaleAnswer]:
    """``judge_scale``'s answers over ``variants`` in the whole run and in the last 10 %."""
    return tuple(judge_scale(runs, etas, window, margin, variants=variants, **kwargs)
                 for window in (PRIMARY_WINDOW, SENSITIVITY_WINDOW))


def follow_up_answers(runs: dict[str, list[Seed]], etas: dict[str, float], margin: float,
                      **kwargs) -> tuple[ScaleAnswer, ScaleAnswer] | None:
    """``FOLLOW_UP_RULE``'s answers in the whole run and the last 10 %; ``None`` until all its
    seeds (``figure3_status.STUDY_BAR``) have finished: it is not read before."""
    if len(runs.get(FOLLOW_UP, [])) < STUDY_BAR[FOLLOW_UP]:
        return None
    return answers(runs, etas, margin, variants=(FOLLOW_UP,), **kwargs)


def follow_up_section(runs: dict[str, list[Seed]], etas: dict[str, float], margin: float,
                      **kwargs) -> list[str]:
    """``FOLLOW_UP_RULE`` and its reading: the variant's scale row, its comparisons and the
    answer (``follow_up_answers``)."""
    lines = [FOLLOW_UP_RULE, *SCALE_TABLE, _scale_row(runs, etas, FOLLOW_UP), ""]
    read = follow_up_answers(runs, etas, margin, **kwargs)
    if read is None:
        finished = len(runs.get(FOLLOW_UP, []))
        return [*lines, f"**Answer: not measured yet** ({finished} of its {STUDY_BAR[FOLLOW_UP]} "
                        "seeds finished; it is read once all have).\n"]
    return [*lines, *COMPARISON_TABLE, *_variant_rows(*read, FOLLOW_UP), "", _answer_line(*read)]


def scale_summary(runs: dict[str, list[Seed]], etas: dict[str, float], **kwargs) -> str:
    """The page's summary sentence on Ant's scale: the follow-up's answer once it is read, the
    first rule's before; empty while neither is measured."""
    margin = task_margin(runs)
    read = follow_up_answers(runs, etas, margin, **kwargs)
    if read is not None:
        asked = "of both changes together (the bonus brought to the reward's scale)"
    else:
        read = answers(runs, etas, margin, **kwargs)
        asked = "of the two variants of one change each"
    primary, sensitivity = read
    if primary.answer == "not measured yet":
        return ""
    windows = ("in both windows" if sensitivity.answer == primary.answer else
               f"over the whole run; the last 10 %: {sensitivity.answer} ⚑")
    return (f"Ant's result, the method's or its first bonus's scale? Asked {asked}, its rule "
            f"answers **{primary.answer}** {windows} ([Ant's scale](#ant-scale)).")


def scale_section(runs: dict[str, list[Seed]], etas: dict[str, float], **kwargs) -> str:
    """The page's section: ``RULE``, then each cell's first scale (the manipulation check), the
    comparisons in both windows and the answer; then ``FOLLOW_UP_RULE`` and its reading."""
    margin = task_margin(runs)
    primary, sensitivity = answers(runs, etas, margin, **kwargs)
    label = AGGREGATE_LABELS
    lines = [RULE, "Each cell's bonus at its start (η read from each run's resolved "
                   "configuration):\n", *SCALE_TABLE,
             *(_scale_row(runs, etas, measure) for measure in (VASE, *VARIANTS)), ""]
    if primary.answer == "not measured yet" and primary.hurts is None:
        lines.append(f"**Answer: not measured yet** (each cell needs {MIN_SEEDS} seeds).\n")
        return "\n".join(lines)
    lines += [f"The task's smallest effect of interest m = {margin:.3g}. A − B: the difference "
              "of medians, in brackets its bootstrap's 5th and 95th percentiles, P(A > B) "
              "beside.\n", *COMPARISON_TABLE,
              f"| {label[CONTROL]} − {label[VASE]} | {_figure(primary.hurts)} | "
              f"{_figure(sensitivity.hurts)} |"]
    for v in VARIANTS:
        lines += _variant_rows(primary, sensitivity, v)
    lines += ["", _answer_line(primary, sensitivity),
              *follow_up_section(runs, etas, margin, **kwargs)]
    return "\n".join(lines)
