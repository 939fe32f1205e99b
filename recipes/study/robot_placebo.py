"""The point robot's placebo: does VASE find the first reward sooner because of what its bonus
says about each transition, or only because the rewards carry a bonus of that size?

The one claim of the paper's Figure 3 study that VASE reproduces as a positive effect ("VASE
does not spend time unnecessarily in random states": it finds the point robot's first reward
sooner than plain TRPO) had no placebo. Here: VASE with each iteration's bonus permuted across
the iteration's transitions (``shuffle_bonus=true``: the policy's rewards keep the bonus's size
and spread, not which transition earned it), 20 seeds at the Figure 3 rerun's commit with that
one switch added (``recipes/study/robot_placebo.sh``). ``RULE`` says how they are read, written
before any placebo run; ``placebo_section`` applies it with the claim's own test
(``figure3_claims.sooner``: the probability that a run of A finds the reward sooner than one of
B, its 95 % bootstrap interval, and a one-sided log-rank test, both needed).

    >>> answer({("vase", SHUFFLED): "sooner", (SHUFFLED, "none"): "not shown"})
    'the content'
"""

from __future__ import annotations

import numpy as np
from figure3_claims import MIN_SEEDS, Sooner, found_text, sooner
from study_runs import Seed
from study_statistics import ALPHA

#: the placebo cell, as ``paper_grid.MEASURES`` names it
SHUFFLED = "vase_shuffled"
LABELS = {"vase": "VASE", SHUFFLED: "VASE, bonus shuffled", "none": "none"}
ANSWERS = ("the content", "its size and spread", "undecided", "not measured yet")
#: the pairs read, A − B: is A sooner than B?
PAIRS = (("vase", SHUFFLED), (SHUFFLED, "none"))

RULE = """\
VASE finds the point robot's first reward sooner than the same TRPO without a bonus (the claim
above). Is it what the bonus says about each transition, or only that the rewards carry a
bonus of that size? A placebo, 20 seeds, at the rerun's commit with one switch added (off in
its runs): VASE with each iteration's bonus permuted across the iteration's transitions
(`shuffle_bonus=true`: the rewards keep the bonus's size and spread, not which transition
earned it). A − B reads as the claim does: "A sooner" when P(a run of A finds it sooner than
one of B) has its 95 % interval above 0.5 and a one-sided log-rank test agrees at 5 %; "B
sooner" when both say the opposite.

**The rule** (written on 2026-12-06, before any placebo run):

- **the content** when VASE is sooner than the shuffled placebo;
- **its size and spread** when the shuffled placebo is sooner than none and VASE is not sooner
  than the shuffled placebo;
- **undecided** otherwise ("not shown sooner" is not "as soon").

VASE with η = 0 is not run here: under TRPO it is the control with the model's training
drawing from the learner's random numbers, nothing else.
"""


def answer(readings: dict[tuple[str, str], str]) -> str:
    """``RULE``'s answer from each pair's reading: ``"sooner"`` (A sooner than B), ``"later"``,
    ``"not shown"``, or ``"not measured yet"``."""
    if "not measured yet" in readings.values():
        return "not measured yet"
    if readings["vase", SHUFFLED] == "sooner":
        return "the content"
    if readings[SHUFFLED, "none"] == "sooner":
        return "its size and spread"
    return "undecided"


def _novelty(seeds: list[Seed]) -> str:
    """The median over runs of each run's median ``bonus/novelty_spearman`` ("–" if none)."""
    medians = [float(np.nanmedian(s.novelty)) for s in seeds
               if s.novelty.size and np.isfinite(s.novelty).any()]
    return f"{np.median(medians):.2f} ({len(medians)} runs)" if medians else "–"


def pair_tests(runs: dict[str, list[Seed]], **kwargs) -> dict[tuple[str, str], Sooner | None]:
    """Each pair's test (``figure3_claims.sooner``), ``None`` below ``MIN_SEEDS`` a side."""
    return {(a, b): sooner(runs[a], runs[b], **kwargs)
            if min(len(runs.get(a, [])), len(runs.get(b, []))) >= MIN_SEEDS else None
            for a, b in PAIRS}


def placebo_answer(runs: dict[str, list[Seed]], tests=None, **kwargs) -> str:
    """``RULE``'s answer on the runs (from ``tests``, ``pair_tests``'s, where given)."""
    tests = pair_tests(runs, **kwargs) if tests is None else tests
    return answer({pair: "not measured yet" if test is None else test.reading
                   for pair, test in tests.items()})


def placebo_section(runs: dict[str, list[Seed]], **kwargs) -> str:
    """The page's lines: ``RULE``, each cell's finding, each pair's test and the answer."""
    lines = [RULE, "Whether the shuffle took: the bonus's rank correlation with the k-NN novelty "
             "of s' (`bonus/novelty_spearman`, every 10th iteration with a bonus), each run's "
             "median, then the median over runs (about 0 for a bonus that no longer follows "
             "the states).\n",
             "| cell | seeds | the first reward | the bonus's novelty correlation |",
             "|---|---:|---|---:|"]
    lines += [f"| {LABELS[m]} | {len(runs.get(m, []))} | "
              f"{found_text(runs[m]) if runs.get(m) else '–'} | {_novelty(runs.get(m, []))} |"
              for m in ("vase", SHUFFLED, "none")]
    lines += ["", "| A − B | P(A sooner) [95 %] | log-rank p, one-sided: sooner, later | "
              "reading |", "|---|---:|---:|---|"]
    close, tests = [], pair_tests(runs, **kwargs)
    for (a, b), test in tests.items():
        if test is None:
            lines.append(f"| {LABELS[a]} − {LABELS[b]} | – | – | not measured yet |")
            continue
        low, high = test.interval
        close += close_calls(test, LABELS[a], LABELS[b])
        said = {"sooner": f"{LABELS[a]} sooner", "later": f"{LABELS[b]} sooner"}
        lines.append(f"| {LABELS[a]} − {LABELS[b]} | {test.probability:.2f} [{low:.2f}, "
                     f"{high:.2f}] | {test.sooner_p:.2g}, {test.later_p:.2g} | "
                     f"{said.get(test.reading, 'neither shown sooner')} |")
    lines += ["", f"**Answer: {placebo_answer(runs, tests)}**."
              + (f" Close calls: {'; '.join(close)}." if close else "") + "\n"]
    return "\n".join(lines)


#: an interval's bound this near 0.5 is a close call
NEAR = 0.01


def close_calls(test: Sooner, a: str, b: str) -> list[str]:
    """Where a pair's reading hangs on a hair: the two statistics disagreeing on a direction,
    or the interval's bound within ``NEAR`` of 0.5 (a reading a few seeds could turn)."""
    low, high = test.interval
    calls = []
    for first, then, shown, p in ((a, b, low > 0.5, test.sooner_p),
                                  (b, a, high < 0.5, test.later_p)):
        if shown != (p < ALPHA):
            calls.append(f"the {'interval' if shown else 'log-rank test'} alone says {first} "
                         f"finds it sooner than {then} (P({a} sooner) [{low:.3f}, {high:.3f}], "
                         f"log-rank p {p:.2g})")
    for bound in (low, high):
        if abs(bound - 0.5) < NEAR and not calls:
            calls.append(f"P({a} sooner than {b}) has its interval's bound at {bound:.4f}, "
                         f"within {NEAR} of 0.5")
    return calls
