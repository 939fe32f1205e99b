"""Compare surprise measures from the runs in an MLflow store: the paper's figures and a table.

For one experiment (one env), reads every finished or running run written by
``recipes/trpo_vase.py`` and writes to ``--out``:

* ``returns.png``: median extrinsic return per iteration across seeds, interquartile range shaded,
  one line per surprise measure (the paper's main figure);
* ``running_time.png``: seconds per iteration of each measure (the paper's speed figure);
* ``delta_sweep.png``: final return (median, IQR) against δ, when the VASE runs used
  several δ (each δ is then its own group in the table and the returns figure);
* ``heatmaps.png`` (point robot): each measure's visited-position heatmap, side by side, from one
  seed's ``visited_positions.png`` artifact (``--heatmap-seed``; by default the lowest seed that
  found the reward, else the lowest seed), titled with its seed and step of first reward;
* ``coverage.png`` (runs that log ``coverage``, the point robot): each group's coverage per seed
  against env steps, with a mark where a seed first found the reward;
* ``table.md``: per measure, the final median return and its IQR across seeds, the success rate,
  the median step of the first extrinsic reward, frames/s, seconds per iteration (the median
  iteration) and the seeds; then the exploration diagnostics (coverage, and "is the bonus
  steering the policy?": the advantage/bonus correlation, how many iterations it was ≥ 0.8 and
  its share, over the iterations before each seed's first reward).

Only finished runs count: running, killed and failed ones are left out with a note (their shorter
curves would cut their group's). Runs are grouped by measure and, within a measure, by every setting
but the seed that differs between its runs; a seed run twice with the same settings counts once
(the latest run; the note names the others). Beside the median and IQR of the final returns, the
table gives their interquartile mean (IQM) with a 95 % percentile-bootstrap confidence interval
over seeds (rliable's aggregate; one experiment is one task, so its stratified bootstrap is the
plain one).

Or one task of a study's dataset (``--study figure3 --task ant``: its measures, named as the
study names them). The returns figure is the study page's own (``report.plot_curves``); the IQM
and its interval are rliable's.

    python recipes/study/compare.py --experiment mountain_car [--tracking-uri sqlite:///mlflow.db]
    python recipes/study/compare.py --study figure3 --task half_cheetah     # a study's runs
"""

from __future__ import annotations

import argparse
import math
import os
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from claims import load_study  # beside this script, as are the others
from dataset import read
from mlflow.tracking import MlflowClient
from report import compact_steps, plot_curves
from study_statistics import aggregate

STEERING_CORR = 0.8  # issue 12's bar for the advantage/bonus correlation
MEASURE_ORDER = ["none", "vase", "nll", "vime", "rnd"]
METRICS = ("return_mean", "success_rate", "fps", "wall_time", "first_reward_step", "coverage",
           "advantage_bonus_corr", "advantage_bonus_share")
DIAGNOSTICS = ("advantage_bonus_corr", "advantage_bonus_share")
# the names the recipe logs them under (stores written before the namespaces have the bare ones)
NAMESPACED = {
    "return_mean": "Return/mean", "success_rate": "Return/success_rate", "fps": "train/fps",
    "wall_time": "train/wall_time", "first_reward_step": "train/first_reward_step",
    "coverage": "train/coverage", "advantage_bonus_corr": "bonus/advantage_corr",
    "advantage_bonus_share": "bonus/advantage_share",
}
OLDER_NAMES = {"return_mean": ("train/return_mean",), "success_rate": ("train/success_rate",)}


# params that do not change what a run computes: never a reason to split a group
NOT_SETTINGS = ("seed", "resume", "threads", "progress_bar", "surprise.name", "checkpoint.",
                "mlflow.")


@dataclass
class Run:
    """One training run: its tags, settings, and per-iteration metric histories."""

    run_id: str
    surprise: str
    seed: int
    metrics: dict[str, np.ndarray]  # name -> values ordered by step (frames)
    settings: dict[str, str] = field(default_factory=dict)  # every param but NOT_SETTINGS
    steps: dict[str, np.ndarray] = field(default_factory=dict)  # name -> the steps of its values
    start_time: int = 0

    @property
    def returns(self) -> np.ndarray:
        return self.metrics["return_mean"]

    @property
    def frames(self) -> np.ndarray:
        return self.steps["return_mean"]

    @property
    def delta(self) -> float | None:
        """δ of a VASE run (``None`` for the other measures)."""
        return _number(self.settings.get("surprise.delta"))

    def final(self, name: str, last: int = 1) -> float:
        """The mean of the last ``last`` finite values of a metric (NaN if none)."""
        values = self.metrics.get(name, np.array([]))
        values = values[np.isfinite(values)]
        return float(values[-last:].mean()) if values.size else math.nan

    def before_first_reward(self, name: str) -> np.ndarray:
        """A metric's finite values from the iterations whose batch held no extrinsic reward."""
        values, steps = self.metrics.get(name, np.array([])), self.steps.get(name, np.array([]))
        first = self.metrics["first_reward_step"]
        if first.size:
            values = values[steps < first[0]]
        return values[np.isfinite(values)]


def _history(client: MlflowClient, run_id: str, name: str) -> list:
    """A metric's history by step: under its name (``Return/mean``), else under the names older
    stores have (``train/return_mean`` before 2026-11-27, the bare name before namespaces)."""
    for key in dict.fromkeys((NAMESPACED.get(name, name), *OLDER_NAMES.get(name, ()), name)):
        history = client.get_metric_history(run_id, key)
        if history:
            return sorted(history, key=lambda m: m.step)
    return []


def load_runs(client: MlflowClient, experiment: str) -> tuple[list[Run], list[str]]:
    """The experiment's finished runs and notes on the runs left out (unfinished, killed,
    failed: their curves would cut every curve of their group to their length)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no experiment named {experiment!r} in {client.tracking_uri}.")
    runs, notes = [], []
    for run in client.search_runs([found.experiment_id], max_results=10_000):
        if run.info.status != "FINISHED":
            notes.append(f"left out {run.info.run_name} ({run.info.run_id[:8]}): "
                         f"{run.info.status}, not finished")
            continue
        metrics, steps = {}, {}
        for name in METRICS:
            history = _history(client, run.info.run_id, name)
            metrics[name] = np.array([m.value for m in history], dtype=float)
            steps[name] = np.array([m.step for m in history], dtype=float)
        runs.append(Run(
            run_id=run.info.run_id, surprise=run.data.tags.get("surprise", "?"),
            seed=int(run.data.tags.get("seed", -1)), metrics=metrics,
            # runs from before `algorithm` existed are TRPO runs
            settings={"algorithm": "trpo"} | {k: v for k, v in run.data.params.items()
                                              if not k.startswith(NOT_SETTINGS)},
            steps=steps, start_time=run.info.start_time or 0))
    if not runs:
        raise SystemExit(f"experiment {experiment!r} has no finished runs "
                         f"({len(notes)} unfinished).")
    return runs, notes


def load_study_runs(study: str, task: str, measures: list[str] | None = None
                    ) -> dict[str, list[Run]]:
    """One task's runs of a study's dataset, grouped by measure and named as the study names
    them (its measures in the config's order, or ``measures``)."""
    config = load_study(study)
    chosen = measures or list(config.measures)
    for measure in chosen:
        if measure not in config.measures:
            raise SystemExit(f"unknown measure {measure!r} of study {study}; the choices: "
                             f"{', '.join(config.measures)}.")
    stored = read(config.dataset, where=lambda r: r.task == task and r.measure in chosen)
    if not stored:
        raise SystemExit(f"no runs of task {task!r} in {config.dataset}.")
    groups: dict[str, list[Run]] = {}
    for measure in chosen:
        for run in (r for r in stored if r.measure == measure):
            metrics, steps = {}, {}
            for name in METRICS:
                values = run.metric(NAMESPACED.get(name, name))
                kept = np.isfinite(values)
                metrics[name], steps[name] = values[kept], run.frames[kept]
            groups.setdefault(config.label(measure), []).append(
                Run(str(run.provenance.get("run_id", "")), measure, run.seed, metrics,
                    steps=steps))
    return groups


def latest_per_seed(groups: dict[str, list[Run]]) -> tuple[dict[str, list[Run]], list[str]]:
    """One run per seed in each group: the latest finished; a note for every rerun set aside
    (pooling two runs of one seed would count one seed twice)."""
    kept, notes = {}, []
    for group, members in groups.items():
        by_seed: dict[int, list[Run]] = {}
        for run in members:
            by_seed.setdefault(run.seed, []).append(run)
        kept[group] = []
        for seed, same in sorted(by_seed.items()):
            same.sort(key=lambda r: r.start_time)
            kept[group].append(same[-1])
            if len(same) > 1:
                notes.append(f"{group}: {len(same)} runs of seed {seed}; kept the latest "
                             f"({same[-1].run_id[:8]}), left out "
                             + ", ".join(r.run_id[:8] for r in same[:-1]))
    return kept, notes


SYMBOLS = {"surprise.delta": "δ", "surprise.sigma_c": "σ_c", "surprise.eta": "η",
           "surprise.num_samples": "N", "surprise.prior_std": "σ_m",
           "advantage.structure": "advantage"}


def _number(value: str | None) -> float | None:
    """A param as a number, ``None`` if it is not one (absent, ``"None"``, a name)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _label(value: str | None) -> str:
    number = _number(value)
    return f"{number:g}" if number is not None else str(value)


#: a label names every setting that differs up to this many; beyond, the fewest that tell the
#: groups apart (a preset changes a dozen settings at once: its label would run off the legend)
MAX_LABELLED = 3


def _distinguishing(members: list[Run], varying: list[str]) -> list[str]:
    """The settings a measure's groups are labelled by: all of ``varying`` up to
    ``MAX_LABELLED``, else the fewest (chosen greedily, the paper's symbols first) whose values
    split the runs into the same groups as all of them do."""
    if len(varying) <= MAX_LABELLED:
        return varying

    def groups(keys: list[str]) -> int:
        return len({tuple(r.settings.get(k) for k in keys) for r in members})

    target, chosen = groups(varying), []
    while groups(chosen) < target:
        chosen.append(max((k for k in varying if k not in chosen),
                          key=lambda k: (groups([*chosen, k]), k in SYMBOLS, -varying.index(k))))
    return [k for k in varying if k in chosen]


ALGORITHMS = {"trpo": "TRPO", "ppo": "PPO", "sac": "SAC"}
BONUSES = {"vase": "VASE", "nll": "NLL", "vime": "VIME", "rnd": "RND"}


def method(algorithm: str, surprise: str) -> str:
    """``"TRPO + VASE"``, ``"SAC, no bonus"``: the learner and its bonus."""
    learner = ALGORITHMS.get(algorithm, algorithm)
    return f"{learner}, no bonus" if surprise == "none" else (
        f"{learner} + {BONUSES.get(surprise, surprise)}")


def by_measure(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs grouped by learner and bonus (``method``) and, within them, by every setting but the
    seed that differs between their runs (``"TRPO + VASE δ=0.01"``, ``"TRPO, no bonus
    trpo.gamma=0.9"``): a sweep's settings are never pooled into one row, and a label names
    only the settings that differ."""
    measures: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        measures.setdefault((run.settings.get("algorithm", "trpo"), run.surprise), []).append(run)
    rank = {m: i for i, m in enumerate(MEASURE_ORDER)}
    order = sorted(measures, key=lambda key: (rank.get(key[1], len(rank)), key[1], key[0]))
    groups: dict[str, list[Run]] = {}
    for key in order:
        members = measures[key]
        keys = sorted({k for r in members for k in r.settings})
        varying = [k for k in keys if len({r.settings.get(k) for r in members}) > 1]
        # the other advantage.* belong to one structure
        if "advantage.structure" in varying:
            varying = [k for k in varying
                       if not k.startswith("advantage.") or k == "advantage.structure"]

        labelled = _distinguishing(members, varying)

        def setting(run: Run, varying: list[str] = varying) -> tuple:
            # numbers in numeric order, then anything else by its text
            values = [run.settings.get(k) for k in varying]
            return tuple((0, n, "") if (n := _number(v)) is not None else (1, 0.0, str(v))
                         for v in values)

        for run in sorted(members, key=lambda r: (setting(r), r.seed)):
            name = method(*key)
            if varying:
                name += " " + ", ".join(
                    f"{SYMBOLS.get(k, k.removeprefix('surprise.'))}={_label(run.settings.get(k))}"
                    for k in labelled
                ) + (f" (+{len(varying) - len(labelled)} settings)"
                     if len(labelled) < len(varying) else "")
            groups.setdefault(name, []).append(run)
    return groups


def iqm_interval(values: np.ndarray, resamples: int = 2000, seed: int = 0
                 ) -> tuple[float, float, float]:
    """rliable's IQM of ``values`` (one per seed) and its 95 % bootstrap interval
    (``aggregate``'s, one task: its stratified bootstrap is over seeds); NaN bounds with fewer
    than 2 values (nothing to resample)."""
    values = values[np.isfinite(values)]
    if values.size < 2:
        return (float(values[0]) if values.size else math.nan), math.nan, math.nan
    return aggregate({"runs": values[:, None]}, np.zeros(1), "runs", reps=resamples,
                     seed=seed)["iqm"]["runs"]


def summary(runs: list[Run], last: int) -> dict[str, float]:
    """The table's numbers for one measure (``last``: iterations averaged for 'final'); NaN where
    no run has the metric yet (e.g. no episode has finished)."""
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):  # all-NaN: NaN
        finals = np.array([r.final("return_mean", last) for r in runs])
        point, low, high = iqm_interval(finals)
        first = [r.metrics["first_reward_step"] for r in runs]
        first_steps = [f[0] for f in first if f.size]
        return {
            "final_median": float(np.nanmedian(finals)),
            "iqr": float(np.nanpercentile(finals, 75) - np.nanpercentile(finals, 25)),
            "iqm": point,
            "iqm_low": low,
            "iqm_high": high,
            "success": float(np.nanmean([r.final("success_rate", last) for r in runs])),
            "first_reward_median": float(np.median(first_steps)) if first_steps else math.nan,
            "reached": len(first_steps),
            "fps": float(np.nanmedian([np.nanmedian(r.metrics["fps"]) for r in runs])),
            # the median iteration, robust to a slow first one (imports, allocation) and to pauses
            "seconds_per_iteration": float(np.nanmedian([
                np.median(np.diff(r.metrics["wall_time"], prepend=0.0))
                if r.metrics["wall_time"].size else math.nan for r in runs])),
            "seeds": len(runs),
        }


def seeds(count: int) -> str:
    """``1 seed``, ``3 seeds``."""
    return f"{count} seed{'' if count == 1 else 's'}"


def timing_note(runs: list[Run]) -> str:
    """Frames/s and s/iteration are each run's own wall clock: say how far apart the runs
    started (a machine's load changes across hours), so that they are not read as a benchmark."""
    starts = sorted(r.start_time for r in runs if r.start_time)
    minutes = (starts[-1] - starts[0]) / 6e4 if len(starts) > 1 else 0.0
    if minutes < 10:  # started together (a sweep's parallel jobs): side by side
        return ""
    apart = f"{minutes / 60:.1f} h" if minutes >= 60 else f"{minutes:.0f} min"
    return (f"frames/s and s/iteration are each run's own wall clock; these runs started "
            f"{apart} apart, on whatever load the machine had then: compare timings "
            "side by side in one interleaved run (recipes/benchmark_*.py), not here.")


def markdown_table(experiment: str, groups: dict[str, list[Run]], last: int,
                   notes: list[str] = ()) -> str:
    lines = [
        "| env | measure | final median return | IQR | IQM [95 % CI] | success rate "
        "| first reward (median step) | frames/s | s/iteration | seeds |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for measure, runs in groups.items():
        s = summary(runs, last)
        first = (
            f"{s['first_reward_median']:,.0f} ({s['reached']}/{s['seeds']})"
            if s["reached"]
            else f"never (0/{s['seeds']})"
        )
        interval = f"{s['iqm']:.3f} [{s['iqm_low']:.3f}, {s['iqm_high']:.3f}]"
        lines.append(
            f"| {experiment} | {measure} | {s['final_median']:.3f} | {s['iqr']:.3f} | "
            f"{interval} | {s['success']:.2f} | {first} | {s['fps']:,.0f} | "
            f"{s['seconds_per_iteration']:.2f} | {s['seeds']} |"
        )
    diagnostics = diagnostics_table(groups)
    note = timing_note([r for members in groups.values() for r in members])
    text = "\n".join(lines) + "\n" + (f"\n{note}\n" if note else "") + (
        f"\n{diagnostics}" if diagnostics else "")
    if notes:
        text += "\nNot pooled:\n\n" + "".join(f"- {note}\n" for note in notes)
    return text


def diagnostics_table(groups: dict[str, list[Run]]) -> str:
    """Coverage and the steering diagnostics per group ('' when no run logged any of them).

    A diagnostic's value per seed is its median over the seed's iterations before its first
    reward; the table gives the median of those over seeds, and for the correlations also the
    lowest value of any such iteration of any seed.
    """
    runs = [r for members in groups.values() for r in members]
    names = (*DIAGNOSTICS, "coverage")
    if not any(r.metrics[name].size for r in runs for name in names):
        return ""
    lines = [
        "Exploration diagnostics, over each seed's iterations before its first extrinsic reward "
        "(every iteration of a seed that never found it); coverage at the run's end.",
        "",
        "| measure | final coverage (median) | advantage/bonus corr. (median; lowest) "
        f"| iterations with corr. ≥ {STEERING_CORR} "
        "| bonus share of advantage variance | seeds |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def median_over_seeds(members: list[Run], name: str) -> tuple[float, float]:
        per_seed = [r.before_first_reward(name) for r in members]
        medians = [np.median(v) for v in per_seed if v.size]
        pooled = np.concatenate(per_seed) if per_seed else np.array([])
        if not medians:
            return math.nan, math.nan
        return float(np.median(medians)), float(pooled.min())

    def cell(value: float, fmt: str = ".2f") -> str:
        return "–" if math.isnan(value) else format(value, fmt)

    for measure, members in groups.items():
        coverage = [r.final("coverage") for r in members]
        corr, lowest = median_over_seeds(members, "advantage_bonus_corr")
        share, _ = median_over_seeds(members, "advantage_bonus_share")
        pooled = np.concatenate([r.before_first_reward("advantage_bonus_corr") for r in members])
        steering = f"{int((pooled >= STEERING_CORR).sum())}/{pooled.size}" if pooled.size else "–"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            final_coverage = float(np.nanmedian(coverage))
        corr_cell = "–" if math.isnan(corr) else f"{corr:.2f}; {lowest:.2f}"
        lines.append(
            f"| {measure} | {cell(final_coverage, '.3f')} | {corr_cell} | {steering} | "
            f"{cell(share)} | {len(members)} |"
        )
    return "\n".join(lines) + "\n"


def wrapped(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters at spaces (titles and legend
    entries that would otherwise run into their neighbours)."""
    return "\n".join(textwrap.wrap(text, width)) or text


def plot_coverage(experiment: str, groups: dict[str, list[Run]], path: Path) -> bool:
    """Each group's coverage per seed against env steps; ✕ where a seed found the reward."""
    panels = {m: [r for r in runs if r.metrics["coverage"].size] for m, runs in groups.items()}
    panels = {m: runs for m, runs in panels.items() if runs}
    if not panels:
        return False
    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.8 * rows), sharex=True,
                             sharey=True, squeeze=False)
    top = max(r.metrics["coverage"].max() for runs in panels.values() for r in runs)
    for ax, (measure, runs) in zip(axes.flat, panels.items(), strict=False):
        for run in sorted(runs, key=lambda r: r.seed):
            frames = run.steps["coverage"]
            (line,) = ax.plot(frames, run.metrics["coverage"], lw=1)
            first = run.metrics["first_reward_step"]
            if first.size:
                at = np.interp(first[0], frames, run.metrics["coverage"])
                ax.plot(first[0], at, "x", color=line.get_color(), markersize=7)
        reached = sum(bool(r.metrics["first_reward_step"].size) for r in runs)
        ax.set_title(f"{wrapped(measure, 34)}\n{seeds(len(runs))}, {reached} reached the goal",
                     fontsize=9)
        ax.set_ylim(0, top * 1.05)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for column in range(columns):  # the lowest panel in use of each column carries the x axis
        ax = axes[(len(panels) - 1 - column) // columns, column]
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_xlabel("env steps")
        compact_steps(ax)
    for ax in axes[:, 0]:
        ax.set_ylabel("coverage")
    fig.suptitle(f"{experiment}: fraction of 0.1 × 0.1 cells visited", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_returns(experiment: str, groups: dict[str, list[Run]], path: Path) -> None:
    """Median and IQR of each group's extrinsic return against env steps: the study page's
    figure (``report.plot_curves``), one panel."""
    plot_curves({experiment: groups}, {group: (group, None) for group in groups}, path,
                f"{experiment}: median extrinsic return over seeds, interquartile range shaded")


def plot_running_time(experiment: str, groups: dict[str, list[Run]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.5))
    names = list(groups)
    seconds = [summary(groups[m], 1)["seconds_per_iteration"] for m in names]
    ax.bar(names, seconds, color="tab:blue")
    ax.set_ylabel("seconds per iteration\n(median iteration, median over seeds)")
    ax.tick_params(axis="x", labelrotation=30 if max(map(len, names)) > 6 else 0)
    ax.set_title(experiment)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_delta_sweep(runs: list[Run], last: int, path: Path) -> bool:
    vase = [r for r in runs if r.surprise == "vase" and r.delta is not None]
    deltas = sorted({r.delta for r in vase})
    if len(deltas) < 2:
        return False
    finals = [np.array([r.final("return_mean", last) for r in vase if r.delta == d])
              for d in deltas]
    low, mid, high = (np.array([np.nanpercentile(f, q) for f in finals]) for q in (25, 50, 75))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    positions = np.arange(len(deltas))
    ax.errorbar(positions, mid, yerr=[mid - low, high - mid], marker="o", capsize=4)
    ax.set_xticks(positions, [f"{d:g}\n({seeds(len(f))})" for d, f in zip(deltas, finals,
                                                                          strict=True)])
    ax.set_xlabel("δ")
    ax.set_ylabel(f"final extrinsic return\n(median, IQR; last {last} iterations)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def heatmap_run(runs: list[Run], seed: int | None) -> Run | None:
    """The run whose heatmap represents a measure: the given seed's, else the lowest seed that
    found the reward, else the lowest seed."""
    if seed is not None:
        return next((r for r in runs if r.seed == seed), None)
    rewarded = [r for r in runs if r.metrics.get("first_reward_step", np.array([])).size]
    return min(rewarded or runs, key=lambda r: r.seed)


def plot_heatmaps(client: MlflowClient, groups: dict[str, list[Run]], path: Path,
                  seed: int | None = None) -> bool:
    images = []
    for measure, runs in groups.items():
        run = heatmap_run(runs, seed)
        if run is None:
            continue
        names = {a.path for a in client.list_artifacts(run.run_id)}
        if "visited_positions.png" not in names:
            continue
        local = client.download_artifacts(run.run_id, "visited_positions.png", str(path.parent))
        images.append((measure, run, plt.imread(local)))
        os.remove(local)
    if not images:
        return False
    # at most 3 panels a row: a page-wide figure keeps each heatmap readable
    columns = min(3, len(images))
    rows = math.ceil(len(images) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.6 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (measure, run, image) in zip(axes.flat, images, strict=False):
        ax.imshow(image)
        first = run.metrics["first_reward_step"]
        steps = f"first reward at {first[0]:,.0f}" if first.size else "no reward"
        ax.set_title(f"{wrapped(f'{measure}, seed {run.seed}', 34)}\n{steps}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def compare(tracking_uri: str | None, experiment: str, out: Path, last: int = 5,
            heatmap_seed: int | None = None, study: str | None = None,
            measures: list[str] | None = None) -> dict[str, Path]:
    """Write the figures and the table for one experiment: an MLflow experiment, or with
    ``study`` the task ``experiment`` of that study's dataset; return what was written."""
    client = None if study is not None else MlflowClient(tracking_uri=tracking_uri)
    if client is None:
        grouped, notes = load_study_runs(study, experiment, measures), []
    else:
        runs, notes = load_runs(client, experiment)
        grouped = by_measure(runs)
    groups, duplicates = latest_per_seed(grouped)
    notes += duplicates
    runs = [r for members in groups.values() for r in members]
    out.mkdir(parents=True, exist_ok=True)
    written = {"table": out / "table.md", "returns": out / "returns.png",
               "running_time": out / "running_time.png"}
    written["table"].write_text(markdown_table(experiment, groups, last, notes))
    plot_returns(experiment, groups, written["returns"])
    plot_running_time(experiment, groups, written["running_time"])
    if plot_delta_sweep(runs, last, out / "delta_sweep.png"):
        written["delta_sweep"] = out / "delta_sweep.png"
    if plot_coverage(experiment, groups, out / "coverage.png"):
        written["coverage"] = out / "coverage.png"
    if client is not None and plot_heatmaps(client, groups, out / "heatmaps.png", heatmap_seed):
        written["heatmaps"] = out / "heatmaps.png"
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experiment", default=None, help="MLflow experiment (the env's name)")
    parser.add_argument("--study", default=None,
                        help="read a study's dataset instead (conf/study/<study>.yaml), one task")
    parser.add_argument("--task", default=None, help="with --study: the task")
    parser.add_argument("--measures", nargs="*", default=None,
                        help="with --study: these measures only (default: all)")
    parser.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"),
    )
    parser.add_argument("--out", type=Path, default=None, help="default: comparison/<experiment>")
    parser.add_argument("--last", type=int, default=5, help="iterations averaged as 'final'")
    parser.add_argument("--heatmap-seed", type=int, default=None,
                        help="the seed whose heatmaps to show (default: the lowest that found the "
                             "reward, per measure)")
    args = parser.parse_args()
    if (args.experiment is None) == (args.study is None) or (args.study and not args.task):
        parser.error("give --experiment (an MLflow experiment), or --study and --task.")
    experiment = args.experiment or args.task
    out = args.out or Path("comparison") / experiment
    written = compare(args.tracking_uri, experiment, out, args.last, args.heatmap_seed,
                      study=args.study, measures=args.measures)
    print(written["table"].read_text())
    for name, path in written.items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
