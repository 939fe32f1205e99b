"""recipes/study/sac_report.py: the SAC study's page from its exported runs, its readings
against direct computations."""

import math
import zlib
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from exported_runs import write_run
from recipe_modules import load_recipe

sac = load_recipe("study/sac_report")
runs_of = load_recipe("study/study_runs")
stats = load_recipe("study/study_statistics")

BUDGET = 300_000  # conf/trpo_vase.yaml: sac.frames


def _cell(root: Path, task: str, measure: str, levels: tuple[float, float], seeds: int = 5,
          iterations: int = 300, frames_per_batch: int = 1000, first_reward=None,
          success=None) -> None:
    """Seeds whose return is ``levels[0]`` until 80 % of the run, then ``levels[1]``, noisy."""
    rng = np.random.default_rng(zlib.crc32(f"{task} {measure}".encode()))
    switch = int(0.8 * iterations)
    for seed in range(seeds):
        curve = np.r_[np.full(switch, levels[0]), np.full(iterations - switch, levels[1])]
        write_run(root / task / measure / f"seed{seed}.csv", curve + rng.normal(0, 0.1, iterations),
                  frames_per_batch=frames_per_batch, first_reward=first_reward,
                  metrics=None if success is None else {"Return/success_rate": success})


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
    assert read == "no difference shown"  # −1 at the end, +1.4 over the whole run
    assert float(figures["last10pct"].split()[0]) == pytest.approx(-1, abs=0.1)
    assert float(figures["whole"].split()[0]) == pytest.approx(1.4, abs=0.1)
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
    _cell(study, "mountain_car", "vase", (0.0, 1.0), first_reward=60_000,
          success=[0.0] * 240 + [1.0] * 60)
    # whole paths: each batch ends on the path that fills it, so a run passes the budget
    _cell(study, "mountain_car", "none", (0.0, 0.0), frames_per_batch=1001)
    (study / "mountain_car" / "vase" / "runs.csv").write_text(
        "seed,git_commit,note\n0,397f176542eac,started on vm (2 cores), load average 2.0\n")
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    sac.main(["--study", str(study), "--figure3", str(figure3), "--page", str(page)])
    text = page.read_text()
    assert text.count(sac.MARKER) == 1 and text.count("## Results") == 1
    assert "**10 of 30 runs finished**" in text and "SAC runs at commit 397f176" in text
    assert "so the runs ended at 300,000–300,300 frames;" in text
    assert "| MountainCar | 5 / 5 | 5 / 5 | 0 / 5 | 3 |" in text
    assert "[![Return against frames per task](sac/sac_curves.png)](sac/sac_curves.png)" in text
    assert ("| MountainCar | SAC + VASE − SAC (no bonus) | " in text
            and "| SAC + VASE above SAC (no bonus) in both windows |" in text)
    assert "| MountainCar | SAC + VASE | 5 of 5, median 60,000 | 1.00 (1.00–1.00) |" in text
    assert "| MountainCar | TRPO + VASE (Figure 3) | 3 of 3, median 100,000 | 1.00" in text
    assert "| HalfCheetah | SAC + RND | – |  |" in text
    image = plt.imread(study / "sac_curves.png")
    assert image.shape[0] > 300 and image.std() > 0.01
    [figure] = drawn
    assert [ax.get_title() for ax in figure.axes] == ["MountainCar (sparse)",
                                                      "HalfCheetah (sparse)"]
    assert len(figure.axes[0].lines) == 3  # VASE, none and TRPO + VASE; no RND run yet
    page.write_text(design)
    with pytest.raises(SystemExit, match="no line"):
        sac.main(["--study", str(study), "--figure3", str(figure3), "--page", str(page)])
