"""The paper's Figure 3 study as its authors ran it (issue 38): tasks × measures × seeds, resumable.

Every cell is one seed of one measure on one task, trained by ``recipes/trpo_vase.py`` at the
recipe's defaults (the authors' code: docs/concepts.md) for the task's full iteration count. A
cell whose CSV ``<out>/<task>/<measure>/seed<k>.csv`` already holds the whole run is skipped;
the other cells run as jobs (one seed a process, one thread each, ``--workers`` at a time) with
``resume=true`` and checkpoints in the scratch folder, so a job killed at any point (a signal,
the machine going down) continues where its last checkpoint left it when the same command runs
again. Each finished job is exported at once (``recipes/study/export_runs.py``: the CSVs and
``runs.csv``, the provenance) and, with ``--commit``, committed to the repository that holds
``--out``; then its checkpoint (its replay pool: GiB on a locomotion task)
is removed unless ``--keep-checkpoints``. Jobs run together only as far as the machine's memory
and the scratch folder's disk hold them at their end. The MLflow store is scratch.

Jobs run in the issue's order: seeds 0–9 before 10–19; within them VASE and the authors' TRPO
first (HalfCheetah, CartpoleSwingup and Ant, where the paper says VASE wins, before the other
tasks), then the point robot's steps to the first reward, then NLL, VIME and the control, then
VASE at the paper's text settings. ``--seed-block 1`` runs seed-major instead (a seed of every cell
before the next seed), as the SAC study does.

    python recipes/study/paper_grid.py --dry-run                     # what is done, what would run
    python recipes/study/paper_grid.py --tasks half_cheetah --measures vase trpo_authors \\
        --seeds 0-9 --workers 2 --commit
    python recipes/study/paper_grid.py --tasks double_pendulum lunar_lander --workers 14 \\
        --scratch /tmp/grid --out /tmp/grid/csv                # a bigger machine's slice

Measures: ``vase``, ``nll``, ``vime`` (the same model and settings, only the measure differs),
``none`` (the control: the bonuses' own TRPO without a bonus), ``trpo_authors``
(``preset=authors_trpo``, plain TRPO as the authors ran it: the paper's "TRPO" curve),
``vase_paper`` (``preset=paper``, the paper's text settings) and ``rnd``. On ``point_robot`` each
run stops at its first extrinsic reward (``stop_at_first_reward=true``) within 500 iterations
(2.5 M steps, beyond the paper's 2,059,459 for plain TRPO). ``--overrides`` adds Hydra overrides
to every job (``preset=former_defaults`` reruns the earlier study's settings).
``--algorithm sac`` runs the cells under SAC (``algorithm=sac``: its frame budget
``sac.frames`` of ``conf/trpo_vase.yaml``, experiments ``sac-<task>``; ``recipes/study/sac.sh``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from export_runs import export, export_failures  # the study's exporter, beside this script
from omegaconf import OmegaConf
from study_timing import expected_minutes, machine, study_setup  # beside this script

from torchrl_vase.recipe import config as schema
from torchrl_vase.runs import git_commit

ROOT = Path(__file__).resolve().parents[2]


def say(message: str) -> None:
    """A line of the launcher's log, timestamped, in one write: the workers' threads print
    side by side, and ``print`` writes the text and its newline in two."""
    sys.stdout.write(f"{time.strftime('%H:%M:%S')} {message}\n")
    sys.stdout.flush()

TASKS = ("half_cheetah", "cartpole_swingup", "ant", "mountain_car", "double_pendulum",
         "lunar_lander", "point_robot")
PRIMARY = ("none", "vase", "nll", "vime", "rnd")
#: measure -> the recipe's overrides; every measure runs at the recipe's defaults otherwise
MEASURES = {
    "none": ("surprise=none",),
    "vase": ("surprise=vase",),
    "nll": ("surprise=nll",),
    "vime": ("surprise=vime",),
    "rnd": ("surprise=rnd",),
    "trpo_authors": ("preset=authors_trpo",),
    "vase_paper": ("preset=paper", "surprise=vase"),
    # Ant's first-iteration scale (issue 77): is "VASE hurts Ant" the method or its scale?
    "vase_linear_init": ("surprise=vase", "surprise.init_mean=uniform"),
    "vase_eta_tenth": ("surprise=vase", "surprise.eta=1e-5"),
    # both, asked after the two answered "undecided" (ant_scale.FOLLOW_UP_RULE)
    "vase_linear_eta_tenth": ("surprise=vase", "surprise.init_mean=uniform", "surprise.eta=1e-5"),
    # the placebos of SAC + VASE on MountainCar and of VASE on the point robot (issue 77):
    # the model trained, no bonus; the bonus shuffled
    "vase_eta0": ("surprise=vase", "surprise.eta=0"),
    "vase_shuffled": ("surprise=vase", "shuffle_bonus=true"),
}
#: the issue's order within a block of seeds: (measures, tasks) in turn
ORDER = (
    (("vase", "trpo_authors"), TASKS[:6]),
    (("vase", "none"), ("point_robot",)),
    (("nll", "vime", "none"), TASKS[:6]),
    (("vase_paper",), ("half_cheetah", "cartpole_swingup", "ant")),
    (("nll", "vime"), ("point_robot",)),
    (("rnd",), TASKS[:6]),  # only when asked for (--measures)
    (("vase_linear_init", "vase_eta_tenth", "vase_linear_eta_tenth"), ("ant",)),  # when asked
    (("vase_eta0", "vase_shuffled"), ("mountain_car",)),  # SAC's placebos, when asked for
    (("vase_shuffled",), ("point_robot",)),  # the point robot's placebo, when asked for
)
#: measures run on fewer seeds than the 20 of the paper (the issues' counts): seeds 0 to n - 1
SEED_COUNT = {"vase_paper": 10, "vase_linear_init": 10, "vase_eta_tenth": 10,
              "vase_linear_eta_tenth": 10}
#: a task's own overrides: the point robot's runs stop at the first reward, within 2.5 M steps
TASK_OVERRIDES = {"point_robot": ("stop_at_first_reward=true", "iterations=500")}
#: the measures of the study (issue 38)
STUDY = ("vase", "trpo_authors", "nll", "vime", "none", "vase_paper")


@dataclass(frozen=True)
class Job:
    """One process: ``seeds`` of ``measure`` on ``task``."""

    task: str
    measure: str
    seeds: tuple[int, ...]
    algorithm: str = "trpo"

    @property
    def experiment(self) -> str:
        # the five measures share their task's experiment (compare.py reads it whole); a
        # secondary has its own, so its runs are not grouped with the measure it varies
        suffix = "" if self.measure in PRIMARY else f"-{self.measure}"
        study = "figure3" if self.algorithm == "trpo" else self.algorithm
        return f"{study}-{self.task}{suffix}"

    @property
    def study(self) -> str:
        """How the study's commits name it: "figure 3", or "sac study"."""
        return "figure 3" if self.algorithm == "trpo" else f"{self.algorithm} study"

    @property
    def name(self) -> str:
        first, last = self.seeds[0], self.seeds[-1]
        if self.seeds != tuple(range(first, last + 1)):  # not a range: every seed
            return f"{self.task} {self.measure} seeds{','.join(map(str, self.seeds))}"
        return f"{self.task} {self.measure} seed{first}" + (f"-{last}" if last != first else "")

    def command(self, store: str, checkpoints: Path, python: str,
                iterations: int | None = None, overrides: tuple[str, ...] = (),
                code: Path = ROOT) -> list[str]:
        task = [o for o in TASK_OVERRIDES.get(self.task, ())
                if not (iterations and o.startswith("iterations="))]
        # run as a module from ``code`` (the launcher's working directory for its jobs): Python
        # then puts that checkout first on the path, so the jobs import its library, not this one
        algorithm = [] if self.algorithm == "trpo" else [f"algorithm={self.algorithm}"]
        return [python, "-m", "recipes.trpo_vase", f"env={self.task}", *algorithm,
                *MEASURES[self.measure], f"seed={self.seeds[0]}", *task, "threads=1",
                "progress_bar=false",
                f"mlflow.tracking_uri={store}", f"mlflow.experiment={self.experiment}",
                f"checkpoint.dir={checkpoints}", "resume=true",
                *([f"iterations={iterations}"] if iterations else []), *overrides]


def task_frames(task: str, iterations: int | None = None, algorithm: str = "trpo") -> int:
    """The frames of a whole run of ``task`` (the study's iterations unless ``iterations``);
    under SAC its ``sac.frames`` in whole batches."""
    if algorithm == "sac":
        sac = OmegaConf.load(ROOT / "conf" / "trpo_vase.yaml").sac
        batches = iterations or -(-int(sac.frames) // int(sac.frames_per_batch))
        return batches * int(sac.frames_per_batch)
    env = OmegaConf.load(ROOT / "conf" / "env" / f"{task}.yaml")
    study = [int(o.split("=")[1]) for o in TASK_OVERRIDES.get(task, ())
             if o.startswith("iterations=")]
    return int(iterations or (study[0] if study else env.iterations)) * int(env.frames_per_batch)


def finished(path: Path, frames: int) -> bool:
    """``path`` is a whole run's export: its last row is at ``frames`` (rllab's whole paths
    make a batch at least the budget), or it stopped at its first reward (the point robot)."""
    if not path.exists():
        return False
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        return False
    stopped = path.parent.parent.name in TASK_OVERRIDES and rows[-1].get(
        "train/first_reward_step", "") != ""
    return stopped or float(rows[-1]["frames"]) >= frames


def seed_list(text: str) -> list[int]:
    """``"0-4"``, ``"0,2,5-9"`` -> the seeds."""
    seeds = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds.extend(range(int(first), int(last or first) + 1))
    return seeds


def plan(tasks: list[str], measures: list[str], seeds: list[int], out: Path,
         iterations: int | None = None, algorithm: str = "trpo", seed_block: int = 10,
         given_order: bool = False,
         ) -> tuple[list[Job], list[tuple[str, str, int]]]:
    """The jobs still to run, in the issue's order, and the cells already done: every cell's
    seeds of one block of ``seed_block`` (seeds 0-9 before 10-19 by default; 1 gives a seed of
    every cell before the next seed) before the next block's. ``given_order`` takes the cells
    in the order of ``tasks``, then ``measures``, as given (the short tasks first, say), each
    cell still one that ``ORDER`` names. A measure of ``SEED_COUNT`` runs its first seeds only."""
    done, jobs = [], []
    blocks = [seeds[i:i + seed_block] for i in range(0, len(seeds), seed_block)]
    cells = list(dict.fromkeys(  # each cell once, where the order first names it
        (task, measure) for tier_measures, tier_tasks in ORDER for task in tier_tasks
        for measure in tier_measures if task in tasks and measure in measures))
    if given_order:
        cells = [(task, measure) for task in tasks for measure in measures
                 if (task, measure) in cells]
    for block in blocks:
        for task, measure in cells:
            frames = task_frames(task, iterations, algorithm)
            todo = []
            for seed in (s for s in block if s < SEED_COUNT.get(measure, math.inf)):
                if finished(out / task / measure / f"seed{seed}.csv", frames):
                    done.append((task, measure, seed))
                else:
                    todo.append(seed)
            jobs.extend(Job(task, measure, (seed,), algorithm) for seed in todo)
    return jobs, done


def without_failed(jobs: list[Job], out: Path, commit: str
                   ) -> tuple[list[Job], list[tuple[Job, str]]]:
    """The jobs less the seeds whose run failed before at ``commit`` (a row of their cell's
    ``failures.csv``): the same code fails the same way, so starting it again only spends the
    time it took; and those seeds, each as a one-seed job with its recorded error."""
    kept, skipped = [], []
    for job in jobs:
        path = out / job.task / job.measure / "failures.csv"
        errors = {}
        if path.exists():
            with path.open(newline="") as handle:
                errors = {int(row["seed"]): row["error"] for row in csv.DictReader(handle)
                          if row["git_commit"] == commit}
        seeds = tuple(seed for seed in job.seeds if seed not in errors)
        skipped += [(Job(job.task, job.measure, (seed,), job.algorithm), errors[seed])
                    for seed in job.seeds if seed in errors]
        if seeds:
            kept.append(job if seeds == job.seeds else
                        Job(job.task, job.measure, seeds, job.algorithm))
    return kept, skipped


def export_job(store: str, job: Job, out: Path, note: str = "") -> list[Path]:
    """The job's finished runs in ``store`` as CSVs under ``out/<task>/<measure>/``."""
    return export(store, job.experiment, out / job.task, measure=job.measure, seeds=job.seeds,
                  surprise=job.measure if job.measure in PRIMARY else None, note=note)


def record_failure(store: str, job: Job, out: Path, log: Path, note: str = "") -> list[Path]:
    """The job's FAILED runs in ``out/<task>/<measure>/failures.csv``, each with the error its
    log ends on (where the run's own ``error`` tag has none)."""
    return export_failures(store, job.experiment, out / job.task, measure=job.measure,
                           seeds=job.seeds,
                           surprise=job.measure if job.measure in PRIMARY else None,
                           error=last_error(log), note=note)


def last_error(log: Path) -> str:
    """The last ``SomeError: message`` line of a job's log ("" when there is none)."""
    if not log.exists():
        return ""
    lines = log.read_text(errors="replace").splitlines()
    return next((line.strip() for line in reversed(lines)
                 if re.match(r"^\w+(Error|Exception|Interrupt): ", line)), "")


def recover(store: str, jobs: list[Job], out: Path) -> list[Path]:
    """Export the runs a store finished that were never exported (a launcher stopped between a
    job's end and its export), so they are not trained again; the files written."""
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        return []
    written = []
    for job in jobs:
        try:
            written += export_job(store, job, out, note="exported on a later launch")
        except SystemExit:  # no experiment yet
            continue
    return written


#: a run's checkpoint besides its pool (networks, optimisers, the model's state): ~5 MB
#: measured on Ant's, rounded up
CHECKPOINT_OVERHEAD = 16 * 2**20


def run_estimates(task: str, measure: str) -> tuple[int, tuple[int, int]]:
    """One run's memory at its end (its replay pool and the rest) and its checkpoint's bytes on
    disk then: its pool's (appended beside ``last.pt`` as it is held) and the rest's."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(ROOT / "conf"), version_base=None):
        cfg = compose("trpo_vase", overrides=[f"env={task}", *MEASURES[measure]])
    pool = schema.pool_bytes(schema.typed_config(cfg))
    return pool + schema.RUN_OVERHEAD, (pool, CHECKPOINT_OVERHEAD)


def directory_bytes(directory: Path | None) -> int:
    """The bytes of the files in ``directory`` and below it (0 when there is none)."""
    if directory is None or not directory.is_dir():
        return 0
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def frames_done(store: str, jobs: list[Job]) -> dict[Job, int]:
    """The frames each single-seed job's unfinished run in ``store`` has checkpointed (its last
    logged ``train/frames``: the loop logs at each checkpoint), where it has one: what a resumed
    job need not train again."""
    from mlflow.tracking import MlflowClient

    done: dict[Job, int] = {}
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        return done  # no store yet, nothing begun (and none created here)
    client = MlflowClient(tracking_uri=store)
    for experiment in {job.experiment for job in jobs}:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            continue
        # per seed, the newest unfinished run of each surprise tag: its checkpointed frames
        latest: dict[str, dict[str, int]] = {}
        for run in client.search_runs([found.experiment_id], max_results=10_000,
                                      filter_string="attributes.status != 'FINISHED'",
                                      order_by=["attributes.start_time ASC"]):
            tags = run.data.tags
            latest.setdefault(tags.get("seed", ""), {})[tags.get("surprise", "")] = int(
                run.data.metrics.get("train/frames", 0))
        for job in jobs:
            runs = latest.get(str(job.seeds[0]), {})
            if job.experiment != experiment or len(job.seeds) != 1 or not runs:
                continue
            # a secondary measure has its experiment to itself: whatever its surprise tag
            frames = runs.get(job.measure) if job.measure in PRIMARY else max(runs.values())
            if frames is not None:
                done[job] = frames
    return done


def deadline(text: str, now: float | None = None) -> float:
    """``--until``: an ISO date and time, or a clock time ``HH:MM`` (its next occurrence, local
    time) -> the epoch seconds."""
    from datetime import datetime, timedelta
    from datetime import time as clock_time

    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text).timestamp()
    try:
        clock = clock_time.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: HH:MM (e.g. 05:20) or YYYY-MM-DDTHH:MM") from None
    now_dt = datetime.fromtimestamp(time.time() if now is None else now)
    when = datetime.combine(now_dt.date(), clock)
    return (when if when > now_dt else when + timedelta(days=1)).timestamp()


class Launcher:
    """Runs jobs ``workers`` at a time, and only as many as the machine's memory and disk hold at
    the end of their runs (an Ant run's pool is ~3 GiB in memory and in its checkpoint); a free
    worker takes the first job, in the
    plan's order, that fits beside the running ones, so a job waiting for memory or disk does not
    keep smaller ones behind it waiting (a job bigger than the whole memory budget runs alone,
    and the recipe judges it; one whose checkpoint the disk cannot hold even alone is refused
    before it trains); exports (and commits) each finished job at once; a SIGTERM or SIGINT is
    passed to the running jobs (each checkpoints and stops) and no new job starts.

    The disk is judged as it is when a job would start: free space now, less what the running
    jobs' checkpoints will still take (each is saved whole beside the last one before that is
    replaced, so a job's checkpoint can take twice its final size; what it already holds on disk
    is counted as used). A job held back by the disk alone is looked at again every
    ``disk_poll`` seconds (other programs free space too).

    With ``--until``, a job starts only if it is expected to end by then (``expected_minutes``,
    for a resumed run what it has left, ``frames_done``):
    before a session or a machine's loan ends, the time left goes to shorter cells further down
    the plan instead of to a long one that would be cut off and start again from nothing on a
    machine that keeps no scratch. A job never expected to fit is left for the next launch;
    the launcher ends once nothing left can start."""

    #: bytes kept free on the checkpoints' disk beside the jobs' checkpoints (logs, the store)
    DISK_MARGIN = 2 * 2**30

    def __init__(self, args: argparse.Namespace, store: str) -> None:
        self.args = args
        self.store = store
        self.room = threading.Condition()  # guards the running jobs and what they hold
        self.memory_free = 0.8 * schema.available_memory()
        self.memory_held = 0  # by the running jobs
        self.needs: dict[tuple[str, str], int] = {}
        self.disk_needs: dict[tuple[str, str], tuple[int, int]] = {}  # pool, rest
        self.checkpoints = args.scratch / "checkpoints"
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        self.disk_poll = 30.0
        self.active: list[Job] = []  # the running jobs
        self.logs = args.scratch / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.stopping = threading.Event()
        self.running: set[subprocess.Popen] = set()
        self.lock = threading.Lock()
        self.results: list[tuple[Job, str]] = []
        self.timings: dict[tuple, float | None] = {}  # --until: a job's minutes
        self.frames_done: dict[Job, int] = {}  # --until: what a resumed job has trained

    def stop(self, signum: int, _frame) -> None:
        self.stopping.set()
        with self.room:  # the jobs waiting for memory or disk give up
            self.room.notify_all()
        with self.lock:
            for process in self.running:
                process.send_signal(signal.SIGTERM)
        print(f"{signal.Signals(signum).name}: the running jobs checkpoint and stop; "
              "run the same command again to continue.", flush=True)

    def note(self) -> str:
        load = " ".join(f"{value:.1f}" for value in os.getloadavg())
        return f"{machine()}, load average {load}"

    def estimate(self, jobs: list[Job]) -> None:
        """Each job's memory, disk and checkpoint directory (in the main thread: Hydra's compose
        is not thread-safe)."""
        for job in jobs:
            if (job.task, job.measure) not in self.needs:
                self.needs[job.task, job.measure], self.disk_needs[job.task, job.measure] = (
                    run_estimates(job.task, job.measure))
        if getattr(self.args, "until", None) is not None:
            self.frames_done = frames_done(self.store, jobs)

    def command(self, job: Job) -> list[str]:
        return job.command(self.store, self.checkpoints, self.args.python, self.args.iterations,
                           tuple(getattr(self.args, "overrides", ())), self.code)

    @property
    def code(self) -> Path:
        """The checkout whose recipe and library the jobs run (``--code``): a study pinned to
        one commit runs from a checkout of it while this one moves on."""
        return Path(getattr(self.args, "code", None) or ROOT).resolve()

    def need(self, job: Job) -> int:
        return len(job.seeds) * self.needs.get((job.task, job.measure), 0)

    def disk_to_come(self, job: Job) -> int:
        """What ``job``'s checkpoints may add to the disk by their end: their pools once
        (appended beside ``last.pt``; twice where the code writes them whole into it) and the
        rest twice (a new ``last.pt`` is written whole before the last one goes); a resumed
        run's directory (the recipe's to name) counts as empty."""
        pool, rest = self.disk_needs.get((job.task, job.measure), (0, 0))
        return len(job.seeds) * ((1 if self.pool_appended else 2) * pool + 2 * rest)

    @functools.cached_property
    def pool_appended(self) -> bool:
        """Whether the jobs' code appends the pool beside the checkpoint (``journal_pool``);
        a study pinned to an older commit writes it whole into every checkpoint."""
        exploration = self.code / "torchrl_vase" / "exploration.py"
        return exploration.exists() and "def journal_pool(" in exploration.read_text()

    def free_disk(self) -> int:
        return shutil.disk_usage(self.checkpoints).free

    def _fits_disk(self, job: Job) -> bool:
        room = self.free_disk() - self.DISK_MARGIN
        return sum(map(self.disk_to_come, self.active)) + self.disk_to_come(job) <= room

    def take(self, pending: list[Job]) -> Job | None:
        """Remove and return the first job of ``pending`` that fits in memory and on disk beside
        the running ones (in memory any job, when none runs: one bigger than the budget runs
        alone, and the recipe judges it); refuse a job whose checkpoint the disk cannot hold
        even alone; wait while none fits; ``None`` when none is left or the launcher stops."""
        with self.room:
            while pending and not self.stopping.is_set():
                disk_bound = False
                for job in list(pending):
                    if not self._ends_in_time(job):
                        pending.remove(job)
                        self._leave_for_later(job)
                        continue
                    need = self.need(job)
                    if not (self.memory_held == 0 or self.memory_held + need <= self.memory_free):
                        continue
                    if self._fits_disk(job):
                        pending.remove(job)
                        self.memory_held += need
                        self.active.append(job)
                        return job
                    if not self.active:
                        pending.remove(job)
                        self._refuse_for_disk(job)
                        continue
                    disk_bound = True
                if pending:  # every job left may have been left for later or refused
                    self.room.wait(self.disk_poll if disk_bound else None)
            return None

    def expected(self, job: Job) -> float | None:
        """``expected_minutes`` of ``job`` (what its run has left, if it resumes one), the
        exports read again only once a job has ended."""
        total = task_frames(job.task, getattr(self.args, "iterations", None), job.algorithm)
        left = 1.0 - min(self.frames_done.get(job, 0), total) / total
        key = (job.task, job.measure, len(job.seeds), left)
        if key not in self.timings:
            self.timings[key] = expected_minutes(self.args.out, *key, setup=self.setup,
                                                 frames=total)
        return self.timings[key]

    @functools.cached_property
    def setup(self) -> tuple[str, str]:
        """The commit the jobs run and this machine: what their runs' times are read by first."""
        return study_setup(self.code)

    def _ends_in_time(self, job: Job) -> bool:
        until = getattr(self.args, "until", None)
        if until is None:
            return True
        minutes = self.expected(job)
        return minutes is not None and time.time() + 60 * minutes <= until

    def _leave_for_later(self, job: Job) -> None:
        minutes = self.expected(job)
        expected = ("no run of the study has finished yet" if minutes is None
                    else f"expected to take {minutes:.0f} min")
        until = time.strftime("%H:%M", time.localtime(self.args.until))
        state = f"left for the next launch ({expected}, --until {until})"
        say(f"{state}: {job.name}")
        self.results.append((job, state))

    def _refuse_for_disk(self, job: Job) -> None:
        need = self.disk_to_come(job) + self.DISK_MARGIN
        state = (f"failed (its checkpoint needs about {need / 2**30:.1f} GiB free on "
                 f"{self.checkpoints}'s disk, {self.free_disk() / 2**30:.1f} GiB are: free "
                 "space there)")
        say(f"{state}: {job.name}")
        self.results.append((job, state))

    def serve(self, pending: list[Job]) -> None:
        """One worker: jobs from ``pending`` until none is left."""
        while (job := self.take(pending)) is not None:
            try:
                self._run(job)
            finally:
                with self.room:
                    self.memory_held -= self.need(job)
                    self.active.remove(job)
                    self.room.notify_all()

    def run(self, jobs: list[Job]) -> None:
        """Every job of ``jobs``, ``--workers`` at a time."""
        pending = list(jobs)
        workers = [threading.Thread(target=self.serve, args=(pending,), daemon=True)
                   for _ in range(min(self.args.workers, len(jobs)))]
        for worker in workers:
            worker.start()
        for worker in workers:
            while worker.is_alive():  # join with a timeout: the main thread still takes signals
                worker.join(0.5)

    def log_path(self, job: Job) -> Path:
        return self.logs / f"{job.name.replace(' ', '-')}.log"

    def _run(self, job: Job) -> None:
        if self.stopping.is_set():
            return
        started, note = time.time(), self.note()
        say(f"start {job.name} ({note})")
        with self.log_path(job).open("a") as handle, self.lock:
            process = subprocess.Popen(self.command(job), stdout=handle,
                                       stderr=subprocess.STDOUT, cwd=self.code,
                                       start_new_session=True)
            self.running.add(process)
        code = process.wait()
        with self.lock:
            self.running.discard(process)
        self.finish(job, code, started, note)

    def finish(self, job: Job, code: int, started: float, note: str) -> None:
        """A job ended with ``code``: export (and commit) its runs, or say why not."""
        log = self.log_path(job)
        minutes = (time.time() - started) / 60
        if code != 0 or self.stopping.is_set():
            state = "stopped" if self.stopping.is_set() else f"failed (exit {code}; see {log})"
            say(f"{state}: {job.name}")
            self.results.append((job, state))
            if not self.stopping.is_set():
                self.keep_failure(job, log, note)
            return
        try:
            written = export_job(self.store, job, self.args.out,
                                 note=f"started on {note}; ended at load average "
                                      + " ".join(f"{v:.1f}" for v in os.getloadavg()))
        except Exception as error:  # the runs are safe in the store: say so, go on
            say(f"trained but not exported: {job.name} ({error}); the next launch exports it "
                "from the store")
            self.results.append((job, f"failed (export: {error})"))
            return
        say(f"done {job.name} in {minutes:.1f} min: {len(written)} runs exported")
        with self.room:  # its run times the jobs still to start
            self.timings.clear()
        self.results.append((job, "done"))
        if self.args.commit and written:
            self.commit(written, f"{job.study}: {job.name}")
        self.remove_checkpoint(job)

    def keep_failure(self, job: Job, log: Path, note: str) -> None:
        """A failed job's runs recorded (and committed) in its cell's ``failures.csv``."""
        try:
            written = record_failure(self.store, job, self.args.out, log,
                                     note=f"started on {note}")
        except (Exception, SystemExit) as error:  # e.g. it failed before its run existed
            say(f"no failed run of {job.name} to record ({error})")
            return
        if self.args.commit and written:
            self.commit(written, f"{job.study}: {job.name} failed", provenance=False)

    def run_checkpoints(self, job: Job) -> list[Path]:
        """A finished, exported job's checkpoint directory (``<checkpoint.dir>/<experiment>/<run
        id>/``, the run id from the ``runs.csv`` the export wrote)."""
        provenance = self.args.out / job.task / job.measure / "runs.csv"
        if not provenance.exists():
            return []
        with provenance.open(newline="") as handle:
            run_ids = {row["seed"]: row["run_id"] for row in csv.DictReader(handle)}
        return [self.checkpoints / job.experiment / run_ids[str(seed)] for seed in job.seeds
                if str(seed) in run_ids]

    def remove_checkpoint(self, job: Job) -> None:
        """A finished, exported job's checkpoints: their replay pools (GiB for a locomotion
        task) are of no more use once the runs are in the store and the CSVs; unless
        ``--keep-checkpoints``."""
        if self.args.keep_checkpoints:
            return
        for directory in self.run_checkpoints(job):
            if not directory.is_dir():
                continue
            size = directory_bytes(directory)
            shutil.rmtree(directory, ignore_errors=True)
            say(f"removed the checkpoint of {job.name} ({size / 2**30:.1f} GiB, {directory})")

    def commit(self, written: list[Path], message: str, *, provenance: bool = True) -> None:
        paths = sorted({*map(str, written),
                        *(str(p.parent / "runs.csv") for p in written if provenance),
                        *(str(config) for p in written
                          if (config := p.with_suffix(".config.yaml")).exists())})
        repo = self.args.out.resolve()
        with self.lock:  # one git at a time here; a person's git beside it may hold the index
            for attempt in range(10):
                added = subprocess.run(["git", "add", "--", *paths], cwd=repo)
                if added.returncode == 0 and subprocess.run(
                        ["git", "commit", "-q", "-m", message, "--", *paths],
                        cwd=repo).returncode == 0:
                    return
                time.sleep(2 + 3 * attempt)
        print(f"could not commit {', '.join(paths)} (they are written; commit them by hand)",
              flush=True)


class SubmititLauncher(Launcher):
    """The jobs handed to a cluster engine through submitit: SLURM (``--launcher slurm``, one
    job a cell, its memory from the recipe's estimate) or submitit's local executor
    (``--launcher submitit_local``, processes on this machine: a try of the same path). The
    plan, the skip of finished cells, ``resume=true`` and the export (and commit) of each
    finished job as it ends are the pool's; the engine decides what runs when. The MLflow store
    and ``--scratch`` must be reachable from the nodes (a shared file system, or a tracking
    server as ``--store``). A SIGTERM or SIGINT cancels the submitted jobs (SLURM signals a
    cancelled job's processes: the recipe checkpoints and stops; the same command continues
    them)."""

    def __init__(self, args: argparse.Namespace, store: str) -> None:
        super().__init__(args, store)
        import submitit

        cluster = "slurm" if args.launcher == "slurm" else "local"
        self.executor = submitit.AutoExecutor(folder=args.scratch / "submitit", cluster=cluster)
        self.submitted: list = []

    def stop(self, signum: int, _frame) -> None:
        self.stopping.set()
        for _, future, _ in self.submitted:
            future.cancel(check=False)
        print(f"{signal.Signals(signum).name}: the submitted jobs are cancelled (each "
              "checkpoints and stops); run the same command again to continue.", flush=True)

    def run(self, jobs: list[Job]) -> None:
        from submitit.helpers import CommandFunction

        for job in jobs:
            gib = max(1, math.ceil(self.need(job) / 2**30) + 1)
            self.executor.update_parameters(
                name=job.name.replace(" ", "-"), timeout_min=self.args.timeout_min,
                cpus_per_task=1, mem_gb=gib,
                **({"slurm_partition": self.args.partition} if self.args.partition else {}))
            note = self.note()
            # submitit's own CommandFunction (a worker unpickles it without this script), the
            # output appended to the job's log as the pool's
            logged = ["bash", "-c", f"exec {shlex.join(self.command(job))} "
                                    f">> {shlex.quote(str(self.log_path(job)))} 2>&1"]
            future = self.executor.submit(CommandFunction(logged, cwd=str(self.code)))
            say(f"submitted {job.name} as job {future.job_id}")
            self.submitted.append((job, future, (time.time(), note)))
        waiting = list(self.submitted)
        while waiting and not self.stopping.is_set():
            for entry in [e for e in waiting if e[1].done()]:
                waiting.remove(entry)
                job, future, (started, note) = entry
                try:
                    future.result()
                    code = 0
                except Exception as error:  # the recipe's exit code, a node lost, a timeout
                    say(f"{job.name}: {str(error).strip().splitlines()[-1][:300]}")
                    code = 1
                self.finish(job, code, started, note)
            time.sleep(self.args.poll)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--measures", nargs="+", choices=list(MEASURES), default=list(STUDY),
                        help="default: " + " ".join(STUDY))
    parser.add_argument("--seeds", type=seed_list, default=seed_list("0-19"),
                        help="e.g. 0-4 or 0,2,5-9 (default 0-19, the paper's)")
    parser.add_argument("--seed-block", type=int, default=10,
                        help="every cell's seeds of a block of this many before the next "
                             "block's (default 10, the issue's; 1: seed-major, so a study cut "
                             "short has every cell at the same seeds)")
    parser.add_argument("--given-order", action="store_true",
                        help="the cells in the order --tasks and --measures name them (e.g. the "
                             "short tasks first), not the issue's")
    parser.add_argument("--workers", type=int, default=2, help="jobs at a time (one core each)")
    parser.add_argument("--overrides", nargs="*", default=[],
                        help="Hydra overrides of every job, e.g. preset=former_defaults")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "figure3")
    parser.add_argument("--scratch", type=Path, default=ROOT / "studies" / "figure3",
                        help="the MLflow store, checkpoints and logs (outside git)")
    parser.add_argument("--store", default=None, help="default: <scratch>/mlflow.db")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--code", type=Path, default=None,
                        help="the checkout whose recipe and library the jobs run (default: this "
                             "one): a study pinned to one commit keeps its code while this moves")
    parser.add_argument("--commit", action="store_true",
                        help="git-commit each finished job's CSVs in --out's repository")
    parser.add_argument("--iterations", type=int, default=None,
                        help="shorter runs, for a try of the script (default: the task's)")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep a finished job's checkpoint (default: removed once its runs "
                             "are exported; it holds the replay pool)")
    parser.add_argument("--launcher", choices=("pool", "slurm", "submitit_local"), default="pool",
                        help="pool: --workers processes here; slurm: a SLURM job a cell through "
                             "submitit; submitit_local: submitit's local executor")
    parser.add_argument("--partition", default=None, help="--launcher slurm: the partition")
    parser.add_argument("--timeout-min", type=int, default=24 * 60,
                        help="--launcher slurm/submitit_local: a job's time limit in minutes")
    parser.add_argument("--poll", type=float, default=10.0,
                        help="seconds between looks at the submitted jobs")
    parser.add_argument("--algorithm", choices=("trpo", "sac"), default="trpo",
                        help="sac: the cells under SAC (algorithm=sac, recipes/study/sac.sh)")
    parser.add_argument("--until", type=deadline, default=None,
                        help="HH:MM or YYYY-MM-DDTHH:MM: start only the jobs expected to end by "
                             "then (timed by this study's finished runs; shorter cells fill the "
                             "time left), e.g. before a session ends")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run again the seeds whose run failed at the jobs' commit before "
                             "(default: skipped, their failures.csv says why)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    args = parser.parse_args(argv)
    if min(args.workers, args.seed_block) < 1:
        parser.error("--workers and --seed-block must be at least 1.")
    if args.until is not None and args.launcher != "pool":
        parser.error("--until times the pool's jobs; a cluster engine has its own time limits "
                     "(--timeout-min).")
    jobs, _ = plan(args.tasks, args.measures, args.seeds, args.out, args.iterations,
                   args.algorithm, args.seed_block, args.given_order)
    store = args.store or f"sqlite:///{args.scratch.resolve()}/mlflow.db"
    kind = Launcher if args.launcher == "pool" else SubmititLauncher
    launcher = None if args.dry_run else kind(args, store)
    recovered = [] if launcher is None else recover(store, jobs, args.out)
    if recovered:
        print(f"exported {len(recovered)} runs the store had finished before", flush=True)
        if args.commit:
            launcher.commit(recovered, f"{jobs[0].study}: runs finished before, exported")
    jobs, done = plan(args.tasks, args.measures, args.seeds, args.out,
                      args.iterations, args.algorithm, args.seed_block, args.given_order)
    if not args.retry_failed:
        commit = git_commit(args.code or ROOT)
        jobs, skipped = without_failed(jobs, args.out, commit)
        for job, error in skipped:
            print(f"  skipped, failed at {commit[:7]} before (--retry-failed runs it): "
                  f"{job.name}: {error}", flush=True)
    print(f"{len(done)} cells done, {sum(len(j.seeds) for j in jobs)} to run in {len(jobs)} jobs",
          flush=True)
    setup = study_setup(Path(args.code or ROOT))
    expected = {job: expected_minutes(
        args.out, job.task, job.measure, len(job.seeds), setup=setup,
        frames=task_frames(job.task, args.iterations, job.algorithm)) for job in jobs}
    for job in jobs:
        minutes = expected[job]
        print(f"  {job.name}" + ("" if minutes is None else f"  (~{minutes:.0f} min)"),
              flush=True)
    if jobs:
        known = [m for m in expected.values() if m is not None]
        unknown = len(jobs) - len(known)
        print(f"expected: {sum(known) / 60:.1f} core-hours from the start of each job "
              f"({sum(known) / 60 / args.workers:.1f} h at --workers {args.workers})"
              + (f"; {unknown} jobs not timed (no run finished yet)" if unknown else ""),
              flush=True)
    if launcher is None or not jobs:
        return 0
    launcher.estimate(jobs)
    handlers = {number: signal.signal(number, launcher.stop)
                for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        launcher.run(jobs)
    finally:  # a caller's own handlers back (the launcher may run inside another program)
        for number, handler in handlers.items():
            signal.signal(number, handler)
    failed = [job.name for job, state in launcher.results if state.startswith("failed")]
    later = sum(state.startswith("left for") for _, state in launcher.results)
    print(f"{sum(state == 'done' for _, state in launcher.results)} jobs done, "
          f"{len(failed)} failed" + (f": {', '.join(failed)}" if failed else "")
          + (f"; {later} left for the next launch (--until)" if later else ""), flush=True)
    return 1 if failed or launcher.stopping.is_set() else 0


if __name__ == "__main__":
    raise SystemExit(main())
