"""Run a study and write its page: one tool for every study config under ``conf/study/``.

    python recipes/study/study.py run figure3 --dry-run          # what is done, what would run
    python recipes/study/study.py run figure3 --tasks ant --measures vase --workers 2
    python recipes/study/study.py report figure3                 # docs/results.md and figures
    python recipes/study/study.py judge figure3                  # the verdicts, one a line

``run`` launches the cells not yet in the study's dataset with Hydra's own multirun (the
joblib launcher, one thread a job; ``--launcher submitit_slurm`` on a cluster), one
``recipes/trpo_vase.py -m`` a task and measure, every job with ``resume=true`` and its
checkpoints under ``--scratch``: a study killed at any point continues where its checkpoints
left it when the same command runs again. The finished runs of each task and measure are
exported into the dataset (``dataset.upsert``: under its lock, swapped in whole) as soon as its
multirun returns, and before anything is launched, so no finished run runs twice. The jobs run
the recipe of ``--code``, a checkout at the study's commit (``git worktree add DIR COMMIT``;
default this one, which must then be at that commit): cells compared with each other run at
one commit. ``run --recheck N`` is the same launcher asked to compare: N stored runs drawn at
random run again (into the scratch store only) and each is compared with its stored metrics,
value for value. The study's config is checked before anything runs (``claims.load_study``).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import dataset
import numpy as np
from claims import ROOT, Study, judge_all, load_study
from mlflow.tracking import MlflowClient
from report import write_page, write_study_page

# the launcher's log is read by people: no download progress bars in it
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def experiment(study: Study, task: str, measure: str) -> str:
    """The MLflow experiment of one task and measure of ``study``."""
    return f"{study.name}-{task}-{measure}"


def export(study: Study, store: str, task: str, measure: str, into: Path | None = None,
           suffix: str = "", note: str | None = None) -> int:
    """Move the finished and failed runs of ``experiment(study, task, measure) + suffix`` in
    ``store`` into the dataset ``into`` (default: the study's) unless already there (a rerun of
    a seed replaces it), with the launcher's ``note`` (its load at their launch); how many."""
    into = into or study.dataset
    client = MlflowClient(tracking_uri=store)
    found = client.get_experiment_by_name(experiment(study, task, measure) + suffix)
    if found is None:
        return 0
    stored = {row["run_id"] for row in dataset.index(into)}
    rows = []
    for run in client.search_runs([found.experiment_id], max_results=10_000,
                                  filter_string="attributes.status != 'RUNNING'",
                                  order_by=["attributes.start_time ASC"]):
        if run.info.status not in ("FINISHED", "FAILED") or run.info.run_id in stored:
            continue
        tags, run_id = run.data.tags, run.info.run_id
        steps: dict[int, dict[str, float]] = {}
        for key in run.data.metrics:
            for metric in client.get_metric_history(run_id, key):
                steps.setdefault(metric.step, {})[key] = metric.value
        order = sorted(steps)
        metrics = {"frames": [float(s) for s in order]} | {
            key: [steps[s].get(key, math.nan) for s in order] for key in run.data.metrics}
        with tempfile.TemporaryDirectory() as folder:
            names = {a.path for a in client.list_artifacts(run_id)}
            config = (Path(client.download_artifacts(run_id, "config.yaml", folder)).read_text()
                      if "config.yaml" in names else None)
        start, end = run.info.start_time, run.info.end_time
        rows.append({"task": task, "measure": measure, "seed": int(tags["seed"]), "metrics":
                     metrics if run.info.status == "FINISHED" else {"frames": []},
                     "provenance": {
                         "status": run.info.status, "run_id": run_id,
                         "git_commit": tags.get("git_commit", ""),
                         "processor": tags.get("machine", ""), "start": start, "end": end,
                         "minutes": f"{(end - start) / 60_000:.1f}" if start and end else None,
                         "iteration": run.data.metrics.get("train/iteration"),
                         "error": tags.get("error"), "config": config, "note": note,
                         "environment": "; ".join(f"{k}={v}" for k, v in sorted(tags.items())
                                                  if k.startswith(("machine", "software")))}})
    dataset.upsert(into, rows)
    return len(rows)


def pending(study: Study, tasks=None, measures=None) -> dict[tuple[str, str], list[int]]:
    """``(task, measure) -> seeds`` the study's cells ask for and its dataset lacks."""
    done = {(r["task"], r["measure"], r["seed"]) for r in dataset.index(study.dataset)
            if r["status"] == "FINISHED"}
    return {(task, measure): missing for (task, measure), seeds in study.seeds.items()
            if (tasks is None or task in tasks) and (measures is None or measure in measures)
            and (missing := [s for s in seeds if (task, measure, s) not in done])}


def command(study: Study, task: str, measure: str, seeds: list[int], store: str, scratch: Path,
            workers: int, launcher: str, overrides: list[str], code: Path = ROOT,
            suffix: str = "") -> list[str]:
    """The Hydra multirun that trains ``seeds`` of one task and measure with ``code``'s recipe
    and library: run from ``code`` as a module, so that ``code`` comes first on the path (a
    script's own folder would, and the library would be the environment's install); the scratch
    paths absolute, as the job's working directory is ``code``."""
    scratch = scratch.resolve()
    return [sys.executable, "-m", "recipes.trpo_vase", "-m", f"env={task}",
            *study.measures[measure]["overrides"], *study.task_overrides.get(task, []),
            f"seed={','.join(map(str, seeds))}", "resume=true", "threads=1",
            f"checkpoint.dir={scratch / 'checkpoints'}", f"mlflow.tracking_uri={store}",
            f"mlflow.experiment={experiment(study, task, measure)}{suffix}",
            f"hydra/launcher={launcher}", f"hydra.sweep.dir={scratch / 'multirun'}",
            *([f"hydra.launcher.n_jobs={workers}"] if launcher == "joblib" else []), *overrides]


def checkout_commit(code: Path) -> str:
    """The commit ``code`` is checked out at (``-dirty`` when its tracked files changed)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(code), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    return git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain", "-uno") else "")


def check_code(study: Study, code: Path, any_commit: bool) -> None:
    """Refuse to launch from a checkout at another commit than the study's (``any_commit``:
    say so and go on)."""
    at = checkout_commit(code)
    if at != study.commit and not (study.commit == "HEAD" and not at.endswith("-dirty")):
        message = (f"{code} is at {at[:12]}, the study {study.name} runs at "
                   f"{study.commit[:12]}: its cells must run at one commit. Make a checkout "
                   f"(git worktree add ../{study.name}-code {study.commit}) and pass --code.")
        if not any_commit:
            raise SystemExit(message)
        print(f"warning: {message} (going on: --any-commit or --dry-run)")


def commit_dataset(study: Study, message: str) -> None:
    """Commit the study's dataset (and nothing else) in the repository that holds it."""
    folder = study.dataset.parent
    subprocess.run(["git", "-C", str(folder), "add", study.dataset.name], check=True)
    staged = subprocess.run(["git", "-C", str(folder), "diff", "--cached", "--quiet", "--",
                             study.dataset.name], check=False).returncode
    if staged:
        subprocess.run(["git", "-C", str(folder), "commit", "-q", "-m", message, "--",
                        study.dataset.name], check=True)


def launch(study: Study, todo: dict, scratch: Path, workers: int, launcher: str, overrides,
           code: Path, dry_run: bool, into: Path | None = None, suffix: str = "",
           commit: bool = False) -> None:
    """The seeds of each task and measure of ``todo`` as multiruns of ``workers`` jobs (a
    slurm launcher: all at once), each exported, and with ``commit`` committed, as it returns:
    a finished run waits at most for the others of its multirun, never for the whole cell."""
    store = f"sqlite:///{(scratch / 'mlflow.db').resolve()}"
    size = len(max(todo.values(), key=len, default=[])) if launcher == "submitit_slurm" else (
        max(1, workers))
    for (task, measure), seeds in todo.items():
        for start in range(0, len(seeds), size):
            chunk = seeds[start:start + size]
            line = command(study, task, measure, chunk, store, scratch, workers, launcher,
                           list(overrides), code, suffix)
            print(" ".join(line[1:]), flush=True)
            if dry_run:
                continue
            load = os.getloadavg()[0]
            returned = subprocess.run(line, cwd=code, check=False).returncode
            exported = export(study, store, task, measure, into, suffix,
                              f"load average {load:.2f} at its multirun's launch")
            print(f"{task} {measure}: {exported} runs exported", flush=True)
            if commit and exported and into is None:
                commit_dataset(study, f"{study.name}: {task} {measure} seeds "
                                      f"{', '.join(map(str, chunk))}")
            if returned:
                raise SystemExit(returned)


def run(study: Study, scratch: Path, workers: int, launcher: str, tasks=None, measures=None,
        overrides=(), dry_run: bool = False, code: Path = ROOT, any_commit: bool = False,
        commit: bool = False) -> None:
    """Launch every run of ``study`` (of ``tasks`` and ``measures``) its dataset lacks."""
    check_code(study, code, any_commit or dry_run)
    scratch.mkdir(parents=True, exist_ok=True)
    if (scratch / "mlflow.db").exists():  # what a killed launcher finished and did not export
        store = f"sqlite:///{(scratch / 'mlflow.db').resolve()}"
        names = {e.name for e in MlflowClient(tracking_uri=store).search_experiments()}
        for task, measure in study.seeds:
            if experiment(study, task, measure) in names:
                export(study, store, task, measure)
    todo = pending(study, tasks, measures)
    print(f"{study.name}: {sum(map(len, todo.values()))} runs to go in {len(todo)} cells")
    launch(study, todo, scratch, workers, launcher, overrides, code, dry_run, commit=commit)


def same_metrics(stored: dataset.Run, rerun: dataset.Run) -> list[str]:
    """The metrics both runs logged whose values differ anywhere (NaN equal to NaN), the
    clocks' (``time/*``, frames/s, wall time) aside."""
    names = sorted(name for name in set(stored.metrics) & set(rerun.metrics)
                   if not name.startswith(("time/", "train/fps", "train/wall_time")))
    return [name for name in names
            if stored.metrics[name].shape != rerun.metrics[name].shape
            or not np.array_equal(stored.metrics[name], rerun.metrics[name], equal_nan=True)]


def recheck(study: Study, count: int, scratch: Path, workers: int, launcher: str, code: Path,
            seed: int = 0, tasks=None, measures=None, overrides=(), dry_run: bool = False,
            any_commit: bool = False) -> dict[tuple, list[str]]:
    """Run ``count`` stored runs drawn at random again and compare each with what is stored:
    ``(task, measure, seed) -> the metrics that differ`` (empty: equal value for value)."""
    check_code(study, code, any_commit or dry_run)
    stored = [r for r in dataset.read(study.dataset) if (tasks is None or r.task in tasks)
              and (measures is None or r.measure in measures)]
    drawn = [stored[i] for i in sorted(np.random.default_rng(seed).choice(
        len(stored), size=min(count, len(stored)), replace=False))]
    todo: dict[tuple[str, str], list[int]] = {}
    for r in drawn:
        todo.setdefault((r.task, r.measure), []).append(r.seed)
    into = scratch / "recheck.parquet"
    scratch.mkdir(parents=True, exist_ok=True)
    launch(study, todo, scratch, workers, launcher, overrides, code, dry_run, into, "-recheck")
    reruns = {(r.task, r.measure, r.seed): r for r in dataset.read(into)}
    found = {}
    for r in drawn:
        key = (r.task, r.measure, r.seed)
        if key in reruns:
            found[key] = same_metrics(r, reruns[key])
            print(f"{' '.join(map(str, key))}: "
                  + ("equal" if not found[key] else "DIFFERENT: " + " ".join(found[key])))
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("run", "report", "judge"))
    parser.add_argument("study", help="a config under conf/study/ (figure3, sac) or its path")
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--measures", nargs="*")
    parser.add_argument("--workers", type=int, default=max(1, len(os.sched_getaffinity(0))))
    parser.add_argument("--launcher", default="joblib", help="hydra/launcher: joblib, "
                        "submitit_local, submitit_slurm")
    parser.add_argument("--scratch", type=Path, help="checkpoints, MLflow (studies/<study>)")
    parser.add_argument("--overrides", nargs="*", default=[], help="added to every job")
    parser.add_argument("--code", type=Path, default=ROOT, help="a checkout at the study's commit")
    parser.add_argument("--any-commit", action="store_true",
                        help="launch from a checkout at another commit (says so)")
    parser.add_argument("--recheck", type=int, default=0, metavar="N",
                        help="with run: rerun N stored runs drawn at random and compare")
    parser.add_argument("--commit", action="store_true",
                        help="with run: commit the dataset as each multirun's runs come in")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--seed", type=int, default=0,
                        help="judge: the bootstraps' seed (the page's verdicts are seed 0's)")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "results.md")
    args = parser.parse_args(argv)
    study = load_study(args.study)
    for name, chosen, known in (("task", args.tasks, study.tasks),
                                ("measure", args.measures, study.measures)):
        for value in chosen or []:
            if value not in known:
                parser.error(f"unknown {name} {value!r}; the choices: {', '.join(known)}.")
    scratch = args.scratch or ROOT / "studies" / study.name
    if args.action == "run" and args.recheck:
        recheck(study, args.recheck, scratch, args.workers, args.launcher, args.code.resolve(),
                tasks=args.tasks, measures=args.measures, overrides=args.overrides,
                dry_run=args.dry_run, any_commit=args.any_commit)
    elif args.action == "run":
        run(study, scratch, args.workers, args.launcher, args.tasks, args.measures,
            args.overrides, args.dry_run, args.code.resolve(), args.any_commit, args.commit)
    elif args.action == "judge":
        for verdict in judge_all(study, seed=args.seed):
            step = verdict.step
            decided = ("" if step is None else f"; p {step.p:.4g} ± {step.error:.2g} against "
                       f"{step.threshold:.3g}, {verdict.resamples:,} resamples"
                       + (", BORDERLINE" if verdict.borderline else ""))
            print(f"{verdict.record.id}: {verdict.verdict} (last 10 %: {verdict.sensitivity})"
                  + decided)
    elif not study.claims and (study.choices or not study.questions):
        write_study_page(study, page := ROOT / "docs" / "results" / f"{study.name}.md",
                         page.with_suffix(""))
        print(f"wrote {page}")
    else:
        studies = [load_study(p) for p in sorted((ROOT / "conf" / "study").glob("*.yaml"))]
        if not study.claims:  # its questions are answered on the page of the study with claims
            study = next(s for s in studies if s.claims)
        others = tuple(s for s in studies if s.name != study.name)
        write_page(study, args.page, ROOT / "docs" / "results" / study.name, others,
                   ROOT / "README.md" if args.page == ROOT / "docs" / "results.md" else None)
        print(f"wrote {args.page}")


if __name__ == "__main__":
    main()
