"""A study's page: its curves, its claims table and its follow-ups on the first screen, each
record's numbers below, rliable's view across tasks, and the runs' commits and processors.

Every verdict is ``claims.judge``'s, once per record; the figures are drawn from the study's
dataset. ``python recipes/study/study.py report figure3`` writes ``docs/results.md``, its
figures under ``docs/results/figure3/`` and the README's table of the claims.

    >>> smoothed(np.arange(40.0))[:3]  # a trailing mean over 5 % of the run: 2 iterations
    array([0. , 0.5, 1.5])
"""

from __future__ import annotations

import collections
import math
import os
import re
import textwrap
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import yaml
from claims import (
    TITLES,
    Choice,
    Claim,
    Question,
    Study,
    Verdict,
    first_reward_steps,
    judge_all,
    windows,
)
from dataset import Run
from study_statistics import WINDOWS, MedianComparison, aggregate

#: every text at least 10 px where the docs show a figure (12 pt at 90 dpi, at most 11 in wide)
LEGIBLE = {"font.size": 12, "axes.titlesize": 12, "legend.fontsize": 12, "figure.titlesize": 12}
DPI = 90


def smoothed(returns: np.ndarray) -> np.ndarray:
    """A trailing mean over 5 % of the run (at least one iteration) of the finite values."""
    window = max(1, int(0.05 * returns.size))
    finite = np.isfinite(returns)
    sums, counts = np.cumsum(np.where(finite, returns, 0.0)), np.cumsum(finite)

    def trailing(totals: np.ndarray) -> np.ndarray:
        return totals - np.concatenate([np.zeros(window), totals])[: totals.size]

    with np.errstate(invalid="ignore", divide="ignore"):
        return trailing(sums) / trailing(counts)


def compact_steps(ax) -> None:
    """At most five x ticks, written 50k, 1.2M: long step counts run together otherwise."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    def label(value: float, _) -> str:
        for size, suffix in ((1e6, "M"), (1e3, "k")):
            if abs(value) >= size:
                return f"{value / size:g}{suffix}"
        return f"{value:g}"

    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.xaxis.set_major_formatter(FuncFormatter(label))


LINE_STYLES = ("-", "--", ":", "-.")


def plot_curves(panels: dict[str, dict[str, list]], styles: dict[str, tuple[str, str | None]],
                path: Path, title: str) -> None:
    """One panel a key of ``panels`` (a task, an experiment), one line a group of runs (anything
    with ``returns`` and ``frames``: a study's runs, ``compare.py``'s): the median over runs of
    each run's smoothed return, the interquartile range shaded, against frames. ``styles``:
    group -> (label, colour or None for matplotlib's cycle). The legend, below the panels,
    names every group with its runs, and a group whose median lies exactly under an earlier
    one's says so; each group has a line style of its own."""
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    with plt.rc_context(LEGIBLE):
        figure, axes = plt.subplots(rows, columns, figsize=(11, 3.9 * rows + 1.2),
                                    layout="constrained", squeeze=False)
        figure.suptitle(textwrap.fill(title, 110))
        drawn: dict[str, tuple] = {}
        counts: dict[str, set] = {}  # group -> its runs in each panel (a study in progress)
        twins: dict[str, set] = {}  # group -> the earlier group whose median it hides under
        for (name, groups), panel in zip(panels.items(), axes.ravel(), strict=False):
            panel.set_title(TITLES.get(name, name))
            medians: list[tuple[str, np.ndarray]] = []
            for index, (group, runs) in enumerate(groups.items()):
                length = min((len(run.returns) for run in runs), default=0)
                if not length:
                    continue
                curves = np.stack([smoothed(run.returns[:length]) for run in runs])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # no episode ended yet
                    q1, median, q3 = np.nanpercentile(curves, [25, 50, 75], axis=0)
                frames = runs[0].frames[:length]
                label, colour = styles[group]
                (line,) = panel.plot(frames, median, color=colour, lw=1.6,
                                     ls=LINE_STYLES[index % len(LINE_STYLES)])
                panel.fill_between(frames, q1, q3, color=line.get_color(), alpha=0.18, lw=0)
                twins.setdefault(group, set()).add(next(
                    (other for other, curve in medians if curve.shape == median.shape
                     and np.allclose(curve, median, equal_nan=True)), None))
                medians.append((group, median))
                drawn.setdefault(group, (line, label))
                counts.setdefault(group, set()).add(len(runs))
            panel.set_xlabel("frames")
            panel.set_ylabel("extrinsic return")
            compact_steps(panel)
        for panel in axes.ravel()[len(panels):]:
            panel.set_visible(False)
        texts = []  # a twin named only where it hides in every panel: one legend for them all
        for group, (_, label) in drawn.items():
            low, high = min(counts[group]), max(counts[group])  # a study in progress: per panel
            twin = next(iter(twins[group])) if len(twins[group]) == 1 else None
            texts.append(f"{label} ({low}{f'–{high}' if high > low else ''} run"
                         f"{'s' if high > 1 else ''})"
                         + (f", same median as {styles[twin][0]}" if twin else ""))
        figure.legend([line for line, _ in drawn.values()], texts,
                      loc="outside lower center", ncols=min(3, len(drawn)) or 1, frameon=False)
        figure.savefig(path, dpi=DPI)
        plt.close(figure)


def plot_aggregate(result: dict, styles: dict[str, tuple[str, str]], reference: str,
                   taus: np.ndarray, path: Path, title: str) -> None:
    """rliable's three views: IQM, P(reference > rival), performance profiles."""
    with plt.rc_context(LEGIBLE):
        figure, axes = plt.subplot_mosaic([["iqm", "poi"], ["profile", "profile"]],
                                          figsize=(11, 8), layout="constrained")
        figure.suptitle(textwrap.fill(title, 110))
        for ax, key in ((axes["iqm"], "iqm"), (axes["poi"], "improvement")):
            names = list(result[key])
            for row, measure in enumerate(names):
                point, low, high = result[key][measure]
                ax.barh(row, high - low, left=low, color=styles[measure][1], alpha=0.6,
                        height=0.6)
                ax.plot([point, point], [row - 0.3, row + 0.3], color="black", lw=2)
            label = ((lambda m: styles[m][0]) if key == "iqm" else
                     (lambda m: f"{styles[reference][0]} vs {styles[m][0]}"))
            ax.set_yticks(range(len(names)), [label(m) for m in names])
            ax.set_xlim(0, 1)
        axes["poi"].axvline(0.5, color="gray", ls=":")
        axes["iqm"].set_xlabel("IQM of normalised score (95 % interval)")
        axes["poi"].set_xlabel(f"P({styles[reference][0]} > rival) (95 % interval)")
        for measure, (profile, low, high) in result["profiles"].items():
            axes["profile"].plot(taus, profile, color=styles[measure][1],
                                 label=styles[measure][0])
            axes["profile"].fill_between(taus, low, high, color=styles[measure][1], alpha=0.15,
                                         lw=0)
        axes["profile"].set_xlabel("normalised score τ")
        axes["profile"].set_ylabel("fraction of runs > τ")
        axes["profile"].legend(frameon=False, ncols=len(result["profiles"]))
        figure.savefig(path, dpi=DPI)
        plt.close(figure)


def plot_first_reward(runs: dict[str, list[Run]], styles: dict[str, tuple[str, str]],
                      budget: float, path: Path, title: str) -> None:
    """The fraction of runs still searching for the first reward at each step."""
    with plt.rc_context(LEGIBLE):
        figure, ax = plt.subplots(figsize=(8, 5.6), layout="constrained")
        for measure, group in runs.items():
            found = np.sort(first_reward_steps(group))
            found = found[np.isfinite(found)]
            x = np.concatenate([[1000], found, [budget]])
            y = 1 - np.concatenate([[0], np.arange(1, found.size + 1), [found.size]]) / len(group)
            ax.step(x, y, where="post", color=styles[measure][1], lw=1.8,
                    ls="--" if measure.endswith("shuffled") else "-",
                    label=f"{styles[measure][0]} ({found.size} of {len(group)} found it)")
        for steps, label in ((2_059_459, "the paper's TRPO run"), (26_663, "the paper's VASE run")):
            ax.axvline(steps, color="gray", ls=":")
            ax.text(steps / 1.1, 0.03, label, rotation=90, ha="right", va="bottom",
                    color="dimgray")
        ax.set_xscale("log")
        ax.set_xlabel("steps (log scale; the budget ends the axis)")
        ax.set_ylabel("fraction of runs still searching")
        ax.set_title(textwrap.fill(title, 70))
        ax.legend(frameon=False)
        figure.savefig(path, dpi=DPI)
        plt.close(figure)


# ------------------------------------------------------------------------------------------------
# The page
# ------------------------------------------------------------------------------------------------
def _median(c: MedianComparison | None) -> str:
    if c is None:
        return "–"
    low, high = c.interval
    return f"{c.median_difference:+.3g} [{low:+.3g}, {high:+.3g}]"


def _opposite_means(c: MedianComparison) -> str:
    """⚠ and the mean difference where it and the medians' differ in sign (HalfCheetah's VASE −
    control: +3 by medians, −6.4 by means: a few runs far from the rest)."""
    if c.median_difference * c.mean_difference >= 0:
        return ""
    return f" ⚠ mean {c.mean_difference:+.3g}, the other sign"


def _names(study: Study, pair_name: str) -> str:
    a, b = pair_name.split(" − ")
    return f"{study.label(a)} − {study.label(b)}"


def _verdict_cell(verdict: Verdict, anchor: str) -> str:
    if verdict.verdict == "not measured yet":
        return f"**{verdict.verdict}**"
    cell = f"**[{verdict.verdict}](#{anchor})**" + (" *borderline*" if verdict.borderline else "")
    step = verdict.step
    if step is None:
        return cell
    # a bootstrap p of 0: no resample crossed, so below one over their number
    p = (f"p < {1 / verdict.resamples:.1g}" if step.p == 0
         else f"p {step.p:.3g} ± {step.error:.1g}")
    return f"{cell}<br>{p} (vs {step.threshold:.3g})"


def _effects(study: Study, verdict: Verdict) -> str:
    """The claim row's effects, a pair a line: ``vs VASE +0.05 [+0.003, +0.12], P 0.68`` (the
    difference of medians, its bootstrap's 5th and 95th percentiles, P(A > B)); the pair named
    in full where the claim's pairs do not share their A."""
    pairs = [name.split(" − ") for name in verdict.comparisons]
    shared = len({a for a, _ in pairs}) == 1
    effects = []
    for (a, b), (primary, _) in zip(pairs, verdict.comparisons.values(), strict=True):
        if isinstance(primary, MedianComparison):
            name = f"vs {study.label(b)}" if shared else f"{study.label(a)} − {study.label(b)}"
            effects.append(f"{name} {_median(primary)}, P {primary.improvement:.2f}"
                           + _opposite_means(primary))
        else:  # sooner
            low, high = primary.interval
            effects.append(f"P({study.label(a)} sooner than {study.label(b)}) "
                           f"{primary.probability:.2f} [{low:.2f}, {high:.2f}], log-rank "
                           f"p {primary.sooner_p:.2g}")
    return "<br>".join(effects) or "–"


def claims_table(study: Study, verdicts: list[Verdict]) -> list[str]:
    """The claims, one row each: the verdict over the whole run (linked to its numbers), the
    last 10 %'s (⚑ where it differs) and each comparison's effect."""
    lines = ["| the paper says | task | verdict: whole run | last 10 % | A − B: median "
             "[5 %, 95 %], P(A > B) |", "|---|---|---|---|---|"]
    for v in verdicts:
        claim = v.record
        sensitivity = f"⚑ {v.sensitivity}" if v.flagged and v.sensitivity != "–" else (
            v.sensitivity if v.verdict != "not measured yet" else "–")
        lines.append(f"| {claim.short} | {TITLES[claim.task]} | "
                     f"{_verdict_cell(v, f'claim-{claim.id}')} | {sensitivity} | "
                     f"{_effects(study, v)} |")
    return lines


def seed_note(verdicts: list[Verdict]) -> str:
    """``"20 seeds a measure"`` where every claim read as many, else the range."""
    counts = {n for v in verdicts for n in v.seeds.values()}
    return (f"{counts.pop()} seeds a measure" if len(counts) == 1 else
            f"{min(counts)} to {max(counts)} seeds a measure" if counts else "no runs yet")


def questions_table(studies: list[tuple[Study, Verdict]]) -> list[str]:
    lines = ["| question (rule written before its runs) | answer: whole run | last 10 % | "
             "seeds |", "|---|---|---|---|"]
    for study, v in studies:
        q = v.record
        seeds = ", ".join(f"{study.label(m)} {n}" for m, n in v.seeds.items())
        lines.append(f"| {q.asks} ({q.written}) | {_verdict_cell(v, q.id)} | "
                     f"{'⚑ ' if v.flagged else ''}{v.sensitivity} | {seeds} |")
    return lines


def _choice_numbers(study: Study, v: Verdict) -> list[str]:
    """A choice's candidates: each task's score (whole run) and the mean rank in both windows."""
    scores = {"first_reward": "mean steps to the first reward", "return": "mean return"}
    tasks = [f"{TITLES[t]}: {scores[score]}" for t, score in v.record.tasks.items()]
    return [f"| candidate | {' | '.join(tasks)} | mean rank | last 10 %: mean rank |",
            "|---|" + "---:|" * (len(tasks) + 2),
            *(f"| {study.label(m)} | {' | '.join(f'{whole[t]:,.7g}' for t in v.record.tasks)} | "
              f"{whole['mean rank']:g} | {last['mean rank']:g} |"
              for m, (whole, last) in v.comparisons.items()), ""]


def _numbers(study: Study, v: Verdict) -> list[str]:
    """A record's numbers, each comparison in both windows."""
    record = v.record
    if isinstance(record, Claim):
        head = (f"**{TITLES[record.task]}**, “{record.says}”: **{v.verdict}**\n"
                f"{{: #claim-{record.id} }}\n")
    else:
        head = f"**{record.asks}**: **{v.verdict}**\n{{: #{record.id} }}\n"
    if v.verdict == "not measured yet" or isinstance(record, Choice):
        return [head, *(_choice_numbers(study, v) if v.comparisons else [])]
    margin = (f" (the task's smallest effect of interest m = ±{v.margin:.3g})"
              if np.isfinite(v.margin) else "")
    lines = [head.replace("\n", f"{margin}\n", 1), "| A − B | whole run: median [5 %, 95 %] "
             "| mean | P(A > B) | last 10 %: median [5 %, 95 %] |", "|---|---:|---:|---:|---:|"]
    for name, (primary, sensitivity) in v.comparisons.items():
        label = name if " − " not in name else _names(study, name)
        if isinstance(record, Claim) and record.kind != "sooner":
            pair = next(p for p in record.pairs if f"{p.a} − {p.b}" == name)
            if (pair.primary, pair.sensitivity) != ("whole", "last10pct"):
                label += f" ({WINDOWS[pair.primary]}; {WINDOWS[pair.sensitivity]})"
        elif not isinstance(record, Claim):
            test, a, b, *margin = record.tests[name]
            label = f"{name}: {test} {study.label(a)}" + (
                f", {study.label(b)}" if test != "at_scale" else f", ≤ {b}") + (
                f" (within 0.5 ± {margin[0]:g})" if margin else "")
        if isinstance(primary, MedianComparison):
            lines.append(f"| {label} | {_median(primary)} | {primary.mean_difference:+.3g} | "
                         f"{primary.improvement:.2f} | {_median(sensitivity)} |")
        elif hasattr(primary, "probability"):
            low, high = primary.interval
            equivalent = "" if primary.as_soon is None else (
                "; 90 % [{:.2f}, {:.2f}]".format(*primary.as_soon_interval)
                + (" inside" if primary.as_soon else " not inside")
                + f" 0.5 ± {primary.margin:g}")
            lines.append(f"| {label} | P(sooner) {primary.probability:.2f} [{low:.2f}, "
                         f"{high:.2f}]{equivalent}; log-rank p {primary.sooner_p:.2g} (sooner), "
                         f"{primary.later_p:.2g} (later) | | | |")
        elif isinstance(primary, list):  # means in the last 10 % and the whole run
            text = [f"{c.difference:+.3g} [{c.interval[0]:+.3g}, {c.interval[1]:+.3g}]"
                    if c else "–" for c in primary]
            lines.append(f"| {label} | mean {text[1]} | | | mean {text[0]} |")
        else:
            lines.append(f"| {label} | {primary:.3g} | | | |")
    return [*lines, ""]


def _processor(run: Run) -> str:
    """A run's processor in a word: Xeon, EPYC or "not recorded"."""
    text = str(run.provenance.get("processor") or "")
    return next((word for word in ("Xeon", "EPYC") if word in text), "not recorded")


def _load(run: Run) -> float:
    """The machine's 1-minute load average the launcher noted at the run's start (NaN: none)."""
    found = re.search(r"load average ([\d.]+)", str(run.provenance.get("note", "")))
    return float(found.group(1)) if found else math.nan


def provenance(study: Study, runs: list[Run]) -> list[str]:
    """Each cell's runs by commit and by processor (cells alike on one row, with the load at
    their start), and the commits the study shows train alike (``commits_alike`` records)."""
    cells: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        cells.setdefault((run.measure, run.task), []).append(run)

    def counted(values: list[str]) -> str:
        return ", ".join(f"{v} {n}" for v, n in sorted(collections.Counter(values).items()))

    rows: dict[tuple[str, str, str], list[str]] = {}
    loads: dict[tuple[str, str, str], list[float]] = {}
    for (measure, task), members in sorted(cells.items()):
        key = (study.label(measure), counted([r.commit[:7] for r in members]),
               counted([_processor(r) for r in members]))
        rows.setdefault(key, []).append(TITLES.get(task, task))
        loads.setdefault(key, []).extend(_load(r) for r in members)

    def load(values: list[float]) -> str:
        noted = np.array([v for v in values if np.isfinite(v)])
        return f"{np.median(noted):.1f} [{noted.min():.1f}, {noted.max():.1f}]" if noted.size \
            else "not noted"

    lines = ["| measure | tasks | commits (runs a task) | processors (runs a task) | load at "
             "their start |", "|---|---|---|---|---|"]
    lines += [f"| {label} | {', '.join(tasks)} | {commits} | {processors} | {load(loads[key])} |"
              for key, tasks in rows.items() for label, commits, processors in [key]]
    alike = [f"- {', '.join(record['commits'])} train {', '.join(record['measures'])} "
             f"bit-identically: {record['evidence']}" for record in study.commits_alike]
    return [*lines, "", *(["Commits shown to train alike:", "", *alike, ""] if alike else [])]


def normalised_scores(study: Study, data: dict) -> tuple[list[str], int, dict[str, np.ndarray]]:
    """The tasks where every figure measure has ``min_seeds``, the seeds read (the fewest), and
    ``measure -> [seeds, tasks]``: each seed's whole-run mean return, min–max normalised a task."""
    measures = study.figure
    tasks = [t for t in study.tasks if t != "point_robot"  # its runs stop at the first reward
             and all(len(data.get(t, {}).get(m, [])) >= study.min_seeds for m in measures)]
    count = min((len(data[t][m]) for t in tasks for m in measures), default=0)
    raw = {t: {m: windows(data[t][m][:count], "whole") for m in measures} for t in tasks}
    scores = {}
    for t in tasks:
        values = np.concatenate(list(raw[t].values()))
        low, high = np.nanmin(values), np.nanmax(values)
        for m in measures:
            scores.setdefault(m, []).append((raw[t][m] - low) / (high - low or 1.0))
    return tasks, count, {m: np.stack(v, axis=1) for m, v in scores.items()}


def across_tasks(study: Study, data: dict, figures: Path, link: str,
                 commits: list[str]) -> list[str]:
    """rliable's aggregate of the figure's measures over ``normalised_scores``'s tasks, named."""
    measures = study.figure
    tasks, count, scores = normalised_scores(study, data)
    taus = np.linspace(0, 1, 51)
    result = aggregate(scores, taus, measures[0])
    plot_aggregate(result, {m: (study.label(m), study.measures[m]["colour"]) for m in measures},
                   measures[0], taus, figures / f"{study.name}_aggregate.png",
                   f"Across {len(tasks)} task{'s' * (len(tasks) != 1)}, {count} seeds each "
                   "(rliable): each seed's mean return over the whole run, min–max normalised "
                   f"per task (runs at {', '.join(commits)})")
    lines = [f"Over {', '.join(TITLES[t] for t in tasks)}, {count} seeds each: "
             f"[![rliable's aggregate]({link}/{study.name}_aggregate.png)]"
             f"({link}/{study.name}_aggregate.png)\n",
             f"| measure | IQM [95 %] | P({study.label(measures[0])} > it) [95 %] |",
             "|---|---:|---:|"]
    for m in measures:
        point, low, high = result["iqm"][m]
        poi = result["improvement"].get(m)
        lines.append(f"| {study.label(m)} | {point:.2f} [{low:.2f}, {high:.2f}] | "
                     + ("–" if poi is None else "{:.2f} [{:.2f}, {:.2f}]".format(*poi)) + " |")
    return lines


README_BLOCK = ("<!-- the claims, written by `recipes/study/study.py report figure3` -->",
                "<!-- end of the claims -->")


def readme_table(study: Study, verdicts: list[Verdict]) -> list[str]:
    """The README's short table: each claim's verdict and its first comparison."""
    lines = ["| claim | task | verdict | A − B: median [5 %, 95 %], whole run |",
             "|---|---|---|---|"]
    for v in verdicts:
        effects = _effects(study, v).split("<br>")
        first = effects[0].rsplit(", P ", 1)[0]
        more = f" (and {len(effects) - 1} more)" if len(effects) > 1 else ""
        lines.append(f"| {v.record.short} | {TITLES[v.record.task]} | {v.verdict} | "
                     f"{first}{more} |")
    return lines


def write_readme(readme: Path, lines: list[str]) -> None:
    """Replace the block between ``README_BLOCK``'s markers in ``readme`` with ``lines``."""
    text = readme.read_text()
    begin, end = README_BLOCK
    if begin not in text or end not in text:
        raise ValueError(f"{readme} has no block {begin} ... {end} to write the claims in.")
    head, rest = text.split(begin, 1)
    readme.write_text(f"{head}{begin}\n" + "\n".join(lines) + f"\n{end}{rest.split(end, 1)[1]}")


def write_study_page(study: Study, page: Path, figures: Path) -> None:
    """``page`` for a study without claims: its choices, curves, rliable's aggregate, runs."""
    data = study.runs()
    runs = [run for by_measure in data.values() for cell in by_measure.values() for run in cell]
    commits = sorted({r.commit[:7] for r in runs})
    link = Path(os.path.relpath(figures, page.parent)).as_posix()
    planned = sum(map(len, study.seeds.values()))
    lines = [f"# {study.title}\n\n{study.about}\n\n{len(runs)} of {planned} runs (commits "
             f"{', '.join(commits) or 'none yet'}); this page: `python recipes/study/study.py "
             f"report {study.name}`.\n"]
    if choices := [(study, v) for v in judge_all(study, data) if isinstance(v.record, Choice)]:
        lines += ["## Choices\n", "By [their rule](../results_rule.md), written before their "
                  "runs; ⚑: the last 10 % of a return task's run would choose otherwise (the "
                  "choice stands).\n", *questions_table(choices), "",
                  *(line for _, v in choices for line in _numbers(study, v))]
    if tasks := [t for t in study.tasks if t != "point_robot"
                 and any(data.get(t, {}).get(m) for m in study.figure)]:
        figures.mkdir(parents=True, exist_ok=True)
        plot_curves({t: {m: data[t][m] for m in study.figure if data[t].get(m)} for t in tasks},
                    {m: (spec["label"], spec["colour"]) for m, spec in study.measures.items()},
                    figures / f"{study.name}_curves.png", f"{study.title}: median extrinsic "
                    f"return, interquartile range shaded (runs at {', '.join(commits)})")
        if normalised_scores(study, data)[0]:  # the answer first, then each task's curves
            lines += ["## Across tasks\n", *across_tasks(study, data, figures, link, commits),
                      ""]
        lines += ["## Curves\n", f"![The curves]({link}/{study.name}_curves.png)\n"]
    if robot := {m: data["point_robot"][m] for m in study.figure
                 if data.get("point_robot", {}).get(m)}:
        figures.mkdir(parents=True, exist_ok=True)
        ran = [r for runs in robot.values() for r in runs]
        config = yaml.safe_load(ran[0].provenance["config"])  # the budget: every run's alike
        plot_first_reward(robot, {m: (study.label(m), study.measures[m]["colour"]) for m in robot},
                          config["iterations"] * config["env"]["frames_per_batch"],
                          figures / f"{study.name}_first_reward.png", "The point robot: runs "
                          "still searching for the first reward (runs at "
                          f"{', '.join(sorted({r.commit[:7] for r in ran}))})")
        lines += ["## The point robot's first reward\n",
                  f"![Runs still searching]({link}/{study.name}_first_reward.png)\n"]
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("\n".join([*lines, "## The runs\n", *provenance(study, runs)]))


def write_page(study: Study, page: Path, figures: Path, others: tuple[Study, ...] = (),
               readme: Path | None = None) -> None:
    """Write ``page`` and its figures (under ``figures``) for ``study`` and the questions of
    ``others`` (studies whose follow-ups the page lists beside)."""
    figures.mkdir(parents=True, exist_ok=True)
    link = Path(os.path.relpath(figures, page.parent)).as_posix()
    data = study.runs()
    everything = [run for by_measure in data.values() for runs in by_measure.values()
                  for run in runs]
    commits = sorted({r.commit[:7] for r in everything})
    verdicts = judge_all(study, data)
    claims = [v for v in verdicts if isinstance(v.record, Claim)]
    asked = [(study, v) for v in verdicts if not isinstance(v.record, Claim)]
    asked += [(other, v) for other in others for v in judge_all(other)
              if isinstance(v.record, Question)]  # a choice is on its study's own page
    styles = {m: (spec["label"], spec["colour"]) for m, spec in study.measures.items()}
    curve_tasks = [t for t in study.tasks if t != "point_robot"]
    seeds = max(len(data.get(t, {}).get(m, [])) for t in curve_tasks for m in study.figure)
    plot_curves({t: {m: data.get(t, {}).get(m, []) for m in study.figure if data.get(t, {}).get(m)}
                 for t in curve_tasks},
                styles, figures / f"{study.name}_curves.png",
                f"The paper's Figure 3 at the authors' configuration: median extrinsic return "
                f"over {seeds} seeds, interquartile range shaded; each task's full iterations, "
                f"runs at {', '.join(commits)} (each run's machine and load in the dataset)")
    robot = {m: data["point_robot"][m] for m in ("none", "vase", "nll", "vime", "vase_shuffled")
             if m in data.get("point_robot", {})}
    budget = next(c.budget for c in study.claims if c.kind == "sooner")
    plot_first_reward(robot, styles, budget, figures / "point_robot_first_reward.png",
                      f"The point robot: runs still searching for the first reward (budget "
                      f"{budget:,.0f} steps; runs at {', '.join(commits)})")
    counts = collections.Counter(v.verdict for v in claims if not v.borderline)
    borderline = sum(v.borderline for v in claims)
    lines = [
        "# Results: the paper's Figure 3\n",
        f"Of the paper's {len(claims)} claims, **{counts['reproduced']} reproduced, "
        f"{counts['not reproduced']} not reproduced, {counts['inconclusive']} inconclusive"
        + (f", {borderline} borderline" if borderline else "") + "** on "
        f"{len(everything)} runs at the authors' configuration ({seed_note(claims)}, each to "
        f"its task's full iterations; commits {', '.join(commits)}). How a claim is judged: "
        "[the rule](results_rule.md), written before the runs; ⚑: the last 10 % of the run "
        "answers otherwise; ⚠: the difference of means has the other sign than the medians' "
        "(the rule reads medians). Under each verdict, the p-value that decided it nearest its "
        "threshold (Holm's, within the claim), ± its Monte-Carlo error √(p(1 − p)/B) over B "
        "bootstrap resamples: B is 10,000, raised to 100,000 and 1,000,000 while that p lies "
        "within 3 errors of its threshold; a verdict still that close is *borderline* and "
        "counted apart (for a first reward, the p is the bootstrap's share of draws at or past "
        "P = 0.5 against α/2, the bound of its 95 % interval).\n",
        f"[![Figure 3's curves]({link}/{study.name}_curves.png)]({link}/{study.name}_curves.png)"
        "\n", *claims_table(study, claims), "",
        "## Follow-ups and placebos\n", *questions_table(asked), "",
        "The study's notes (how it was run, Ant's scale, the bonus's reach, rechecks): "
        "[notes](results_study_notes.md); earlier rules and studies: "
        "[history](results_history.md); VASE among today's bonuses (RND, ICM, Disagreement; "
        "exploratory): [its page](results/rivals.md).\n",
        "## Each record's numbers\n",
        "A − B is the difference of the two measures' medians over their seeds (each seed's "
        "mean return over the window), in brackets its bootstrap's 5th and 95th percentiles "
        "(10,000 resamples of each measure's seeds); the mean difference and P(A > B) beside.\n"]
    for v in claims:
        lines += _numbers(study, v)
    for other, v in asked:
        lines += _numbers(other, v)
    lines += ["## Across tasks\n", *across_tasks(study, data, figures, link, commits), "",
              "## The point robot's first reward\n",
              f"[![Runs still searching]({link}/point_robot_first_reward.png)]"
              f"({link}/point_robot_first_reward.png)\n",
              "## The runs\n",
              f"From `{study.dataset.relative_to(study.dataset.parents[1])}`, written by "
              f"`python recipes/study/study.py report {study.name}`:\n",
              *provenance(study, everything)]
    page.write_text("\n".join(lines))
    if readme is not None:
        write_readme(readme, readme_table(study, claims))
