"""The study's statistics: windows of a curve, the claims' comparisons, Holm, and rliable's
aggregates across tasks.

Every seed counts: measures are compared as independent samples. A claim compares medians over
seeds (``median_comparison``: percentile bootstrap, one-sided p-values, a smallest effect of
interest m); an off-policy placebo compares means (``mean_comparison``: the wider of the
percentile bootstrap and Welch's t-interval); the point robot compares steps to the first
reward (``sooner``: the probability that a run of A finds it sooner, and a log-rank test).
Holm's step-down correction is ``holm_rejects``. Across tasks, rliable itself
(Agarwal et al., 2021): the interquartile mean with its stratified bootstrap, performance
profiles and the probability of improvement.

    >>> import numpy as np
    >>> window_mean(np.arange(100.0), "last10pct"), window_mean(np.arange(100.0), "whole")
    (94.5, 49.5)
    >>> round(probability_of_improvement(np.array([1.0, 2.0]), np.array([0.0, 2.0])), 3)
    0.625
    >>> holm_rejects([0.01, 0.04, 0.03])  # 0.01 < 0.05/3, then 0.03 > 0.05/2 stops
    [True, False, False]
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import absl.logging
import numpy as np
import scipy.stats
from rliable import library as rly
from rliable import metrics

# rliable imports absl's logging, whose handler keeps the stderr of the moment of import (pytest's
# capture, a Hydra job's) and closes it when anything reconfigures logging (Hydra does, at every
# job): a later write to that stream then fails. The process's own stderr it never closes.
absl.logging.get_absl_handler().python_handler.stream = sys.__stderr__

#: a window of a seed's curve -> its label on the page
WINDOWS = {"whole": "whole run", "last10pct": "last 10 %", "first25pct": "first quarter",
           "last25pct": "last quarter"}
ALPHA, RESAMPLES = 0.05, 10_000


def window_mean(returns: np.ndarray, window: str) -> float:
    """The mean of a seed's per-iteration returns over ``window`` (``WINDOWS``); NaN
    iterations (no episode ended) are left out."""
    returns = np.asarray(returns, dtype=float)
    size = returns.size
    parts = {"whole": slice(None), "last10pct": slice(-max(1, math.ceil(0.1 * size)), None),
             "first25pct": slice(max(1, size // 4)), "last25pct": slice(-max(1, size // 4), None)}
    if window not in parts:
        raise ValueError(f"window must be one of {sorted(WINDOWS)}, got {window!r}.")
    part = returns[parts[window]]
    return float(np.nanmean(part)) if np.isfinite(part).any() else math.nan


def _improvement(a: np.ndarray, b: np.ndarray, rows: int = 20_000) -> np.ndarray:
    """P(X > Y) over the last axes of ``a`` and ``b`` (leading axes alike), ties half; a
    million resamples ``rows`` at a time (their pairs would take gigabytes at once)."""
    if a.ndim == 2 and a.shape[0] > rows:
        return np.concatenate([_improvement(a[i:i + rows], b[i:i + rows])
                               for i in range(0, a.shape[0], rows)])
    a, b = a[..., :, None], b[..., None, :]
    return ((a > b) + 0.5 * (a == b)).mean((-2, -1))


def probability_of_improvement(a: np.ndarray, b: np.ndarray) -> float:
    """P(X > Y) for X from ``a``, Y from ``b``, ties counting half (U / (n·m))."""
    return float(_improvement(np.asarray(a, float), np.asarray(b, float)))


def _resample(rng: np.random.Generator, values: np.ndarray, resamples: int) -> np.ndarray:
    return values[rng.integers(0, values.size, (resamples, values.size))]


def _tails(confidence: float) -> list[float]:
    """The percentiles of a two-sided interval at ``confidence`` (written as the former
    estimators wrote them, so the page's figures stay bit for bit)."""
    tail = 50 * (1 - confidence)
    return [tail, 100 - tail]


def _finite(values: Sequence[float]) -> np.ndarray:
    values = np.asarray(values, float)
    return values[np.isfinite(values)]


@dataclass(frozen=True)
class MedianComparison:
    """A − B on medians against a smallest effect of interest ``margin``. Each p-value is a
    one-sided percentile-bootstrap p-value of Δ* = median(A*) − median(B*):
    ``(1 + #{Δ* on H0's side}) / (resamples + 1)``."""

    n: int
    m: int
    margin: float
    median_difference: float
    #: the bootstrap's 5th and 95th percentiles: each a one-sided 95 % bound
    interval: tuple[float, float]
    mean_difference: float
    improvement: float  # P(A > B), ties half
    p_above_zero: float  # H0: Δ ≤ 0
    p_below_margin: float  # H0: Δ ≥ margin
    p_equivalent: float  # H0: |Δ| ≥ margin (two one-sided tests: the larger p)
    p_apart: float  # H0: |Δ| ≤ margin
    resamples: int = RESAMPLES  # the bootstrap's, which each p's Monte-Carlo error follows


def median_comparison(a: Sequence[float], b: Sequence[float], margin: float, *,
                      resamples: int = RESAMPLES, seed: int = 0) -> MedianComparison | None:
    """A − B on medians, unpaired (``None`` with fewer than 2 finite values a side)."""
    a, b = _finite(a), _finite(b)
    if a.size < 2 or b.size < 2:
        return None
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be positive and finite, got {margin}.")
    rng = np.random.default_rng(seed)
    draws = (np.median(_resample(rng, a, resamples), 1)
             - np.median(_resample(rng, b, resamples), 1))

    def p(on_null_side: np.ndarray) -> float:
        return float((1 + on_null_side.sum()) / (resamples + 1))

    low, high = np.percentile(draws, _tails(1 - 2 * ALPHA))
    return MedianComparison(
        n=a.size, m=b.size, margin=float(margin),
        median_difference=float(np.median(a) - np.median(b)),
        interval=(float(low), float(high)), mean_difference=float(a.mean() - b.mean()),
        improvement=probability_of_improvement(a, b),
        p_above_zero=p(draws <= 0), p_below_margin=p(draws >= margin),
        p_equivalent=max(p(draws <= -margin), p(draws >= margin)),
        p_apart=min(1.0, 2 * min(p(draws <= margin), p(draws >= -margin))),
        resamples=resamples)


@dataclass(frozen=True)
class MeanComparison:
    """A − B on means: the wider of a 95 % percentile bootstrap and Welch's t-interval."""

    difference: float
    interval: tuple[float, float]

    @property
    def sign(self) -> int:
        """+1: the interval above 0, −1: below, 0: it holds 0."""
        low, high = self.interval
        return 1 if low > 0 else -1 if high < 0 else 0


def mean_comparison(a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES,
                    seed: int = 0) -> MeanComparison | None:
    """A − B on means, unpaired (``None`` with fewer than 2 finite values a side)."""
    a, b = _finite(a), _finite(b)
    if a.size < 2 or b.size < 2:
        return None
    rng = np.random.default_rng(seed)
    resampled_a, resampled_b = _resample(rng, a, resamples), _resample(rng, b, resamples)
    boot = np.percentile(resampled_a.mean(1) - resampled_b.mean(1), _tails(1 - ALPHA))
    difference = float(a.mean() - b.mean())
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    if se == 0:
        welch = (difference, difference)
    else:
        va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
        dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
        half = scipy.stats.t.ppf(0.5 + (1 - ALPHA) / 2, dof) * se
        welch = (difference - half, difference + half)
    return MeanComparison(difference, (float(min(boot[0], welch[0])),
                                       float(max(boot[1], welch[1]))))


def mc_error(p: float, resamples: int) -> float:
    """A bootstrap p-value's Monte-Carlo standard error, ``√(p (1 − p) / resamples)``: the spread
    of the p that another bootstrap seed would give.

    >>> round(mc_error(0.04, 10_000), 4)
    0.002
    """
    return math.sqrt(p * (1 - p) / resamples)


#: a verdict whose deciding p lies within this many Monte-Carlo errors of its threshold is
#: *borderline*: another bootstrap seed could give another verdict
BORDERLINE_ERRORS = 3.0


def borderline(step: Step | None) -> bool:
    """Whether a deciding comparison lies within ``BORDERLINE_ERRORS`` of its threshold."""
    return step is not None and step.near < BORDERLINE_ERRORS


@dataclass(frozen=True)
class Step:
    """One comparison Holm's procedure made: a p, its Monte-Carlo error, its threshold."""

    p: float
    error: float
    threshold: float

    @property
    def near(self) -> float:
        """How many Monte-Carlo errors the p lies from its threshold (∞ without error)."""
        gap = abs(self.p - self.threshold)
        return gap / self.error if self.error > 0 else math.inf


def holm_steps(p_values: Sequence[float], errors: Sequence[float] | None = None,
               alpha: float = ALPHA) -> tuple[list[bool], list[Step]]:
    """Holm's step-down procedure: the i-th smallest p-value of k (from 0) against
    α / (k − i), stopping at the first that fails; which are rejected, and every comparison it
    made (with the p's Monte-Carlo ``errors``, none by default)."""
    errors = [0.0] * len(p_values) if errors is None else list(errors)
    rejected, steps = [False] * len(p_values), []
    for rank, index in enumerate(np.argsort(p_values, kind="stable")):
        threshold = alpha / (len(p_values) - rank)
        steps.append(Step(float(p_values[index]), float(errors[index]), threshold))
        if p_values[index] > threshold:
            break
        rejected[index] = True
    return rejected, steps


def holm_rejects(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down procedure's rejections (``holm_steps``)."""
    return holm_steps(p_values, alpha=alpha)[0]


@dataclass(frozen=True)
class Judgement:
    """A rule's verdict and the comparison nearest its threshold among those that decided it."""

    verdict: str
    step: Step | None

    @property
    def borderline(self) -> bool:
        return borderline(self.step)


def _judged(verdict: str, steps: list[Step]) -> Judgement:
    return Judgement(verdict, min(steps, key=lambda step: step.near) if steps else None)


def _errors(comparisons: Sequence[MedianComparison], name: str) -> tuple[list, list]:
    values = [getattr(c, name) for c in comparisons]
    return values, [mc_error(p, c.resamples) for p, c in zip(values, comparisons, strict=True)]


def judge_better(comparisons: Sequence[MedianComparison], alpha: float = ALPHA) -> Judgement:
    """"A better than each B_j", Holm within the claim: *not reproduced* when some A − B_j is
    below the margin with confidence; else *reproduced* when every A − B_j is above 0 with
    confidence; else *inconclusive*."""
    below, below_steps = holm_steps(*_errors(comparisons, "p_below_margin"), alpha)
    if any(below):
        return _judged("not reproduced", below_steps)
    above, above_steps = holm_steps(*_errors(comparisons, "p_above_zero"), alpha)
    return _judged("reproduced" if all(above) else "inconclusive", below_steps + above_steps)


def judge_equivalent(comparisons: Sequence[MedianComparison], alpha: float = ALPHA) -> Judgement:
    """"Each pair alike": *reproduced* when every difference lies inside ±margin by two
    one-sided tests, *not reproduced* when one lies outside with confidence, else
    *inconclusive* (Holm within the claim, each direction)."""
    inside, inside_steps = holm_steps(*_errors(comparisons, "p_equivalent"), alpha)
    if all(inside):
        return _judged("reproduced", inside_steps)
    apart, apart_steps = holm_steps(*_errors(comparisons, "p_apart"), alpha)
    return _judged("not reproduced" if any(apart) else "inconclusive",
                   inside_steps + apart_steps)


@dataclass(frozen=True)
class Sooner:
    """Do runs of A find the first reward sooner than runs of B?"""

    probability: float  # P(a run of A finds it sooner), never-found runs tied
    interval: tuple[float, float]  # its 95 % bootstrap interval
    sooner_p: float  # one-sided log-rank p: A sooner
    later_p: float  # one-sided log-rank p: A later
    reading: str  # "sooner", "later" or "not shown"
    #: the comparison nearest its threshold: the bootstrap's share of draws on the wrong side
    #: of 0.5 against α/2 (the interval's bound, with its Monte-Carlo error), or a log-rank p
    step: Step | None = None
    #: with an equivalence ``margin``: whether P(A sooner) lies within 0.5 ± margin by two
    #: one-sided tests at α (the bootstrap's share of draws at or past each bound below α: its
    #: 90 % interval inside), that interval, and the larger share (the deciding one)
    margin: float = math.nan
    as_soon: bool | None = None
    as_soon_interval: tuple[float, float] | None = None
    as_soon_step: Step | None = None

    @property
    def borderline(self) -> bool:
        return borderline(self.step)


def sooner(steps_a: np.ndarray, steps_b: np.ndarray, budget: float, *,
           resamples: int = RESAMPLES, seed: int = 0, margin: float | None = None) -> Sooner:
    """"A sooner" when P(A sooner) has its 95 % interval above 0.5 and a one-sided log-rank
    test agrees at α; "later" when both say the opposite; else "not shown". ``inf``: a run
    censored at ``budget``. With ``margin``, also whether A is *as soon* as B: P(A sooner)
    within ``0.5 ± margin`` by two one-sided bootstrap tests at α.

    >>> found = np.arange(1.0, 101.0)
    >>> s = sooner(found, found + 0.5, budget=1e3, margin=0.1)
    >>> s.reading, s.as_soon, round(s.probability, 3)
    ('not shown', True, 0.505)
    >>> sooner(found, found + 60, budget=1e3, margin=0.1).as_soon
    False
    """
    a, b = -np.minimum(steps_a, budget), -np.minimum(steps_b, budget)
    rng = np.random.default_rng(seed)
    draws = _improvement(_resample(rng, a, resamples), _resample(rng, b, resamples))
    low, high = (float(v) for v in np.percentile(draws, _tails(1 - ALPHA)))

    def censored(values: np.ndarray) -> scipy.stats.CensoredData:
        found = np.isfinite(values)
        return scipy.stats.CensoredData(uncensored=values[found],
                                        right=np.full((~found).sum(), budget))

    # scipy's "greater": the first group's event rate (finding the reward) above the other's;
    # no variance (no run found it, or all at one step): no evidence either way, p = 1
    with np.errstate(invalid="ignore", divide="ignore"):
        sooner_p, later_p = (float(np.nan_to_num(scipy.stats.logrank(
            censored(steps_a), censored(steps_b), alternative=side).pvalue, nan=1.0))
            for side in ("greater", "less"))
    reading = ("sooner" if low > 0.5 and sooner_p < ALPHA else
               "later" if high < 0.5 and later_p < ALPHA else "not shown")
    # the bootstrap's side of each reading: its share of draws at or beyond 0.5 against α/2 (its
    # interval's bound), with a Monte-Carlo error; the log-rank test's p has none. A reading can
    # change with the bootstrap's seed only through a share near α/2 whose log-rank test holds
    shares = {side: Step(share, mc_error(share, resamples), ALPHA / 2) for side, share in (
        ("sooner", float(np.mean(draws <= 0.5))), ("later", float(np.mean(draws >= 0.5))))}
    deciding = [shares[side] for side, p in (("sooner", sooner_p), ("later", later_p))
                if p < ALPHA and reading in (side, "not shown")]
    equivalence = {}
    if margin is not None:
        outside = [Step(share, mc_error(share, resamples), ALPHA) for share in (
            float(np.mean(draws >= 0.5 + margin)), float(np.mean(draws <= 0.5 - margin)))]
        equivalence = {"margin": float(margin), "as_soon": all(s.p < ALPHA for s in outside),
                       "as_soon_interval": tuple(float(v) for v in np.percentile(
                           draws, _tails(1 - 2 * ALPHA))),
                       "as_soon_step": max(outside, key=lambda s: s.p)}
    # runs that never found it tie at the budget (counted half)
    return Sooner(probability_of_improvement(-steps_a, -steps_b), (low, high), sooner_p, later_p,
                  reading, min(deciding, key=lambda step: step.near, default=None),
                  **equivalence)


@contextlib.contextmanager
def seeded_rliable(seed: int) -> Iterator[np.random.RandomState]:
    """A generator for rliable's bootstraps, whose profiles draw from numpy's global one
    (seeded here too), with arch's notice that rliable still passes ``random_state`` quieted."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "random_state is deprecated", FutureWarning)
        np.random.seed(seed)  # noqa: NPY002
        yield np.random.RandomState(seed)


def aggregate(scores: dict[str, np.ndarray], taus: np.ndarray, reference: str, *,
              reps: int = 2_000, seed: int = 0) -> dict:
    """rliable's views of ``measure -> [runs, tasks]`` normalised scores: each measure's IQM,
    its performance profile over ``taus`` and P(``reference`` > it), each with rliable's
    stratified-bootstrap 95 % interval (``{"iqm": {m: (point, low, high)}, ...}``)."""
    pairs = {f"{reference},{m}": [scores[reference], scores[m]] for m in scores if m != reference}
    with seeded_rliable(seed) as generator:
        points, intervals = rly.get_interval_estimates(
            scores, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=reps,
            random_state=generator)
        profiles, bands = rly.create_performance_profile(scores, taus, reps=reps)
        improvement, improvement_ci = rly.get_interval_estimates(
            pairs, metrics.probability_of_improvement, reps=reps, random_state=generator)
    return {"iqm": {m: (float(points[m][0]), *map(float, intervals[m][:, 0])) for m in scores},
            "profiles": {m: (profiles[m], *bands[m]) for m in scores},
            "improvement": {key.split(",")[1]: (float(improvement[key]),
                                                *map(float, improvement_ci[key].ravel()))
                            for key in pairs}}
