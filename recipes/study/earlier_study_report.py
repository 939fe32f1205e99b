"""The earlier study at the former defaults (issue 26): its claims, tables and figures.

Reads ``docs/results/paper_grid/<task>/<measure>/seed<k>.csv`` (the runs of
``preset=former_defaults``) and writes the results page's last part and its figures:

* ``figure3.png``: per task, the median extrinsic return (``Return/mean``, the batch's episodes;
  each seed's running mean over 10 iterations) against frames with the interquartile range
  shaded, one line per measure, as the paper draws it;
* ``first_reward.png``: per task, the fraction of seeds that had met the extrinsic reward by
  frame t (a survival curve), and how often the first batch (the initial policy, before any
  bonus) met it on its own;
* ``self_agreement.png``: per task, the bonus's self-agreement (Spearman ρ between two fresh
  evaluations; ``Exploration.self_agreement``) over training, median over seeds, where logged;
* the claim-by-claim table (the paper says / we measured / verdict / budget), the per-task table
  (final return's IQM with a 95 % bootstrap CI, median, first reward) and the paired
  differences by seed.

Statistics: a seed's *final return* is the mean ``Return/mean`` of its last 10 iterations, its
*early return* that of its first quarter of iterations, its *whole-run return* that of every
iteration (the area under its curve; shown beside the final return, not used for verdicts).
Measures are compared by the paired difference of those per seed (the seeds they share), with a
95 % percentile-bootstrap CI of the mean difference (10,000 resamples). A claim "A above B" is
*reproduced* when that CI lies above 0, *not reproduced* when it lies below 0 (B above A), and
*inconclusive* otherwise; "A best" needs A above every other measure the paper drew (none,
NLL, VIME, VASE), "alike" needs no CI to exclude 0. A comparison with fewer than 5 paired
seeds is *not measured yet*. The study at the authors' configuration (``figure3_report.py``)
replaces these verdicts.

    >>> from pathlib import Path
    >>> grid = Path("docs/results/paper_grid")
    >>> judge(CLAIMS[0], load(grid, REPORTED)["mountain_car"])[0]
    'inconclusive'
"""

from __future__ import annotations

import math
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import scipy.stats
from compare import iqm_interval  # rliable's IQM and its bootstrap CI (beside this script)
from omegaconf import OmegaConf
from study_figures import DPI, figure, legible, running_mean
from study_runs import FINAL, ROOT, TASKS, TITLES, Seed, load, provenance

MEASURES = ("none", "vase", "nll", "vime", "rnd", "trpo_authors")
#: VASE's secondaries -> the measure each is paired with: the paper's text settings
#: (``preset=paper``), 50 weight samples, both; reported beside the primary measures, never
#: judged in a claim
SECONDARIES = {"vase_paper": "vase", "vase_n50": "vase", "vase_paper_n50": "vase_paper"}
#: every measure the report reads, in its tables' order
REPORTED = (*MEASURES, *SECONDARIES)
LABELS = {"none": "TRPO (none)", "vase": "VASE", "nll": "NLL", "vime": "VIME", "rnd": "RND",
          "trpo_authors": "TRPO, authors' settings",
          "vase_paper": "VASE, paper's text settings", "vase_n50": "VASE, N = 50",
          "vase_paper_n50": "VASE, paper's text settings, N = 50"}
SHORT = {"none": "none", "vase": "VASE", "nll": "NLL", "vime": "VIME", "rnd": "RND",
         "trpo_authors": "TRPO (authors')"}  # the claims' measures
COLOURS = {"none": "tab:gray", "vase": "tab:red", "nll": "tab:green", "vime": "tab:blue",
           "rnd": "tab:purple", "trpo_authors": "black", "vase_paper": "tab:orange",
           "vase_n50": "tab:brown", "vase_paper_n50": "tab:olive"}
MIN_PAIRS, RESAMPLES = 5, 10_000


@dataclass
class Difference:
    """The mean paired difference ``a − b`` over the seeds both have, with its bootstrap CI."""

    mean: float
    low: float
    high: float
    pairs: int

    @property
    def verdict(self) -> str:
        if self.pairs < MIN_PAIRS:
            return "not measured yet"
        if self.low > 0:
            return "above"
        if self.high < 0:
            return "below"
        return "no difference shown"

    def __str__(self) -> str:
        if self.pairs < 2:
            return f"n = {self.pairs}"
        return f"{self.mean:+.1f} [{self.low:+.1f}, {self.high:+.1f}] (n = {self.pairs})"

    def short(self) -> str:
        """``+1.2 [+0.3, +2.0] (5)``: the claims table's cell."""
        if self.pairs < 2:
            return f"({self.pairs} seeds)"
        return f"{self.mean:+.1f} [{self.low:+.1f}, {self.high:+.1f}] ({self.pairs})"


def paired_difference(a: list[Seed], b: list[Seed], statistic: str = "final",
                      seed: int = 0) -> Difference:
    by_seed = {s.seed: getattr(s, statistic) for s in b}
    diffs = np.array([getattr(s, statistic) - by_seed[s.seed] for s in a if s.seed in by_seed])
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size < 2:
        return Difference(float(diffs.mean()) if diffs.size else math.nan, math.nan, math.nan,
                          int(diffs.size))
    if np.ptp(diffs) == 0:  # every pair equal: the bootstrap has nothing to resample
        return Difference(float(diffs[0]), float(diffs[0]), float(diffs[0]), int(diffs.size))
    result = scipy.stats.bootstrap((diffs,), np.mean, n_resamples=RESAMPLES,
                                   method="percentile", rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return Difference(float(diffs.mean()), float(interval.low), float(interval.high),
                      int(diffs.size))


# ------------------------------------------------------------------------------------------------
# The paper's claims
# ------------------------------------------------------------------------------------------------
@dataclass
class Claim:
    task: str
    says: str
    #: (a, b, statistic): each comparison "a above b" the claim makes
    above: tuple[tuple[str, str, str], ...] = ()
    #: pairs that the claim says are alike
    alike: tuple[tuple[str, str], ...] = ()


#: "no surprise" in a claim is judged against both: plain TRPO at the bonuses' own settings
#: (none: the control) and the paper's TRPO curve, its authors' settings (trpo_authors)
NO_SURPRISE = ("none", "trpo_authors")

CLAIMS = (
    Claim("mountain_car", "VIME performs best",
          above=tuple(("vime", m, "final") for m in ("vase", "nll", *NO_SURPRISE))),
    Claim("double_pendulum", "VIME performs well initially, but is later surpassed by VASE",
          above=(("vime", "vase", "early"), ("vase", "vime", "final"))),
    *[Claim(task, "VASE shows good results (above the other curves)",
            above=tuple(("vase", m, "final") for m in ("vime", "nll", *NO_SURPRISE)))
      for task in ("cartpole_swingup", "half_cheetah", "ant")],
    *[Claim(task, "VASE always performs better than NLL", above=(("vase", "nll", "final"),))
      for task in TASKS],
    Claim("lunar_lander", "all surprise-driven methods behave almost the same as no surprise",
          alike=tuple((m, b) for b in NO_SURPRISE for m in ("vase", "nll", "vime"))),
)


def judge(claim: Claim, runs: dict[str, list[Seed]]) -> tuple[str, list[str]]:
    """The claim's verdict and the statistic behind each of its comparisons."""
    evidence, verdicts = [], []
    for a, b, statistic in claim.above:
        diff = paired_difference(runs.get(a, []), runs.get(b, []), statistic)
        when = "" if statistic == "final" else f", {statistic}"
        evidence.append(f"{SHORT[a]} − {SHORT[b]}{when}: {diff.short()}")
        verdicts.append({"above": "yes", "below": "no", "no difference shown": "?",
                         "not measured yet": "-"}[diff.verdict])
    for a, b in claim.alike:
        diff = paired_difference(runs.get(a, []), runs.get(b, []))
        evidence.append(f"{SHORT[a]} − {SHORT[b]}: {diff.short()}")
        verdicts.append({"above": "no", "below": "no", "no difference shown": "yes",
                         "not measured yet": "-"}[diff.verdict])
    if "-" in verdicts:
        return "not measured yet", evidence
    if "no" in verdicts:
        return "not reproduced", evidence
    if "?" in verdicts:
        return "inconclusive", evidence
    return "reproduced", evidence



# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------

def _panels(title: str):
    figure, axes = plt.subplots(2, 3, figsize=(11, 8.2), constrained_layout=True)
    figure.suptitle(textwrap.fill(title, 110))  # the commits' list can be long
    return figure, dict(zip(TASKS, axes.ravel(), strict=True))


def _shared_legend(figure, axes: dict) -> None:
    """One legend for every panel, below them: a legend per panel covers its curves at a
    legible size (the seeds of each cell are in the page's tables)."""
    handles = {}
    for ax in axes.values():
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                handles.setdefault(line.get_label(), line)
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="outside lower center",
                      ncol=min(4, len(handles)), frameon=False)



@legible
def plot_returns(data: dict, path: Path, caption: str) -> None:
    figure, axes = _panels(f"Extrinsic return: median over seeds of each seed's running mean over "
                           f"{FINAL} iterations, interquartile range shaded ({caption})")
    for task, ax in axes.items():
        ax.set_title(TITLES[task])
        for measure, seeds in data.get(task, {}).items():
            length = min(len(s.returns) for s in seeds)
            curves = np.stack([running_mean(s.returns[:length]) for s in seeds])
            frames = seeds[0].frames[:length] / 1e6
            q1, median, q3 = np.nanpercentile(curves, [25, 50, 75], axis=0)
            ax.plot(frames, median, color=COLOURS[measure], label=LABELS[measure])
            ax.fill_between(frames, q1, q3, color=COLOURS[measure], alpha=0.15)
        ax.set_xlabel("frames (millions)")
        ax.set_ylabel("return")
        if not data.get(task):
            ax.text(0.5, 0.5, "not run yet", ha="center", transform=ax.transAxes)
    _shared_legend(figure, axes)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def first_batch_touches(seeds_by_measure: dict[str, list[Seed]]) -> tuple[int, int]:
    """Runs whose first batch (the initial policy; no bonus acts before the model's first
    update) met the extrinsic reward, and runs."""
    runs = [s for seeds in seeds_by_measure.values() for s in seeds]
    return sum(s.first_reward <= s.frames[0] for s in runs), len(runs)


@legible
def plot_first_reward(data: dict, path: Path, caption: str) -> None:
    figure, axes = _panels("Fraction of seeds that have met the extrinsic reward by frame t ("
                           + caption + ")")
    for task, ax in axes.items():
        ax.set_title(TITLES[task])
        for measure, seeds in data.get(task, {}).items():
            end = max(s.frames[-1] for s in seeds)
            times = np.sort([s.first_reward for s in seeds if np.isfinite(s.first_reward)])
            x = np.concatenate([[0], times, [end]]) / 1e6
            y = np.concatenate([[0], np.arange(1, times.size + 1), [times.size]]) / len(seeds)
            ax.step(x, y, where="post", color=COLOURS[measure], label=LABELS[measure])
        if data.get(task):
            touched, runs = first_batch_touches(data[task])
            ax.text(0.98, 0.03, f"first batch met it: {touched}/{runs}", ha="right",
                    transform=ax.transAxes)
        else:
            ax.text(0.5, 0.5, "not run yet", ha="center", transform=ax.transAxes)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("frames (millions)")
        ax.set_ylabel("fraction of seeds")
    _shared_legend(figure, axes)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


@legible
def plot_self_agreement(data: dict, path: Path, caption: str) -> bool:
    logged = {task: {m: [s for s in seeds if np.isfinite(s.agreement).any()]
                     for m, seeds in runs.items()} for task, runs in data.items()}
    if not any(seeds for runs in logged.values() for seeds in runs.values()):
        return False
    figure, axes = _panels("Bonus self-agreement: Spearman ρ of two fresh evaluations, median "
                           "over seeds (" + caption + ")")
    for task, ax in axes.items():
        ax.set_title(TITLES[task])
        for measure, seeds in logged.get(task, {}).items():
            if not seeds:
                continue
            length = min(len(s.agreement) for s in seeds)
            curves = np.stack([s.agreement[:length] for s in seeds])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # iterations without a bonus
                median = np.nanmedian(curves, axis=0)
            # the iterations it was computed on (a thinned series: Exploration's
            # diagnostics_every), joined
            computed = np.isfinite(median)
            if computed.any():
                ax.plot(seeds[0].frames[:length][computed] / 1e6, median[computed],
                        color=COLOURS[measure], label=LABELS[measure])
        ax.set_ylim(-0.1, 1.05)
        ax.set_xlabel("frames (millions)")
        ax.set_ylabel("ρ")
        if not ax.lines:
            ax.text(0.5, 0.5, "not logged", ha="center", transform=ax.transAxes)
    _shared_legend(figure, axes)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return True


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------
def budget(runs: dict[str, list[Seed]], measures: tuple[str, ...]) -> str:
    """``"5–10 seeds × 50 iterations"``: the seeds of the claim's measures and their length."""
    counts = [len(runs.get(m, [])) for m in measures]
    lengths = [len(s.returns) for m in measures for s in runs.get(m, [])]
    if not lengths:
        return "–"
    low, high = min(counts), max(counts)
    seeds = f"{low}" if low == high else f"{low}–{high}"
    return f"{seeds} seeds × {min(lengths)} iterations"


def claims_table(data: dict) -> str:
    lines = ["| task | the paper says | we measured: paired difference of final returns, "
             "mean [95 % CI] (seeds) | verdict | budget |", "|---|---|---|---|---|"]
    for claim in CLAIMS:
        runs = data.get(claim.task, {})
        verdict, evidence = judge(claim, runs)
        involved = tuple(dict.fromkeys([m for a, b, _ in claim.above for m in (a, b)]
                                       + [m for pair in claim.alike for m in pair]))
        lines.append(f"| {TITLES[claim.task]} | {claim.says} | {'<br>'.join(evidence)} | "
                     f"**{verdict}** | {budget(runs, involved)} |")
    return "\n".join(lines) + "\n"


def _number(value: float, digits: int = 1) -> str:
    return "–" if not np.isfinite(value) else f"{value:,.{digits}f}"


def task_table(task: str, runs: dict[str, list[Seed]]) -> str:
    lines = ["| measure | seeds | final return: IQM [95 % CI] | median | IQR | met the reward "
             "| first reward (median frame) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for measure in REPORTED:
        seeds = runs.get(measure)
        if not seeds:
            continue
        finals = np.array([s.final for s in seeds])
        point, low, high = iqm_interval(finals, resamples=RESAMPLES)
        met = [s.first_reward for s in seeds if np.isfinite(s.first_reward)]
        q1, median, q3 = np.percentile(finals, [25, 50, 75])
        lines.append(
            f"| {LABELS[measure]} | {len(seeds)} | {_number(point)} [{_number(low)}, "
            f"{_number(high)}] | {_number(median)} | {_number(q3 - q1)} | {len(met)}/{len(seeds)} "
            f"| {_number(float(np.median(met)) if met else math.nan, 0)} |")
    return "\n".join(lines) + "\n"


def pairs_table(task: str, runs: dict[str, list[Seed]]) -> str:
    lines = ["| difference | final return: mean [95 % CI] (n seeds) | | mean return over the "
             "whole run (area under the curve) | |", "|---|---:|---|---:|---|"]
    for a, b in (("vase", "nll"), ("vase", "none"), ("vase", "vime"), ("vime", "none"),
                 ("rnd", "vase"), *SECONDARIES.items()):
        if runs.get(a) and runs.get(b):
            final = paired_difference(runs[a], runs[b])
            whole = paired_difference(runs[a], runs[b], "whole")
            lines.append(f"| {LABELS[a]} − {LABELS[b]} | {final} | {final.verdict} | {whole} | "
                         f"{whole.verdict} |")
    return "\n".join(lines) + "\n"


def agreement_table(data: dict) -> str:
    """Median over seeds of each seed's median self-agreement in the first and last tenth of its
    iterations, where logged."""
    lines = ["| task | measure | seeds logged | ρ, first tenth of training | ρ, last tenth |",
             "|---|---|---:|---:|---:|"]
    for task in TASKS:
        for measure, seeds in data.get(task, {}).items():
            logged = [s for s in seeds if np.isfinite(s.agreement).any()]
            if not logged:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                early = [np.nanmedian(s.agreement[: max(2, len(s.agreement) // 10)])
                         for s in logged]
                late = [np.nanmedian(s.agreement[-max(1, len(s.agreement) // 10):])
                        for s in logged]
            lines.append(f"| {TITLES[task]} | {LABELS[measure]} | {len(logged)} | "
                         f"{_number(float(np.nanmedian(early)), 2)} | "
                         f"{_number(float(np.nanmedian(late)), 2)} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


#: seeds of each measure the issue's bar asks for
BAR = {"mountain_car": 10, "cartpole_swingup": 10, "half_cheetah": 10, "double_pendulum": 5,
       "ant": 5, "lunar_lander": 5}

HEADER = """# The earlier study at the former defaults

The paper's claims about its Figure 3, judged on our first study (issue 26): every task at the
authors' iteration counts and the recipe's defaults of the time, which `preset=former_defaults`
reproduces: a mix of the paper's text and the authors' code, not the authors' configuration.
σ_c = 5 and δ = 1e-3 (the paper's text), BNN means initialised as `torch.nn.Linear` (neither the
paper nor the authors), the bonus centred per batch, PyTorch's initialisation, CG damping 0.1 and
10 backtracks (sb3's), batches of 10 lanes of 500 fresh steps; the authors' tasks, BNN layer and
`advantage=extrinsic`. Seeds 0–9 (5 on some cells), each run exported to
`docs/results/paper_grid/<task>/<measure>/seed<k>.csv` with its commit, machine and load in
`runs.csv` beside it. Its verdicts pair seeds and read one window (the last 10 iterations); the
study at the authors' configuration ([results](results.md)) replaces them. Nothing was tuned
towards the paper: those defaults were chosen before it, on other seeds (the [earlier
studies](results_history.md)).
This page is written by `python recipes/study/paper_grid_report.py` from those files; the study is
run (and resumed) by `python recipes/study/paper_grid.py` ([how](#how-this-was-run)).

How to read the verdicts: a seed's *final return* is its mean extrinsic return over its last 10
iterations; two measures are compared by the mean of their paired differences over the seeds
both ran, with a 95 % bootstrap CI. *Reproduced*: every comparison the claim makes has its CI on
the claimed side of 0; *not reproduced*: one has it on the other side; *inconclusive*: some CI
straddles 0; *not measured yet*: fewer than 5 paired seeds. "No surprise" has two curves here,
and a claim about it is judged against both: `none`, plain TRPO at the recipe's defaults (the same
TRPO the bonuses use: the control), and `TRPO (authors')`, the paper's TRPO curve as the authors'
script ran it (`preset=authors_trpo`: rllab's defaults γ = 0.99 and λ = 1, where their bonus runs
used 0.995 and 0.95, with rllab's initialisation and line search).
"""


def status_table(data: dict) -> str:
    """Finished seeds per task and measure against the bar."""
    lines = ["| task | iterations | " + " | ".join(LABELS[m] for m in MEASURES) + " | bar |",
             "|---|---:|" + "---:|" * len(MEASURES) + "---:|"]
    for task in TASKS:
        counts = [len(data.get(task, {}).get(m, [])) for m in MEASURES]
        iterations = OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml").iterations
        lines.append(f"| {TITLES[task]} | {iterations} | "
                     + " | ".join(str(c) if c else "–" for c in counts)
                     + f" | {BAR[task]} seeds of the first five |")
    secondaries = [f"{LABELS[m]}: " + ", ".join(
        f"{TITLES[task]} {len(data[task][m])}" for task in TASKS if data.get(task, {}).get(m))
        for m in SECONDARIES if any(data.get(task, {}).get(m) for task in TASKS)]
    if secondaries:
        lines.append("\nSecondaries (seeds): " + "; ".join(secondaries) + ".")
    return "\n".join(lines) + "\n"


def earlier_section(grid: Path, figures: Path, link: str) -> tuple[str, dict[str, Path]]:
    """The earlier study's page (its title a level-1 heading), and the figures it wrote into
    ``figures`` (linked from the page as ``link``)."""
    data = load(grid, REPORTED)
    if not data:
        raise SystemExit(f"no exported runs under {grid} (<task>/<measure>/seed<k>.csv).")
    figures.mkdir(parents=True, exist_ok=True)
    commits, machines = provenance(grid)
    caption = ("commits " + ", ".join(commits) + " and PROVENANCE.txt's" if commits
               else "commits in PROVENANCE.txt")
    written = {"figure3": figures / "figure3.png", "first_reward": figures / "first_reward.png"}
    plot_returns(data, written["figure3"], caption)
    plot_first_reward(data, written["first_reward"], caption)
    if plot_self_agreement(data, figures / "self_agreement.png", caption):
        written["self_agreement"] = figures / "self_agreement.png"
    notes = grid / "NOTES.md"
    sections = [HEADER, "## The paper's claims\n", claims_table(data)]
    if notes.exists():
        sections.append(notes.read_text())
    sections += ["## Figure 3\n",
                 figure(link, "figure3.png", "Median return per task and measure"),
                 "## Finding the reward\n",
                 figure(link, "first_reward.png",
                        "Fraction of seeds that met the reward by frame t")]
    for task in TASKS:
        if task not in data:
            sections.append(f"## {TITLES[task]}\n\nNot run yet.\n")
            continue
        touched, total = first_batch_touches(data[task])
        sections += [f"## {TITLES[task]}\n", task_table(task, data[task]),
                     f"\nThe first batch (the initial policy, before any bonus) met the reward "
                     f"in {touched} of {total} runs.\n\nPaired by seed:\n",
                     pairs_table(task, data[task])]
    agreement = agreement_table(data)
    sections += ["## Self-agreement of the bonuses\n",
                 "Spearman's ρ between two evaluations of a bonus on the same 500 transitions "
                 "of a batch, each with fresh weight samples (`bonus/self_agreement`, logged "
                 "every iteration by runs since its introduction; older runs lack it).\n",
                 agreement or "Not logged by any exported run yet.\n"]
    if "self_agreement" in written:
        sections.append(figure(link, "self_agreement.png", "Self-agreement over training"))
    sections += ["## How this was run\n",
                 "Finished seeds per task and measure (the study's bar: 10 seeds of none, VASE, "
                 "NLL, VIME and RND on MountainCar, CartpoleSwingup and HalfCheetah, 5 on the "
                 "others):\n", status_table(data),
                 f"\nRuns exported with their provenance (`runs.csv` beside the CSVs: run, "
                 f"commit, start, end, machine, load): commits {', '.join(commits) or '–'}, "
                 f"machines {', '.join(machines) or '–'}; the earlier cells' commits and "
                 "machines, and what ran beside them, are in `PROVENANCE.txt`.\n",
                 "```\n# reruns this study's cells at its settings (--tasks, --seeds take a "
                 "slice)\npython recipes/study/paper_grid.py --overrides preset=former_defaults "
                 "--measures none vase nll vime rnd --seeds 0-9 \\\n    --out "
                 "docs/results/paper_grid --scratch studies/paper_grid\n"
                 "# this page and its figures\npython recipes/study/paper_grid_report.py\n```\n"]
    return "\n".join(sections), written
