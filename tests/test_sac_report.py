"""recipes/study/sac_report.py: the SAC study's page from its exported runs, its readings
against direct computations."""

import math
import subprocess
import zlib
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import yaml
from exported_runs import write_run
from recipe_modules import load_recipe

sac = load_recipe("study/sac_report")
runs_of = load_recipe("study/study_runs")
stats = load_recipe("study/study_statistics")

BUDGET = 300_000  # conf/trpo_vase.yaml: sac.frames


def _cell(root: Path, task: str, measure: str, levels: tuple[float, float], seeds: int = 5,
          iterations: int = 300, frames_per_batch: int = 1000, first_reward=None,
          success=None, metrics=None) -> None:
    """Seeds whose return is ``levels[0]`` until 80 % of the run, then ``levels[1]``, noisy;
    ``success`` and ``metrics``: more columns (``write_run``'s)."""
    metrics = dict(metrics or {}) | ({} if success is None else {"Return/success_rate": success})
    rng = np.random.default_rng(zlib.crc32(f"{task} {measure}".encode()))
    switch = int(0.8 * iterations)
    for seed in range(seeds):
        curve = np.r_[np.full(switch, levels[0]), np.full(iterations - switch, levels[1])]
        write_run(root / task / measure / f"seed{seed}.csv", curve + rng.normal(0, 0.1, iterations),
                  frames_per_batch=frames_per_batch, first_reward=first_reward,
                  metrics=metrics)


def _head() -> str:
    """This checkout's commit (a run's ``runs.csv`` names the commit it ran at)."""
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=runs_of.ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_budget_is_the_recipes_and_a_figure3_run_is_cut_at_it():
    assert sac.sac_budget() == BUDGET
    # a Figure 3 run of 100 iterations of 5,000 frames: 0 until 300 k frames, 1,000 after, its
    # first reward found at 400 k
    whole = runs_of.Seed(0, 5000.0 * np.arange(1, 101), np.r_[np.zeros(60), np.full(40, 1e3)],
                         400_000.0, success_rate=np.r_[np.zeros(60), np.ones(40)])
    short = sac.cut(whole, BUDGET)
    assert short.frames[-1] == BUDGET and short.returns.size == short.success_rate.size == 60
    assert not short.returns.any() and not short.success_rate.any()
    assert math.isnan(short.first_reward)  # found after the budget: not found within it
    assert sac.cut(whole, 500_000).first_reward == 400_000
    assert whole.returns.size == 100  # the run itself is left whole


def test_a_direction_is_read_only_when_both_windows_show_it_with_every_seed(tmp_path):
    study, figure3 = tmp_path / "sac", tmp_path / "figure3"
    _cell(study, "half_cheetah", "none", (0.0, 0.0))
    _cell(study, "half_cheetah", "vase", (1.0, 3.0))  # above in both windows
    _cell(study, "half_cheetah", "rnd", (2.0, -1.0))  # above over the run, below at its end
    _cell(study, "mountain_car", "vase", (0.0, 1.0), seeds=4)  # a seed short
    _cell(study, "mountain_car", "none", (0.0, 0.0))
    _cell(figure3, "half_cheetah", "vase", (5.0, 5.0), seeds=8, iterations=100,
          frames_per_batch=5000)
    data = sac.load_study(study, figure3, BUDGET)
    assert [run.returns.size for run in data["half_cheetah"]["trpo_vase"]] == [60] * 8
    vase, none = data["half_cheetah"]["vase"], data["half_cheetah"]["none"]
    figures, read = sac.reading(vase, none, "A", "B", resamples=2000)
    assert read == "A above B in both windows"
    # the figures are compare()'s on each seed's window mean, computed here directly
    last = [np.mean(run.returns[-30:]) for run in vase], [np.mean(run.returns[-30:])
                                                          for run in none]
    expected = stats.compare(*last, resamples=2000)
    low, high = expected.interval
    assert figures["last10pct"] == f"{expected.difference:+.3g} [{low:+.3g}, {high:+.3g}]"
    assert float(figures["last10pct"].split()[0]) == pytest.approx(3, abs=0.1)
    assert sac.reading(none, vase, "B", "A", resamples=2000)[1] == "B below A in both windows"
    rnd = data["half_cheetah"]["rnd"]
    figures, read = sac.reading(rnd, none, "A", "B", resamples=2000)
    # −1 at the end, +1.4 over the whole run: no direction read, the two named
    assert read == ("the windows disagree: A below B in the last 10 % of frames, above in the "
                    "whole run")
    assert float(figures["last10pct"].split()[0]) == pytest.approx(-1, abs=0.1)
    assert float(figures["whole"].split()[0]) == pytest.approx(1.4, abs=0.1)
    late = tmp_path / "late"
    _cell(late, "half_cheetah", "none", (0.0, 0.0))
    _cell(late, "half_cheetah", "rnd", (-0.25, 1.0))  # above at its end, level over the run
    later = sac.load_study(late, figure3, BUDGET)["half_cheetah"]
    figures, read = sac.reading(later["rnd"], later["none"], "A", "B", resamples=2000)
    assert read == "no direction read: A above B in the last 10 % of frames only"
    assert float(figures["whole"].split()[0]) == pytest.approx(0, abs=0.02)
    assert sac.reading(data["mountain_car"]["vase"], data["mountain_car"]["none"], "A", "B",
                       resamples=2000)[1] == "not read yet (4 and 5 seeds)"
    assert sac.reading([], none, "A", "B")[0] == {"last10pct": "–", "whole": "–"}
    # TRPO + VASE (Figure 3, 8 seeds, cut) against SAC + VASE: compared, every seed counting
    assert sac.reading(vase, data["half_cheetah"]["trpo_vase"], "A", "B",
                       resamples=2000)[1] == "A below B in both windows"


def test_first_rewards_and_success_rates_count_every_seed():
    seeds = [runs_of.Seed(i, np.array([1000.0]), np.array([0.0]), found,
                          success_rate=np.r_[np.zeros(27), np.full(3, rate)])
             for i, (found, rate) in enumerate([(20_000.0, 1.0), (50_000.0, 0.5),
                                                (math.nan, 0.0)])]
    assert sac.first_reward(seeds, BUDGET) == "2 of 3, median 50,000"
    assert sac.first_reward(seeds[2:], BUDGET) == "0 of 1, median beyond the budget"
    assert sac.first_reward([], BUDGET) == "–"
    assert sac.first_reward(seeds, 40_000) == "1 of 3, median beyond the budget"
    # the last 10 % of 30 iterations: the last 3
    assert sac.success(seeds) == "0.50 (0.00–1.00)"
    assert sac.success([runs_of.Seed(0, np.array([1.0]), np.array([0.0]), math.nan)]) == "–"


def test_the_bonus_size_is_each_seed_window_mean_over_its_updating_iterations():
    # 3 iterations of random actions (nothing sampled), then 7 with updates: a window of the
    # last 10 % is the last one; the whole run, the 7
    nothing = [math.nan] * 3
    runs = [runs_of.Seed(seed, 1000.0 * np.arange(1, 11), np.zeros(10), math.nan,
                         sampled_reward=np.r_[nothing, np.full(7, 0.5 + seed)],
                         sampled_bonus=np.r_[nothing, np.arange(7.0)],
                         bonus_std=np.r_[[9.0] * 3, np.full(7, 2.0)],  # logged from the start
                         alpha=np.r_[nothing, np.linspace(0.7, 0.1, 7)],  # falling, as it is tuned
                         entropy=np.r_[nothing, -np.ones(7)])
            for seed in range(2)]
    etas = [1e-2, 1e-3]
    last = sac.bonus_sizes(runs, etas, "last10pct")
    assert float(last["η·U"]) == pytest.approx((1e-2 * 6 + 1e-3 * 6) / 2)
    assert float(last["r_e"]) == pytest.approx(
        ((0.5 - 1e-2 * 6) + (1.5 - 1e-3 * 6)) / 2)
    assert float(last["α"]) == pytest.approx(0.1)
    assert float(last["α·H"]) == pytest.approx(-0.1)
    whole = sac.bonus_sizes(runs, etas, "whole")
    assert float(whole["η·U"]) == pytest.approx((1e-2 * 3 + 1e-3 * 3) / 2)
    # the 3 iterations before the first update are left out (their 9s would raise it)
    assert float(whole["η·sd(U)"]) == pytest.approx((1e-2 * 2 + 1e-3 * 2) / 2)
    assert float(whole["α"]) == pytest.approx(0.4)
    assert float(whole["α·H"]) == pytest.approx(-0.4)
    plain = sac.bonus_sizes(runs, None, "whole")  # no bonus: its sampled reward is extrinsic
    assert plain["η·U"] == plain["η·sd(U)"] == "–"
    assert float(plain["r_e"]) == pytest.approx(1.0)


def test_a_bonus_weight_is_the_eta_of_its_runs_commit(tmp_path):
    head = _head()
    for measure in sac.BONUSES:
        conf = yaml.safe_load((runs_of.ROOT / "conf" / "surprise" / f"{measure}.yaml")
                              .read_text())
        assert sac.bonus_weight(head, measure) == conf["eta"]
    with pytest.raises(SystemExit, match=r"cannot read conf/surprise/vase\.yaml at 0{40}"):
        sac.bonus_weight("0" * 40, "vase")
    cell = tmp_path / "vase"
    cell.mkdir()
    (cell / "runs.csv").write_text(f"seed,git_commit\n0,{head}\n")
    runs = [runs_of.Seed(seed, np.array([1.0]), np.array([0.0]), math.nan) for seed in (0, 1)]
    with pytest.raises(SystemExit, match=r"no row for seeds \[1\]"):
        sac.bonus_weights(cell, runs, "vase")
    assert sac.bonus_weights(cell, runs[:1], "vase") == [sac.bonus_weight(head, "vase")]


def test_the_page_keeps_its_design_and_is_written_below_its_marker(tmp_path, monkeypatch):
    study, figure3, page = tmp_path / "sac", tmp_path / "figure3", tmp_path / "sac.md"
    design = "# SAC\n\nThe design, fixed before any run.\n\n"
    page.write_text(design + sac.MARKER + "\nwhatever an earlier report wrote\n")
    _cell(figure3, "mountain_car", "vase", (0.0, 1.0), seeds=3, iterations=50,
          frames_per_batch=5000, first_reward=100_000, success=[0.0] * 40 + [1.0] * 10)
    sac.main(["--study", str(study), "--figure3", str(figure3), "--page", str(page)])
    text = page.read_text()
    assert text.startswith(design + sac.MARKER + "\n\n## Results\n")
    assert "**0 of 30 runs finished**: nothing to read yet." in text
    assert "| MountainCar | 0 / 5 | 0 / 5 | 0 / 5 | 3 |" in text
    assert "whatever" not in text and not (study / "sac_curves.png").exists()
    # the learner updates from its 26th batch: 0.25 a sampled transition, 100 of it U
    updating = [None] * 25 + [1.0] * 275
    learner = {"sac/sampled_reward": [v and 0.25 for v in updating],
               "bonus/sampled_mean": [v and 100.0 for v in updating],
               "bonus/std": [50.0] * 300, "sac/alpha": [v and 0.2 for v in updating],
               "sac/entropy": [v and -1.0 for v in updating]}
    _cell(study, "mountain_car", "vase", (0.0, 1.0), first_reward=60_000,
          success=[0.0] * 240 + [1.0] * 60, metrics=learner)
    # whole paths: each batch ends on the path that fills it, so a run passes the budget
    _cell(study, "mountain_car", "none", (0.0, 0.0), frames_per_batch=1001)
    head = _head()
    (study / "mountain_car" / "vase" / "runs.csv").write_text("seed,git_commit,note\n" + "".join(
        f"{seed},{head},started on vm (2 cores), load average 2.0\n" for seed in range(5)))
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    sac.main(["--study", str(study), "--figure3", str(figure3), "--page", str(page)])
    text = page.read_text()
    assert text.count(sac.MARKER) == 1 and text.count("## Results") == 1
    assert "**10 of 30 runs finished**" in text and f"SAC runs at commit {head[:7]}" in text
    assert "so the runs ended at 300,000–300,300 frames;" in text
    assert "| MountainCar | 5 / 5 | 5 / 5 | 0 / 5 | 3 |" in text
    assert "[![Return against frames per task](sac/sac_curves.png)](sac/sac_curves.png)" in text
    assert ("| MountainCar | SAC + VASE − SAC (no bonus) | " in text
            and "| SAC + VASE above SAC (no bonus) in both windows |" in text)
    assert "| MountainCar | SAC + VASE | 5 of 5, median 60,000 | 1.00 (1.00–1.00) |" in text
    assert "| MountainCar | TRPO + VASE (Figure 3) | 3 of 3, median 100,000 | 1.00" in text
    assert "| HalfCheetah | SAC + RND | – |  |" in text
    eta = sac.bonus_weight(head, "vase")
    for window in ("last 10 %", "whole run"):  # both windows: every updating iteration alike
        assert (f"| VASE | {window} | {eta * 100:.3g} | "
                f"{eta * 50:.3g} | {0.25 - eta * 100:.3g} | 0.2 | -0.2 |") in text
    assert "| none | whole run | – | – | – | – | – |" in text
    assert "\nMountainCar:\n\n| SAC with |" in text and "HalfCheetah:" not in text
    assert f"at its commit: {eta:g} (VASE). Described" in text
    image = plt.imread(study / "sac_curves.png")
    assert image.shape[0] > 300 and image.std() > 0.01
    figure, seeds_figure = drawn
    assert [ax.get_title() for ax in figure.axes] == ["MountainCar (sparse)",
                                                      "HalfCheetah (sparse)"]
    assert len(figure.axes[0].lines) == 3  # VASE, none and TRPO + VASE; no RND run yet
    # the placebos' figure: a panel a cell, a line a seed, the seeds that found the reward
    assert "(sac/sac_placebo_seeds.png)" in text
    assert [ax.get_title() for ax in seeds_figure.axes] == [
        "SAC (no bonus)\n5 seeds, 0 found the reward", "SAC + VASE\n5 seeds, 5 found the reward",
        "SAC + VASE, η = 0\n0 seeds, 0 found the reward",
        "SAC + VASE, bonus shuffled\n0 seeds, 0 found the reward"]
    assert [len(ax.lines) for ax in seeds_figure.axes] == [5, 5, 0, 0]
    page.write_text(design)
    with pytest.raises(SystemExit, match="no line"):
        sac.main(["--study", str(study), "--figure3", str(figure3), "--page", str(page)])


placebos = load_recipe("study/sac_placebos")


@pytest.mark.parametrize(("levels", "answer"), [
    # VASE reaches the goal, both placebos stay at 0: what the bonus says matters
    ({"vase_eta0": (0.0, 0.0), "vase_shuffled": (0.0, 0.0)}, "the content"),
    # the shuffled bonus explores as VASE does, η = 0 does not: its size and spread
    ({"vase_eta0": (0.0, 0.0), "vase_shuffled": (0.0, 1.0)}, "its size and spread"),
    # the shuffled placebo halfway (above η = 0, below VASE), η = 0 level with VASE
    ({"vase_eta0": (0.0, 1.0), "vase_shuffled": (0.0, 0.5)}, "undecided"),
])
def test_the_placebos_rule_reaches_each_answer_from_the_pages_own_readings(tmp_path, levels,
                                                                           answer):
    study = tmp_path / "sac"
    _cell(study, "mountain_car", "none", (0.0, 0.0), first_reward=None)
    _cell(study, "mountain_car", "vase", (0.0, 1.0), first_reward=60_000)
    for measure, level in levels.items():
        _cell(study, "mountain_car", measure, level)
    cells = {m: runs_of.load_cell(study, "mountain_car", m)
             for m in ("none", "vase", *placebos.PLACEBOS)}
    lines = placebos.placebo_section(cells, sac.LABELS, sac.reading,
                                     lambda seeds: (sac.first_reward(seeds, BUDGET), "–"),
                                     resamples=2000)
    text = "\n".join(lines)
    assert text.count(placebos.RULE) == 1 and text.index(placebos.RULE) < text.index("| A − B")
    assert text.endswith(f"**Answer: {answer}.**")
    # each row is the page's reading of the pair, recomputed here
    figures, read = sac.reading(cells["vase"], cells["vase_eta0"], "SAC + VASE",
                                "SAC + VASE, η = 0", resamples=2000)
    assert (f"| SAC + VASE − SAC + VASE, η = 0 | {figures['last10pct']} | {figures['whole']} "
            f"| {read} |") in lines
    assert any(line.endswith("(shown, not judged) |") and "η = 0 − SAC (no bonus)" in line
               for line in lines)
    assert "| SAC + VASE | 5 | 5 of 5, median 60,000 | – |" in lines


def test_the_placebos_wait_for_every_seed_before_an_answer(tmp_path):
    study = tmp_path / "sac"
    _cell(study, "mountain_car", "vase", (0.0, 1.0))
    _cell(study, "mountain_car", "vase_eta0", (0.0, 0.0), seeds=4)
    _cell(study, "mountain_car", "vase_shuffled", (0.0, 0.0))
    cells = {m: runs_of.load_cell(study, "mountain_car", m)
             for m in ("none", "vase", *placebos.PLACEBOS)}
    lines = placebos.placebo_section(cells, sac.LABELS, sac.reading, lambda seeds: ("–", "–"),
                                     resamples=500)
    assert lines[-1] == "\n**Answer: not measured yet.**"
    assert "| SAC (no bonus) | 0 | – | – |" in lines
