"""The study as a tool (recipes/study/): its dataset, its config's checks, the one judge of its
records against the former page's numbers, rliable's aggregates and the resumable launcher."""

from __future__ import annotations

import json
import math
import subprocess
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.stats
from omegaconf import OmegaConf
from recipe_modules import load_recipe

ROOT = Path(__file__).resolve().parents[1]
dataset = load_recipe("study/dataset")
claims = load_recipe("study/claims")
statistics = load_recipe("study/study_statistics")
report = load_recipe("study/report")
study_tool = load_recipe("study/study")
BEFORE = json.loads((ROOT / "tests" / "data" / "figure3_before.json").read_text())


@pytest.fixture(scope="module")
def figure3():
    study = claims.load_study("figure3")
    data = study.runs()
    return study, data, {v.record.id: v for v in claims.judge_all(study, data)}


# ------------------------------------------------------------------------------------------------
# Every verdict and number as the former scripts computed them
# ------------------------------------------------------------------------------------------------
def test_every_claims_verdict_and_number_equals_the_former_pages(figure3):
    study, _, verdicts = figure3
    assert set(BEFORE["claims"]) | {"point-robot"} == {c.id for c in study.claims}
    for claim_id, before in BEFORE["claims"].items():
        verdict = verdicts[claim_id]
        assert (verdict.verdict, verdict.sensitivity) == (before["verdict"],
                                                          before["sensitivity"]), claim_id
        assert verdict.margin == before["margin"]
        assert len(verdict.comparisons) == len(before["comparisons"])
        for old, (name, (primary, sensitivity)) in zip(before["comparisons"],
                                                       verdict.comparisons.items(), strict=True):
            assert name == f"{old['a']} − {old['b']}"
            for was, now in ((old["primary"], primary), (old["sensitivity"], sensitivity)):
                assert (now.n, now.m) == (was["n"], was["m"])
                assert now.median_difference == was["median_difference"]
                assert list(now.interval) == was["interval"]
                assert now.mean_difference == was["mean_difference"]
                assert now.improvement == was["improvement"]


def test_the_point_robot_and_the_follow_ups_answer_as_before(figure3):
    _, data, verdicts = figure3
    robot = verdicts["point-robot"]
    (test, _), = robot.comparisons.values()
    before = BEFORE["point_robot"]
    assert robot.verdict == before["verdict"] and test.reading == before["reading"]
    assert (test.probability, list(test.interval), test.sooner_p, test.later_p) == (
        before["probability"], before["interval"], before["sooner_p"], before["later_p"])
    assert [verdicts["ant-scale"].verdict, verdicts["ant-scale"].sensitivity] == \
        BEFORE["ant_scale"]
    sac = claims.load_study("sac")
    (placebo,) = claims.judge_all(sac)
    assert placebo.verdict == BEFORE["sac_placebo"]
    counts = {f"{t}/{m}": len(runs) for t, cells in data.items() for m, runs in cells.items()}
    assert counts == BEFORE["seed_counts"]


def test_the_committed_page_shows_the_judged_table_on_its_first_screen(figure3):
    study, _, verdicts = figure3
    page = (ROOT / "docs" / "results.md").read_text().splitlines()
    table = report.claims_table(study, [verdicts[c.id] for c in study.claims])
    first = page[:60]
    assert any(line.startswith("[![") for line in first)
    start = first.index(table[0])
    assert page[start:start + len(table)] == table  # the page is the judge's, row for row
    assert len(page) <= 250
    for claim in study.claims:  # each record's head names its task's smallest effect
        margin = verdicts[claim.id].margin
        head = page[page.index(f"{{: #claim-{claim.id} }}") - 1]
        assert head.endswith(f"m = ±{margin:.3g})") or not np.isfinite(margin)
    readme = (ROOT / "README.md").read_text()
    begin, end = report.README_BLOCK
    block = readme.split(begin, 1)[1].split(end, 1)[0].strip().splitlines()
    assert block == report.readme_table(study, [verdicts[c.id] for c in study.claims])


def test_each_record_is_judged_once(figure3, monkeypatch):
    study, data, _ = figure3
    judged = []
    original = claims.judge
    monkeypatch.setattr(claims, "judge",
                        lambda s, r, d, *seed: judged.append(r.id) or original(s, r, d, *seed))
    claims.judge_all(study, data)
    assert sorted(judged) == sorted([c.id for c in study.claims]
                                    + [q.id for q in study.questions])


# ------------------------------------------------------------------------------------------------
# The rule's pieces against closed forms
# ------------------------------------------------------------------------------------------------
def test_a_claim_is_not_reproduced_when_an_advantage_is_shown_smaller_than_the_margin():
    a, b = np.full(20, 1.0) + np.linspace(0, 0.01, 20), np.zeros(20)
    small = statistics.median_comparison(a, b, margin=5.0)
    assert small.median_difference == pytest.approx(np.median(a))
    assert statistics.judge_better([small]).verdict == "not reproduced"
    large = statistics.median_comparison(a + 10, b, margin=5.0)
    assert statistics.judge_better([large]).verdict == "reproduced"
    alike = statistics.median_comparison(a, a[::-1], margin=5.0)
    assert statistics.judge_equivalent([alike]).verdict == "reproduced"


def _comparison(p_above_zero: float, resamples: int) -> statistics.MedianComparison:
    """A comparison whose only deciding p is ``p_above_zero`` (nothing below the margin)."""
    return statistics.MedianComparison(
        n=20, m=20, margin=1.0, median_difference=0.5, interval=(0.1, 0.9), mean_difference=0.5,
        improvement=0.6, p_above_zero=p_above_zero, p_below_margin=0.9, p_equivalent=0.5,
        p_apart=0.5, resamples=resamples)


def test_a_verdict_within_three_monte_carlo_errors_of_its_threshold_is_borderline():
    # p = 0.049 against α = 0.05: its error over 10,000 resamples is 0.0022, 0.46 errors away
    near = statistics.judge_better([_comparison(0.049, 10_000)])
    assert near.verdict == "reproduced" and near.borderline
    assert near.step.threshold == 0.05
    assert near.step.error == pytest.approx(math.sqrt(0.049 * 0.951 / 10_000))
    # the same p over 1,000,000 resamples is 4.6 errors away: decided
    assert not statistics.judge_better([_comparison(0.049, 1_000_000)]).borderline
    # Holm: the smaller of two p's against α/2 (0.024: 0.65 errors away), the other against α
    two = statistics.judge_better([_comparison(0.03, 10_000), _comparison(0.024, 10_000)])
    assert two.verdict == "reproduced" and two.step.threshold == 0.025 and two.borderline


def test_a_clear_verdict_holds_under_every_bootstrap_seed_and_a_near_one_is_flagged():
    rng = np.random.default_rng(0)
    a, b = rng.normal(3.0, 1.0, 20), rng.normal(0.0, 1.0, 20)
    judged = [statistics.judge_better([statistics.median_comparison(a, b, 0.5, seed=seed)])
              for seed in range(20)]
    assert {j.verdict for j in judged} == {"reproduced"}
    assert not any(j.borderline for j in judged)
    # a difference whose p sits at α: the seeds disagree, and every one of them says so
    c = np.random.default_rng(1).normal(0.38, 1.0, 20)
    near = [statistics.judge_better([statistics.median_comparison(c, b, 0.05, seed=seed)])
            for seed in range(20)]
    assert {j.verdict for j in near} == {"reproduced", "inconclusive"}
    assert all(j.borderline for j in near)


def test_holm_steps_down_and_stops_at_the_first_failure():
    assert statistics.holm_rejects([0.01, 0.02, 0.03]) == [True, True, True]
    assert statistics.holm_rejects([0.04, 0.001, 0.03]) == [False, True, False]


def test_the_means_interval_is_the_wider_of_the_bootstrap_and_welchs():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1, 1, 8), rng.normal(0, 2, 9)
    compared = statistics.mean_comparison(a, b)
    welch = scipy.stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert compared.difference == pytest.approx(a.mean() - b.mean())
    assert compared.interval[0] <= welch.low + 1e-12 and compared.interval[1] >= welch.high - 1e-12


def test_sooner_reads_runs_that_never_found_the_reward_as_censored():
    found = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    never = np.full(6, math.inf)
    test = statistics.sooner(found, never, budget=1000)
    assert test.probability == 1.0 and test.reading == "sooner"
    # decided by the bootstrap's share of draws at or below 0.5 (none) against α/2
    assert test.step.threshold == statistics.ALPHA / 2 and test.step.p == 0.0
    assert not test.borderline
    assert statistics.sooner(never, found, budget=1000).reading == "later"


def test_as_soon_is_two_one_sided_tests_on_the_probability_of_sooner():
    rng = np.random.default_rng(7)  # two draws of one distribution, 10 % censored
    a = np.where(rng.random(100) < 0.1, math.inf, rng.exponential(2e5, 100))
    b = np.where(rng.random(100) < 0.1, math.inf, rng.exponential(2e5, 100))
    alike = statistics.sooner(a, b, budget=2.5e6, margin=0.12, resamples=20_000, seed=1)
    # the 90 % interval of the same draws the 95 % one comes from, inside 0.5 ± 0.1
    low, high = alike.as_soon_interval
    assert alike.interval[0] <= low < alike.probability < high <= alike.interval[1]
    assert alike.as_soon == (low > 0.38 and high < 0.62)
    assert alike.as_soon and alike.reading == "not shown"
    # the deciding share is the larger of the bootstrap's shares at or past each bound
    assert alike.as_soon_step.threshold == statistics.ALPHA and alike.as_soon_step.p < 0.05
    halved = np.minimum(a, 2.5e6) / 2.5  # the same runs, each finding it 2.5 times sooner
    apart = statistics.sooner(halved, b, budget=2.5e6, margin=0.12, seed=1)
    assert apart.probability > 0.6 and not apart.as_soon and apart.reading == "sooner"
    # ten seeds cannot show equivalence, whatever they say
    assert not statistics.sooner(a[:10], b[:10], budget=2.5e6, margin=0.12).as_soon
    assert statistics.sooner(a, b, budget=2.5e6).as_soon is None  # no margin, no test


def test_rliable_aggregates_equal_their_closed_forms():
    rng = np.random.default_rng(0)
    scores = {"a": rng.random((8, 3)), "b": rng.random((8, 3)) * 0.5}
    taus = np.linspace(0, 1, 5)
    result = statistics.aggregate(scores, taus, "a", reps=200)
    for name, matrix in scores.items():
        point, low, high = result["iqm"][name]
        assert point == pytest.approx(scipy.stats.trim_mean(matrix.ravel(), 0.25))
        assert low <= point <= high
        np.testing.assert_allclose(result["profiles"][name][0],
                                   [(matrix > tau).mean() for tau in taus])
    mann_whitney = np.mean([statistics.probability_of_improvement(scores["a"][:, t],
                                                                  scores["b"][:, t])
                            for t in range(3)])
    assert result["improvement"]["b"][0] == pytest.approx(mann_whitney)


# ------------------------------------------------------------------------------------------------
# Bad input: the config and the dataset
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c.tasks.append("moon_lander"), "unknown task 'moon_lander'"),
    (lambda c: c.cells[0].measures.append("vaes"), "unknown measure 'vaes'"),
    (lambda c: c.measures.vase.overrides.append("suprise=vase"), "unknown override 'suprise'"),
    (lambda c: c.claims[0].pairs.append(["vime", "ppo"]), "unknown measure 'ppo'"),
    (lambda c: c.claims[1].pairs[0].__setitem__(2, "first_half"), "unknown window"),
    (lambda c: setattr(c.claims[0], "kind", "best"), "unknown kind 'best'"),
    (lambda c: c.questions[0].answers[0].__setitem__(1, {"vase_soon": True}),
     "unknown test name 'vase_soon'"),
])
def test_a_config_naming_an_unknown_thing_is_refused_with_the_choices(tmp_path, change,
                                                                       message):
    config = OmegaConf.load(ROOT / "conf" / "study" / "figure3.yaml")
    change(config)
    path = tmp_path / "broken.yaml"
    OmegaConf.save(config, path)
    with pytest.raises(ValueError, match=message) as refused:
        claims.load_study(path)
    assert "the choices:" in str(refused.value)
    with pytest.raises(ValueError, match="unknown study 'figure4'; the choices: figure3, "
                                         "point_robot_placebo, rivals, rivals_eta, sac, "
                                         "sac_placebo"):
        claims.load_study("figure4")


@pytest.mark.parametrize("test", [["as_soon", "vase", "none"], ["as_soon", "vase", "none", 0.5]])
def test_an_equivalence_test_without_a_margin_inside_half_is_refused(tmp_path, test):
    config = OmegaConf.load(ROOT / "conf" / "study" / "figure3.yaml")
    config.questions[0].tests["as_soon"] = test
    OmegaConf.save(config, tmp_path / "broken.yaml")
    with pytest.raises(ValueError, match=r"as_soon takes \[as_soon, A, B, margin\]"):
        claims.load_study(tmp_path / "broken.yaml")


def _choice_run(task: str, measure: str, seed: int, returns=(0.0, 0.0),
                first: float = math.nan) -> object:
    return dataset.Run(task, measure, seed, {
        "frames": np.array([5000.0, 10000.0]), "Return/mean": np.array(returns, dtype=float),
        "train/first_reward_step": np.array([first, first])})


def test_a_choice_ranks_each_candidate_on_each_task_and_a_tie_goes_to_the_first_listed():
    study = claims.load_study("rivals_eta")
    choice = next(c for c in study.choices if c.id == "eta-icm")
    assert choice.tasks == {"mountain_car": "return", "point_robot": "first_reward"}
    first, second, third, fourth, fifth = choice.candidates
    # MountainCar's mean whole-run return; the point robot's mean steps, never found = budget
    returns = {first: 0.1, second: 0.4, third: 0.4, fourth: 0.0, fifth: 0.3}
    steps = {first: [1e5] * 5, second: [math.nan] * 5, third: [2e5] * 4 + [math.nan],
             fourth: [3e4] * 5, fifth: [5e4] * 5}
    data = {"mountain_car": {m: [_choice_run("mountain_car", m, s, (0.0, 2 * r))
                                 for s in range(100, 105)] for m, r in returns.items()},
            "point_robot": {m: [_choice_run("point_robot", m, s, first=x)
                                for s, x in zip(range(100, 105), xs, strict=True)]
                            for m, xs in steps.items()}}
    verdict = claims.choose(study, choice, data)
    whole = {m: w for m, (w, _) in verdict.comparisons.items()}
    assert whole[third]["point_robot"] == pytest.approx((4 * 2e5 + 2.5e6) / 5)
    assert whole[second]["point_robot"] == 2.5e6 and whole[first]["mountain_car"] == 0.1
    # MountainCar ranks: second and third share 1.5, fifth 3, first 4, fourth 5; the point
    # robot: fourth 1, fifth 2, first 3, third 4, second 5
    expected = {first: 3.5, second: 3.25, third: 2.75, fourth: 3.0, fifth: 2.5}
    assert {m: w["mean rank"] for m, w in whole.items()} == expected
    assert verdict.verdict == study.label(fifth) == verdict.sensitivity
    # a tie: fifth given third's runs, both share the lowest mean rank (2.75)
    for task in data:
        data[task][fifth] = data[task][third]
    tied = claims.choose(study, choice, data)
    assert tied.comparisons[third][0]["mean rank"] == tied.comparisons[fifth][0]["mean rank"]
    assert tied.verdict == study.label(third)  # listed before fifth
    data["point_robot"][first] = data["point_robot"][first][:4]
    assert claims.choose(study, choice, data).verdict == "not measured yet"


NEVER = [math.nan] * 20  # 20 runs that never find the reward within the budget


@pytest.mark.parametrize(("steps", "answer"), [
    # VASE finds it in every seed, neither placebo in any
    ({"vase": [5e4] * 20, "vase_eta0": NEVER, "vase_shuffled": NEVER}, "the content"),
    # the shuffled bonus finds it exactly as VASE does, η = 0 never
    ({"vase": [5e4] * 20, "vase_eta0": NEVER, "vase_shuffled": [5e4] * 20},
     "its size and spread"),
    # nobody finds it: every pair tied at the budget
    ({"vase": NEVER, "vase_eta0": NEVER, "vase_shuffled": NEVER}, "no sooner than without it"),
    # VASE finds it in 10 seeds, η = 0 in 7: neither shown sooner nor within 0.5 ± 0.2
    ({"vase": [1e5] * 10 + NEVER[:10], "vase_eta0": [1e5] * 7 + NEVER[:13],
      "vase_shuffled": NEVER}, "undecided"),
])
def test_the_sac_placebo_rule_reaches_each_of_its_answers(steps, answer):
    """Issue 98's SAC placebos, 20 seeds: every answer of the rule written before their runs
    is reachable, each from first-reward steps that say it plainly."""
    study = claims.load_study("sac_placebo")
    [question] = study.questions
    assert question.budget == 300_000 and question.min_seeds == 20
    data = {"mountain_car": {m: [_choice_run("mountain_car", m, seed, first=x)
                                 for seed, x in enumerate(xs)] for m, xs in steps.items()}}
    assert claims.judge(study, question, data).verdict == answer


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c.choices[0].tasks.__setitem__("mountain_car", "area"), "unknown score 'area'"),
    (lambda c: c.choices[0].candidates.append("vase"), "unknown measure 'vase'"),
    (lambda c: c.choices[0].pop("budget"), "a first_reward score needs the budget"),
])
def test_a_choice_naming_an_unknown_score_or_candidate_or_no_budget_is_refused(tmp_path, change,
                                                                              message):
    config = OmegaConf.load(ROOT / "conf" / "study" / "rivals_eta.yaml")
    change(config)
    OmegaConf.save(config, tmp_path / "broken.yaml")
    with pytest.raises(ValueError, match=message):
        claims.load_study(tmp_path / "broken.yaml")


def _row(seed: int, measure: str = "vase", value: float = 1.0) -> dict:
    return {"task": "mountain_car", "measure": measure, "seed": seed,
            "metrics": {"frames": [5000.0, 10000.0], "Return/mean": [0.0, value]},
            "provenance": {"git_commit": "abc", "config": "seed: 0\n"}}


def test_the_dataset_keeps_every_value_and_a_rerun_replaces_its_seed(tmp_path):
    path = tmp_path / "s.parquet"
    dataset.upsert(path, [_row(0), _row(1, value=np.nan)])
    dataset.upsert(path, [_row(0, value=7.0)])
    runs = dataset.read(path)
    assert (runs[0].seed, runs[0].returns[-1]) == (0, 7.0)
    assert math.isnan(runs[1].returns[-1]) and runs[1].provenance["config"] == "seed: 0\n"
    assert math.isnan(runs[0].first_reward) and runs[0].metric("bonus/mean").shape == (2,)


def test_two_writers_ending_together_keep_both_rows(tmp_path):
    path = tmp_path / "s.parquet"
    threads = [threading.Thread(target=dataset.upsert, args=(path, [_row(seed)]))
               for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.seed for r in dataset.read(path)) == list(range(6))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_dataset_of_another_schema_version_is_refused_with_a_sentence(tmp_path):
    path = tmp_path / "old.parquet"
    pq.write_table(pa.table({"task": ["ant"]}), path)
    with pytest.raises(dataset.SchemaError, match="schema version none; this code reads "
                                                  "version 1"):
        dataset.read(path)


# ------------------------------------------------------------------------------------------------
# The launcher: Hydra's multirun, resumable, each finished run exported once
# ------------------------------------------------------------------------------------------------
TINY = """\
name: tiny
dataset: {dataset}
commit: HEAD
algorithm: trpo
tasks: [mountain_car]
measures:
  vase: {{overrides: [surprise=vase], label: VASE, colour: "#D55E00"}}
cells:
  - {{tasks: [mountain_car], measures: [vase], seeds: 0-1}}
task_overrides: {{}}
figure: [vase]
margin: {{fraction: 0.1, measures: [vase]}}
min_seeds: 2
claims: []
questions: []
"""


def test_a_killed_study_resumes_without_running_a_finished_run_twice(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(dataset=tmp_path / "tiny.parquet"))
    study = claims.load_study(config)
    assert study_tool.pending(study) == {("mountain_car", "vase"): [0, 1]}
    scratch = tmp_path / "scratch"
    study_tool.run(study, scratch, workers=2, launcher="joblib",
                   overrides=["iterations=2", "eval.every=0"], any_commit=True)
    runs = dataset.read(study.dataset)
    assert [(r.seed, r.frames.size) for r in runs] == [(0, 2), (1, 2)]
    assert all(r.provenance["config"] and r.provenance["git_commit"] for r in runs)
    assert all(np.isfinite(report._load(r)) for r in runs)  # the load at their launch, noted
    # killed after seed 1 finished and before it was exported: the store has it, the dataset not
    dataset.write(study.dataset, [row for row in dataset.read_rows(study.dataset)
                                  if row["seed"] == 0])
    capsys.readouterr()
    study_tool.run(study, scratch, workers=2, launcher="joblib", dry_run=True)
    assert "tiny: 0 runs to go in 0 cells" in capsys.readouterr().out
    assert [r.provenance["run_id"] for r in dataset.read(study.dataset)] == [
        r.provenance["run_id"] for r in runs]


def test_the_launcher_refuses_a_checkout_at_another_commit(tmp_path):
    study = claims.load_study("figure3")
    with pytest.raises(SystemExit, match="its cells must run at one commit"):
        study_tool.check_code(study, ROOT, any_commit=False)


def test_rliables_aggregate_equals_the_former_estimators_within_the_bootstraps_noise(figure3):
    study, data, _ = figure3
    before = BEFORE["aggregate_whole_run"]
    raw = {t: {m: claims.windows(data[t][m], "whole") for m in study.figure}
           for t in study.tasks if t != "point_robot"}
    scores = {}
    for by_measure in raw.values():
        values = np.concatenate(list(by_measure.values()))
        low, high = values.min(), values.max()
        for m, v in by_measure.items():
            scores.setdefault(m, []).append((v - low) / (high - low))
    scores = {m: np.stack(v, axis=1) for m, v in scores.items()}
    result = statistics.aggregate(scores, np.linspace(0, 1, 3), "vase", reps=2000)
    for measure, (point, low, high) in before["iqm"].items():
        now = result["iqm"][measure]
        assert now[0] == pytest.approx(point, abs=1e-12)  # equal seeds a task: the same IQM
        assert now[1:] == pytest.approx((low, high), abs=0.02)
    for measure, (point, low, high) in before["improvement"].items():
        now = result["improvement"][measure]
        assert now[0] == pytest.approx(point, abs=1e-12)
        assert now[1:] == pytest.approx((low, high), abs=0.02)


@pytest.mark.parametrize("module", [dataset, claims, statistics, report])
def test_the_study_modules_examples_run(module):
    import doctest

    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted and not result.failed


def test_a_study_job_trains_with_the_library_of_its_code_checkout(tmp_path):
    """``run --code DIR``: the job imports DIR's ``torchrl_vase``, not the environment's
    editable install (a script's own folder, not DIR, would come first on its path)."""
    code = tmp_path / "code"
    for package in ("recipes", "torchrl_vase"):
        (code / package).mkdir(parents=True)
        (code / package / "__init__.py").write_text("")
    (code / "recipes" / "trpo_vase.py").write_text(
        "import pathlib, torchrl_vase\n"
        "pathlib.Path('imported.txt').write_text(torchrl_vase.__file__)\n")
    line = study_tool.command(claims.load_study("point_robot_placebo"), "point_robot", "vase",
                              [0], "sqlite:///unused.db", tmp_path / "scratch", 1, "joblib", [],
                              code)
    subprocess.run(line, cwd=code, check=True)
    assert Path((code / "imported.txt").read_text()).resolve() == (
        code / "torchrl_vase" / "__init__.py").resolve()
    # the job runs in ``code``: its checkpoints and logs go where the study's scratch is
    relative = study_tool.command(claims.load_study("point_robot_placebo"), "point_robot", "vase",
                                  [0], "sqlite:///unused.db", Path("scratch"), 1, "joblib", [],
                                  code)
    assert f"checkpoint.dir={Path('scratch').resolve() / 'checkpoints'}" in relative


def test_a_study_without_claims_gets_a_page_of_its_curves_aggregate_and_runs(tmp_path):
    config = tmp_path / "rivals.yaml"
    config.write_text(TINY.format(dataset=tmp_path / "rivals.parquet").replace(
        "  vase: {overrides: [surprise=vase], label: VASE, colour: \"#D55E00\"}",
        "  vase: {overrides: [surprise=vase], label: VASE, colour: \"#D55E00\"}\n"
        "  rnd: {overrides: [surprise=rnd], label: RND, colour: \"#CC79A7\"}").replace(
        "tasks: [mountain_car], measures: [vase], seeds: 0-1",
        "tasks: [mountain_car, point_robot], measures: [vase, rnd], seeds: 0-1").replace(
        "figure: [vase]", "figure: [vase, rnd]").replace(
        "tasks: [mountain_car]\n", "tasks: [mountain_car, point_robot]\n").replace(
        "name: tiny", "name: tiny\n"
                                                        "title: Two bonuses\nabout: A test."))
    study = claims.load_study(config)
    assert (study.title, study.about) == ("Two bonuses", "A test.")
    # VASE's runs end at 1 and 2, RND's at 0 and 0.5: VASE ahead in every pair of seeds
    dataset.upsert(study.dataset, [_row(s, m, v) for s, m, v in
                                   ((0, "vase", 1.0), (1, "vase", 2.0), (0, "rnd", 0.0),
                                    (1, "rnd", 0.5))])
    # the point robot's runs stop at their first reward: its own figure, not in the aggregate
    # (where VASE's returns, far below RND's, would turn every P(VASE > RND) below 1)
    robot = [_row(s, m, v) | {"task": "point_robot"} for s, m, v in
             ((0, "vase", -9.0), (1, "vase", -9.0), (0, "rnd", 9.0), (1, "rnd", 9.0))]
    robot[0]["metrics"]["train/first_reward_step"] = [np.nan, 10000.0]
    for row in robot:  # the budget the figure's axis ends at
        row["provenance"]["config"] = "iterations: 2\nenv: {frames_per_batch: 5000}\n"
    dataset.upsert(study.dataset, robot)
    page, figures = tmp_path / "page.md", tmp_path / "figures"
    report.write_study_page(study, page, figures)
    text = page.read_text()
    assert text.startswith("# Two bonuses\n\nA test.\n")
    assert "8 of 8 runs (commits abc)" in text  # of the cells' seeds
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## Across tasks", "## Curves", "## The point robot's first reward",
                        "## The runs"]  # the answer first
    assert "## Choices" not in text  # it has none
    across = text.split("## Across tasks")[1].split("## Curves")[0]
    assert across.startswith("\n\nOver MountainCar, 2 seeds each: [![")  # which tasks
    rows = {line.split(" | ")[0]: line for line in across.splitlines()
            if line.startswith(("| VASE |", "| RND |"))}
    assert rows["| VASE"].endswith("| – |")  # P(VASE > VASE) is not asked
    assert "1.00 [1.00, 1.00] |" in rows["| RND"]  # P(VASE > RND): every pair
    assert {p.name for p in figures.iterdir()} == {"tiny_curves.png", "tiny_aggregate.png",
                                                   "tiny_first_reward.png"}


def test_the_study_code_stays_within_its_budget():
    """Issue 94's bar: the study's code, wherever it lives, at most 2,500 Python lines."""
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "recipes" / "study").glob("*.py"))
    assert lines <= 2500, f"recipes/study/ is {lines} lines: the study tool's budget is 2,500"


def test_reporting_a_study_of_questions_alone_writes_the_page_that_answers_them(monkeypatch,
                                                                               tmp_path):
    written = {}
    monkeypatch.setattr(study_tool, "write_page", lambda study, page, figures, others, readme:
                        written.update(study=study.name, others={o.name for o in others},
                                       page=page))
    study_tool.main(["report", "sac", "--page", str(tmp_path / "results.md")])
    # sac's questions are answered beside the claims of the study that has them: its page
    assert written["study"] == "figure3" and "sac" in written["others"]
    assert written["page"] == tmp_path / "results.md"
