"""recipes/study/paper_grid_report.py and the modules it assembles (study_runs, study_figures,
earlier_study_report, figure3_report with figure3_claims and figure3_status): the statistics and
verdicts against direct computations."""

import math
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from exported_runs import write_run
from recipe_modules import load_recipe

report = load_recipe("study/paper_grid_report")
runs_of = load_recipe("study/study_runs")
style = load_recipe("study/study_figures")
earlier = load_recipe("study/earlier_study_report")
figure3 = load_recipe("study/figure3_report")
claims_of = load_recipe("study/figure3_claims")
status = load_recipe("study/figure3_status")
stats = load_recipe("study/study_statistics")


def _seed(seed: int, returns, first_reward: float = np.nan, frames_per_batch: int = 5000):
    returns = np.asarray(returns, dtype=float)
    frames = frames_per_batch * np.arange(1, returns.size + 1, dtype=float)
    return runs_of.Seed(seed, frames, returns, first_reward)


def test_final_early_and_whole_run_returns_are_their_means():
    run = _seed(0, np.arange(40.0))
    assert run.final == pytest.approx(np.mean(np.arange(30.0, 40.0)))  # the last 10 iterations
    assert run.early == pytest.approx(np.mean(np.arange(10.0)))  # the first quarter
    assert run.whole == pytest.approx(19.5)
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    expected = [np.mean(values[max(0, i - 2): i + 1]) for i in range(values.size)]
    np.testing.assert_allclose(style.running_mean(values, window=3), expected)
    # an iteration without a finished episode has no return: left out, not counted as 0
    gappy = np.array([2.0, np.nan, 4.0, np.nan, np.nan, np.nan])
    np.testing.assert_allclose(style.running_mean(gappy, window=3),
                               [2.0, 2.0, 3.0, 4.0, 4.0, np.nan])


def test_the_paired_difference_is_the_mean_over_shared_seeds_with_a_bootstrap_interval():
    rng = np.random.default_rng(3)
    diffs = rng.normal(2.0, 1.0, size=8)
    a = [_seed(s, [0.0] * 10 + [d] * 10) for s, d in enumerate(diffs)]
    b = [_seed(s, [0.0] * 20) for s in range(8)] + [_seed(99, [50.0] * 20)]  # 99 unpaired
    difference = earlier.paired_difference(a, b)
    assert difference.pairs == 8 and difference.mean == pytest.approx(diffs.mean())
    resampled = diffs[np.random.default_rng(11).integers(0, 8, size=(20_000, 8))].mean(1)
    assert difference.low == pytest.approx(np.percentile(resampled, 2.5), abs=0.1)
    assert difference.high == pytest.approx(np.percentile(resampled, 97.5), abs=0.1)
    assert difference.verdict == "above"
    assert earlier.paired_difference(b[:8], a).verdict == "below"
    assert earlier.paired_difference(a[:4], b).verdict == "not measured yet"  # 4 < 5 pairs


def test_claims_are_reproduced_refuted_inconclusive_or_not_measured_as_their_intervals_say():
    claim = earlier.Claim("half_cheetah", "VASE above NLL", above=(("vase", "nll", "final"),))
    high = [_seed(s, [10.0 + s] * 10) for s in range(6)]
    low = [_seed(s, [1.0 + 0.5 * s] * 10) for s in range(6)]
    noisy = [_seed(s, [10.0 + (-1) ** s * 20.0] * 10) for s in range(6)]
    assert earlier.judge(claim, {"vase": high, "nll": low})[0] == "reproduced"
    assert earlier.judge(claim, {"vase": low, "nll": high})[0] == "not reproduced"
    assert earlier.judge(claim, {"vase": noisy, "nll": high})[0] == "inconclusive"
    verdict, evidence = earlier.judge(claim, {"vase": high[:3], "nll": low})
    assert verdict == "not measured yet" and "(3)" in evidence[0]
    # the paper's DoublePendulum: VIME ahead early, VASE ahead at the end
    double = earlier.Claim("double_pendulum", "", above=(("vime", "vase", "early"),
                                                         ("vase", "vime", "final")))
    vime = [_seed(s, [5.0 + s] * 10 + [5.0] * 30) for s in range(5)]
    vase = [_seed(s, [1.0] * 10 + [9.0 + s] * 30) for s in range(5)]
    assert earlier.judge(double, {"vime": vime, "vase": vase})[0] == "reproduced"
    alike = earlier.Claim("lunar_lander", "", alike=(("vase", "none"),))
    assert earlier.judge(alike, {"vase": noisy, "none": high})[0] == "reproduced"
    assert earlier.judge(alike, {"vase": high, "none": low})[0] == "not reproduced"


def test_a_claim_about_no_surprise_is_judged_against_both_trpo_curves():
    for claim in earlier.CLAIMS:
        pairs = [(a, b) for a, b, _ in claim.above] + list(claim.alike)
        assert {a for a, b in pairs if b == "none"} == {a for a, b in pairs if b == "trpo_authors"}
    [lunar] = [claim for claim in earlier.CLAIMS if claim.alike]
    control = [_seed(s, [100.0 + (-1) ** s * 5.0] * 10) for s in range(5)]
    bonus = [_seed(s, [100.0 + (-1) ** (s + 1) * 5.0] * 10) for s in range(5)]
    below = [_seed(s, [40.0 + s] * 10) for s in range(5)]
    runs = {"vase": bonus, "nll": bonus, "vime": bonus, "none": control}
    assert earlier.judge(lunar, {**runs, "trpo_authors": control})[0] == "reproduced"
    # alike the control but far above the paper's TRPO curve: not "alike no surprise"
    verdict, evidence = earlier.judge(lunar, {**runs, "trpo_authors": below})
    assert verdict == "not reproduced" and len(evidence) == 6
    assert earlier.judge(lunar, runs)[0] == "not measured yet"  # the authors' TRPO not run


def test_the_first_batch_touch_count_reads_each_run_s_first_reward_frame():
    runs = {"none": [_seed(0, [0.0] * 5, first_reward=5000.0), _seed(1, [0.0] * 5)],
            "vase": [_seed(0, [0.0] * 5, first_reward=1200.0),
                     _seed(1, [0.0] * 5, first_reward=10_000.0)]}
    assert earlier.first_batch_touches(runs) == (2, 4)


def _export(path: Path, returns, first_reward=None, agreement=None) -> None:
    # the self-agreement is not logged at the first iteration (no model yet)
    metrics = (None if agreement is None else
               {"bonus/self_agreement": [None, *[agreement] * (len(returns) - 1)]})
    write_run(path, returns, first_reward=first_reward, metrics=metrics)


def _text_pixels_in_the_docs_column(figure) -> list[tuple[float, str]]:
    """Each visible text's height in pixels where the docs show the figure: saved at the
    report's dpi, shown at most ``COLUMN_PX`` wide."""
    width = figure.get_figwidth() * style.DPI
    shrink = min(1.0, style.COLUMN_PX / width)
    return [(text.get_fontsize() * style.DPI / 72 * shrink, text.get_text())
            for text in figure.findobj(plt.Text) if text.get_visible() and text.get_text()]


def test_the_report_writes_its_figures_and_tables_from_exported_runs(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    grid = tmp_path / "grid"
    for seed in range(5):
        _export(grid / "half_cheetah" / "vase" / f"seed{seed}.csv", [0.0] * 5 + [8.0 + seed] * 15,
                first_reward=25_000, agreement=0.5)
        _export(grid / "half_cheetah" / "nll" / f"seed{seed}.csv", [0.0] * 20, agreement=0.9)
    for seed in (0, 1, 3):  # a secondary: VASE at the paper's text settings, three of five seeds
        _export(grid / "half_cheetah" / "vase_paper" / f"seed{seed}.csv",
                [0.0] * 10 + [2.0 * seed] * 10)
    for seed in (0, 1):  # and one paired with that secondary, not with VASE
        _export(grid / "half_cheetah" / "vase_paper_n50" / f"seed{seed}.csv",
                [0.0] * 10 + [5.0] * 10)
    written = report.report(grid, tmp_path / "docs" / "results.md")
    text = written["report"].read_text()
    row = next(line for line in text.splitlines()
               if line.startswith("| HalfCheetah | VASE always performs better than NLL"))
    assert "VASE − NLL: +10.0 [+8.8, +11.2] (5)" in row and "**reproduced**" in row
    assert row.endswith("| 5 seeds × 20 iterations |")
    assert "| VASE | 5 | 10.0 [" in text and "| 5/5 | 25,000 |" in text
    assert "| HalfCheetah | NLL | 5 | 0.90 | 0.90 |" in text
    assert "## Ant\n\nNot run yet." in text
    assert "](../grid/figure3.png)" in text  # linked from the page to the figures beside the CSVs
    assert "| HalfCheetah | 600 | – | 5 | 5 | – | – | – | 10 seeds" in text
    # the secondary: its own row, paired with VASE on the seeds both ran (0, 1, 3: the finals
    # 0, 2, 6 against 8, 9, 11, so −8, −7, −5), in no claim, counted under the status table
    assert "| VASE, paper's text settings | 3 | " in text
    assert "| VASE, paper's text settings − VASE | -6.7 [" in text and "(n = 3)" in text
    claims = text[text.index("## The paper's claims"):text.index("## Figure 3")]
    assert "VASE − NLL" in claims and "paper's text" not in claims
    assert ("| VASE, paper's text settings, N = 50 − VASE, paper's text settings | +4.0 [+3.0, "
            "+5.0] (n = 2) | not measured yet |") in text
    assert ("Secondaries (seeds): VASE, paper's text settings: HalfCheetah 3; VASE, paper's "
            "text settings, N = 50: HalfCheetah 2.") in text
    for name in ("figure3", "first_reward", "self_agreement"):
        image = plt.imread(written[name])
        assert image.shape[0] > 500 and image.std() > 0.01, name
    assert "[![Median return per task and measure](../grid/figure3.png)](../grid/figure3.png)" \
        in text  # a click opens it full size
    assert len(drawn) == 3
    for figure in drawn:
        small = [t for t in _text_pixels_in_the_docs_column(figure) if t[0] < 10]
        assert not small, small


def test_the_studys_figures_are_legible_in_the_docs_column(tmp_path, monkeypatch):
    _study(tmp_path / "study", "half_cheetah", {"vase": (5, 9), "nll": (1, 1), "vime": (1, 2),
                                                "trpo_authors": (0, 0), "none": (0, 1)})
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    _, written = figure3.study_section(tmp_path / "study", tmp_path / "figures", "figures")
    assert {"curves", "extras"} <= set(written) and len(drawn) >= 2
    for figure in drawn:
        texts = _text_pixels_in_the_docs_column(figure)
        assert texts and min(size for size, _ in texts) >= 10, sorted(texts)[:3]


# ------------------------------------------------------------------------------------------------
# The study at the authors' configuration (issue 38): claims in three windows, unpaired
# ------------------------------------------------------------------------------------------------
def _write_seed(path: Path, returns, first_reward: float | None = None) -> None:
    write_run(path, returns, first_reward=first_reward)


def _study(root: Path, task: str, levels: dict[str, tuple[float, float]], seeds: int = 8,
           iterations: int = 60) -> None:
    """Seeds of each measure: ``(early, late)`` levels (the switch at 85 % of the run), noise."""
    rng = np.random.default_rng(len(task))
    for measure, (early, late) in levels.items():
        for seed in range(seeds):
            switch = int(0.85 * iterations)
            curve = np.r_[np.full(switch, early), np.full(iterations - switch, late)]
            _write_seed(root / task / measure / f"seed{seed}.csv",
                        curve + rng.normal(0, 0.2, iterations))


def test_the_studys_claims_follow_the_three_outcome_rule_on_the_whole_run(tmp_path):
    # HalfCheetah: VASE above every rival throughout; Ant: VASE below for 85 % of the run,
    # above at the end (the last 10 % disagrees: flagged); LunarLander: every measure alike;
    # MountainCar: VIME level with the others at the top (an advantage ruled out)
    _study(tmp_path, "half_cheetah", {"vase": (5, 9), "nll": (1, 1), "vime": (1, 2),
                                      "trpo_authors": (0, 0), "none": (0, 1)})
    _study(tmp_path, "ant", {"vase": (0, 9), "nll": (4, 4), "vime": (4, 4),
                             "trpo_authors": (4, 4), "none": (4, 4)})
    _study(tmp_path, "lunar_lander", {m: (-100, 50) for m in
                                      ("vase", "nll", "vime", "trpo_authors", "none")})
    _study(tmp_path, "mountain_car", {"vime": (1, 1), "vase": (1, 1), "nll": (1, 1),
                                      "trpo_authors": (0, 1), "none": (0, 1)})
    data = runs_of.load(tmp_path, claims_of.STUDY_MEASURES)
    listed = claims_of.study_claims(data, resamples=2000)
    claims = {(c.key, c.task): c for c in listed}
    good = claims["good", "half_cheetah"]
    assert (good.verdict, good.sensitivity, good.flagged) == ("reproduced", "reproduced", False)
    ant = claims["good", "ant"]
    assert (ant.verdict, ant.sensitivity, ant.flagged) == ("not reproduced", "reproduced", True)
    assert ant.earlier == "inconclusive"  # the earlier rule: the three windows disagreed
    # the primary window is the whole run, on medians: Ant's VASE − NLL there, recomputed
    _, primary, _ = next(c for c in ant.comparisons if c[0].b == "nll")
    vase = [np.mean(s.returns) for s in data["ant"]["vase"]]
    nll = [np.mean(s.returns) for s in data["ant"]["nll"]]
    assert primary.median_difference == pytest.approx(np.median(vase) - np.median(nll))
    assert primary.mean_difference == pytest.approx(np.mean(vase) - np.mean(nll))
    # the margin: 10 % of the 5th-95th percentile span of every iteration of the task's runs
    every = np.concatenate([s.returns for m in ("vase", "nll", "vime", "trpo_authors", "none")
                            for s in data["ant"][m]])
    assert ant.margin == pytest.approx(0.1 * np.subtract(*np.percentile(every, [95, 5])))
    assert claims["nll", "half_cheetah"].verdict == "reproduced"
    assert claims["lunar_lander", "lunar_lander"].verdict == "reproduced"
    assert claims["mountain_car", "mountain_car"].verdict == "not reproduced"
    assert claims["good", "cartpole_swingup"].verdict == "not measured yet"
    summary = claims_of.claims_summary(listed, {})  # no point-robot run: not measured yet
    assert summary.startswith("**In short:** of the paper's 13 claims (a claim on each task it "
                              "names), 3 reproduced (“VASE shows good results” on HalfCheetah; "
                              "“VASE better than NLL” on HalfCheetah; “all alike” on "
                              "LunarLanderContinuous), ")
    assert summary.rstrip().endswith(
        f"The last 10 % of the run gives another verdict for "
        f"{sum(c.flagged for c in listed)} of them (⚑ in the table).")
    assert claims_of.study_claims_table(data, claims=listed) == claims_of.study_claims_table(
        data, resamples=2000)  # the claims computed once serve the table alike
    page = claims_of.study_claims_table(data, claims=listed)
    assert ("| Ant | **not reproduced** ([the numbers](#claim-good-ant)) | ⚑ reproduced | "
            "inconclusive | ") in page
    assert ("| HalfCheetah | **reproduced** ([the numbers](#claim-good-half-cheetah)) | "
            "reproduced | ") in page
    assert "| CartpoleSwingup | **not measured yet** | – |" in page
    assert "#claim-good-cartpole-swingup" not in page  # no numbers to link to
    block = page[page.index("{: #claim-good-ant }"):].split("\n\n")[2].splitlines()
    assert block[0] == ("| A − B | median [5 %, 95 %] | mean | P(A > B) | "
                        "last 10 %: median [5 %, 95 %] |")
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in block[2:]}
    assert list(rows) == ["VASE − VIME", "VASE − NLL", "VASE − TRPO (authors')",
                          "VASE − none (control)", "*verdict*"]
    assert rows["VASE − NLL"].startswith(f"| VASE − NLL | {primary.median_difference:+.3g} [")
    assert rows["*verdict*"] == "| *verdict* | *not reproduced* | | | *reproduced* |"
    lander = page[page.index("{: #claim-lunar-lander-lunar-lander }"):]
    assert lander.split("\n\n")[1].startswith("The task's equivalence margin: ±")


def test_the_aggregate_across_tasks_is_on_the_page_as_numbers(tmp_path):
    measures = ("vase", "nll", "vime", "trpo_authors", "none")
    _study(tmp_path, "half_cheetah", {"vase": (5, 9), "nll": (1, 1), "vime": (1, 2),
                                      "trpo_authors": (0, 0), "none": (0, 1)})
    _study(tmp_path, "ant", {"vase": (0, 9)})  # not every measure ran there: left out
    data = runs_of.load(tmp_path, claims_of.STUDY_MEASURES)
    result = figure3.aggregate(data, measures)
    assert result["tasks"] == ["half_cheetah"]
    # one task: each seed's last-10 return, min-max normalised over every run of the five
    scores = {m: claims_of.seed_windows(data["half_cheetah"][m], "last10") for m in measures}
    low = min(v.min() for v in scores.values())
    high = max(v.max() for v in scores.values())
    iqm = {m: stats.iqm((v - low) / (high - low)) for m, v in scores.items()}  # one task: plain
    assert {m: result["iqm"][m][0] for m in measures} == pytest.approx(iqm)
    assert result["improvement"]["nll"][0] == 1.0  # every VASE seed above every NLL seed
    table = figure3.aggregate_table(result)
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| measure")}
    assert list(rows) == ["VASE", "NLL", "VIME", "TRPO (authors')", "none (control)"]
    point, lo, hi = result["iqm"]["vime"]
    assert rows["VIME"].startswith(f"| VIME | {point:.2f} [{lo:.2f}, {hi:.2f}] | ")
    assert rows["VASE"].endswith(" | – |")  # VASE against itself: no row of its own
    assert rows["NLL"].endswith(" | 1.00 [1.00, 1.00] |")


def test_the_point_robot_claim_counts_runs_that_never_found_it(tmp_path):
    for seed in range(6):
        _write_seed(tmp_path / "point_robot" / "vase" / f"seed{seed}.csv", [0.0] * 5,
                    first_reward=20_000 + 1000 * seed)
        # plain TRPO: two of six find it late, four run the whole budget without it
        steps = 500 if seed >= 2 else 400
        _write_seed(tmp_path / "point_robot" / "none" / f"seed{seed}.csv", [0.0] * steps,
                    first_reward=None if seed >= 2 else 1_900_000)
    runs = claims_of.load_point_robot(tmp_path)
    assert np.isinf(claims_of.first_reward_steps(runs["none"])).sum() == 4
    assert claims_of.kaplan_meier_median(claims_of.first_reward_steps(runs["vase"])) == 22_500
    measured, result, seeds = claims_of.point_robot_row(runs)
    assert result == "reproduced" and seeds == "none 6, VASE 6"
    assert "(none): found by 2 of 6" in measured and "median beyond the budget" in measured
    assert "P(VASE finds it sooner than none) 1.00" in measured
    sooner = claims_of.logrank_p(claims_of.first_reward_steps(runs["vase"]),
                              claims_of.first_reward_steps(runs["none"]), "sooner")
    assert f"log-rank test, one-sided: p = {sooner:.2g} (sooner)" in measured and sooner < 0.05
    # the other way round, the same evidence says "not reproduced"; alike, "inconclusive"
    swapped = claims_of.point_robot_row({"vase": runs["none"], "none": runs["vase"]})
    assert swapped[1] == "not reproduced"
    alike = claims_of.point_robot_row({"vase": runs["vase"], "none": runs["vase"]})
    assert alike[1] == "inconclusive"
    # on the page: a row of the claims' table, its numbers with the other claims'
    page = claims_of.study_claims_table({}, runs, resamples=200)
    assert ("| point robot (steps to the first reward) | **reproduced** (none found it in 2 of "
            "6 runs, VASE found it in 6 of 6 runs; [the numbers](#claim-point-robot)) | – | "
            "reproduced (the same rule) | none 6, VASE 6 |") in page
    heading = page[:page.index("\n{: #claim-point-robot }")].splitlines()[-1]
    assert heading.startswith("**Point robot**") and heading.endswith(
        "(none 6, VASE 6): **reproduced**")
    numbers = page[page.index("{: #claim-point-robot }"):].splitlines()
    assert [line for line in numbers if line.startswith("- ")] == [
        f"- {part}" for part in measured.split("<br>")]


def test_the_log_rank_p_value_is_mantels_statistic_computed_by_hand():
    inf = math.inf
    vase = np.array([3.0, 5.0, 5.0, 8.0, inf])  # one run censored at the budget
    none = np.array([4.0, 9.0, inf, inf, inf])
    # by hand, at each time some run found it: observed minus expected finds of VASE's runs,
    # and the hypergeometric variance, over the runs still searching
    observed_minus_expected = variance = 0.0
    for t in sorted(set(np.r_[vase, none][np.isfinite(np.r_[vase, none])])):
        n1, n2 = (vase >= t).sum(), (none >= t).sum()
        d1, d2 = (vase == t).sum(), (none == t).sum()
        n, d = n1 + n2, d1 + d2
        observed_minus_expected += d1 - d * n1 / n
        variance += d * (n1 / n) * (n2 / n) * (n - d) / (n - 1)
    z = observed_minus_expected / math.sqrt(variance)
    expected = 0.5 * math.erfc(z / math.sqrt(2))  # P(Z > z): VASE's runs find it sooner
    assert claims_of.logrank_p(vase, none, "sooner") == pytest.approx(expected, rel=1e-9)
    assert claims_of.logrank_p(vase, none, "later") == pytest.approx(1 - expected, rel=1e-9)


def test_failed_runs_are_listed_with_whether_their_seed_finished_since(tmp_path):
    cell = tmp_path / "half_cheetah" / "vime"
    cell.mkdir(parents=True)
    (cell / "failures.csv").write_text(
        "seed,run_id,git_commit,start,end,iteration,error,note\n"
        "9,r9,b2b53df1,2026-11-29T04:47:34Z,,449,ValueError: nan | inf,\n"
        "0,r0,b2b53df1,2026-11-29T03:50:08Z,,499,ValueError: nan,\n")
    (cell / "seed0.csv").write_text("frames,Return/mean\n5000,1.0\n")
    failures = status.load_failures(tmp_path)
    assert [(f["task"], f["measure"], f["seed"]) for f in failures] == [
        ("half_cheetah", "vime", "0"), ("half_cheetah", "vime", "9")]
    rows = [line for line in status.failures_table(failures, tmp_path).splitlines()
            if line.startswith("| HalfCheetah")]
    assert rows[0] == "| HalfCheetah VIME | 0 | b2b53df | 499 | ValueError: nan | finished |"
    assert "ValueError: nan / inf" in rows[1] and rows[1].endswith("| not yet |")
    assert status.failures_table([], tmp_path) == "No run has failed.\n"


def test_runaway_policy_stds_are_listed_by_cell_with_the_returns_beside_them(tmp_path):
    cell = tmp_path / "half_cheetah" / "vime"
    cell.mkdir(parents=True)
    (cell / "runs.csv").write_text("seed,run_id,policy_log_std\n5,a,-0.2 41.3\n6,b,0.5 1.2\n"
                                   "7,c,\n")
    (cell / "failures.csv").write_text("seed,run_id,policy_log_std\n0,d,42.5 0.1\n")
    _write_seed(cell / "seed5.csv", [9.0] * 20 + [1.0] * 10)  # last 10 iterations: 1
    _write_seed(cell / "seed6.csv", [0.0] * 20 + [40.0] * 10)
    other = tmp_path / "mountain_car" / "nll"
    other.mkdir(parents=True)
    (other / "runs.csv").write_text("seed,run_id,policy_log_std\n0,e,1.9\n")
    text = status.policy_spread(tmp_path)
    assert "4 runs recorded" in text  # the run without a value is not counted
    assert ("- HalfCheetah VIME: above 2 in 1 of 2 finished runs (seed 5: 41.3); before "
            "failing, in seed 0: 42.5; last-10-iteration return of those finished runs 1.0 to "
            "1.0; last-10-iteration return of the others 40.0 to 40.0\n") in text
    assert "- every other finished run recorded: at most 1.9" in text
    assert text.endswith("(guides/transforms.md#watch-the-policys-std-under-vime)\n")
    (cell / "runs.csv").write_text("seed,run_id,policy_log_std\n5,a,0.3\n")
    (cell / "failures.csv").unlink()
    assert "transforms.md" not in status.policy_spread(tmp_path)  # no runaway, no pointer
    assert status.policy_spread(tmp_path / "nothing") == ""


def test_a_recheck_of_an_earlier_commit_is_reported_with_each_run_that_differed(tmp_path):
    assert status.rechecks(tmp_path) == ""
    (tmp_path / "recheck_b2b53df.csv").write_text(
        "task,measure,seed,earlier_commit,commit,iterations,metrics_compared,metrics_differing,"
        "identity_equal,result\n"
        "mountain_car,vase,5,b2b53df,82a8bde,50,29,,True,equal\n"
        "mountain_car,nll,7,b2b53df,82a8bde,50,29,,True,equal\n"
        "lunar_lander,vime,2,b2b53df,82a8bde,100,29,Return/mean bnn/kl,True,DIFFERENT\n")
    text = status.rechecks(tmp_path).splitlines()[0]
    assert text.startswith("Rechecked (recheck_b2b53df.csv, `python recipes/study/recheck.py`): "
                           "3 runs that finished at b2b53df, drawn at random from 3 cells, rerun "
                           "whole at 82a8bde: 2 equal")
    assert text.endswith("; **different**: LunarLanderContinuous VIME seed 2 (Return/mean, "
                         "bnn/kl).")
    assert status._first_three("a b c d e") == "a, b, c and 2 more"
    # where the runs part, and the earlier commit rerun on this machine (recheck.py's fields)
    (tmp_path / "recheck_b2b53df.csv").write_text(
        "task,measure,seed,earlier_commit,commit,iterations,metrics_compared,metrics_differing,"
        "identity_equal,result,first_difference,earlier_here,earlier_here_differing\n"
        "lunar_lander,vime,2,b2b53df,82a8bde,100,29,Return/mean bnn/kl,True,DIFFERENT,"
        "iteration 3: bnn/kl,equal,\n"
        "mountain_car,nll,7,b2b53df,82a8bde,50,29,bnn/kl,True,DIFFERENT,iteration 0: bnn/kl,"
        "DIFFERENT from iteration 4: bnn/kl,bnn/elbo bnn/kl\n")
    assert status.rechecks(tmp_path).splitlines()[0].endswith(
        "; **different**: LunarLanderContinuous VIME seed 2 (from iteration 3 (bnn/kl); b2b53df "
        "rerun here equals 82a8bde here: not the commit); MountainCar NLL seed 7 (from "
        "iteration 0 (bnn/kl); only the kernel's logged KL and entropy; b2b53df rerun here "
        "differs from 82a8bde here in bnn/elbo, bnn/kl, from iteration 4).")


def test_a_rerun_that_differs_only_in_the_kernels_logged_kl_is_told_apart(tmp_path):
    """A rerun whose only differing metrics are the ELBO kernel's logged KL and entropy (the
    study's kernel, before e253547, logged them a float32 step apart in a compiling process and
    a cache-loading one) is named so and counted; one that also differs in a metric training
    reads, or in its config identity, is not."""
    fields = ("task,measure,seed,earlier_commit,commit,iterations,metrics_compared,"
              "metrics_differing,identity_equal,result,first_difference\n")
    (tmp_path / "recheck_01cdad2_rerun.csv").write_text(
        fields
        + "ant,vase,0,01cdad2,01cdad2,600,30,bnn/elbo bnn/entropy bnn/kl bnn/loss_kl,True,"
          "DIFFERENT,iteration 1: bnn/entropy\n"
          "ant,vase,1,01cdad2,01cdad2,600,30,bnn/kl bonus/mean,True,DIFFERENT,"
          "iteration 2: bnn/kl bonus/mean\n"
          "ant,nll,9,01cdad2,01cdad2,600,30,bnn/kl,False,DIFFERENT,iteration 0: bnn/kl\n"
          "ant,nll,10,01cdad2,01cdad2,600,30,,True,equal,\n")
    first, second, *_ = status.rechecks(tmp_path).splitlines()
    assert first.endswith(
        "**different**: Ant VASE seed 0 (from iteration 1 (bnn/entropy); only the kernel's "
        "logged KL and entropy); Ant VASE seed 1 (from iteration 2 (bnn/kl, bonus/mean)); Ant "
        "NLL seed 9 (from iteration 0 (bnn/kl)).")
    assert second.startswith("1 of the differing reruns differs only in the ELBO kernel's "
                             "logged KL and entropy (`bnn/elbo`, `bnn/entropy`, `bnn/kl`, "
                             "`bnn/loss_kl`)")
    assert "Up to e253547" in second
    (tmp_path / "recheck_01cdad2_rerun.csv").write_text(
        fields + "ant,vase,1,01cdad2,01cdad2,600,30,bnn/kl bonus/mean,True,DIFFERENT,"
                 "iteration 2: bnn/kl bonus/mean\n")
    assert "ELBO kernel" not in status.rechecks(tmp_path)


def test_a_rerun_that_differs_only_by_an_evaluation_at_a_pause_is_told_apart(tmp_path):
    """recheck.py's "equal where both logged": one run evaluated off the schedule (at a stop,
    before 67d98e2); and how many of the study's runs did, counted from their CSVs."""
    (tmp_path / "recheck_b2b53df.csv").write_text(
        "task,measure,seed,earlier_commit,commit,iterations,metrics_compared,metrics_differing,"
        "identity_equal,result,first_difference,earlier_here,earlier_here_differing,"
        "logged_by_one_run\n"
        "lunar_lander,trpo_authors,6,b2b53df,82a8bde,100,19,,True,equal where both logged,,,,"
        "iteration 48: eval/return\n"
        "half_cheetah,nll,0,b2b53df,82a8bde,600,30,bnn/kl,True,DIFFERENT,iteration 1: bnn/kl,"
        "equal where both logged (iteration 578: eval/return logged by one run only),,"
        "iteration 578: eval/return\n")
    every = status.EVAL_EVERY
    cell = tmp_path / "lunar_lander" / "vase"
    cell.mkdir(parents=True)
    schedule = ["" if (i + 1) % every else "1.0" for i in range(3 * every)]
    for seed, evaluated in enumerate([
            schedule,  # on the schedule only
            [*schedule[:4], "2.0", *schedule[5:]],  # paused after iteration 4
            [*schedule[:every + 1], "2.0"]]):  # its last iteration (a stop_when): not a pause
        rows = "".join(f"{5000 * (i + 1)},{value}\n" for i, value in enumerate(evaluated))
        (cell / f"seed{seed}.csv").write_text("frames,eval/return\n" + rows)
    assert status.off_schedule_evaluations(tmp_path) == (1, 3)
    first, kernel, second = status.rechecks(tmp_path).splitlines()
    assert kernel.startswith("1 of the differing reruns differs only in the ELBO kernel's")
    assert ("0 equal to the study's in every metric (clocks aside) and in their config identity; "
            "1 equal in every value, the evaluation's wherever both runs evaluated, one of the two "
            "evaluating off the schedule (LunarLanderContinuous TRPO (authors') seed 6, iteration "
            "48); **different**: HalfCheetah NLL seed 0 (from iteration 1 (bnn/kl); only the "
            "kernel's logged KL and entropy; b2b53df rerun here equals 82a8bde here wherever "
            "both evaluated, one of them evaluating off the "
            "schedule at iteration 578: not the commit).") in first
    assert f"off the {every}-iteration schedule" in second
    assert "1 of the study's 3 runs carry at least one" in second


def test_the_observation_sizes_the_page_gives_are_the_envs():
    import gymnasium
    from omegaconf import OmegaConf

    import torchrl_vase.envs  # noqa: F401  (registers the tasks)

    for task, dims in figure3.OBSERVATION_DIMS.items():
        env = gymnasium.make(OmegaConf.load(runs_of.ROOT / "conf" / "env" / f"{task}.yaml").id)
        assert env.observation_space.shape == (dims,), task
        env.close()


def test_the_bonus_reach_table_splits_runs_by_whether_the_bonus_still_drove_them():
    late = figure3.LATE

    def run(seed, share, final, bonus):
        returns = np.r_[np.zeros(60), np.full(10, final)]
        shares = np.r_[np.full(70 - late, 0.5), np.full(late, share)]
        return runs_of.Seed(seed, 5000.0 * np.arange(1, 71), returns, np.nan,
                            advantage_share=shares, bonus_mean=np.full(70, bonus))

    data = {"ant": {"vase": [run(0, 1.0, 0.0, 200.0), run(1, 0.9, 0.2, 220.0),
                             run(2, 0.0, 12.0, 1e7)]},  # a run whose bonus blew up: the median
            "half_cheetah": {"none": [run(0, np.nan, 5.0, np.nan)]}}  # no bonus, no row
    table = figure3.bonus_reach(data)
    rows = [line for line in table.splitlines() if line.startswith("| Ant")]
    assert rows == ["| Ant (125) | VASE | 3 | 0.90 [0.00, 1.00] | 0.1 (2) | 12 (1) | 0.022 |"]
    assert "HalfCheetah" not in table
    assert figure3.bonus_reach({}) == ""


def test_the_status_table_counts_each_cell_against_its_bar_the_point_robot_in_its_own_columns():
    seeds = lambda n: list(range(n))  # noqa: E731 (only their number is read)
    table = status.study_status({"ant": {"vase": seeds(12), "vase_paper": seeds(2)}},
                                 {"vase": seeds(20), "none": seeds(11), "nll": seeds(13)})
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[2:] for line in
            table.splitlines()[2:]}
    assert rows["Ant"] == ["12 / 20", "0 / 20", "0 / 20", "0 / 10", "0 / 10", "2 / 10",
                           "0 / 10", "0 / 10", "0 / 10 |"]
    # the text settings run on three tasks only, Ant's scale checks on Ant
    assert rows["MountainCar"][-4:] == ["", "", "", " |"]
    assert rows["point robot"] == ["20 / 20", "–", "13 / 20", "0", "11 / 20", "–", "–", "–",
                                   "– |"]
    below = table.splitlines()[-1]
    assert below.startswith("Below the bar: MountainCar VASE (0 of 20), MountainCar TRPO "
                            "(authors') (0 of 20), MountainCar NLL (0 of 20)")
    assert "Ant VASE (12 of 20)" in below and "Ant VASE, paper's text (2 of 10)" in below
    assert "MountainCar VASE, paper's text" not in below  # not run there: no bar
    assert below.endswith(", point robot NLL (13 of 20), point robot TRPO, the bonuses' own "
                          "(none) (11 of 20).")
    # five measures a task, the text on three, Ant's three checks, the point robot's NLL and none
    assert below.count(" of ") == 6 * 5 + 3 + 3 + 2
    full = {task: {m: seeds(bar) for m, bar in status.STUDY_BAR.items()} for task in status.TASKS}
    table = status.study_status(full, {"vase": seeds(20), "nll": seeds(20), "none": seeds(20)})
    assert table.splitlines()[-1] == "**Every cell has reached the bar.**"


def test_only_the_ants_text_settings_change_its_reward_and_the_page_says_so():
    import gymnasium

    assert {task: figure3.text_reward(task) for task in figure3.TASKS} == {
        "mountain_car": "", "cartpole_swingup": "", "double_pendulum": "", "half_cheetah": "",
        "ant": "goal=position", "lunar_lander": ""}
    # the argument is the env's: the text's Ant is rewarded where the authors' is not
    from torchrl_vase.envs.locomotion_v1 import RllabAntEnv

    assert gymnasium.make("torchrl_vase/SparseAnt-v1", goal="position").unwrapped.goal == (
        "position") and RllabAntEnv().goal == "velocity"


def test_the_constant_s_share_of_a_former_bonus_decides_which_cells_rerun(tmp_path):
    constant = load_recipe("study/bonus_constant")
    c = 2 * (math.log(0.5) + 0.5 * math.log(2 * math.pi))  # MountainCar's at σ_c = 0.5

    def write(measure, seed, bonus, entropy=None):
        path = tmp_path / "mountain_car" / measure / f"seed{seed}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["frames,bonus/mean,bnn/entropy"] + [
            f"{5000 * (i + 1)},{'' if b is None else b},{'' if entropy is None else entropy}"
            for i, b in enumerate(bonus)]
        path.write_text("\n".join(lines) + "\n")

    # seed 0: the constant is half the bonus throughout; seed 1: 1 % of it in 1 of 20 iterations
    write("vase", 0, [None] + [2 * c] * 19)  # no bonus at the first iteration: left out
    write("vase", 1, [c / 0.02] + [1000 * c] * 19)
    [row] = constant.cell_rows(tmp_path)
    assert (row["task"], row["measure"], row["seeds"]) == ("mountain_car", "vase", 2)
    assert row["constant"] == pytest.approx(c)
    assert row["share_range"] == pytest.approx((0.001, 0.5))
    assert row["touched_seeds"] == 1  # seed 1: 5 % of its iterations, below the 10 % bar
    table = constant.markdown([row])
    assert table.splitlines()[-1].startswith("| mountain_car (2) | vase | 0.5 | 0.452 | ")
    assert table.splitlines()[-1].endswith("| 1 / 2 | – | yes |")


ant_scale = load_recipe("study/ant_scale")


def _scale_runs(levels: dict[str, float], first_bonus: dict[str, float], late: dict | None = None,
                seeds: int = 10, iterations: int = 40) -> dict:
    """Ant-like cells: each seed's return ``levels[m]`` plus noise every iteration (``late[m]``
    over the last 10 % instead, where given), its bonus U ``first_bonus[m]`` at iteration 1."""
    rng = np.random.default_rng(3)
    runs = {}
    for measure, level in levels.items():
        cell = []
        for seed in range(seeds):
            returns = level + 0.05 * rng.standard_normal(iterations)
            if late and measure in late:
                returns[-iterations // 10:] = late[measure] + 0.05 * rng.standard_normal(
                    iterations // 10)
            bonus = np.full(iterations, np.nan if measure == "none" else 200.0)
            if measure != "none":
                bonus[0], bonus[1] = 0.0, first_bonus[measure]
            cell.append(runs_of.Seed(seed, 5000.0 * np.arange(1, iterations + 1), returns,
                                     np.nan, bonus_mean=bonus))
        runs[measure] = cell
    return runs


ETAS = {"vase": 1e-4, "vase_linear_init": 1e-4, "vase_eta_tenth": 1e-5}
HUGE = {"vase": 5e6, "vase_linear_init": 5e6, "vase_eta_tenth": 5e6}  # η·U 500, 500, 50
SMALL_INIT = {**HUGE, "vase_linear_init": 5e3}  # the Linear init's first bonus: 0.5 a step


@pytest.mark.parametrize(("levels", "first", "answer"), [
    # a variant recovers to the control's level: the scale
    ({"none": 4, "vase": 0, "vase_linear_init": 4, "vase_eta_tenth": 0}, SMALL_INIT,
     "the scale"),
    # recovers, but stays below the control by more than the margin (0.4): partly
    ({"none": 4, "vase": 0, "vase_linear_init": 2, "vase_eta_tenth": 0}, SMALL_INIT,
     "partly the scale"),
    # the variant at the reward's scale still hurts, neither recovers: the method
    ({"none": 4, "vase": 0, "vase_linear_init": 0, "vase_eta_tenth": 0}, SMALL_INIT,
     "the method"),
    # the same returns, but no variant brought the bonus down to the reward's scale
    ({"none": 4, "vase": 0, "vase_linear_init": 0, "vase_eta_tenth": 0}, HUGE, "undecided"),
    # VASE level with the control: nothing to explain, whatever the variants do
    ({"none": 4, "vase": 4, "vase_linear_init": 0, "vase_eta_tenth": 4}, SMALL_INIT,
     "nothing to explain"),
])
def test_ants_scale_question_reaches_each_answer_its_rule_names(levels, first, answer):
    runs = _scale_runs(levels, first)
    margin = claims_of.task_margin(runs)
    judged = ant_scale.judge_scale(runs, ETAS, "whole", margin, resamples=2000)
    assert judged.answer == answer
    assert judged.hurts.median_difference == pytest.approx(
        np.median([s.returns.mean() for s in runs["none"]])
        - np.median([s.returns.mean() for s in runs["vase"]]))
    assert judged.at_scale == {"vase_linear_init": first["vase_linear_init"] * 1e-4 <= 1,
                               "vase_eta_tenth": False}
    assert judged.why == WHY[answer]


WHY = {
    "the scale": "VASE (Linear init) recovers and is as good as the control",
    "partly the scale": "VASE (Linear init) recovers, not shown as good as the control",
    "the method": "no variant recovers; VASE (Linear init) brought the bonus to the reward's "
                  "scale and still hurts",
    # η·U at the first iteration: 1e-4 × 5e6 and 1e-5 × 5e6
    "undecided": "no variant recovers, and none brought the bonus to the reward's scale (η·U a "
                 "step at the first iteration with a model, median: VASE (Linear init) 500, "
                 "VASE (η / 10) 50; the scale: at most 1), so none tells the method from the "
                 "scale",
    "nothing to explain": "control − VASE is not shown above 0",
}


def test_ants_scale_section_states_its_rule_before_numbers_and_flags_a_late_disagreement():
    # the Linear init recovers to the control's level, then falls halfway back in the last 10 %
    levels = {"none": 4, "vase": 0, "vase_linear_init": 4, "vase_eta_tenth": 0}
    runs = _scale_runs(levels, SMALL_INIT, late={"vase_linear_init": 2})
    page = ant_scale.scale_section(runs, ETAS, resamples=2000)
    assert page.startswith(ant_scale.RULE)
    assert ("**Answer: the scale** (the whole run: VASE (Linear init) recovers and is as good "
            "as the control); the last 10 %: partly the scale ⚑.") in page
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in page.splitlines()
            if line.startswith("| VASE")}
    # η·U at the first iteration with a model: 1e-4 × 5e6; the Linear init's 1e-4 × 5e3
    assert rows["VASE"].startswith("| VASE | 0.0001 | 10 | 500 [500, 500] | ")
    assert rows["VASE (Linear init)"].startswith("| VASE (Linear init) | 0.0001 | 10 | 0.5 [")
    # iterations above 1 a step: the first only for VASE (200 × 1e-4 = 0.02 afterwards)
    assert rows["VASE"].endswith("| 1 |")
    # with no variant run yet: the rule, the scale table, VASE's harm, and no answer yet
    early = ant_scale.scale_section({m: runs[m] for m in ("none", "vase")}, ETAS,
                                    resamples=2000)
    assert early.startswith(ant_scale.RULE)
    assert "| VASE (η / 10) | – | 0 | – | – |" in early
    assert ("**Answer: not measured yet** (the whole run: VASE (Linear init) and VASE (η / 10) "
            "below 5 seeds)") in early


FOLLOW_ETAS = {**ETAS, "vase_linear_eta_tenth": 1e-5}


@pytest.mark.parametrize(("level", "first", "answer"), [
    (4, 5e4, "the scale"),  # at the scale (η·U 0.5), back at the control's level
    (2, 5e4, "partly the scale"),  # recovers, stays more than the margin below the control
    (0, 5e4, "the method"),  # at the scale, no better than VASE
    (0, 5e6, "undecided"),  # no better, but its first bonus 50 a step: not at the scale
])
def test_the_follow_up_is_read_alone_by_the_same_rule(level, first, answer):
    """Both changes together, one Holm family of its own: the two earlier variants (both at
    VASE's level and far above the scale) change nothing of its answer."""
    levels = {"none": 4, "vase": 0, "vase_linear_init": 0, "vase_eta_tenth": 0,
              ant_scale.FOLLOW_UP: level}
    runs = _scale_runs(levels, {**HUGE, ant_scale.FOLLOW_UP: first})
    judged = ant_scale.judge_scale(runs, FOLLOW_ETAS, "whole", claims_of.task_margin(runs),
                                   variants=(ant_scale.FOLLOW_UP,), resamples=2000)
    assert judged.answer == answer
    assert judged.at_scale == {ant_scale.FOLLOW_UP: first * 1e-5 <= 1}
    assert set(judged.recovers) == {ant_scale.FOLLOW_UP}


def test_the_follow_up_is_shown_after_the_first_answer_and_read_only_at_its_ten_seeds():
    levels = {"none": 4, "vase": 0, "vase_linear_init": 0, "vase_eta_tenth": 0,
              ant_scale.FOLLOW_UP: 0}
    runs = _scale_runs(levels, {**SMALL_INIT, ant_scale.FOLLOW_UP: 5e4})
    page = ant_scale.scale_section(runs, FOLLOW_ETAS, resamples=2000)
    first, _, follow = page.partition(ant_scale.FOLLOW_UP_RULE)
    assert "**Answer: the method** (the whole run: no variant recovers; VASE (Linear init)" in first
    assert follow.count("**Answer:") == 1
    assert ("**Answer: the method** (the whole run: no variant recovers; VASE (Linear init, "
            "η / 10) brought the bonus to the reward's scale and still hurts)") in follow
    assert "| VASE (Linear init, η / 10) | 1e-05 | 10 | 0.5 [0.5, 0.5] | 0 |" in follow
    assert "| none (control) − VASE (Linear init, η / 10) | +4" in follow
    # nine of its ten seeds: shown, not read
    partial = {**runs, ant_scale.FOLLOW_UP: runs[ant_scale.FOLLOW_UP][:9]}
    follow = ant_scale.scale_section(partial, FOLLOW_ETAS, resamples=2000).partition(
        ant_scale.FOLLOW_UP_RULE)[2]
    assert "| VASE (Linear init, η / 10) | 1e-05 | 9 | 0.5 [0.5, 0.5] | 0 |" in follow
    assert ("**Answer: not measured yet** (9 of its 10 seeds finished; it is read once all "
            "have).") in follow
    assert "− VASE (Linear init, η / 10)" not in follow


def test_the_summary_sentence_names_the_follow_up_once_read_and_the_first_answer_before():
    levels = {"none": 4, "vase": 0, "vase_linear_init": 4, "vase_eta_tenth": 0,
              ant_scale.FOLLOW_UP: 0}
    runs = _scale_runs(levels, {**SMALL_INIT, ant_scale.FOLLOW_UP: 5e4},
                       late={ant_scale.FOLLOW_UP: 4})
    # read at its ten seeds: the follow-up's own answer, not the first rule's ("the scale");
    # back at the control's level over the last 10 % only, so 0.4 above VASE over the whole run
    summary = ant_scale.scale_summary(runs, FOLLOW_ETAS, resamples=2000)
    assert summary == ("Ant's result, the method's or its first bonus's scale? Asked of both "
                       "changes together (the bonus brought to the reward's scale), its rule "
                       "answers **partly the scale** over the whole run; the last 10 %: the "
                       "scale ⚑ ([Ant's scale](#ant-scale)).")
    # nine of its seeds: the first rule's answer, both windows alike
    partial = {**runs, ant_scale.FOLLOW_UP: runs[ant_scale.FOLLOW_UP][:9]}
    assert ("Asked of the two variants of one change each, its rule answers **the scale** in "
            "both windows") in ant_scale.scale_summary(partial, FOLLOW_ETAS, resamples=2000)
    assert ant_scale.scale_summary({"none": runs["none"]}, FOLLOW_ETAS) == ""


def test_each_cells_processors_are_counted_from_its_runs_notes(tmp_path):
    import csv

    amd = "started on vm (2 cores, AMD EPYC), load average 2.0"
    for measure, notes in {"vase": ["started on vm (2 cores, Intel(R) Xeon(R) Processor), load "
                                    "average 1.0; ended", "exported by hand"],
                           "none": [amd, amd]}.items():
        cell = tmp_path / "ant" / measure
        cell.mkdir(parents=True)
        # seed 1 of none exported twice: its last row counts, once
        rows = [(0, notes[0]), (1, notes[1])] + ([(1, notes[1])] if measure == "none" else [])
        with (cell / "runs.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["seed", "note"])
            writer.writerows(rows)
    assert status.cell_processors(tmp_path, "ant", ("none", "vase", "vase_eta_tenth")) == (
        "none (control): AMD EPYC 2; VASE: Intel(R) Xeon(R) Processor 1, not recorded 1")


def test_a_cells_eta_is_read_from_its_runs_configurations(tmp_path):
    cell = tmp_path / "ant" / "vase_eta_tenth"
    cell.mkdir(parents=True)
    for seed in (0, 1):
        (cell / f"seed{seed}.config.yaml").write_text("surprise:\n  eta: 1.0e-05\n")
    assert ant_scale.cell_eta(tmp_path, "ant", "vase_eta_tenth") == 1e-5
    assert math.isnan(ant_scale.cell_eta(tmp_path, "ant", "vase"))
    (cell / "seed2.config.yaml").write_text("surprise:\n  eta: 1.0e-04\n")
    with pytest.raises(ValueError, match="different η"):
        ant_scale.cell_eta(tmp_path, "ant", "vase_eta_tenth")


placebo_of = load_recipe("study/robot_placebo")


def _robot_cell(first_steps: list[float]) -> list:
    """A point robot cell: each run's steps to its first reward (NaN: never found it)."""
    return [_seed(seed, [0.0] * 3, first_reward=steps) for seed, steps in enumerate(first_steps)]


FAST = [20_000.0 + 1000 * k for k in range(12)]  # found early, every run
SLOW = [1_500_000.0 + 10_000 * k for k in range(6)] + [np.nan] * 6  # found late or never


@pytest.mark.parametrize(("cells", "answer", "readings"), [
    # VASE sooner than its shuffled placebo, the placebo no sooner than none: the content
    ({"vase": FAST, "vase_shuffled": SLOW, "none": SLOW}, "the content",
     ("VASE sooner", "neither shown sooner")),
    # the placebo as fast as VASE and sooner than none: the bonus's size and spread
    ({"vase": FAST, "vase_shuffled": FAST, "none": SLOW}, "its size and spread",
     ("neither shown sooner", "VASE, bonus shuffled sooner")),
    # the placebo slower than none, VASE not sooner than it: neither
    ({"vase": SLOW, "vase_shuffled": SLOW, "none": FAST}, "undecided",
     ("neither shown sooner", "none sooner")),
])
def test_the_point_robots_placebo_reaches_each_answer_its_rule_names(cells, answer, readings):
    runs = {measure: _robot_cell(steps) for measure, steps in cells.items()}
    page = placebo_of.placebo_section(runs, resamples=2000)
    assert page.startswith(placebo_of.RULE)
    assert f"**Answer: {answer}**." in page
    rows = [line for line in page.splitlines() if line.startswith("| VASE − ")
            or line.startswith("| VASE, bonus shuffled − ")]
    assert [row.rsplit(" | ", 1)[1].rstrip(" |") for row in rows] == list(readings)
    # the claim's own test, the same numbers: P(VASE sooner than its placebo) by direct count
    vase = np.nan_to_num(np.array(cells["vase"]), nan=np.inf)
    shuffled = np.nan_to_num(np.array(cells["vase_shuffled"]), nan=np.inf)
    direct = np.mean([(a < b) + 0.5 * (a == b) for a in vase for b in shuffled])
    assert rows[0].startswith(f"| VASE − VASE, bonus shuffled | {direct:.2f} [")


def test_the_point_robots_placebo_waits_for_its_seeds_and_shows_whether_the_shuffle_took():
    shuffled = [replace(run, novelty=np.array([np.nan, 0.1 * k, -0.1, 0.0]))
                for k, run in enumerate(_robot_cell(FAST[:3]))]
    runs = {"vase": _robot_cell(FAST), "none": _robot_cell(SLOW), "vase_shuffled": shuffled}
    page = placebo_of.placebo_section(runs, resamples=2000)
    assert "**Answer: not measured yet**." in page
    # each run's median novelty correlation (of 0.1·k, −0.1 and 0) is 0; none has no bonus
    assert ("| VASE, bonus shuffled | 3 | found by 3 of 3 within 2,500,000 steps, median 21,000 "
            "| 0.00 (3 runs) |") in page
    assert "| none | 12 | found by 6 of 12 within 2,500,000 steps, median " in page
    assert page.split("| none | 12 |")[1].splitlines()[0].endswith("| – |")


FIRST_FRAMES = "; other frames collected in its first iteration, before any model or policy step"


def test_a_rerun_on_another_processor_says_so(tmp_path):
    """recheck.py records where the rerun ran and where the study's run started; the page names
    both processors where they differ, and says nothing where they are one."""
    fields = ("task,measure,seed,earlier_commit,commit,iterations,metrics_compared,"
              "metrics_differing,identity_equal,result,first_difference,machine,study_machine\n")
    amd, intel = "vm (2 cores, AMD EPYC)", "vm (2 cores, Intel(R) Xeon(R) Processor)"
    (tmp_path / "recheck_01cdad2_rerun.csv").write_text(
        fields + f'ant,vase_paper,5,01cdad2,01cdad2,600,30,frames,True,DIFFERENT,'
                 f'iteration 0: frames,"{amd}","{intel}"\n'
                 f'ant,vase_paper,8,01cdad2,01cdad2,600,30,frames,True,DIFFERENT,'
                 f'iteration 0: frames,"{amd}","{amd}"\n'
                 f'ant,vase_paper,9,01cdad2,01cdad2,600,30,frames,True,DIFFERENT,'
                 f'iteration 3: frames,"{amd}","{amd}"\n')
    line = status.rechecks(tmp_path).splitlines()[0]
    assert (f"Ant VASE, paper's text seed 5 (from iteration 0 (frames){FIRST_FRAMES}; rerun on "
            "AMD EPYC, the study's on Intel(R) Xeon(R) Processor)") in line
    assert f"Ant VASE, paper's text seed 8 (from iteration 0 (frames){FIRST_FRAMES})" in line
    # parting later than the first iteration: its frames were collected by trained models
    assert "Ant VASE, paper's text seed 9 (from iteration 3 (frames))" in line
    # the environment tags both runs recorded: those that differ named, agreement said,
    # nothing said where either run predates the tags (an empty field)
    (tmp_path / "recheck_01cdad2_rerun.csv").write_text(
        fields.replace("study_machine", "study_machine,environment_differs")
        + f'ant,vase,1,01cdad2,01cdad2,600,30,frames,True,DIFFERENT,iteration 0: frames,'
          f'"{amd}","{intel}",machine machine.cpu_capability\n'
          f'ant,vase,2,01cdad2,01cdad2,600,30,frames,True,DIFFERENT,iteration 0: frames,'
          f'"{amd}","{amd}",none\n'
          f'ant,vase,3,01cdad2,01cdad2,600,30,frames,True,DIFFERENT,iteration 0: frames,'
          f'"{amd}","{amd}",\n')
    line = status.rechecks(tmp_path).splitlines()[0]
    assert (f"Ant VASE seed 1 (from iteration 0 (frames){FIRST_FRAMES}; rerun on AMD EPYC, the "
            "study's on "
            "Intel(R) Xeon(R) Processor; recorded otherwise: machine, machine.cpu_capability)"
            ) in line
    assert (f"Ant VASE seed 2 (from iteration 0 (frames){FIRST_FRAMES}; the same recorded "
            "environment)") in line
    assert f"Ant VASE seed 3 (from iteration 0 (frames){FIRST_FRAMES})" in line


def test_a_placebo_reading_that_hangs_on_one_statistic_or_a_hair_is_named():
    Sooner = claims_of.Sooner
    # the log-rank test alone: significant at 5 %, the interval straddling 0.5
    calls = placebo_of.close_calls(Sooner(0.56, (0.38, 0.74), 0.041, 0.96, "not shown"), "A", "B")
    assert calls == ["the log-rank test alone says A finds it sooner than B (P(A sooner) "
                     "[0.380, 0.740], log-rank p 0.041)"]
    # the interval alone, the other way
    calls = placebo_of.close_calls(Sooner(0.3, (0.1, 0.45), 0.9, 0.2, "not shown"), "A", "B")
    assert calls[0].startswith("the interval alone says B finds it sooner than A")
    # both agree, the bound a hair above 0.5
    calls = placebo_of.close_calls(Sooner(0.68, (0.5025, 0.85), 0.003, 1.0, "sooner"), "A", "B")
    assert calls == ["P(A sooner than B) has its interval's bound at 0.5025, within 0.01 of 0.5"]
    # clear readings: nothing to say
    assert placebo_of.close_calls(Sooner(0.8, (0.6, 0.95), 0.001, 1.0, "sooner"), "A", "B") == []
    assert placebo_of.close_calls(Sooner(0.5, (0.3, 0.7), 0.5, 0.5, "not shown"), "A", "B") == []


def test_the_pages_summary_names_the_point_robots_placebo_once_it_is_measured(tmp_path):
    study = tmp_path / "study"
    for seed in range(12):
        _write_seed(study / "point_robot" / "vase" / f"seed{seed}.csv", [0.0] * 5,
                    first_reward=20_000 + 1000 * seed)
        _write_seed(study / "point_robot" / "none" / f"seed{seed}.csv", [0.0] * 500)
    for seed in range(3):  # below the 5 seeds a reading needs
        _write_seed(study / "point_robot" / "vase_shuffled" / f"seed{seed}.csv", [0.0] * 500)
    text, _ = figure3.study_section(study, tmp_path / "figures", "figures")
    assert "has a placebo" not in text and "**Answer: not measured yet**." in text
    for seed in range(3, 12):
        _write_seed(study / "point_robot" / "vase_shuffled" / f"seed{seed}.csv", [0.0] * 500)
    text, _ = figure3.study_section(study, tmp_path / "figures", "figures")
    summary = text.split("### The claims")[0]
    # VASE finds it in every run, the shuffled bonus and none in none: the content
    assert "Its rule answers **the content** ([the placebo](#point-robot-placebo))." in summary
    assert "**Answer: the content**." in text
