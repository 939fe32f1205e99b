"""recipes/study/study_statistics.py: each estimator against a closed form or scipy, and the
verdicts on synthetic studies whose answer is known."""

import math

import numpy as np
import pytest
import scipy.stats
from recipe_modules import load_recipe

stats = load_recipe("study/study_statistics")
RESAMPLES = 4_000  # enough for stable intervals on these samples, cheap for the suite


def test_the_three_windows_are_their_means():
    returns = np.arange(200.0)
    assert stats.window_mean(returns, "last10") == pytest.approx(np.mean(returns[-10:]))
    assert stats.window_mean(returns, "last10pct") == pytest.approx(np.mean(returns[-20:]))
    assert stats.window_mean(returns, "whole") == pytest.approx(99.5)
    short = np.array([1.0, np.nan, 5.0])  # 10 % of 3 iterations: the last one
    assert stats.window_mean(short, "last10pct") == 5.0
    assert stats.window_mean(short, "whole") == 3.0  # an iteration without an episode left out
    assert math.isnan(stats.window_mean(np.array([np.nan]), "last10"))
    with pytest.raises(ValueError, match="window must be one of"):
        stats.window_mean(returns, "last5")


def test_the_probability_of_improvement_counts_pairs_and_half_the_ties():
    a, b = np.array([3.0, 1.0, 2.0]), np.array([2.0, 0.0])
    # pairs: 3>2, 3>0, 1<2, 1>0, 2=2 (half), 2>0: 4.5 of 6
    assert stats.probability_of_improvement(a, b) == pytest.approx(4.5 / 6)
    u = scipy.stats.mannwhitneyu(a, b).statistic
    assert stats.probability_of_improvement(a, b) == pytest.approx(u / 6)


def test_welchs_interval_and_p_value_are_scipys():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 1.0, 12), rng.normal(0.0, 3.0, 20)
    low, high, p = stats.welch_interval(a, b, 0.95)
    test = scipy.stats.ttest_ind(a, b, equal_var=False)
    interval = test.confidence_interval(0.95)
    assert (low, high) == pytest.approx((interval.low, interval.high))
    assert p == pytest.approx(test.pvalue)


def test_a_true_difference_is_found_and_no_difference_is_not():
    rng = np.random.default_rng(2)
    base = rng.normal(0.0, 1.0, 20)
    better = stats.compare(base + 2.0, base[::-1], resamples=RESAMPLES)
    assert better.sign == 1 and better.difference == pytest.approx(2.0)
    assert better.improvement > 0.8 and better.improvement_interval[0] > 0.5
    # the verdict reads the wider interval: the union of the bootstrap's and Welch's
    assert better.interval[0] == min(better.bootstrap[0], better.welch[0])
    assert better.interval[1] == max(better.bootstrap[1], better.welch[1])
    same = stats.compare(base, base[::-1], resamples=RESAMPLES)  # the same seeds' values
    assert same.difference == pytest.approx(0.0) and same.sign == 0
    assert same.improvement == pytest.approx(0.5)
    assert stats.compare([1.0], [2.0, 3.0]) is None  # one seed: nothing to judge


def test_holm_judges_the_smallest_p_value_strictest():
    levels = stats.holm_levels([0.01, 0.04, 0.03])
    assert levels == pytest.approx([1 - 0.05 / 3, 1 - 0.05 / 1, 1 - 0.05 / 2])
    rng = np.random.default_rng(3)
    a = rng.normal(0.0, 1.0, 20)
    # rivals are a's values shifted: the intervals of A − rival shift alike, so the upper ends
    # at d = 0 say which shift each level finds
    h95 = stats.compare(a, a[::-1], resamples=RESAMPLES).interval[1]
    h975 = stats.compare(a, a[::-1], confidence=1 - 0.05 / 2, resamples=RESAMPLES).interval[1]
    assert h975 > h95 > 0
    # two rivals a little above A, each found at 95 % alone: Holm judges the smaller p-value at
    # 97.5 %, where it holds 0, and then stops (step-down): neither is found
    between = [h95 + 0.6 * (h975 - h95), h95 + 0.4 * (h975 - h95)]
    rivals = [a[::-1] + shift for shift in between]
    assert [stats.compare(a, r, resamples=RESAMPLES).sign for r in rivals] == [-1, -1]
    assert stats.holm_signs([a] * 2, rivals, resamples=RESAMPLES) == [0, 0]
    # with one far below beside them: it is judged first (at 1 − α/3) and found; then the two
    # at 97.5 % and 95 % as before
    far = [a[::-1] - 5.0, *rivals]
    assert stats.holm_signs([a] * 3, far, resamples=RESAMPLES) == [1, 0, 0]
    # and a single one is judged at 95 %
    assert stats.holm_signs([a], rivals[:1], resamples=RESAMPLES) == [-1]


def test_equivalence_within_and_outside_the_margin():
    rng = np.random.default_rng(4)
    a = rng.normal(0.0, 1.0, 20)
    assert stats.equivalent(a, a[::-1] + 0.1, margin=1.5, resamples=RESAMPLES)
    assert not stats.equivalent(a, a[::-1] + 0.1, margin=0.2, resamples=RESAMPLES)  # too noisy
    assert not stats.equivalent(a, a[::-1] + 3.0, margin=1.5, resamples=RESAMPLES)
    groups = [a, a[::-1] + 0.1, np.roll(a, 3) - 0.1]
    assert stats.judge_alike(groups, 1.5, resamples=RESAMPLES) == "reproduced"
    assert stats.judge_alike([a, a[::-1] + 4.0], 1.5, resamples=RESAMPLES) == "not reproduced"
    assert stats.judge_alike([a, a[::-1] + 0.1], 0.2, resamples=RESAMPLES) == "inconclusive"


def _curves(level_late: float, level_early: float, seeds: int, iterations: int = 100,
             seed: int = 0) -> list[np.ndarray]:
    """Seeds' curves at ``level_early`` for 85 % of the run, then ``level_late``, with noise."""
    rng = np.random.default_rng(seed)
    switch = int(0.85 * iterations)
    base = np.r_[np.full(switch, level_early), np.full(iterations - switch, level_late)]
    return [base + rng.normal(0.0, 0.3, iterations) for _ in range(seeds)]


def test_a_claim_that_holds_in_one_window_only_is_inconclusive():
    vase = _curves(10.0, 0.0, 20, seed=5)  # above at the end, below over the run
    rival = _curves(5.0, 5.0, 20, seed=6)
    per_window = {}
    for window in stats.WINDOWS:
        a = [stats.window_mean(c, window) for c in vase]
        b = [stats.window_mean(c, window) for c in rival]
        per_window[window] = stats.judge_above(a, [b], resamples=RESAMPLES)
    assert per_window == {"last10": "reproduced", "last10pct": "reproduced",
                          "whole": "not reproduced"}
    assert stats.verdict(per_window) == "inconclusive"
    assert stats.verdict(dict.fromkeys(stats.WINDOWS, "reproduced")) == "reproduced"
    assert stats.verdict(dict.fromkeys(stats.WINDOWS, "not reproduced")) == "not reproduced"
    assert stats.verdict({"last10": "reproduced", "whole": "not measured yet"}) == \
        "not measured yet"


def test_the_aggregates_are_rliables_on_known_scores():
    scores = {"t1": {"a": np.array([0.0, 10.0, 20.0, 30.0]), "b": np.array([5.0, 5.0])},
              "t2": {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}}
    normalised, ranges = stats.normalise(scores)
    assert ranges == {"t1": (0.0, 30.0), "t2": (1.0, 4.0)}
    np.testing.assert_allclose(normalised["t1"]["a"], [0, 1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(normalised["t2"]["b"], [2 / 3, 1])
    values = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0])
    assert stats.iqm(values) == pytest.approx(np.mean([2.0, 3.0, 4.0, 5.0]))
    point, low, high = stats.aggregate_iqm([normalised["t1"]["a"], normalised["t2"]["a"]],
                                           resamples=RESAMPLES)
    # each task weighs alike: t1's four runs 1/8 each, t2's two (0 and 1/3) 1/4 each; sorted,
    # 0 (1/8), 0 (1/4), 1/3 (1/8), 1/3 (1/4), 2/3, 1: inside the middle half [1/4, 3/4] lie
    # 1/8 of the second 0, all of the first 1/3 and all of the second: (1/3)(3/8) / (1/2)
    assert point == pytest.approx(0.25) and low <= point <= high
    # with equal weights, rliable's IQM (scipy's trimmed mean) where the count divides by 4
    assert stats.weighted_iqm(values, np.ones(8)) == pytest.approx(stats.iqm(values))
    equal = [normalised["t1"]["a"], np.array([0.1, 0.2, 0.9, 0.5])]
    assert stats.aggregate_iqm(equal, resamples=RESAMPLES)[0] == pytest.approx(
        stats.iqm(np.concatenate(equal)))
    rows = np.array([[3.0, 1.0, 2.0, 0.0], [0.0, 0.0, 4.0, 4.0]])  # bootstrap draws: per row
    np.testing.assert_allclose(stats.weighted_iqm(rows, np.ones(4)), [1.5, 2.0])
    taus = np.array([0.0, 0.5, 0.9])
    profile, low, high = stats.performance_profile([normalised["t1"]["a"],
                                                    normalised["t2"]["a"]], taus,
                                                   resamples=RESAMPLES)
    # t1: 3 of 4 above 0, 2 of 4 above 0.5, 1 above 0.9; t2 (0 and 1/3): 1 of 2 above 0
    np.testing.assert_allclose(profile, [(3 / 4 + 1 / 2) / 2, (2 / 4 + 0) / 2, (1 / 4 + 0) / 2])
    assert (low <= profile + 1e-12).all() and (profile <= high + 1e-12).all()
    point, low, high = stats.aggregate_improvement(
        [scores["t1"]["a"], scores["t2"]["a"]], [scores["t1"]["b"], scores["t2"]["b"]],
        resamples=RESAMPLES)
    # t1: a above 5 in 2 of 4 (10, 20, 30 above; 0 below): 6 of 8 pairs; t2: never
    assert point == pytest.approx((6 / 8 + 0.0) / 2) and low <= point <= high


# ------------------------------------------------------------------------------------------------
# The three-outcome rule (issue 77)
# ------------------------------------------------------------------------------------------------
def _judge(a, b, margin):
    comparison = stats.median_comparison(a, b, margin, resamples=RESAMPLES)
    return stats.judge_better([comparison]), comparison


def test_the_quarters_of_a_run_are_their_means():
    returns = np.arange(100.0)
    assert stats.window_mean(returns, "first25pct") == pytest.approx(12.0)
    assert stats.window_mean(returns, "last25pct") == pytest.approx(87.0)


def test_the_median_comparison_reads_medians_with_the_mean_and_rank_statistic_beside():
    a, b = np.array([1.0, 2.0, 3.0, 100.0]), np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    comparison = stats.median_comparison(a, b, 1.0, resamples=RESAMPLES)
    assert comparison.median_difference == pytest.approx(2.5 - 1.0)
    assert comparison.mean_difference == pytest.approx(26.5 - 1.0)
    assert comparison.improvement == pytest.approx(stats.probability_of_improvement(a, b))
    # a bootstrap p-value is the share of resampled differences on H0's side, one added
    rng = np.random.default_rng(0)
    draws = (np.median(a[rng.integers(0, 4, (RESAMPLES, 4))], 1)
             - np.median(b[rng.integers(0, 5, (RESAMPLES, 5))], 1))
    assert comparison.p_above_zero == pytest.approx(((draws <= 0).sum() + 1) / (RESAMPLES + 1))
    assert comparison.p_below_margin == pytest.approx(((draws >= 1.0).sum() + 1)
                                                      / (RESAMPLES + 1))
    assert stats.median_comparison([1.0], [2.0, 3.0], 1.0) is None
    with pytest.raises(ValueError, match="margin must be positive"):
        stats.median_comparison(a, b, 0.0)


def test_a_true_difference_beyond_the_margin_is_reproduced():
    rng = np.random.default_rng(3)
    verdict, comparison = _judge(rng.normal(5.0, 1.0, 20), rng.normal(0.0, 1.0, 20), margin=1.0)
    assert verdict == "reproduced" and comparison.interval[0] > 0


def test_no_difference_inside_the_margin_is_not_reproduced_and_the_old_rule_could_not_say_so():
    rng = np.random.default_rng(4)
    a, b = rng.normal(0.0, 0.1, 20), rng.normal(0.0, 0.1, 20)
    verdict, comparison = _judge(a, b, margin=1.0)
    assert verdict == "not reproduced" and comparison.interval[1] < 1.0
    # the earlier rule (a reversal needed) calls the same data inconclusive
    assert stats.judge_above(a, [b], resamples=RESAMPLES) == "inconclusive"


def test_a_small_noisy_difference_is_inconclusive():
    rng = np.random.default_rng(5)
    # a true advantage of half the margin, too noisy at 20 seeds for either side to show
    verdict, comparison = _judge(rng.normal(0.5, 3.0, 20), rng.normal(0.0, 3.0, 20), margin=1.0)
    assert verdict == "inconclusive"
    assert comparison.interval[0] < 0 < 1.0 < comparison.interval[1]


def test_a_worse_measure_is_not_reproduced():
    rng = np.random.default_rng(6)
    verdict, _ = _judge(rng.normal(-3.0, 1.0, 20), rng.normal(0.0, 1.0, 20), margin=1.0)
    assert verdict == "not reproduced"


def test_median_and_mean_can_disagree_and_the_median_decides():
    # A's typical seed is ahead by 2, but three of B's seeds found a far larger reward: the
    # mean puts B ahead, the median (the paper's figure) A
    rng = np.random.default_rng(7)
    a = rng.normal(3.0, 0.3, 20)
    b = np.concatenate([rng.normal(1.0, 0.3, 17), [60.0, 70.0, 80.0]])
    verdict, comparison = _judge(a, b, margin=1.0)
    assert comparison.mean_difference < 0 < comparison.median_difference
    assert verdict == "reproduced"


def test_equivalence_is_reproduced_inside_the_margin_and_refuted_outside_it():
    rng = np.random.default_rng(8)
    base = rng.normal(0.0, 0.2, 20)

    def judged(shift):
        return stats.judge_equivalent([stats.median_comparison(
            base + shift, rng.normal(0.0, 0.2, 20), 1.0, resamples=RESAMPLES)])

    assert judged(0.0) == "reproduced"
    assert judged(3.0) == "not reproduced"
    assert judged(-3.0) == "not reproduced"
    noisy = [stats.median_comparison(rng.normal(0.0, 4.0, 20), rng.normal(0.0, 4.0, 20), 1.0,
                                     resamples=RESAMPLES)]
    assert stats.judge_equivalent(noisy) == "inconclusive"


def test_holm_rejects_step_down_and_stops_at_the_first_failure():
    # k = 3: the smallest against α/3, the next α/2, the last α
    assert stats.holm_rejects([0.01, 0.04, 0.02]) == [True, True, True]
    assert stats.holm_rejects([0.01, 0.04, 0.026]) == [True, False, False]
    assert stats.holm_rejects([0.03, 0.001, 0.5]) == [False, True, False]
    # one comparison of a claim below the margin refutes it; all must clear 0 to reproduce
    rng = np.random.default_rng(9)
    far = stats.median_comparison(rng.normal(5, 1, 20), rng.normal(0, 1, 20), 1.0,
                                  resamples=RESAMPLES)
    level = stats.median_comparison(rng.normal(0, 0.1, 20), rng.normal(0, 0.1, 20), 1.0,
                                    resamples=RESAMPLES)
    assert stats.judge_better([far, far]) == "reproduced"
    assert stats.judge_better([far, level]) == "not reproduced"


def test_the_aggregates_equal_rliables_own_on_the_study_s_runs():
    """rliable 1.2.0 run on the study's untouched cells (``recipes/study/rliable_reference.py``,
    in an environment of its own: it does not import under this project's pandas): its IQM and
    probability of improvement equal ours on the same runs; its bootstrap interval (another
    generator) agrees within 0.02."""
    import json

    reference = load_recipe("study/rliable_reference")
    recorded = json.loads(reference.OUT.read_text())
    scores = reference.study_scores()
    assert list(scores) == recorded["measures"]
    for measure, matrix in scores.items():
        by_task = list(matrix.T)  # every task has as many runs: rliable's matrix
        point, low, high = stats.aggregate_iqm(by_task, resamples=RESAMPLES)
        assert point == pytest.approx(recorded["iqm"][measure], abs=1e-12)
        assert (low, high) == pytest.approx(recorded["iqm_interval"][measure], abs=0.02)
    for pair, value in recorded["probability_of_improvement"].items():
        a, b = pair.split(",")
        ours, *_ = stats.aggregate_improvement(list(scores[a].T), list(scores[b].T),
                                               resamples=200)
        assert ours == pytest.approx(value, abs=1e-12)
