"""Jobs that set up one MLflow store or experiment at once, for the tests of concurrent set-up.

The jobs are not forked from this test process: it imports MLflow, whose pyarrow starts
jemalloc's background thread, and a fork taken while that thread holds an allocator lock leaves
the child hanging in its first allocation (seen under load: two of four children never started).
They are forked from a fork server that has imported torch, tensordict and torchrl and nothing
else (no MLflow, no pyarrow), as a DataLoader's workers are forked from a process that imported
torch: each job then pays only MLflow's and the library's imports, not torch's (the SQLite races
took 45 s instead of 78 s so, side by side on a loaded two-core machine). Each job is one process
for the whole test, meeting the others at a barrier before every round, so the rounds really run
at once (a pool may hand two rounds' tasks to one worker). The SQLite tests share one set of jobs
(``sqlite_races``), whose rounds are those of both.
"""

import multiprocessing
import os
import traceback
from collections.abc import Callable, Sequence

from mlflow.tracking import MlflowClient

from torchrl_vase.runs import TrainingRun
from torchrl_vase.tracking import MLflowTracker, get_or_create_experiment

TAGS = {"mlflow.experimentKind": "custom_model_development", "mlflow.note.content": "a note"}
PRELOADED = ["torch", "tensordict", "torchrl"]  # never mlflow: see above
TIMEOUT = 300  # seconds a job waits for the others at a barrier before the test fails


def _job(work: Callable, rounds: Sequence[tuple], barrier, results, index: int) -> None:
    try:
        out = []
        for args in rounds:
            barrier.wait()  # every job starts the round at the same moment
            out.append(work(*args))
        results[index] = ("ok", out)
    except BaseException:
        results[index] = ("error", traceback.format_exc())
        barrier.abort()  # the others stop waiting


def run_together(work: Callable, rounds_per_job: Sequence[Sequence[tuple]]) -> list[list]:
    """``work(*args)`` for each job's rounds, the jobs' rounds at once; ``[job][round]`` results
    (a job's error fails the test with its traceback)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    with context.Manager() as manager:
        barrier = manager.Barrier(len(rounds_per_job), timeout=TIMEOUT)
        results = manager.dict()
        jobs = [context.Process(target=_job, args=(work, rounds, barrier, results, index))
                for index, rounds in enumerate(rounds_per_job)]
        for job in jobs:
            job.start()
        for job in jobs:
            job.join(TIMEOUT * (1 + len(rounds_per_job[0])))
        outcome = [results.get(index) for index in range(len(jobs))]
        for job in jobs:
            if job.is_alive():
                job.kill()
    errors = [f"job {index} did not finish" if result is None else result[1]
              for index, result in enumerate(outcome) if result is None or result[0] == "error"]
    if errors:
        raise AssertionError("a concurrent job failed:\n" + "\n".join(map(str, errors)))
    return [o[1] for o in outcome]


def _set_up(uri: str, name: str) -> str:
    client = MlflowClient(tracking_uri=uri)
    experiment = get_or_create_experiment(client, name, tags=TAGS)
    tracker = MLflowTracker.create(uri, experiment, run_name=f"pid{os.getpid()}")
    tracker.log([(1, {"x": 1.0})])
    tracker.end("FINISHED")
    return experiment.experiment_id


def concurrent_set_up(uri: str, names: Sequence[str], jobs: int = 4) -> list[list[str]]:
    """``jobs`` processes set up each fresh experiment of ``names`` at once, one after
    another; per name, the experiment ids the jobs got."""
    per_job = run_together(_set_up, [[(uri, name) for name in names]] * jobs)
    return [list(ids) for ids in zip(*per_job, strict=True)]


def _resume_runs(uri: str, checkpoints: str, seed: int) -> list[str]:
    """Two runs (seeds ``seed`` and ``seed + 1``) started with ``resume=true``: no checkpoint
    yet, so each looks up its config's latest run before any run (or table) exists."""
    run_ids = []
    for s in (seed, seed + 1):
        with TrainingRun(uri, "resumed", config={"seed": s}, run_name=f"seed{s}",
                         checkpoint_dir=checkpoints, resume=True) as run:
            run_ids.append(run.run_id)
    return run_ids


def _round(work: Callable, *args):
    return work(*args)


def sqlite_races(set_up_uri: str, names: Sequence[str], resumed_uri: str, checkpoints: str,
                 jobs: int = 4) -> tuple[list[list[str]], list[list[str]]]:
    """The two SQLite races in one set of ``jobs`` processes: first each fresh experiment of
    ``names`` set up at once on ``set_up_uri`` (as ``concurrent_set_up``), then two runs
    started by each job with ``resume=true`` at once on the fresh store ``resumed_uri`` (no
    checkpoint yet: they look up their config's latest run before any run or table exists).
    Per name, the experiment ids the jobs got; per job, its runs' ids."""
    per_job = run_together(_round, [
        [(_set_up, set_up_uri, name) for name in names]
        + [(_resume_runs, resumed_uri, checkpoints, 10 * job)]
        for job in range(jobs)])
    set_ups = [list(ids) for ids in zip(*(rounds[:-1] for rounds in per_job), strict=True)]
    return set_ups, [rounds[-1] for rounds in per_job]
