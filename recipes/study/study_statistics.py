"""The statistics the Figure 3 report judges claims with (issue 38): windows, unpaired
comparisons, Holm's correction, equivalence, and rliable-style aggregates across tasks.

Every seed counts: measures are compared as independent samples (the seeds' returns correlate
between measures at −0.6 to +0.5 in the earlier study, so pairing by seed gained nothing and
dropped the unpaired seeds). A comparison reports the difference of means with two 95 %
intervals, a percentile bootstrap and Welch's t-interval, and judges by the wider of the two
(their union); beside it the probability of improvement P(A > B) (the Mann–Whitney statistic
over n·m pairs, ties counting half) with its bootstrap interval.

A claim is judged in three windows of each seed's curve (``WINDOWS``): the mean extrinsic return
over the last 10 iterations, over the last 10 % of iterations, and over the whole run (the area
under the curve). It is *reproduced* or *not reproduced* only when all three agree; otherwise
*inconclusive*. The comparisons of one claim are Holm-corrected (step-down: the comparison with
the i-th smallest Welch p-value of k is judged on intervals at level 1 − α/(k − i)). "All alike"
is an equivalence claim: two one-sided tests against a margin (the 1 − 2α interval of each
difference inside ±margin; every pair must pass, which needs no correction: an intersection–union
test).

Across tasks, as rliable (Agarwal et al., 2021) computes them: scores min–max normalised per
task, the interquartile mean (IQM) with a stratified bootstrap (seeds resampled within each task),
performance profiles (the fraction of runs above each normalised score τ) and the probability of
improvement averaged over tasks. rliable itself is not a dependency: it pins ``arch<8``, and arch
7.2 does not import under pandas 3 (which mlflow's pins bring), while arch 8 refuses rliable's
``random_state=None``; the few functions are written here, tested against closed forms and
against rliable's own numbers on the study's runs (``rliable_reference.py``, run in an
environment of its own: equal IQM and probability of improvement, intervals within 0.02).

Examples:
    >>> import numpy as np
    >>> window_mean(np.arange(100.0), "last10"), window_mean(np.arange(100.0), "whole")
    (94.5, 49.5)
    >>> round(probability_of_improvement(np.array([1.0, 2.0]), np.array([0.0, 2.0])), 3)
    0.625
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats

#: a seed's window of its curve -> its label on the page
WINDOWS = {"last10": "last 10 iterations", "last10pct": "last 10 % of iterations",
           "whole": "whole run (area under the curve)"}
#: every window a claim can read: the three above, and the first and last quarter of the run
WINDOW_LABELS = {**WINDOWS, "first25pct": "first quarter", "last25pct": "last quarter"}
ALPHA, RESAMPLES = 0.05, 10_000


def window_mean(returns: np.ndarray, window: str) -> float:
    """The mean of a seed's per-iteration returns over ``window`` (``WINDOWS``); NaN iterations
    (no episode ended) are left out."""
    returns = np.asarray(returns, dtype=float)
    if window == "last10":
        part = returns[-10:]
    elif window == "last10pct":
        part = returns[-max(1, math.ceil(0.1 * returns.size)):]
    elif window == "whole":
        part = returns
    elif window == "first25pct":
        part = returns[: max(1, returns.size // 4)]
    elif window == "last25pct":
        part = returns[-max(1, returns.size // 4):]
    else:
        raise ValueError(f"window must be one of {sorted(WINDOW_LABELS)}, got {window!r}.")
    with np.errstate(all="ignore"):
        return float(np.nanmean(part)) if np.isfinite(part).any() else math.nan


def _improvement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(X > Y) over the last axis of ``a`` and of ``b`` (any leading axes alike: bootstrap
    draws), ties counting half."""
    a, b = a[..., :, None], b[..., None, :]
    return ((a > b) + 0.5 * (a == b)).mean((-2, -1))


def probability_of_improvement(a: np.ndarray, b: np.ndarray) -> float:
    """P(X > Y) for X from ``a``, Y from ``b``, ties counting half (U / (n·m))."""
    return float(_improvement(np.asarray(a, float), np.asarray(b, float)))


def _bootstrap_indices(rng: np.random.Generator, size: int, resamples: int) -> np.ndarray:
    return rng.integers(0, size, (resamples, size))


def welch_interval(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Welch's t-interval of mean(a) − mean(b) at ``confidence``, and its two-sided p-value."""
    n, m = a.size, b.size
    va, vb = a.var(ddof=1) / n, b.var(ddof=1) / m
    se = math.sqrt(va + vb)
    difference = a.mean() - b.mean()
    if se == 0:
        return difference, difference, 0.0 if difference else 1.0
    dof = (va + vb) ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (m - 1))
    half = scipy.stats.t.ppf(0.5 + confidence / 2, dof) * se
    p_value = 2 * scipy.stats.t.sf(abs(difference) / se, dof)
    return difference - half, difference + half, float(p_value)


@dataclass(frozen=True)
class Comparison:
    """A − B for two independent samples (every seed of each)."""

    n: int
    m: int
    difference: float  # mean(A) − mean(B)
    bootstrap: tuple[float, float]  # percentile bootstrap of the difference at ``confidence``
    welch: tuple[float, float]  # Welch's t-interval at ``confidence``
    p_value: float  # Welch's two-sided p-value
    improvement: float  # P(A > B)
    improvement_interval: tuple[float, float]
    confidence: float

    @property
    def interval(self) -> tuple[float, float]:
        """The wider of the two intervals (their union): what a verdict reads."""
        return min(self.bootstrap[0], self.welch[0]), max(self.bootstrap[1], self.welch[1])

    @property
    def sign(self) -> int:
        """+1: A above B (the interval above 0), −1: below, 0: the interval holds 0."""
        low, high = self.interval
        return 1 if low > 0 else -1 if high < 0 else 0


def compare(a: Sequence[float], b: Sequence[float], *, confidence: float = 1 - ALPHA,
            resamples: int = RESAMPLES, seed: int = 0) -> Comparison | None:
    """A − B, unpaired, at ``confidence`` (``None`` with fewer than 2 finite values a side)."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size < 2 or b.size < 2:
        return None
    rng = np.random.default_rng(seed)
    resampled_a = a[_bootstrap_indices(rng, a.size, resamples)]
    resampled_b = b[_bootstrap_indices(rng, b.size, resamples)]
    tail = 50 * (1 - confidence)
    differences = resampled_a.mean(1) - resampled_b.mean(1)
    improvements = _improvement(resampled_a, resampled_b)
    low, high, p_value = welch_interval(a, b, confidence)
    return Comparison(
        n=a.size, m=b.size, difference=float(a.mean() - b.mean()),
        bootstrap=tuple(float(v) for v in np.percentile(differences, [tail, 100 - tail])),
        welch=(float(low), float(high)), p_value=p_value,
        improvement=probability_of_improvement(a, b),
        improvement_interval=tuple(float(v) for v in np.percentile(improvements,
                                                                   [tail, 100 - tail])),
        confidence=confidence)


def holm_levels(p_values: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """The confidence level each comparison is judged at under Holm's step-down correction:
    the one with the i-th smallest p-value (from 0) of k at 1 − α/(k − i)."""
    order = np.argsort(p_values, kind="stable")
    levels = [math.nan] * len(p_values)
    for rank, index in enumerate(order):
        levels[index] = 1 - alpha / (len(p_values) - rank)
    return levels


def holm_signs(a_sets: Sequence[Sequence[float]], b_sets: Sequence[Sequence[float]],
               alpha: float = ALPHA, **kwargs) -> list[int] | None:
    """The signs (``Comparison.sign``) of the comparisons A_j − B_j of one claim, Holm-corrected:
    in the order of their Welch p-values each is judged on intervals at its Holm level, and once
    one holds 0 the rest count as 0 too (step-down). ``None`` if any comparison lacks seeds."""
    p_values = []
    for a, b in zip(a_sets, b_sets, strict=True):
        a, b = np.asarray(a, float), np.asarray(b, float)
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        if a.size < 2 or b.size < 2:
            return None
        p_values.append(welch_interval(a, b, 1 - alpha)[2])  # the order: no bootstrap needed
    levels = holm_levels(p_values, alpha)
    signs = [0] * len(p_values)
    for index in np.argsort(p_values, kind="stable"):
        judged = compare(a_sets[index], b_sets[index], confidence=levels[index], **kwargs)
        if judged.sign == 0:
            break
        signs[index] = judged.sign
    return signs


def equivalent(a: Sequence[float], b: Sequence[float], margin: float, alpha: float = ALPHA,
               **kwargs) -> bool | None:
    """Two one-sided tests: the 1 − 2α interval of A − B (the wider of bootstrap and Welch) lies
    inside (−margin, margin). ``None`` without enough seeds."""
    comparison = compare(a, b, confidence=1 - 2 * alpha, **kwargs)
    if comparison is None:
        return None
    low, high = comparison.interval
    return -margin < low and high < margin


def verdict(per_window: Mapping[str, str]) -> str:
    """``reproduced`` / ``not reproduced`` when every window says so, else ``inconclusive``
    (``not measured yet`` if a window could not be judged)."""
    values = set(per_window.values())
    if "not measured yet" in values:
        return "not measured yet"
    if values == {"reproduced"}:
        return "reproduced"
    if values == {"not reproduced"}:
        return "not reproduced"
    return "inconclusive"


def judge_above(a: Sequence[float], rivals: Sequence[Sequence[float]], **kwargs) -> str:
    """One window of "A above each rival": reproduced when every Holm-corrected comparison puts A
    above, not reproduced when one puts it below, else inconclusive."""
    signs = holm_signs([a] * len(rivals), rivals, **kwargs)
    if signs is None:
        return "not measured yet"
    if all(sign > 0 for sign in signs):
        return "reproduced"
    if any(sign < 0 for sign in signs):
        return "not reproduced"
    return "inconclusive"


def judge_alike(groups: Sequence[Sequence[float]], margin: float, **kwargs) -> str:
    """One window of "all alike": reproduced when every pair is shown equivalent within
    ±``margin``, not reproduced when a Holm-corrected comparison finds a pair apart, else
    inconclusive."""
    pairs = [(i, j) for i in range(len(groups)) for j in range(i + 1, len(groups))]
    alike = [equivalent(groups[i], groups[j], margin, **kwargs) for i, j in pairs]
    if any(a is None for a in alike):
        return "not measured yet"
    if all(alike):
        return "reproduced"
    signs = holm_signs([groups[i] for i, _ in pairs], [groups[j] for _, j in pairs], **kwargs)
    return "not reproduced" if any(signs) else "inconclusive"


# ------------------------------------------------------------------------------------------------
# Across tasks (rliable's estimators)
# ------------------------------------------------------------------------------------------------
def iqm(scores: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """The interquartile mean: the mean of the middle 50 % (scipy's 25 % trimmed mean)."""
    return scipy.stats.trim_mean(scores, 0.25, axis=axis)


def normalise(scores: Mapping[str, Mapping[str, np.ndarray]]) -> tuple[
        dict[str, dict[str, np.ndarray]], dict[str, tuple[float, float]]]:
    """``task -> measure -> seeds' scores`` min–max normalised per task over every run of every
    measure there (0: the task's worst run, 1: its best); and each task's (min, max)."""
    ranges, normalised = {}, {}
    for task, by_measure in scores.items():
        values = np.concatenate([np.asarray(v, float) for v in by_measure.values()])
        values = values[np.isfinite(values)]
        low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
        span = high - low if high > low else 1.0
        ranges[task] = (low, high)
        normalised[task] = {m: (np.asarray(v, float) - low) / span for m, v in by_measure.items()}
    return normalised, ranges


def stratified_resamples(runs: Sequence[np.ndarray], resamples: int,
                         rng: np.random.Generator) -> list[np.ndarray]:
    """Per task (stratum), ``[resamples, n_task]`` seeds drawn with replacement from its own."""
    return [run[_bootstrap_indices(rng, run.size, resamples)] for run in runs]


def weighted_iqm(scores: np.ndarray, weights: np.ndarray) -> np.ndarray | float:
    """The mean of the middle 50 % of the weight of ``scores`` (over the last axis, any leading
    axes alike), a score straddling a quartile counting with the part of its weight inside;
    with equal weights and a count divisible by 4, ``iqm``."""
    order = np.argsort(scores, axis=-1)
    values = np.take_along_axis(scores, order, -1)
    mass = np.asarray(weights, float)[order]
    mass = mass / mass.sum(-1, keepdims=True)
    upper = np.cumsum(mass, -1)
    inside = np.clip(np.minimum(upper, 0.75) - np.maximum(upper - mass, 0.25), 0.0, None)
    result = (inside * values).sum(-1) / 0.5
    return float(result) if np.ndim(result) == 0 else result


def aggregate_iqm(by_task: Sequence[np.ndarray], *, resamples: int = 2_000, seed: int = 0,
                  confidence: float = 1 - ALPHA) -> tuple[float, float, float]:
    """The IQM of one measure's normalised scores pooled over tasks, each task weighing alike
    (a run weighs 1 / its task's runs), with its stratified bootstrap interval. rliable's
    ``aggregate_iqm`` and ``StratifiedBootstrap`` on a runs × tasks matrix, where every task has
    as many runs, are this with equal weights; our cells have unequal seeds, and pooled with equal
    run weights a measure's IQM would weigh its tasks by their seeds."""
    runs = [np.asarray(r, float)[np.isfinite(r)] for r in by_task]
    runs = [r for r in runs if r.size]
    weights = np.concatenate([np.full(r.size, 1.0 / r.size) for r in runs])
    point = weighted_iqm(np.concatenate(runs), weights)
    draws = np.concatenate(stratified_resamples(runs, resamples, np.random.default_rng(seed)), 1)
    tail = 50 * (1 - confidence)
    low, high = np.percentile(weighted_iqm(draws, weights), [tail, 100 - tail])
    return point, float(low), float(high)


def performance_profile(by_task: Sequence[np.ndarray], taus: np.ndarray, *,
                        resamples: int = 2_000, seed: int = 0,
                        confidence: float = 1 - ALPHA) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """The fraction of runs (each task weighted alike) whose normalised score exceeds each τ,
    with a stratified bootstrap band: (profile, low, high) over ``taus``."""
    runs = [np.asarray(r, float)[np.isfinite(r)] for r in by_task]
    runs = [r for r in runs if r.size]

    def profile(samples: list[np.ndarray]) -> np.ndarray:  # [..., n_task] per task
        return np.mean([(s[..., None] > taus).mean(-2) for s in samples], axis=0)

    point = profile(runs)
    draws = profile(stratified_resamples(runs, resamples, np.random.default_rng(seed)))
    tail = 50 * (1 - confidence)
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return point, low, high


def aggregate_improvement(a_by_task: Sequence[np.ndarray], b_by_task: Sequence[np.ndarray], *,
                          resamples: int = 2_000, seed: int = 0,
                          confidence: float = 1 - ALPHA) -> tuple[float, float, float]:
    """P(A > B) averaged over tasks (rliable's ``probability_of_improvement``), with its
    stratified bootstrap interval (both measures' seeds resampled within each task)."""
    pairs = [(np.asarray(a, float), np.asarray(b, float)) for a, b in
             zip(a_by_task, b_by_task, strict=True)]
    pairs = [(a[np.isfinite(a)], b[np.isfinite(b)]) for a, b in pairs]
    pairs = [(a, b) for a, b in pairs if a.size and b.size]
    point = float(np.mean([probability_of_improvement(a, b) for a, b in pairs]))
    rng = np.random.default_rng(seed)
    per_task = []
    for a, b in pairs:
        ra, rb = a[_bootstrap_indices(rng, a.size, resamples)], b[
            _bootstrap_indices(rng, b.size, resamples)]
        per_task.append(_improvement(ra, rb))
    tail = 50 * (1 - confidence)
    low, high = np.percentile(np.mean(per_task, axis=0), [tail, 100 - tail])
    return point, float(low), float(high)


# ------------------------------------------------------------------------------------------------
# The three-outcome rule (issue 77): medians, a smallest effect of interest, Holm within a claim
# ------------------------------------------------------------------------------------------------
#: the verdicts' primary window (the paper's claims are about curves) and its sensitivity check
PRIMARY_WINDOW, SENSITIVITY_WINDOW = "whole", "last10pct"


@dataclass(frozen=True)
class MedianComparison:
    """A − B for two independent samples on the paper's statistic, the median, against a
    smallest effect of interest ``margin``.

    Every p-value is a one-sided percentile-bootstrap p-value of the difference of medians
    Δ* = median(A*) − median(B*) over ``resamples`` independent resamples of each side:
    ``(1 + #{Δ* on H0's side}) / (resamples + 1)``, which is below α exactly when the
    1 − 2α percentile interval excludes H0's side.
    """

    n: int
    m: int
    margin: float
    median_difference: float  # median(A) − median(B)
    #: its bootstrap's 5th and 95th percentiles: each a one-sided 95 % bound, the bounds the
    #: verdict's one-sided tests read (before Holm's adjustment)
    interval: tuple[float, float]
    mean_difference: float  # the mean beside it
    improvement: float  # P(A > B), ties half: the rank statistic beside it
    p_above_zero: float  # H0: Δ ≤ 0 ("A better" needs it rejected)
    p_below_margin: float  # H0: Δ ≥ margin ("no useful advantage" needs it rejected)
    p_equivalent: float  # H0: |Δ| ≥ margin, two one-sided tests (the larger p)
    p_apart: float  # H0: |Δ| ≤ margin ("apart by more than the margin", two-sided)


def median_comparison(a: Sequence[float], b: Sequence[float], margin: float, *,
                      confidence: float = 1 - 2 * ALPHA, resamples: int = RESAMPLES,
                      seed: int = 0) -> MedianComparison | None:
    """A − B on medians, unpaired, every seed counting (``None`` with fewer than 2 finite
    values a side)."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size < 2 or b.size < 2:
        return None
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be positive and finite, got {margin}.")
    rng = np.random.default_rng(seed)
    draws = (np.median(a[_bootstrap_indices(rng, a.size, resamples)], 1)
             - np.median(b[_bootstrap_indices(rng, b.size, resamples)], 1))

    def p(on_null_side: np.ndarray) -> float:
        return float((1 + on_null_side.sum()) / (resamples + 1))

    tail = 50 * (1 - confidence)
    low, high = np.percentile(draws, [tail, 100 - tail])
    return MedianComparison(
        n=a.size, m=b.size, margin=float(margin),
        median_difference=float(np.median(a) - np.median(b)),
        interval=(float(low), float(high)), mean_difference=float(a.mean() - b.mean()),
        improvement=probability_of_improvement(a, b),
        p_above_zero=p(draws <= 0), p_below_margin=p(draws >= margin),
        p_equivalent=max(p(draws <= -margin), p(draws >= margin)),
        p_apart=min(1.0, 2 * min(p(draws <= margin), p(draws >= -margin))))


def holm_rejects(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down procedure: which null hypotheses are rejected at family-wise ``alpha``
    (the i-th smallest p-value of k, from 0, against α / (k − i), stopping at the first that
    fails)."""
    rejected = [False] * len(p_values)
    for rank, index in enumerate(np.argsort(p_values, kind="stable")):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected


def judge_better(comparisons: Sequence[MedianComparison], alpha: float = ALPHA) -> str:
    """"A better than each B_j", one comparison a B_j, Holm within the claim:

    * *not reproduced* when some A − B_j lies below the margin with confidence (no useful
      advantage, or worse): its "Δ ≥ margin" rejected;
    * else *reproduced* when every A − B_j lies above 0 with confidence: every "Δ ≤ 0"
      rejected;
    * else *inconclusive*.
    """
    if any(holm_rejects([c.p_below_margin for c in comparisons], alpha)):
        return "not reproduced"
    if all(holm_rejects([c.p_above_zero for c in comparisons], alpha)):
        return "reproduced"
    return "inconclusive"


def judge_equivalent(comparisons: Sequence[MedianComparison], alpha: float = ALPHA) -> str:
    """"Each pair alike": *reproduced* when every pair's difference lies inside ±margin by two
    one-sided tests, *not reproduced* when some pair lies outside it with confidence, else
    *inconclusive* (Holm within the claim, each direction)."""
    if all(holm_rejects([c.p_equivalent for c in comparisons], alpha)):
        return "reproduced"
    if any(holm_rejects([c.p_apart for c in comparisons], alpha)):
        return "not reproduced"
    return "inconclusive"
