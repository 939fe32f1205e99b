"""The SAC study's page (issue 41): SAC with no bonus, VASE and RND on MountainCar v1 and
HalfCheetah v1, beside TRPO + VASE from the Figure 3 study at the same frames.

Reads the runs ``recipes/study/sac.sh`` exports (``docs/results/sac/<task>/<measure>/seed<k>.csv``,
with their ``runs.csv``) and the Figure 3 study's VASE runs, cut at the SAC runs' budget
(``sac.frames`` of ``conf/trpo_vase.yaml``), and writes the part of ``docs/results/sac.md`` below
its marker line (the design above it was fixed before any run and is left as it is) and the figures
``docs/results/sac/sac_curves.png`` and ``sac_placebo_seeds.png`` (the placebos'). What it reads off
is the design's: each seed's mean extrinsic return over the last 10 % of its frames and over the
whole run; per pair of measures, the difference of means with the wider of its 95 %
percentile-bootstrap and Welch intervals (``study_statistics.compare``); a direction only where both
windows show the same one with every seed of both cells finished; the frames to the first extrinsic
reward and, on MountainCar, the success rate. Besides the design, described and not tested: the
bonus's size (η·U, η at each run's commit) beside the extrinsic reward and the entropy term the
learner saw.

    python recipes/study/sac_report.py

Examples:
    >>> import numpy as np
    >>> run = Seed(0, np.array([100_000.0, 200_000.0, 300_000.0, 400_000.0]),
    ...            np.array([0.0, 1.0, 2.0, 9.0]), 150_000.0)
    >>> cut(run, 300_000).returns.tolist()  # the Figure 3 run at the SAC runs' budget
    [0.0, 1.0, 2.0]
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import os
import statistics
import subprocess
import textwrap
import warnings
from dataclasses import fields, replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import yaml
from figure3_claims import seed_windows
from figure3_report import smoothed
from paper_grid import task_frames
from sac_placebos import LABELS as PLACEBO_LABELS
from sac_placebos import PLACEBOS, placebo_section
from study_figures import DPI, figure, legible
from study_runs import ROOT, TITLES, Seed, load_cell, provenance
from study_statistics import compare, window_mean
from study_timing import run_minutes

#: the study's cells (docs/results/sac.md's design): tasks, SAC's measures, seeds
TASKS = ("mountain_car", "half_cheetah")
MEASURES = ("none", "vase", "rnd")
SEEDS = 5
#: the column TRPO + VASE from the Figure 3 study takes beside them
TRPO_VASE = "trpo_vase"
LABELS = {"none": "SAC (no bonus)", "vase": "SAC + VASE", "rnd": "SAC + RND",
          TRPO_VASE: "TRPO + VASE (Figure 3)"}
#: Okabe & Ito's colour-blind-safe palette, as the Figure 3 page's
COLOURS = {"none": "#999999", "vase": "#D55E00", "rnd": "#CC79A7", TRPO_VASE: "#000000",
           "vase_eta0": "#0072B2", "vase_shuffled": "#009E73"}
#: the pairs compared, A − B
PAIRS = (("vase", "none"), ("rnd", "none"), ("vase", "rnd"), ("vase", TRPO_VASE))
#: the two windows of the design: the last 10 % of a run's frames (read as its last 10 % of
#: iterations, each of sac.frames_per_batch frames or up to a path more) and the whole run
WINDOWS = {"last10pct": "last 10 % of frames", "whole": "whole run"}
#: the measures with a bonus (an η), and their names in the bonus's-size table (all SAC there)
BONUSES = tuple(measure for measure in MEASURES if measure != "none")
BONUS_NAMES = {"none": "none"} | {m: LABELS[m].removeprefix("SAC + ") for m in BONUSES}
#: its columns: name -> what each seed's iteration gives, from the run and its bonus's η
SIZES = {
    "η·U": lambda run, eta: eta * run.sampled_bonus,
    "η·sd(U)": lambda run, eta: eta * run.bonus_std,
    "r_e":  # no bonus: no column of U, and the reward is all extrinsic
        lambda run, eta: run.sampled_reward - eta * np.nan_to_num(run.sampled_bonus),
    "α": lambda run, eta: run.alpha,
    "α·H": lambda run, eta: run.alpha * run.entropy,
}
#: the line above which the page is the design's and below which this script writes
MARKER = "<!-- Below: written by `python recipes/study/sac_report.py` from docs/results/sac/. -->"


def sac_budget() -> int:
    """A SAC run's frames (``sac.frames``, in whole batches: the launcher's count)."""
    return task_frames(TASKS[0], algorithm="sac")


def cut(run: Seed, frames: int) -> Seed:
    """``run`` up to ``frames`` (its iterations that end by then); a first reward found later
    counts as not found."""
    keep = run.frames <= frames
    per_iteration = {f.name: getattr(run, f.name)[keep] for f in fields(run)
                     if isinstance(getattr(run, f.name), np.ndarray)
                     and getattr(run, f.name).size == keep.size}  # those it logged
    first = run.first_reward if run.first_reward <= frames else math.nan
    return replace(run, first_reward=first, **per_iteration)


def load_study(study: Path, figure3: Path, frames: int) -> dict[str, dict[str, list[Seed]]]:
    """``task -> measure -> seeds``: the SAC cells and TRPO + VASE cut at ``frames``."""
    data = {}
    for task in TASKS:
        cells = {measure: load_cell(study, task, measure) for measure in MEASURES}
        cells[TRPO_VASE] = [cut(run, frames) for run in load_cell(figure3, task, "vase")]
        data[task] = cells
    return data


def reading(seeds_a: list[Seed], seeds_b: list[Seed], label_a: str, label_b: str,
            **kwargs) -> tuple[dict[str, str], str]:
    """One pair's differences per window (``"+1.2 [−0.3, +2.8]"``) and what they read: a
    direction only when both windows' intervals exclude 0 on the same side, and only with every
    seed of both cells (a cell of Figure 3 has more). Where one window alone shows a direction,
    or the two opposite ones, the reading names them: shown, not read."""
    figures, signs = {}, []
    for window in WINDOWS:
        comparison = compare(seed_windows(seeds_a, window), seed_windows(seeds_b, window),
                             **kwargs)
        if comparison is None:
            figures[window] = "–"
            signs.append(None)
            continue
        low, high = comparison.interval
        figures[window] = f"{comparison.difference:+.3g} [{low:+.3g}, {high:+.3g}]"
        signs.append(comparison.sign)
    if min(len(seeds_a), len(seeds_b)) < SEEDS:
        return figures, f"not read yet ({len(seeds_a)} and {len(seeds_b)} seeds)"
    if signs[0] == signs[1] == 1:
        return figures, f"{label_a} above {label_b} in both windows"
    if signs[0] == signs[1] == -1:
        return figures, f"{label_a} below {label_b} in both windows"
    shown = [("above" if sign > 0 else "below", WINDOWS[window])
             for window, sign in zip(WINDOWS, signs, strict=True) if sign]
    if len(shown) == 1:
        (side, window), = shown
        return figures, f"no direction read: {label_a} {side} {label_b} in the {window} only"
    if shown:
        (first, in_first), (second, in_second) = shown
        return figures, (f"the windows disagree: {label_a} {first} {label_b} in the {in_first}, "
                         f"{second} in the {in_second}")
    return figures, "no difference shown"


def first_reward(seeds: list[Seed], frames: int) -> str:
    """How many runs found an extrinsic reward within ``frames``, and their median frames (runs
    that never found it counted as beyond the budget)."""
    if not seeds:
        return "–"
    steps = np.array([run.first_reward if run.first_reward <= frames else math.inf
                      for run in seeds])  # NaN (never) compares False: beyond the budget too
    median = float(np.median(steps))
    return (f"{np.isfinite(steps).sum()} of {len(seeds)}, median "
            + (f"{median:,.0f}" if math.isfinite(median) else "beyond the budget"))


def success(seeds: list[Seed]) -> str:
    """The mean over seeds of each seed's success rate over its last 10 % of frames, and the
    seeds' range."""
    rates = np.array([window_mean(run.success_rate, "last10pct") for run in seeds
                      if run.success_rate.size])
    rates = rates[np.isfinite(rates)]
    if not rates.size:
        return "–"
    return f"{rates.mean():.2f} ({rates.min():.2f}–{rates.max():.2f})"


@functools.cache  # one git call per commit and bonus, not per seed
def bonus_weight(commit: str, measure: str) -> float:
    """The η that runs of ``measure`` at ``commit`` ran with: ``eta`` of
    ``conf/surprise/<measure>.yaml`` at that commit (the study's only override of a measure is
    ``surprise=<measure>``, and no preset sets η)."""
    shown = subprocess.run(["git", "show", f"{commit}:conf/surprise/{measure}.yaml"], cwd=ROOT,
                           capture_output=True, text=True)
    if shown.returncode:
        raise SystemExit(f"cannot read conf/surprise/{measure}.yaml at {commit}, the η of its "
                         f"runs (a shallow clone?): {shown.stderr.strip()}")
    return float(yaml.safe_load(shown.stdout)["eta"])


def bonus_weights(cell: Path, seeds: list[Seed], measure: str) -> list[float]:
    """Each seed's η (``bonus_weight``) at the commit its row in the cell's ``runs.csv`` names."""
    path = cell / "runs.csv"
    commits = {}
    if path.exists():
        with path.open(newline="") as handle:
            commits = {int(row["seed"]): row["git_commit"] for row in csv.DictReader(handle)}
    missing = [run.seed for run in seeds if run.seed not in commits]
    if missing:
        raise SystemExit(f"{path} has no row for seeds {missing}: their η is read at their commit.")
    return [bonus_weight(commits[run.seed], measure) for run in seeds]


def bonus_sizes(seeds: list[Seed], etas: list[float] | None, window: str) -> dict[str, str]:
    """Per ``SIZES`` column, the mean over seeds of each seed's mean over ``window`` of the
    iterations in which the learner updated (``"–"`` for η's columns without a bonus:
    ``etas`` ``None``, and where a seed has no value)."""
    sizes = {}
    for column, value in SIZES.items():
        if etas is None and "η" in column:
            sizes[column] = "–"
            continue
        means = [window_mean(np.where(np.isfinite(run.sampled_reward), value(run, eta), np.nan),
                             window)
                 for run, eta in zip(seeds, etas or [0.0] * len(seeds), strict=True)]
        mean = float(np.mean(means)) if seeds else math.nan
        sizes[column] = f"{mean:.3g}" if math.isfinite(mean) else "–"  # a seed never logged it
    return sizes


@legible
def plot_curves(data: dict, path: Path, title: str) -> None:
    """Per task, each SAC measure's median return over seeds against frames (each seed
    smoothed over 5 % of its run), the interquartile range shaded; TRPO + VASE's median dashed."""
    figure_, axes = plt.subplots(1, len(TASKS), figsize=(11, 5), layout="constrained")
    figure_.suptitle(textwrap.fill(title, 110))
    handles = {}
    for task, panel in zip(TASKS, axes, strict=True):
        panel.set_title(f"{TITLES[task]} (sparse)")
        for measure in (*MEASURES, TRPO_VASE):
            seeds = data[task][measure]
            if not seeds:
                continue
            length = min(run.returns.size for run in seeds)
            curves = np.stack([smoothed(run.returns[:length]) for run in seeds])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                q1, median, q3 = np.nanpercentile(curves, [25, 50, 75], axis=0)
            frames = seeds[0].frames[:length] / 1e3
            (line,) = panel.plot(frames, median, color=COLOURS[measure], lw=1.6,
                                 ls="--" if measure == TRPO_VASE else "-")
            if measure != TRPO_VASE:  # the reference: its median only, beside SAC's bands
                panel.fill_between(frames, q1, q3, color=COLOURS[measure], alpha=0.18, lw=0)
            handles[measure] = line
        panel.set_xlabel("frames (thousands)")
        panel.set_ylabel("extrinsic return")
        if not any(data[task][m] for m in MEASURES):
            panel.text(0.5, 0.5, "no SAC run yet", ha="center", transform=panel.transAxes)
    figure_.legend(list(handles.values()), [LABELS[m] for m in handles],
                   loc="outside lower center", ncol=len(handles), frameon=False)
    figure_.savefig(path, dpi=DPI)
    plt.close(figure_)


@legible
def plot_placebo_seeds(cells: dict[str, list[Seed]], path: Path, title: str) -> None:
    """MountainCar's SAC cells and placebos, a panel each, every seed's return against frames
    (smoothed over 5 % of its run): at 5 seeds, where one or two seeds find the reward, a median
    would hide them."""
    measures = ("none", "vase", *PLACEBOS)
    figure_, axes = plt.subplots(1, len(measures), figsize=(13, 3.6), sharey=True,
                                 layout="constrained")
    figure_.suptitle(textwrap.fill(title, 130))
    for measure, panel in zip(measures, axes, strict=True):
        seeds = cells.get(measure, [])
        found = sum(math.isfinite(run.first_reward) for run in seeds)
        panel.set_title(f"{(LABELS | PLACEBO_LABELS)[measure]}\n{len(seeds)} seeds, {found} "
                        "found the reward", fontsize=10)
        for run in seeds:
            panel.plot(run.frames / 1e3, smoothed(run.returns), color=COLOURS[measure], lw=1.2,
                       alpha=0.8)
        panel.set_xlabel("frames (thousands)")
    axes[0].set_ylabel("extrinsic return")
    figure_.savefig(path, dpi=DPI)
    plt.close(figure_)


def run_ends(data: dict[str, dict[str, list[Seed]]]) -> str:
    """The frames the finished SAC runs ended at (``"300,000–311,745 frames"``): each of a run's
    ``sac.frames / sac.frames_per_batch`` batches of whole paths stops on the path that fills it,
    up to a path past its share, so a run ends past its budget by what its batches passed."""
    ends = sorted(int(run.frames[-1]) for cells in data.values() for measure in MEASURES
                  for run in cells[measure])
    span = f"{ends[0]:,}" if ends[0] == ends[-1] else f"{ends[0]:,}–{ends[-1]:,}"
    return f"{span} frames"


def bonus_size_section(study: Path, data: dict[str, dict[str, list[Seed]]]) -> list[str]:
    """The page's lines on the bonus's size: a table a task of ``bonus_sizes`` per bonus and
    window, described, not tested."""
    tables, weights = [], {}
    for task in TASKS:
        rows = []
        for measure in MEASURES:
            seeds = data[task][measure]
            if not seeds:
                continue
            etas = (bonus_weights(study / task / measure, seeds, measure)
                    if measure in BONUSES else None)
            weights.setdefault(measure, set()).update(etas or ())
            rows += [f"| {BONUS_NAMES[measure]} | {name} | "
                     + " | ".join(bonus_sizes(seeds, etas, window).values()) + " |"
                     for window, name in (("last10pct", "last 10 %"), ("whole", "whole run"))]
        if rows:  # the task's own table: one with a column of tasks is too wide for the page
            tables += [f"\n{TITLES[task]}:\n", "| SAC with | window | "
                       + " | ".join(SIZES) + " |", "|---|---|" + "---:|" * len(SIZES), *rows]
    etas = "; ".join(f"{', '.join(f'{e:g}' for e in sorted(values))} ({BONUS_NAMES[measure]})"
                     for measure, values in weights.items() if values)
    return ["\n### The bonus's size\n",
            "Under SAC the bonus's scale reaches the policy, not only its ranking, and η was left "
            "at the recipe's default. What the learner saw per transition: each seed's mean over "
            "the window's iterations from its first update on, then the mean over the cell's "
            "finished seeds (their counts above). The batches are sampled from every "
            "transition so far, so their means lag the policy. "
            "η·U is the bonus in them (its mean is a shift every transition shares); η·sd(U) its "
            "spread over the iteration's collected batch (what can rank one transition above "
            "another); r_e the extrinsic reward in the sampled batches; α the temperature and α·H "
            "it times the policy's entropy (the entropy term −α log π of SAC's soft value; the "
            "product of the iteration's means). α is tuned as the run goes, to hold the "
            "entropy at its target (−1 an action dimension), and falls by orders of magnitude "
            "once it is held, so the whole run's α and α·H are mostly its first iterations' "
            "and the last 10 % rows are the balance late in a run: there a bonus far smaller "
            "than the early entropy term can be the larger. η is each run's, from "
            f"`conf/surprise/<bonus>.yaml` at its commit: {etas or 'no run of a bonus yet'}. "
            "Described, not tested.", *tables]


def results_section(study: Path, figure3: Path, link: str,
                    **kwargs) -> tuple[str, Path | None]:
    """The page's part below ``MARKER``, and the figure it drew into ``study`` (``None`` before
    any run); ``link`` is ``study`` as the page links it."""
    frames = sac_budget()
    data = load_study(study, figure3, frames)
    finished = sum(len(data[t][m]) for t in TASKS for m in MEASURES)
    total = len(TASKS) * len(MEASURES) * SEEDS
    lines = ["## Results\n", f"**{finished} of {total} runs finished**"
             + (": nothing to read yet." if not finished else
                f" (each {frames:,} frames in batches of whole paths, each batch ending on the "
                f"path that fills it, so the runs ended at {run_ends(data)}; TRPO + VASE from "
                f"the Figure 3 study, its runs cut at {frames:,} frames or whole where "
                "shorter).") + "\n",
             "| task | " + " | ".join(LABELS[m] for m in (*MEASURES, TRPO_VASE)) + " |",
             "|---|" + "---:|" * (len(MEASURES) + 1)]
    for task in TASKS:
        cells = [f"{len(data[task][m])} / {SEEDS}" for m in MEASURES]
        lines.append(f"| {TITLES[task]} | " + " | ".join(cells)
                     + f" | {len(data[task][TRPO_VASE])} |")
    if not finished:
        return "\n".join(lines) + "\n", None
    commits, machines = provenance(study)
    minutes = sorted(m for t in TASKS for s in MEASURES for m in run_minutes(study, t, s))
    lines.append(f"\nSAC runs at commit {', '.join(commits) or '–'}; machines: "
                 f"{', '.join(machines) or '–'}"
                 + (f"; each run's own clock (`train/wall_time`, pauses left out): median "
                    f"{statistics.median(minutes):.0f} min ({minutes[0]:.0f}–{minutes[-1]:.0f})"
                    if minutes else "") + ".\n")
    path = study / "sac_curves.png"
    plot_curves(data, path, "SAC with and without a bonus: median extrinsic return over seeds, "
                "interquartile range shaded; TRPO + VASE's median dashed "
                f"({finished} of {total} SAC runs)")
    lines += [figure(link, path.name, "Return against frames per task"),
              "### The comparisons\n",
              "A − B: the difference of the measures' mean returns (each seed's mean over the "
              "window) [the wider of its 95 % percentile-bootstrap and Welch t-intervals], every "
              "seed counting, unpaired and not corrected for the four comparisons of a task. A "
              "direction is read only when both windows show it and both cells have all their "
              "seeds.\n",
              "| task | A − B | " + " | ".join(WINDOWS.values()) + " | reading |",
              "|---|---|---:|---:|---|"]
    for task in TASKS:
        for a, b in PAIRS:
            figures, read = reading(data[task][a], data[task][b], LABELS[a], LABELS[b], **kwargs)
            lines.append(f"| {TITLES[task]} | {LABELS[a]} − {LABELS[b]} | "
                         + " | ".join(figures[w] for w in WINDOWS) + f" | {read} |")
    lines += ["\n### Finding the reward\n",
              f"Runs that found an extrinsic reward within {frames:,} frames and the median "
              "frames to it (runs that never did counted as beyond the budget); on MountainCar, "
              "the share of episodes that reached the goal over the last 10 % of frames, mean "
              "over seeds (lowest–highest seed).\n",
              "| task | measure | found the reward | success rate |", "|---|---|---|---|"]
    for task in TASKS:
        for measure in (*MEASURES, TRPO_VASE):
            seeds = data[task][measure]
            rate = success(seeds) if task == "mountain_car" else ""
            lines.append(f"| {TITLES[task]} | {LABELS[measure]} | "
                         f"{first_reward(seeds, frames)} | {rate} |")
    lines += bonus_size_section(study, data)
    placebos = {m: data["mountain_car"][m] for m in ("none", "vase")} | {
        m: load_cell(study, "mountain_car", m) for m in PLACEBOS}
    lines += placebo_section(placebos, LABELS, reading,
                             lambda seeds: (first_reward(seeds, frames), success(seeds)),
                             **kwargs)
    plot_placebo_seeds(placebos, study / "sac_placebo_seeds.png",
                       "MountainCar under SAC: each seed's extrinsic return (the return is 1 "
                       "when a path reaches the goal), the cells the placebos are read against "
                       "and the two placebos")
    lines += ["", figure(link, "sac_placebo_seeds.png", "Each seed's return, per placebo cell")]
    return "\n".join(lines) + "\n", path


def write_page(page: Path, section: str) -> None:
    """Replace what follows ``MARKER`` on ``page`` with ``section``."""
    text = page.read_text()
    if MARKER not in text:
        raise SystemExit(f"{page} has no line {MARKER!r}: the report writes below it.")
    page.write_text(text[: text.index(MARKER) + len(MARKER)] + "\n\n" + section)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, default=ROOT / "docs" / "results" / "sac")
    parser.add_argument("--figure3", type=Path, default=ROOT / "docs" / "results" / "figure3")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "results" / "sac.md")
    args = parser.parse_args(argv)
    link = Path(os.path.relpath(args.study, args.page.parent)).as_posix()
    section, drawn = results_section(args.study, args.figure3, link)
    write_page(args.page, section)
    print(f"report: {args.page}" + (f"\nfigure: {drawn}" if drawn else ""))


if __name__ == "__main__":
    main()
