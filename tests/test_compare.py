"""recipes/study/compare.py on a fixture MLflow store written in the test."""

from pathlib import Path

import matplotlib.pyplot as plt
import mlflow
import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from recipe_modules import load_recipe

ROOT = Path(__file__).resolve().parents[1]
compare = load_recipe("study/compare")
report = load_recipe("study/report")

RETURNS = {  # (surprise, seed, delta): returns per iteration
    ("none", 0, None): [0, 0, 0, 0, 0, 0],
    ("none", 1, None): [0, 0, 0, 0, 0, 1],
    ("none", 2, None): [0, 0, 0, 0, 0, 0],
    ("vase", 0, 1e-3): [0, 0, 1, 2, 3, 4],
    ("vase", 1, 1e-3): [0, 1, 2, 3, 9, 9],  # an outlier: median ≠ mean
    ("vase", 2, 1e-3): [0, 0, 0, 1, 1, 2],
    ("vase", 3, 1e-2): [0, 0, 0, 0, 0, 1],
}
FIRST_REWARD = {("vase", 0): 1500, ("vase", 1): 700, ("vase", 2): 2600, ("vase", 3): 5000,
                ("none", 1): 5100}


@pytest.fixture(scope="module")
def store(tmp_path_factory, fresh_store):
    root = tmp_path_factory.mktemp("store")
    uri = fresh_store(root / "mlflow.db")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("point_robot", artifact_location=(root / "a").as_uri())
    picture = root / "visited_positions.png"
    plt.imsave(picture, np.random.default_rng(0).random((20, 20, 3)))
    for (surprise, seed, delta), returns in RETURNS.items():
        run = client.create_run(experiment, tags={"surprise": surprise, "seed": str(seed)},
                                run_name=f"{surprise}-seed{seed}")
        run_id = run.info.run_id
        if delta is not None:
            client.log_param(run_id, "surprise.delta", str(delta))
        for i, value in enumerate(returns):
            step = (i + 1) * 1000
            client.log_metric(run_id, "return_mean", value, step=step)
            client.log_metric(run_id, "success_rate", float(value > 0), step=step)
            client.log_metric(run_id, "fps", 1000.0 + 100 * seed + (surprise == "vase"), step=step)
            client.log_metric(run_id, "wall_time", (i + 1) * (2.0 if surprise == "vase" else 1.5),
                              step=step)
            first = FIRST_REWARD.get((surprise, seed))
            if first is not None and step >= first:
                client.log_metric(run_id, "first_reward_step", first, step=step)
        client.log_artifact(run_id, str(picture))
        client.set_terminated(run_id)
    mlflow.set_tracking_uri(None)
    return uri


def test_table_numbers_equal_a_direct_computation(store, tmp_path):
    written = compare.compare(store, "point_robot", tmp_path, last=2)
    rows = {
        line.split("|")[2].strip(): [c.strip() for c in line.split("|")[3:-1]]
        for line in written["table"].read_text().split("\n\n")[0].splitlines()[2:]
    }
    # the VASE runs used two δ: each is its own row, never pooled
    assert list(rows) == ["TRPO, no bonus", "TRPO + VASE δ=0.001", "TRPO + VASE δ=0.01"]
    vase = [r for k, r in RETURNS.items() if k[0] == "vase" and k[2] == 1e-3]
    finals = [np.mean(r[-2:]) for r in vase]  # last 2 iterations of each seed
    row = rows["TRPO + VASE δ=0.001"]
    assert float(row[0]) == pytest.approx(np.median(finals), abs=5e-4)
    iqr = np.percentile(finals, 75) - np.percentile(finals, 25)
    assert float(row[1]) == pytest.approx(iqr, abs=5e-4)
    # the IQM of 3 seeds: scipy's trim_mean (rliable's) cuts int(0.25 * 3) = 0 values from each
    # end, so it is their mean
    assert row[2].split(" [")[0] == f"{np.mean(finals):.3f}"
    success = np.mean([np.mean([float(v > 0) for v in r[-2:]]) for r in vase])
    assert float(row[3]) == pytest.approx(success, abs=5.1e-3)  # printed to 2 places
    first = np.median([FIRST_REWARD[("vase", s)] for s in range(3)])
    assert row[4] == f"{first:,.0f} (3/3)"
    assert row[5] == f"{np.median([1001, 1101, 1201]):,.0f}"
    assert row[6] == "2.00"  # the fixture's VASE iterations take 2 s each
    assert row[7] == "3"
    tenfold = rows["TRPO + VASE δ=0.01"]
    assert tenfold[4] == "5,000 (1/1)" and tenfold[0] == "0.500"
    assert tenfold[2] == "0.500 [nan, nan]"  # one seed: no interval
    plain = rows["TRPO, no bonus"]
    assert plain[4] == "5,100 (1/3)" and plain[7] == "3"
    assert rows["TRPO, no bonus"][6] == "1.50"


def test_iqm_and_its_bootstrap_interval_equal_a_direct_computation():
    values = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0])
    point, low, high = compare.iqm_interval(values, resamples=4000, seed=1)
    assert point == pytest.approx(np.mean([2.0, 3.0, 4.0, 5.0]))  # the middle half
    rng = np.random.default_rng(123)
    resampled = values[rng.integers(0, 8, size=(4000, 8))]
    direct = [np.mean(np.sort(r)[2:6]) for r in resampled]
    assert low == pytest.approx(np.percentile(direct, 2.5), abs=0.3)
    assert high == pytest.approx(np.percentile(direct, 97.5), abs=0.3)
    assert low < point < high < 100


def test_reruns_killed_runs_and_other_settings_are_never_pooled(tmp_path, sqlite_uri):
    uri = sqlite_uri
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("mixed", artifact_location=(tmp_path / "a").as_uri())

    def run(seed, returns, status="FINISHED", **params):
        run_id = client.create_run(experiment, tags={"surprise": "none", "seed": str(seed)},
                                   run_name=f"none-seed{seed}").info.run_id
        client.log_param(run_id, "seed", str(seed))
        client.log_param(run_id, "checkpoint.dir", f"/tmp/{run_id}")  # noise: never a setting
        for key, value in params.items():
            client.log_param(run_id, key, value)
        for i, value in enumerate(returns):
            client.log_metric(run_id, "Return/mean", value, step=(i + 1) * 100)
            client.log_metric(run_id, "train/wall_time", float(i + 1), step=(i + 1) * 100)
        client.set_terminated(run_id, status)
        return run_id

    old = run(0, [0.0, 0.0, 0.0], **{"trpo.gamma": "0.99"})
    new = run(0, [1.0, 1.0, 1.0], **{"trpo.gamma": "0.99"})  # a rerun of seed 0: the latest
    run(1, [2.0, 2.0, 2.0], **{"trpo.gamma": "0.99"})
    run(0, [5.0], **{"trpo.gamma": "0.9"})  # another setting, another row
    killed = run(2, [7.0], status="KILLED", **{"trpo.gamma": "0.99"})
    mlflow.set_tracking_uri(None)
    written = compare.compare(uri, "mixed", tmp_path / "out", last=1)
    text = written["table"].read_text()
    rows = {line.split("|")[2].strip(): line.split("|") for line in text.splitlines()[2:]
            if line.startswith("| mixed")}
    assert set(rows) == {"TRPO, no bonus trpo.gamma=0.9", "TRPO, no bonus trpo.gamma=0.99"}
    plain = rows["TRPO, no bonus trpo.gamma=0.99"]
    assert plain[-2].strip() == "2"  # seeds 0 (latest) and 1, not 3
    assert plain[3].strip() == "1.500"  # median of 1 and 2: not 0
    assert f"left out none-seed2 ({killed[:8]}): KILLED, not finished" in text
    assert f"kept the latest ({new[:8]}), left out {old[:8]}" in text
    # the killed run's single iteration does not cut the group's curves: 3 points plotted
    assert plt.imread(written["returns"]).shape[0] > 100


def test_groups_split_a_measure_by_the_settings_that_differ_between_its_runs():
    def run(run_id, surprise, seed, **settings):
        settings = {f"surprise.{k}": v for k, v in settings.items()}
        return compare.Run(run_id, surprise, seed, {}, settings)

    runs = [run("a", "vase", 0, delta="0.001", sigma_c="5.0", eta="0.0001"),
            run("b", "none", 0),
            run("c", "vime", 1, sigma_c="5.0"),
            run("d", "vase", 1, delta="0.001", sigma_c="5.0", eta="0.0001"),
            run("e", "vase", 0, delta="0.0", sigma_c="0.5", eta="0.0001"),
            run("f", "vime", 0, sigma_c="5.0")]
    groups = compare.by_measure(runs)
    # η is the same in every VASE run, so it does not label them; VIME's runs agree on everything
    assert list(groups) == ["TRPO, no bonus", "TRPO + VASE δ=0, σ_c=0.5",
                            "TRPO + VASE δ=0.001, σ_c=5", "TRPO + VIME"]
    assert [r.run_id for r in groups["TRPO + VASE δ=0.001, σ_c=5"]] == ["a", "d"]
    assert [r.run_id for r in groups["TRPO + VIME"]] == ["f", "c"]  # by seed


def test_trpo_and_ppo_runs_of_a_measure_are_two_groups_named_by_the_algorithm():
    ppo = {"algorithm": "ppo", "ppo.epochs": "10", "ppo.lr": "0.0003"}
    runs = [compare.Run("a", "vase", 0, {}, {"algorithm": "trpo"}),
            compare.Run("b", "vase", 0, {}, ppo),
            compare.Run("c", "vase", 1, {}, ppo)]
    groups = compare.by_measure(runs)
    # named by the learner, and by no setting the learner alone implies (ppo.*)
    assert list(groups) == ["PPO + VASE", "TRPO + VASE"]
    assert [r.run_id for r in groups["PPO + VASE"]] == ["b", "c"]


def test_figures_are_written_and_non_empty(store, tmp_path):
    written = compare.compare(store, "point_robot", tmp_path)
    assert set(written) == {"table", "returns", "running_time", "delta_sweep", "heatmaps"}
    for name in ("returns", "running_time", "delta_sweep", "heatmaps"):
        image = plt.imread(written[name])
        assert image.shape[0] > 100 and image.shape[1] > 100, name
        assert image.std() > 0.01, name  # not a blank canvas


def test_running_time_is_the_median_iteration():
    # a slow first iteration (start-up) does not count
    run = compare.Run("id", "vase", 0, {"wall_time": np.array([9.0, 11.0, 13.0]),
                                               "return_mean": np.zeros(3),
                                               "success_rate": np.zeros(3),
                                               "fps": np.ones(3),
                                               "first_reward_step": np.array([])})
    assert compare.summary([run], 1)["seconds_per_iteration"] == 2.0


def test_unknown_experiment_is_a_clear_error(store, tmp_path):
    with pytest.raises(SystemExit, match="no experiment named 'nope'"):
        compare.compare(store, "nope", tmp_path)


def test_runs_without_a_finished_episode_give_nan_rows_not_a_crash(tmp_path, sqlite_uri):
    uri = sqlite_uri
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("young", artifact_location=(tmp_path / "a").as_uri())
    run_id = client.create_run(experiment, tags={"surprise": "vase", "seed": "0"}).info.run_id
    client.log_metric(run_id, "fps", 1000.0, step=64)  # an iteration, but no episode ended
    client.log_metric(run_id, "wall_time", 2.0, step=64)
    client.set_terminated(run_id)
    mlflow.set_tracking_uri(None)
    written = compare.compare(uri, "young", tmp_path / "out")
    row = written["table"].read_text().splitlines()[2].split("|")
    assert row[3].strip() == "nan" and row[7].strip() == "never (0/1)" and row[8].strip() == "1,000"
    assert plt.imread(written["returns"]).shape[0] > 100


def test_the_heatmap_shows_the_chosen_seed_else_the_lowest_rewarded_one():
    def run(seed, first):
        return compare.Run(str(seed), "vase", seed,
                           {"first_reward_step": np.array(first, dtype=float)})

    runs = [run(0, []), run(1, []), run(2, [5000.0]), run(3, [900.0])]
    assert compare.heatmap_run(runs, None).seed == 2
    assert compare.heatmap_run(runs, 1).seed == 1
    assert compare.heatmap_run(runs, 7) is None
    assert compare.heatmap_run(runs[:2], None).seed == 0  # nobody found it: the lowest seed


def test_diagnostics_table_and_coverage_figure(tmp_path, sqlite_uri):
    uri = sqlite_uri
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("diag", artifact_location=(tmp_path / "a").as_uri())
    # per seed: advantage/bonus correlation per iteration, and the step of the first reward
    corr = {0: [1.0, 0.9, 0.2, 0.1], 1: [0.8, 0.7, 0.6, 0.5], 2: [0.95, 0.3, 0.3, 0.3]}
    first = {0: 2500, 2: 1500}  # seed 1 never finds it
    for seed in corr:
        run_id = client.create_run(
            experiment, tags={"surprise": "vase", "seed": str(seed)}
        ).info.run_id
        client.log_param(run_id, "advantage.structure", "extrinsic")
        for i in range(4):
            step = (i + 1) * 1000
            client.log_metric(run_id, "advantage_bonus_corr", corr[seed][i], step=step)
            client.log_metric(run_id, "advantage_bonus_share", 1.0, step=step)
            client.log_metric(run_id, "coverage", 0.01 * (i + 1) * (seed + 1), step=step)
            client.log_metric(run_id, "wall_time", float(i), step=step)
            if seed in first and step >= first[seed]:
                client.log_metric(run_id, "first_reward_step", first[seed], step=step)
        client.set_terminated(run_id)
    mlflow.set_tracking_uri(None)
    written = compare.compare(uri, "diag", tmp_path / "out")
    table = written["table"].read_text().splitlines()
    row = [c.strip() for c in table[-1].split("|")[1:-1]]
    # before the first reward: seed 0 steps 1000, 2000; seed 1 all; seed 2 step 1000
    before = {0: corr[0][:2], 1: corr[1], 2: corr[2][:1]}
    medians = [np.median(v) for v in before.values()]
    lowest = min(min(v) for v in before.values())
    assert row[2] == f"{np.median(medians):.2f}; {lowest:.2f}"
    assert row[3] == "4/7"  # 1.0, 0.9 | 0.8 | 0.95 of the seven iterations before a reward
    assert row[4] == "1.00" and row[5] == "3"  # the share; the seeds
    assert row[1] == f"{np.median([0.04, 0.08, 0.12]):.3f}"  # final coverage per seed
    image = plt.imread(written["coverage"])
    assert image.shape[0] > 100 and image.std() > 0.01


def test_the_returns_figure_names_a_curve_hidden_under_another_and_keeps_the_legend_outside(
        tmp_path, monkeypatch):
    def run(run_id, surprise, returns):
        steps = np.arange(1, len(returns) + 1) * 50_000
        return compare.Run(run_id, surprise, 0, {"return_mean": np.array(returns)},
                           steps={"return_mean": steps})

    groups = {"none": [run("a", "none", [0.0, 0.0, 0.0])],
              "vase advantage=extrinsic": [run("b", "vase", [0.0, 1.0, 1.0])],
              "nll": [run("c", "nll", [0.0, 1.0, 1.0])]}  # exactly under vase's
    figures = []
    monkeypatch.setattr(compare.plt, "close", figures.append)
    compare.plot_returns("demo", groups, tmp_path / "returns.png")
    [figure] = figures
    [ax] = [ax for ax in figure.axes if ax.get_visible()]
    [legend] = figure.legends  # the study page's figure: one legend under the panels
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels == ["none (1 run)", "vase advantage=extrinsic (1 run)",
                      "nll (1 run), same median as vase advantage=extrinsic"]
    assert len({line.get_linestyle() for line in ax.get_lines()}) == 3
    box = legend.get_window_extent(figure.canvas.get_renderer())
    axes_box = ax.get_window_extent(figure.canvas.get_renderer())
    assert box.y1 < axes_box.y0  # below the axes, never over the curves
    assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()][-1].endswith("k")


def test_a_group_with_other_run_counts_in_other_panels_names_the_range(tmp_path,
                                                                         monkeypatch):
    """A study in progress: VASE has 3 runs on one task and 1 on the other, RND 2 on both."""
    def runs(surprise, count):
        return [compare.Run(str(i), surprise, i, {"return_mean": np.array([0.0, float(i)])},
                            steps={"return_mean": np.array([5e4, 1e5])}) for i in range(count)]

    figures = []
    monkeypatch.setattr(report.plt, "close", figures.append)
    report.plot_curves({"a": {"vase": runs("vase", 3), "rnd": runs("rnd", 2)},
                        "b": {"vase": runs("vase", 1), "rnd": runs("rnd", 2)}},
                       {"vase": ("VASE", None), "rnd": ("RND", None)}, tmp_path / "c.png", "t")
    [legend] = figures[0].legends
    assert [t.get_text() for t in legend.get_texts()] == ["VASE (1–3 runs)", "RND (2 runs)"]


def test_timings_from_runs_started_apart_are_flagged_and_seed_counts_are_plural_right():
    hour = 3_600_000  # ms, MLflow's start_time unit
    runs = [compare.Run(str(i), "vase", i, {}, start_time=1_000 + i * 3 * hour) for i in (0, 1)]
    assert "started 3.0 h apart" in compare.timing_note(runs)
    assert compare.timing_note(runs[:1]) == ""  # one run: nothing set side by side
    together = [compare.Run(str(i), "vase", i, {}, start_time=1_000 + i * 60_000) for i in (0, 1)]
    assert compare.timing_note(together) == ""  # a minute apart: a sweep's parallel jobs
    assert [compare.seeds(n) for n in (1, 2)] == ["1 seed", "2 seeds"]


def test_groups_that_differ_in_many_settings_are_labelled_by_the_fewest_that_tell_them_apart():
    paper = {"surprise.sigma_c": "5.0", "surprise.delta": "0.001", "surprise.init_mean": "uniform",
             "surprise.sampling": "weights", "trpo.init": "torch", "trpo.cg_damping": "0.1"}
    authors = {"surprise.sigma_c": "0.5", "surprise.delta": "0.0", "surprise.init_mean": "normal",
               "surprise.sampling": "local_shared", "trpo.init": "glorot",
               "trpo.cg_damping": "1e-05"}
    runs = [compare.Run("a", "vase", 0, {}, paper), compare.Run("b", "vase", 0, {}, authors),
            compare.Run("c", "vase", 1, {}, {**authors, "surprise.eta": "0.001"})]
    groups = compare.by_measure(runs)
    # seven settings differ; δ (the paper's symbols first) and η split the runs as all do
    assert sorted(groups) == ["TRPO + VASE δ=0, η=0.001 (+5 settings)",
                              "TRPO + VASE δ=0, η=None (+5 settings)",
                              "TRPO + VASE δ=0.001, η=None (+5 settings)"]
    assert [len(members) for members in groups.values()] == [1, 1, 1]
