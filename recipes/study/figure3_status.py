"""How far the Figure 3 study has come, and what to know about its runs (issue 38): the seeds
finished against the bar, the runs that failed, the policies' spread, the recheck of an earlier
commit's runs. ``figure3_report.py`` puts them on the results page.

    >>> _first_three("a b c d e")
    'a, b, c and 2 more'
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from figure3_claims import AGGREGATE_LABELS, STUDY_LABELS
from omegaconf import OmegaConf
from paper_grid import SEED_COUNT
from recheck import EQUAL_WHERE_BOTH_LOGGED  # the recheck's record (beside this script)
from study_runs import ROOT, TASKS, TITLES, Seed, load_cell
from study_timing import started_on

#: iterations between the evaluations of the deterministic policy (the recipe's ``eval.every``)
EVAL_EVERY = OmegaConf.load(ROOT / "conf" / "trpo_vase.yaml").eval.every
#: seeds each cell must reach: the issues' bars (VIME and no bonus at 10, though they ran 20)
#: and, for the measures the launcher runs on fewer seeds, the count it runs
STUDY_BAR = {"vase": 20, "trpo_authors": 20, "nll": 20, "vime": 10, "none": 10} | SEED_COUNT
#: the cells a measure has outside the six tasks' every one (``paper_grid.ORDER``)
ONLY_ON = {"vase_paper": ("cartpole_swingup", "half_cheetah", "ant"),
           "vase_linear_init": ("ant",), "vase_eta_tenth": ("ant",),
           "vase_linear_eta_tenth": ("ant",)}


def load_failures(study: Path) -> list[dict[str, str]]:
    """Every run of the study that failed (``<task>/<measure>/failures.csv``), its task and
    measure added; by task, measure and seed."""
    rows = []
    for path in study.glob("*/*/failures.csv"):
        with path.open(newline="") as handle:
            rows += [{"task": path.parent.parent.name, "measure": path.parent.name, **row}
                     for row in csv.DictReader(handle)]
    return sorted(rows, key=lambda r: (r["task"], r["measure"], int(r["seed"]), r["start"]))


def failures_table(failures: list[dict[str, str]], study: Path) -> str:
    """The failed runs, and whether each seed has finished since (at the commit its
    ``runs.csv`` row names)."""
    if not failures:
        return "No run has failed.\n"
    lines = ["Runs that failed (each recorded in `failures.csv` beside its cell's CSVs, never "
             "drawn; its seed runs again, and once finished its `runs.csv` row says at which "
             "commit):\n",
             "| cell | seed | commit | at iteration | error | run again |",
             "|---|---:|---|---:|---|---|"]
    for row in failures:
        rerun = study / row["task"] / row["measure"] / f"seed{row['seed']}.csv"
        title = TITLES.get(row["task"], row["task"].replace("_", " "))
        lines.append(f"| {title} {STUDY_LABELS.get(row['measure'], row['measure'])} | "
                     f"{row['seed']} | {row['git_commit'][:7]} | {row['iteration'] or '–'} | "
                     f"{row['error'].replace('|', '/')} | "
                     f"{'finished' if rerun.exists() else 'not yet'} |")
    return "\n".join(lines) + "\n"


#: a final log-std above this (a std of e² ≈ 7.4 half-ranges of the actions) sends nine in ten
#: of that dimension's actions to a bound, at random
RUNAWAY_LOG_STD = 2.0


def policy_spread(study: Path) -> str:
    """The cells whose runs' policies ended with a runaway log-std (``policy_log_std`` in
    ``runs.csv`` and ``failures.csv``; the largest over action dimensions), each with the
    last-10-iteration returns of its finished runs that ran away and of the others; and the
    largest log-std of every other run recorded."""
    largest: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for path in sorted([*study.glob("*/*/runs.csv"), *study.glob("*/*/failures.csv")]):
        how = "failed" if path.name == "failures.csv" else "finished"
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                if row.get("policy_log_std"):
                    cell = largest.setdefault((path.parent.parent.name, path.parent.name),
                                              {"finished": {}, "failed": {}})
                    cell[how][row["seed"]] = max(map(float, row["policy_log_std"].split()))
    if not largest:
        return ""
    recorded = sum(len(runs) for cell in largest.values() for runs in cell.values())
    lines = [f"The policies' final log-std (`policy_log_std` in `runs.csv` and `failures.csv`, "
             f"{recorded} runs recorded; the largest over action dimensions, in [−1, 1] action "
             f"units; above {RUNAWAY_LOG_STD:g}, nine in ten of a dimension's actions are clipped "
             "to a bound at random):\n"]
    calm = []
    for (task, measure), cell in sorted(largest.items()):
        away = {seed: v for seed, v in cell["finished"].items() if v > RUNAWAY_LOG_STD}
        failed = {seed: v for seed, v in cell["failed"].items() if v > RUNAWAY_LOG_STD}
        calm += [v for seed, v in cell["finished"].items() if seed not in away]
        if not away and not failed:
            continue
        line = (f"- {TITLES.get(task, task)} {STUDY_LABELS.get(measure, measure)}: above "
                f"{RUNAWAY_LOG_STD:g} in {len(away)} of {len(cell['finished'])} finished runs ("
                + ", ".join(f"seed {seed}: {v:.1f}" for seed, v in _by_seed(away)) + ")")
        if failed:
            line += ("; before failing, in " + ", ".join(f"seed {seed}: {v:.1f}"
                                                          for seed, v in _by_seed(failed)))
        returns = {seed.seed: seed.final for seed in load_cell(study, task, measure)}
        for name, seeds in (("those finished runs", away),
                            ("the others", set(cell["finished"]) - set(away))):
            finals = [returns[int(seed)] for seed in seeds if int(seed) in returns]
            if finals:
                line += (f"; last-10-iteration return of {name} "
                         f"{min(finals):.1f} to {max(finals):.1f}")
        lines.append(line)
    runaway = len(lines) > 1
    if calm:
        lines.append(f"- every other finished run recorded: at most {max(calm):.1f}")
    if runaway:
        lines.append("- why a bonus pays for it, measured on the HalfCheetah VIME runs with "
                     "`recipes/study/bonus_vs_action_noise.py`, and what the model fed the "
                     "applied (clipped) action does instead (`surprise.model_action=applied`, "
                     "not the authors' code): [the transforms guide]"
                     "(guides/transforms.md#watch-the-policys-std-under-vime)")
    return "\n".join(lines) + "\n"


def _first_three(names: str) -> str:
    """``"a b c d"`` → ``"a, b, c and 1 more"``: a differing run's metrics, shortly."""
    names = names.split()
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def _parting(text: str) -> str:
    """``"iteration 3: a b c d"`` (recheck.py's ``first_difference``) → ``"from iteration 3 (a,
    b, c and 1 more)"``."""
    where, _, names = text.partition(": ")
    return f"from {where}" + (f" ({_first_three(names)})" if names else "")


#: the metrics the ELBO kernel logs from its closed-form KL and entropy (and the sums they
#: enter); no step of training reads these values, only their gradients, which do not round alike
KERNEL_LOGGED = frozenset({"bnn/kl", "bnn/entropy", "bnn/elbo", "bnn/loss_kl"})
#: the commit after which a process that compiles the ELBO kernel and one that loads it from
#: numba's disk cache log the same bits (its helpers inlined by numba)
KERNEL_FIX = "e253547"


def only_kernel_logged(row: dict[str, str]) -> bool:
    """Whether a differing rerun differs only in the kernel's logged KL and entropy
    (``KERNEL_LOGGED``): its config identity equal and every other metric equal.

        >>> only_kernel_logged({"metrics_differing": "bnn/kl bnn/elbo", "identity_equal": "True"})
        True
        >>> only_kernel_logged({"metrics_differing": "bnn/kl Return/mean",
        ...                     "identity_equal": "True"})
        False
    """
    differing = set(row["metrics_differing"].split())
    return bool(differing) and differing <= KERNEL_LOGGED and row["identity_equal"] == "True"


def _processor(machine: str) -> str:
    """A ``torchrl_vase.provenance.machine()`` name's processor: ``"vm (2 cores, AMD EPYC)"`` →
    "AMD EPYC" (the whole name where it names none).

        >>> _processor("vm (2 cores, Intel(R) Xeon(R) Processor)")
        'Intel(R) Xeon(R) Processor'
    """
    inside = machine.partition(" (")[2].removesuffix(")")
    return inside.partition(", ")[2] or machine


def cell_processors(study: Path, task: str, measures: tuple[str, ...]) -> str:
    """Which processor each cell's runs started on, from their ``runs.csv`` notes (a seed's
    last row), as a sentence: ``"VASE: Intel(R) Xeon(R) Processor 20; none (control): AMD EPYC
    10, not recorded 10"``; a cell without runs is left out."""
    cells = []
    for measure in measures:
        path = study / task / measure / "runs.csv"
        if not path.exists():
            continue
        with path.open(newline="") as handle:
            notes = {row["seed"]: row.get("note", "") for row in csv.DictReader(handle)}
        counts = Counter(_processor(machine) if (machine := started_on(note)) else "not recorded"
                         for note in notes.values())
        cells.append(f"{AGGREGATE_LABELS.get(measure, measure)}: "
                     + ", ".join(f"{name} {count}" for name, count in sorted(counts.items())))
    return "; ".join(cells)


def _differing_rerun(row: dict[str, str]) -> str:
    """A rerun that differs from the study's run: where they part and, where it was rerun at
    the earlier commit on this machine too, whether that one parts from the newer."""
    where = (_parting(row["first_difference"]) if row.get("first_difference")
             else _first_three(row["metrics_differing"]) or "config identity")
    text = (f"{TITLES.get(row['task'], row['task'])} "
            f"{STUDY_LABELS.get(row['measure'], row['measure'])} seed {row['seed']} ({where}")
    if only_kernel_logged(row):
        text += "; only the kernel's logged KL and entropy"
    first, _, metrics = row.get("first_difference", "").partition(":")
    if first == "iteration 0" and "frames" in metrics.split():
        text += "; other frames collected in its first iteration, before any model or policy step"
    if row.get("machine") and row.get("study_machine") and row["machine"] != row["study_machine"]:
        text += f"; rerun on {_processor(row['machine'])}, the study's on "  \
                f"{_processor(row['study_machine'])}"
    if row.get("environment_differs") == "none":
        text += "; the same recorded environment"
    elif row.get("environment_differs"):
        text += f"; recorded otherwise: {', '.join(row['environment_differs'].split())}"
    here = row.get("earlier_here", "")
    if here == "equal":
        text += (f"; {row['earlier_commit'][:7]} rerun here equals {row['commit']} here: not "
                 "the commit")
    elif here.startswith(EQUAL_WHERE_BOTH_LOGGED):
        text += (f"; {row['earlier_commit'][:7]} rerun here equals {row['commit']} here "
                 "wherever both evaluated, one of them evaluating off the schedule at "
                 f"{here.partition('(')[2].partition(':')[0]}: not the commit")
    elif here:
        parting = here.removeprefix("DIFFERENT from ").partition(":")[0]
        text += (f"; {row['earlier_commit'][:7]} rerun here differs from {row['commit']} here "
                 f"in {_first_three(row['earlier_here_differing'])}, from {parting}")
    return text + ")"


def rechecks(study: Path) -> str:
    """What ``recipes/study/recheck.py`` found (``recheck_<commit>.csv`` beside the cells): runs
    finished at an earlier commit of the study, drawn at random and rerun whole at the later
    one, each equal in every metric (clocks aside) and in its config identity, or not."""
    lines, all_rows = [], []
    for path in sorted(study.glob("recheck_*.csv")):
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        all_rows += rows
        if not rows:
            continue
        equal = [r for r in rows if r["result"] == "equal"]
        alike = [r for r in rows if r["result"] == EQUAL_WHERE_BOTH_LOGGED]
        differing = [r for r in rows if r["result"] == "DIFFERENT"]
        cells = len({(r["task"], r["measure"]) for r in rows})
        line = (f"Rechecked ({path.name}, `python recipes/study/recheck.py`): {len(rows)} runs "
                f"that finished at {rows[0]['earlier_commit'][:7]}, drawn at random from {cells} "
                f"cells, rerun whole at {', '.join(sorted({r['commit'] for r in rows}))}: "
                f"{len(equal)} equal to the study's in every metric (clocks aside) and in their "
                f"config identity")
        if alike:
            line += (f"; {len(alike)} equal in every value, the evaluation's wherever both runs "
                     "evaluated, one of the two evaluating off the schedule (" + "; ".join(
                         f"{TITLES.get(r['task'], r['task'])} "
                         f"{STUDY_LABELS.get(r['measure'], r['measure'])} seed {r['seed']}, "
                         f"{r['logged_by_one_run'].partition(':')[0]}" for r in alike) + ")")
        if differing:
            line += "; **different**: " + "; ".join(_differing_rerun(r) for r in differing)
        lines.append(line + ".")
    kernel_only = [r for r in all_rows if r["result"] == "DIFFERENT" and only_kernel_logged(r)]
    if kernel_only:
        lines.append(
            f"{len(kernel_only)} of the differing reruns "
            f"{'differs' if len(kernel_only) == 1 else 'differ'} only in the ELBO kernel's logged "
            f"KL and entropy (`{'`, `'.join(sorted(KERNEL_LOGGED))}`), every other metric equal, "
            "the bonus and the model's loss among them: no step of training reads those values. "
            f"Up to {KERNEL_FIX}, later than the study's commits, the kernel logged them a "
            "float32 step apart in a process that compiled it and in one that loaded it from "
            "numba's disk cache; a study's first job after its code is checked out compiles "
            "it, the later ones load it, which run did is not recorded. Measured for Ant VASE "
            "seed 0 at 01cdad2 (the run that compiled it at the rerun's start, and the recheck "
            "that loaded it): 3 iterations with `NUMBA_CACHE_DIR` an empty folder log the "
            "study's run's `bnn/entropy` bits, a second process over the same folder the "
            "recheck's (`paper_grid.py --code studies/figure3_rerun/code --tasks ant "
            "--measures vase --seeds 0 --iterations 3`, twice). Since "
            f"{KERNEL_FIX} the two processes log the same bits (`tests/test_elbo_kernel.py`).")
    if lines:
        paused, runs = off_schedule_evaluations(study)
        lines.append(
            f"At the study's commits (82a8bde, and the rerun's 01cdad2 built on it) a run "
            f"stopped by a signal evaluated its policy at the stop (67d98e2, on the main line, "
            f"ended that): a run paused by `figure3.sh stop` carries one "
            f"evaluation off the {EVAL_EVERY}-iteration schedule, which a rerun that was not "
            f"paused there lacks. {paused} of the study's {runs} runs carry at least one; no "
            "figure or verdict on this page reads an evaluation's metric (`eval/*`).")
    return "\n".join(lines) + "\n" if lines else ""


def off_schedule_evaluations(study: Path) -> tuple[int, int]:
    """How many of the study's runs (``seed<k>.csv``) evaluated off the schedule (an
    ``eval/return`` at an iteration ``i`` with ``i + 1`` not a multiple of ``eval.every``,
    other than the run's last), and how many runs there are."""
    paused = runs = 0
    for path in sorted(study.glob("*/*/seed*.csv")):
        with path.open(newline="") as handle:
            evaluated = [row.get("eval/return", "") != "" for row in csv.DictReader(handle)]
        runs += 1
        paused += any(done and (i + 1) % EVAL_EVERY and i != len(evaluated) - 1
                      for i, done in enumerate(evaluated))
    return paused, runs


def _by_seed(values: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(values.items(), key=lambda item: int(item[0]))


def study_status(data: dict, robot: dict[str, list[Seed]]) -> str:
    measures = tuple(STUDY_BAR)
    lines = ["| task | iterations | " + " | ".join(STUDY_LABELS[m] for m in measures) + " |",
             "|---|---:|" + "---:|" * len(measures)]
    short = []  # the cells below their bar
    for task in TASKS:
        iterations = OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml").iterations
        cells = []
        for measure in measures:
            bar = STUDY_BAR[measure]
            if task not in ONLY_ON.get(measure, (task,)):
                cells.append("")
                continue
            finished = len(data.get(task, {}).get(measure, []))
            cells.append(f"{finished} / {bar}")
            if finished < bar:
                short.append(f"{TITLES[task]} {STUDY_LABELS[measure]} ({finished} of {bar})")
        lines.append(f"| {TITLES[task]} | {iterations} | " + " | ".join(cells) + " |")
    # the point robot's bar: 20 seeds of VASE and none; NLL and VIME "if cheap" (no bar); the
    # authors' TRPO and the text settings are not run there
    robot_bar = {"vase": 20, "nll": 20, "none": 20}
    robot_cells = {"vase": "{} / 20", "nll": "{} / 20", "vime": "{}", "none": "{} / 20"}
    lines.append("| point robot | until the first reward, ≤ 500 | " + " | ".join(
        robot_cells[m].format(len(robot.get(m, []))) if m in robot_cells else "–"
        for m in measures) + " |")
    short += [f"point robot {STUDY_LABELS[m]} ({len(robot.get(m, []))} of {bar})"
              for m, bar in robot_bar.items() if len(robot.get(m, [])) < bar]
    lines.append("\n" + (f"Below the bar: {', '.join(short)}." if short
                         else "**Every cell has reached the bar.**"))
    return "\n".join(lines) + "\n"
