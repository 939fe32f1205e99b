"""Does a study's newer commit reproduce the cells an earlier one finished? Rerun a random draw of
them, whole, at the newer commit and compare every metric, value for value.

A study pinned to one commit that had to move to another (``recipes/study/figure3.sh``: b2b53df,
then 82a8bde, which only changes what happens where the older one failed) keeps its earlier
cells when the new commit gives them the same numbers. This checks that on a sample: from every
cell (task × measure) with runs finished at ``--commit`` (their ``runs.csv`` rows), it draws
``--per-cell`` of those seeds (a seeded generator: the draw is fixed before anything runs), reruns
each through ``paper_grid.py`` at ``--code``'s commit into a scratch store and folder, and
compares the exported CSV with the study's: the same iterations, the same config identity, and
every metric equal (NaN equal to NaN) except the clocks (the loop's ``is_clock``).
An evaluation that one run logged and the other did not (off the schedule: at a stop, before
67d98e2) is not a value that differs: such a run is "equal where both logged", the rows named in
``logged_by_one_run``. Each row names the machine the rerun ran on and the one the study's run
started on (``machine``, ``study_machine``; empty in rows recorded before 2026-12-06), and the
environment tags the two runs recorded otherwise (``environment_differs``: the processor, its
kernels, a library's version; "none" where they agree, empty where either run predates the tags,
see ``export_runs.environment``). A drawn seed whose run started on another processor than this one
is flagged in the listing: the libraries' kernels may round otherwise there from the first
iteration on (docs/benchmarks.md, "Which kernel choices change a run's bits").
Each result is
appended to ``--record`` (a CSV beside the study; a cell already there is not run again), with
the first iteration where a differing rerun parts from the study's.

A difference has three possible sources: the commit, the machine (the study's run may have run on
another processor, whose kernels round differently) and the run's own history. With
``--earlier-code`` (a checkout of the earlier commit) every differing seed is also rerun at the
earlier commit on this machine and the two reruns compared: equal, the commit is not the cause
(``earlier_here``: "equal"); else where and in which metrics the two reruns here part, which
is the commit's effect or this machine's run-to-run variation.

    python recipes/study/recheck.py --study docs/results/figure3 --commit b2b53df \\
        --code studies/figure3/code --tasks mountain_car lunar_lander --dry-run

    >>> same_values(["1.5", "nan", ""], ["1.5", "nan", ""])
    True
"""

from __future__ import annotations

import argparse
import csv
import math
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from export_runs import parse_environment, rewrite_rows  # beside this script
from paper_grid import MEASURES, TASKS
from study_timing import expected_minutes, machine, started_on, study_setup

from torchrl_vase.loop import is_clock  # the clocks: they differ between any two runs
from torchrl_vase.runs import git_commit

ROOT = Path(__file__).resolve().parents[2]
RECORD_FIELDS = ("task", "measure", "seed", "earlier_commit", "commit", "iterations",
                 "metrics_compared", "metrics_differing", "identity_equal", "result",
                 "first_difference", "earlier_here", "earlier_here_differing",
                 "logged_by_one_run", "machine", "study_machine", "environment_differs")
# every value equal, the evaluation's where both runs evaluated, but one run evaluated off the
# schedule where the other did not
EQUAL_WHERE_BOTH_LOGGED = "equal where both logged"
EVALUATION = "eval/"  # the evaluation's metrics (torchrl_vase.recipe.assembly.evaluation_metrics)


def finished_at(study: Path, commit: str, tasks: list[str], measures: list[str]
                ) -> dict[tuple[str, str], list[int]]:
    """``(task, measure) -> seeds`` whose ``runs.csv`` row says they ran at ``commit`` (a prefix
    of the hash) and whose CSV is there."""
    cells = {}
    for task in tasks:
        for measure in measures:
            rows = study / task / measure / "runs.csv"
            if not rows.exists():
                continue
            with rows.open(newline="") as handle:
                seeds = sorted({int(row["seed"]) for row in csv.DictReader(handle)
                                if row["git_commit"].startswith(commit)
                                and (rows.parent / f"seed{row['seed']}.csv").exists()})
            if seeds:
                cells[task, measure] = seeds
    return cells


def draw(cells: dict[tuple[str, str], list[int]], per_cell: int, rng_seed: int
         ) -> list[tuple[str, str, int]]:
    """``per_cell`` seeds of each cell (all of them where it has fewer), drawn by one generator
    in the cells' sorted order."""
    rng = np.random.default_rng(rng_seed)
    drawn = []
    for (task, measure), seeds in sorted(cells.items()):
        chosen = rng.choice(seeds, size=min(per_cell, len(seeds)), replace=False)
        drawn += [(task, measure, int(seed)) for seed in sorted(chosen)]
    return drawn


def _same(x: str, y: str) -> bool:
    """Two CSV cells equal: as numbers where they are (NaN equal to NaN), as text otherwise."""
    if x == y:
        return True
    try:
        fx, fy = float(x), float(y)
    except ValueError:
        return False
    return fx == fy or (math.isnan(fx) and math.isnan(fy))


def logged_by_one(x: str, y: str) -> bool:
    """A row where one run logged the metric and the other did not (an empty CSV cell)."""
    return (x == "") != (y == "")


def first_mismatch(a: list[str], b: list[str], evaluation: bool = False) -> int | None:
    """The first row where two CSV columns differ (a shorter column differs where it ends), or
    ``None`` when they are equal value for value. An ``evaluation`` column (``eval/*``) differs
    only where both runs evaluated: a row where one run alone did is an evaluation off the
    schedule (``rows_logged_by_one``), not a different value."""
    pairs = enumerate(zip(a, b, strict=False))  # the shorter one ends the walk
    index = next((i for i, (x, y) in pairs
                  if not (_same(x, y) or (evaluation and logged_by_one(x, y)))), None)
    if index is None and len(a) != len(b):
        return min(len(a), len(b))
    return index


def same_values(a: list[str], b: list[str], evaluation: bool = False) -> bool:
    """Two CSV columns equal value for value: as numbers where they are (NaN equal to NaN), as
    text otherwise (an ``evaluation`` column: wherever both runs evaluated)."""
    return first_mismatch(a, b, evaluation) is None


def rows_logged_by_one(old: dict[str, list[str]], new: dict[str, list[str]]) -> str:
    """``"iterations 48, 578: eval/a eval/b"``: the rows of two runs of one length where one run
    alone evaluated, and those metrics ("" when none; runs of different lengths already differ
    where the shorter ends). At 82a8bde and before, a run stopped by a signal evaluated at its
    stop, off the schedule (67d98e2 ended that): a run paused once has one such row."""
    if len(next(iter(old.values()), [])) != len(next(iter(new.values()), [])):
        return ""
    alone = {name: [i for i, (x, y) in enumerate(zip(old[name], new[name], strict=True))
                    if logged_by_one(x, y)]
             for name in sorted(set(old) & set(new)) if name.startswith(EVALUATION)}
    rows = sorted({i for found in alone.values() for i in found})
    if not rows:
        return ""
    names = " ".join(name for name, found in alone.items() if found)
    return f"iteration{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))}: {names}"


def _table(path: Path) -> dict[str, list[str]]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {name: [row[name] for row in rows] for name in (rows[0] if rows else {})}


def _run_row(cell: Path, seed: int) -> dict[str, str]:
    """The cell's ``runs.csv`` row of ``seed`` (its last), empty if none."""
    with (cell / "runs.csv").open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["seed"]) == seed]
    return rows[-1] if rows else {}


def _identity(cell: Path, seed: int) -> str:
    return _run_row(cell, seed).get("run_identity", "")


def study_machine(cell: Path, seed: int) -> str:
    """The machine the study's run of ``seed`` started on (its ``runs.csv`` note), "" if none
    is named: a rerun on another processor may round differently from iteration 0 on."""
    return started_on(_run_row(cell, seed).get("note", ""))


def environment_differs(cell: Path, rerun: Path, seed: int) -> str:
    """The environment tags (``torchrl_vase.provenance.ENVIRONMENT_TAGS``) the two runs of
    ``seed`` recorded with other values, or one of them alone, sorted and space-separated;
    ``"none"`` when they agree, ``""`` when either run recorded none (as in a row recorded
    before the field existed)."""
    ran, reran = (parse_environment(_run_row(where, seed).get("environment", ""))
                  for where in (cell, rerun))
    if not ran or not reran:
        return ""
    return " ".join(sorted(name for name in ran.keys() | reran.keys()
                           if ran.get(name) != reran.get(name))) or "none"


def first_difference(old: dict[str, list[str]], new: dict[str, list[str]],
                     differing: list[str]) -> str:
    """``"iteration i: a b"``, the first row where the two runs part and the metrics that part
    there ("" when no metric differs); a run longer than the other parts where the shorter ends."""
    at = {name: first_mismatch(old.get(name, []), new.get(name, []), name.startswith(EVALUATION))
          for name in differing}
    at = {name: index for name, index in at.items() if index is not None}
    if not at:
        return ""
    first = min(at.values())
    return f"iteration {first}: {' '.join(name for name in differing if at.get(name) == first)}"


def compare_run(earlier: Path, rerun: Path, seed: int) -> dict[str, object]:
    """The rerun of ``seed`` (under ``rerun/``) against the study's (under ``earlier/``): the
    record's comparison fields."""
    old, new = _table(earlier / f"seed{seed}.csv"), _table(rerun / f"seed{seed}.csv")
    names = sorted(n for n in set(old) | set(new) if not is_clock(n))
    differing = [n for n in names if n not in old or n not in new
                 or not same_values(old[n], new[n], n.startswith(EVALUATION))]
    identity_equal = _identity(earlier, seed) == _identity(rerun, seed) != ""
    alone = rows_logged_by_one(old, new)
    result = ("DIFFERENT" if differing or not identity_equal
              else EQUAL_WHERE_BOTH_LOGGED if alone else "equal")
    return {"iterations": len(next(iter(new.values()), [])),
            "metrics_compared": len(names), "metrics_differing": " ".join(differing),
            "identity_equal": identity_equal, "result": result,
            "first_difference": first_difference(old, new, differing),
            "logged_by_one_run": alone,
            "environment_differs": environment_differs(earlier, rerun, seed)}


def _with_every_field(row: dict[str, object]) -> dict[str, object]:
    """``row`` with every field of ``RECORD_FIELDS`` (a record written before a field existed
    has it empty)."""
    return {name: "" if row.get(name) is None else row[name] for name in RECORD_FIELDS}


def read_record(record: Path) -> list[dict[str, str]]:
    """The record's rows, each with every field of ``RECORD_FIELDS``."""
    if not record.exists():
        return []
    with record.open(newline="") as handle:
        return [_with_every_field(row) for row in csv.DictReader(handle)]


def change_record(record: Path, change: Callable[[list[dict]], list[dict]]) -> None:
    """The record rewritten with ``change`` of its rows, its folder locked from the read to the
    write and the file swapped in whole (``export_runs.rewrite_rows``): a stopped call leaves
    the old record, and two calls recording into one (one a cell each) keep each other's
    rows."""
    rewrite_rows(record, RECORD_FIELDS,
                 lambda rows: change([_with_every_field(row) for row in rows]))


def recorded(record: Path) -> set[tuple[str, str, int]]:
    return {(r["task"], r["measure"], int(r["seed"])) for r in read_record(record)}


def append(record: Path, row: dict[str, object]) -> None:
    change_record(record, lambda rows: [*rows, _with_every_field(row)])


def run_paper_grid(command: list[str]) -> int:
    """``command`` (a ``paper_grid.py`` call) run to its end; its exit status. A SIGTERM sent to
    this process meanwhile is passed on to it, whose jobs then checkpoint and stop (as
    ``figure3.sh stop`` stops the study's): ``pkill -TERM -f study/recheck.py`` pauses a recheck
    and leaves no job running without it."""
    child: subprocess.Popen | None = None
    pending = False

    def pass_on(signum: int, frame) -> None:
        nonlocal pending
        if child is None:
            pending = True  # between the handler and the child's start
        else:
            child.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, pass_on)
    try:
        child = subprocess.Popen(command)
        if pending:
            child.send_signal(signal.SIGTERM)
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def rerun(code: Path, scratch: Path, cell: tuple[str, str, int], overrides: list[str]) -> Path:
    """``cell`` run whole at ``code`` through ``paper_grid.py`` into ``scratch`` (skipped there
    when its CSV is already whole); the folder of its exported CSV, or ``SystemExit`` when the
    run did not finish."""
    task, measure, seed = cell
    out = scratch / "out"
    command = [sys.executable, str(Path(__file__).with_name("paper_grid.py")),
               "--code", str(code), "--scratch", str(scratch), "--out", str(out),
               "--tasks", task, "--measures", measure, "--seeds", str(seed), "--workers", "1"]
    if overrides:
        command += ["--overrides", *overrides]
    if run_paper_grid(command) != 0 or not (out / task / measure / f"seed{seed}.csv").exists():
        raise SystemExit(f"{task} {measure} seed{seed}: the rerun at {code} did not finish")
    return out / task / measure


def attribute(row: dict[str, str], study: Path, newer: Path, earlier: Path) -> dict[str, str]:
    """``row`` with ``earlier_here``: the rerun at the newer commit (under ``newer``) against the
    one at the earlier commit on this machine (under ``earlier``); and ``first_difference``
    where a row recorded before that field lacks it (the study's run, under ``study``, against
    the newer rerun)."""
    seed = int(row["seed"])
    here = compare_run(newer, earlier, seed)
    differing = here["metrics_differing"].split() + ([] if here["identity_equal"]
                                                      else ["config identity"])
    return {**row, "first_difference": row["first_difference"] or compare_run(
                study, newer, seed)["first_difference"],
            "earlier_here": (
                f"DIFFERENT from {here['first_difference'] or 'the start'}"
                if here["result"] == "DIFFERENT" else here["result"]
                + (f" ({here['logged_by_one_run']} logged by one run only)"
                   if here["logged_by_one_run"] else "")),
            "earlier_here_differing": " ".join(differing)}


def recompared(row: dict[str, str], study: Path, scratch: Path, earlier_scratch: Path
               ) -> dict[str, str]:
    """``row`` compared again from the reruns kept in the scratch folders (after the
    comparison's rules change): the study's run against the newer rerun (under
    ``scratch/out``) and, where it was attributed, the newer against the earlier rerun (under
    ``earlier_scratch/out``). A rerun no longer kept leaves its fields as they were."""
    task, measure, seed = row["task"], row["measure"], int(row["seed"])
    newer, earlier = (folder / "out" / task / measure for folder in (scratch, earlier_scratch))
    if not (newer / f"seed{seed}.csv").exists():
        return row
    row = {**row, **{name: str(value) for name, value in
                     compare_run(study / task / measure, newer, seed).items()}}
    if row["earlier_here"] and (earlier / f"seed{seed}.csv").exists():
        row = attribute(row, study / task / measure, newer, earlier)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, default=ROOT / "docs" / "results" / "figure3")
    parser.add_argument("--commit", required=True, help="the earlier commit (a prefix)")
    parser.add_argument("--code", type=Path, required=True,
                        help="the checkout of the newer commit the reruns run")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--measures", nargs="+", default=list(MEASURES), choices=list(MEASURES))
    parser.add_argument("--per-cell", type=int, default=1)
    parser.add_argument("--rng", type=int, default=0, help="the draw's generator seed")
    parser.add_argument("--scratch", type=Path, default=ROOT / "studies" / "recheck")
    parser.add_argument("--record", type=Path, default=None,
                        help="default: <study>/recheck_<commit>.csv")
    parser.add_argument("--overrides", nargs="*", default=[],
                        help="passed to paper_grid.py (settings outside a run's numbers)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="rerun only the drawn seeds expected to take at most this long (the "
                             "rest stay drawn, for a later call)")
    parser.add_argument("--earlier-code", type=Path, default=None,
                        help="a checkout of --commit: each differing seed is rerun there too, "
                             "on this machine, to tell the commit from the machine")
    parser.add_argument("--recompare", action="store_true",
                        help="compare every recorded seed again from the reruns kept under "
                             "--scratch, run nothing, and stop")
    parser.add_argument("--same-commit", action="store_true",
                        help="--code may be at --commit itself: rerun the drawn seeds at the "
                             "commit they ran at (is a run reproduced bit for bit here?)")
    parser.add_argument("--dry-run", action="store_true", help="list the draw and stop")
    args = parser.parse_args(argv)
    if args.per_cell < 1:
        parser.error("--per-cell must be at least 1.")
    commit = git_commit(args.code)
    if commit.startswith(args.commit) and not args.same_commit:
        parser.error(f"--code is at {commit[:7]}, the commit being checked: point it at the "
                     "newer one.")
    if args.earlier_code is not None and not git_commit(args.earlier_code).startswith(
            args.commit):
        parser.error(f"--earlier-code is at {git_commit(args.earlier_code)[:7]}, not at "
                     f"{args.commit}.")
    record = args.record or args.study / f"recheck_{args.commit[:7]}.csv"
    earlier_scratch = args.scratch / f"at-{args.commit[:7]}"
    if args.recompare:
        change_record(record, lambda rows: [recompared(row, args.study, args.scratch,
                                                       earlier_scratch) for row in rows])
        for row in read_record(record):
            print(f"{row['task']} {row['measure']} seed{row['seed']}: {row['result']} "
                  f"{row['logged_by_one_run']}".rstrip())
        return 0
    drawn = draw(finished_at(args.study, args.commit, args.tasks, args.measures), args.per_cell,
                 args.rng)
    setup = study_setup(args.code)
    todo, minutes, done = [], [], recorded(record)
    for cell in drawn:
        expected = expected_minutes(args.study, cell[0], cell[1], setup=setup)
        if cell not in done and (args.max_minutes is None or (
                expected is not None and expected <= args.max_minutes)):
            todo.append(cell)
            minutes.append(expected)
    print(f"{len(drawn)} drawn, {len(todo)} to rerun at {commit[:7]} (~"
          f"{sum(m for m in minutes if m is not None):.0f} min):")
    here, elsewhere = machine(), 0
    for (task, measure, seed), expected in zip(todo, minutes, strict=True):
        ran_on = study_machine(args.study / task / measure, seed)
        elsewhere += bool(ran_on) and ran_on != here
        print(f"  {task} {measure} seed{seed}"
              + ("" if expected is None else f"  (~{expected:.0f} min)")
              + (f"  [its run started on {ran_on}]" if ran_on and ran_on != here else ""))
    if elsewhere:
        print(f"{elsewhere} of them started on another machine than this {here}: another "
              "processor's kernels may round otherwise from the first iteration on")
    to_attribute = [] if args.earlier_code is None else [
        (r["task"], r["measure"], int(r["seed"])) for r in read_record(record)
        if r["result"] == "DIFFERENT" and not r["earlier_here"]]
    if to_attribute:
        print(f"{len(to_attribute)} differing seeds recorded before, to rerun at {args.commit} "
              "here: " + ", ".join(f"{t} {m} seed{s}" for t, m, s in to_attribute))
    if args.dry_run:
        return 0
    newer_runs: dict[tuple[str, str, int], Path] = {}
    for cell in todo:
        task, measure, seed = cell
        newer_runs[cell] = rerun(args.code, args.scratch, cell, args.overrides)
        result = compare_run(args.study / task / measure, newer_runs[cell], seed)
        append(record, {"task": task, "measure": measure, "seed": seed,
                        "earlier_commit": args.commit, "commit": commit[:7], **result,
                        "machine": machine(),
                        "study_machine": study_machine(args.study / task / measure, seed)})
        print(f"{task} {measure} seed{seed}: {result['result']}"
              + (f" from {result['first_difference']}" if result["first_difference"] else ""),
              flush=True)
        if result["result"] == "DIFFERENT" and args.earlier_code is not None:
            to_attribute.append(cell)
    for cell in to_attribute:
        # a seed recorded by an earlier call: its rerun kept in the scratch, or run again
        newer = newer_runs.get(cell) or rerun(args.code, args.scratch, cell, args.overrides)
        earlier = rerun(args.earlier_code, earlier_scratch, cell, args.overrides)

        def attributed(rows: list[dict], cell=cell, newer=newer, earlier=earlier) -> list[dict]:
            return [attribute(row, args.study / cell[0] / cell[1], newer, earlier)
                    if (row["task"], row["measure"], int(row["seed"])) == cell else row
                    for row in rows]

        change_record(record, attributed)
        for row in read_record(record):
            if (row["task"], row["measure"], int(row["seed"])) == cell:
                print(f"{' '.join(map(str, cell))} at {args.commit} here against "
                      f"{commit[:7]} here: {row['earlier_here']} "
                      f"{row['earlier_here_differing']}".rstrip(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
