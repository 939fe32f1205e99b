"""A training run's life outside the loop, in one context manager (``TrainingRun``): its
identity, the run to continue, its MLflow run, lock, checkpoint and end status::

    with TrainingRun(uri, "mountain_car", config=config, run_name="vase-seed0",
                     checkpoint_dir="checkpoints/mountain_car", resume=True) as run:
        loop = TrainingLoop(..., logger=run.tracker, checkpoint=run.save)
        run.restore(loop)  # the checkpoint found, if any
        run.stopped_by = loop.run().stopped_by

What it guarantees at entry, save and exit: docs/guides/checkpoints.md.

Examples:
    >>> flatten({"env": {"bnn": {"num_cells": [32]}, "id": "x"}, "seed": 0})
    {'env.bnn.num_cells': '[32]', 'env.id': 'x', 'seed': '0'}
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

import torch
import yaml
from mlflow.tracking import MlflowClient

from torchrl_vase.checkpointing import (
    Checkpointer,
    check_writable,
    config_identity,
    load_checkpoint,
    trusting_unsigned,
)
from torchrl_vase.evaluation import WEIGHTS_FILE, run_weights
from torchrl_vase.loop import StopAtOnce
from torchrl_vase.tracking import (
    MLflowTracker,
    RunLock,
    TrackingUnavailable,
    check_tracking_store,
    get_or_create_experiment,
    redact,
    redact_strings,
    run_charts_url,
    runs_table_url,
)

__all__ = ["ENVIRONMENT_TAGS", "RESUMED_ELSEWHERE", "TrainingRun", "changed", "cpu_model",
           "environment_tags", "flatten", "git_commit", "ignored", "machine",
           "recorded_environment", "reported_errors"]


def flatten(config: Mapping, prefix: str = "") -> dict[str, str]:
    """``{"env": {"batch": 5}}`` → ``{"env.batch": "5"}``: MLflow params, one per leaf."""
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def ignored(key: str, ignores: Iterable[str]) -> bool:
    """``key`` (dotted) is one of ``ignores`` or inside one of them."""
    return any(key == name or key.startswith(f"{name}.") for name in ignores)


@contextlib.contextmanager
def reported_errors(program: str,
                    errors: tuple[type[BaseException], ...] = (ValueError, TypeError,
                                                               RuntimeError, OSError,
                                                               ImportError)) -> Iterator[None]:
    """Inside, an error a user can act on (a refused config, env, store, checkpoint or file)
    ends the program with ``<program>: <message>`` on stderr and exit status 1, not a
    traceback; ``HYDRA_FULL_ERROR=1`` keeps the traceback, as Hydra's own errors do.

    Examples:
        >>> with reported_errors("demo"):
        ...     raise ValueError("seed must be >= 0, got -1.")
        Traceback (most recent call last):
        ...
        SystemExit: demo: seed must be >= 0, got -1.
    """
    try:
        yield
    except errors as error:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        raise SystemExit(f"{program}: {redact(str(error))}") from None
    except StopAtOnce as stop:  # a second signal: a sentence, the signal's exit status
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"{program}: {stop}", file=sys.stderr)
        raise SystemExit(128 + signal.Signals[stop.signal_name].value) from None
    except KeyboardInterrupt:  # Ctrl-C before the loop took over the signals (the start-up)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"{program}: interrupted (SIGINT) while starting; a run it had opened, if any, "
              "is marked KILLED", file=sys.stderr)
        raise SystemExit(128 + signal.SIGINT) from None


# what a run executes: a change here (uncommitted, or a new file) means HEAD did not produce it
_RUN_CODE = ("torchrl_vase", "recipes", "conf")


def git_commit(directory: str | os.PathLike) -> str:
    """The commit checked out at ``directory``, with ``-dirty`` when ``torchrl_vase/``, ``recipes/``
    or ``conf/`` differ from it (as ``git describe --dirty``); ``unknown`` outside a work tree."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=normal", "--", *_RUN_CODE)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}-dirty" if changed else commit


def _check_artifact_store(location: str) -> None:
    """A local artifact store must be writable before the run starts (a server's is checked by the
    first artifact logged)."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        check_writable(unquote(parsed.path), "the MLflow artifact store")
    elif not parsed.scheme:
        check_writable(location, "the MLflow artifact store")


class TrainingRun:
    """One training run: its MLflow run, lock, checkpoint and end status (see the module).

    Args:
        tracking_uri: the MLflow store (checked reachable at construction).
        experiment: the experiment's name (created if missing, with ``experiment_tags``).
        config: the run's whole resolved config: its identity, ``config.yaml``, what a checkpoint
            is compared with.
        run_name: the new MLflow run's name.
        identity_ignores: dotted keys that do not change what the run computes.
        retired: keys the config no longer has, at the value every run had (identities kept).
        params: the MLflow params of a new run (default: every leaf of ``config``).
        tags: a new run's tags (``run_identity`` is added).
        checkpoint_dir: where the run's directory ``<run id>/`` goes (``None``: no checkpoints).
        resume: ``False``, ``True`` (the latest run of this identity) or a checkpoint's path.
        retry_minutes: how long every MLflow call retries a store that went away.
        trust_unsigned: load a checkpoint without a digest of its content."""

    def __init__(self, tracking_uri: str, experiment: str, *, config: Mapping, run_name: str,
                 identity_ignores: Iterable[str] = (), retired: Mapping | None = None,
                 params: Mapping[str, str] | None = None,
                 tags: Mapping[str, str] | None = None,
                 checkpoint_dir: str | os.PathLike | None = None, resume: bool | str = False,
                 retry_minutes: float = 10.0,
                 experiment_tags: Mapping[str, str] | None = None,
                 trust_unsigned: bool = False) -> None:
        check_resume(resume, checkpoint_dir)
        check_tracking_store(tracking_uri)
        self.uri, self.experiment_name = tracking_uri, experiment
        # a tracking URI's password stays out of config.yaml and the checkpoint (and so of the
        # identity: where a run logs is not part of it)
        self.config, self.run_name = redact_strings(dict(config)), run_name
        self.identity_ignores = tuple(identity_ignores)
        self.identity = run_identity(self.config, self.identity_ignores, retired)
        self.params = dict(flatten(self.config) if params is None else params)
        self.tags = {**(tags or {}), "run_identity": self.identity}
        self.root = None if checkpoint_dir is None else check_writable(checkpoint_dir,
                                                                       "checkpoint.dir")
        self.resume, self.retry_minutes = resume, retry_minutes
        self.trust_unsigned = trust_unsigned
        self.experiment_tags = dict(experiment_tags or {})
        #: set by the caller when a signal stopped the loop: the run then ends KILLED
        self.stopped_by: str | None = None
        self.run_id: str | None = None
        self.state: dict | None = None
        self.tracker: MLflowTracker | None = None
        self.checkpointer: Checkpointer | None = None
        self._held_lock: RunLock | None = None
        self._unrestored = False  # a checkpoint that could not be loaded into the loop

    def restore(self, loop) -> bool:
        """Load the checkpoint found on entry into ``loop``, then let it go (a memory-mapped pool of
        GiB would stay mapped for the whole run). ``False`` when there was none."""
        if self.state is None:
            return False
        try:
            with trusting_unsigned(self.trust_unsigned):  # the replay chunks it names
                loop.load_state_dict(self.state)
        except BaseException:
            self._unrestored = True  # the run is given back as it was, not marked FAILED
            raise
        self.state = None
        return True

    def __enter__(self) -> TrainingRun:
        client = MlflowClient(tracking_uri=self.uri)
        experiment = get_or_create_experiment(client, self.experiment_name,
                                              tags=self.experiment_tags)
        self.experiment_id = experiment.experiment_id
        _check_artifact_store(experiment.artifact_location)
        with trusting_unsigned(self.trust_unsigned):
            self.run_id, self.state, lock = self._find_resumable(client)
        if self.run_id is None:  # created with its identity: resume=true finds it from the start
            self.tracker = MLflowTracker.create(self.uri, experiment, run_name=self.run_name,
                                                tags=self.tags | environment_tags(),
                                                retry_minutes=self.retry_minutes)
            self.run_id = self.tracker.run_id
            if self.root is not None:
                lock = self._lock()
        else:
            self.tracker = MLflowTracker.resume(self.uri, self.run_id,
                                                retry_minutes=self.retry_minutes)
            self._note_where_resumed()
        self._held_lock = lock
        if self.root is not None:
            self.checkpointer = Checkpointer(self.root / self.run_id)
            self._weights = Checkpointer(self.root / self.run_id, WEIGHTS_FILE)
        try:
            if not self.tracker.params:  # a new run (or one killed before it logged them)
                self.tracker.log_params(self.params)
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "config.yaml"
                    path.write_text(yaml.safe_dump(self.config, sort_keys=False))
                    self.tracker.log_artifact(path)
        except BaseException as error:
            self.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if isinstance(error, TrackingUnavailable):  # the store cannot be told: RUNNING there
                written = self.checkpointer is not None and self.checkpointer.exists()
                where = (f"the checkpoint {self.checkpointer.path} holds every step not logged"
                         if written else "no checkpoint was written yet")
                raise RuntimeError(
                    f"{error}. Stopped: {where}; the store still shows the run RUNNING (it "
                    "could not be told otherwise). Once the store is back, continue with "
                    "resume=true (mlflow.retry_minutes sets how long to wait).") from None
            message = None
            if self._unrestored and self.tracker.status_before is not None:
                # nothing ran: the run keeps the status it had, and no error of this attempt
                if self.tracker.status_before != "RUNNING":
                    self.tracker.end(self.tracker.status_before)
                return
            if error is None:
                status = "FINISHED" if self.stopped_by is None else "KILLED"
            elif isinstance(error, KeyboardInterrupt):
                status = "KILLED"
            else:
                status, message = "FAILED", f"{type(error).__name__}: {error}"
            self.tracker.end(status, error=message)
        finally:
            if self._held_lock is not None:
                self._held_lock.release()

    def _note_where_resumed(self) -> None:
        """A run continued on another machine or software than it started on rounds its later
        iterations there: what differs is appended to its ``resumed_elsewhere`` tag (once)."""
        recorded = self.tracker.tags
        difference = changed(recorded, environment_tags())
        earlier = [entry for entry in recorded.get(RESUMED_ELSEWHERE, "").split("; ") if entry]
        if difference and difference not in earlier:
            self.tracker.set_tag(RESUMED_ELSEWHERE, "; ".join([*earlier, difference]))

    def save(self, state: Mapping) -> Path:
        """Write ``state`` (a loop's ``state_dict``) as the run's checkpoint, with the run's id,
        identity and config, and the networks alone as the MLflow artifact ``weights.pt``."""
        path = self.checkpointer.save({**state, "run_id": self.run_id, "identity": self.identity,
                                       "config": yaml.safe_dump(self.config, sort_keys=False)})
        self.tracker.log_artifact(self._weights.save(run_weights(state["parts"])))
        return path

    def runs_table(self, *, charts: bool = False) -> str:
        """Where the experiment's runs table is (the return first: ``mlflow_ui``), or with
        ``charts`` its chart view: the server's page, or how to serve a store."""
        return self._page(lambda server: runs_table_url(server, self.experiment_id,
                                                        charts=charts))

    def run_charts(self) -> str:
        """Where this run's metric charts are (``Return/`` first)."""
        return self._page(lambda server: run_charts_url(server, self.experiment_id, self.run_id))

    def _page(self, page: Callable[[str], str]) -> str:
        uri = redact(self.uri)
        if uri.startswith(("http://", "https://")):
            return page(uri)
        return (f"{mlflow_command()} ui --backend-store-uri {uri}, then "
                f"{page('http://127.0.0.1:5000')}")

    def _lock(self) -> RunLock:
        """The run's lock (beside its checkpoint), taken; ``RunLocked`` if another process has
        it."""
        return RunLock(self.root / self.run_id / "run.lock", f"run {self.run_id}").acquire()

    def _find_resumable(self, client: MlflowClient) -> tuple[str | None, dict | None,
                                                               RunLock | None]:
        """``(run id, state, lock)`` that ``resume`` points at, each may be ``None``; the lock
        is taken before the checkpoint is read."""
        if self.resume is False:
            return None, None, None
        if self.resume is True:
            self.run_id = _latest_run_id(client, self.experiment_id, self.identity)
            if self.run_id is None:
                print("resume: no earlier run of this config in this experiment; starting one.")
                return None, None, None
            lock = self._lock()
            checkpointer = Checkpointer(self.root / self.run_id)
            if checkpointer.exists():
                return self.run_id, checkpointer.load(), lock
            try:  # no checkpoint: continue only a run that logged nothing (killed before)
                refuse_without_checkpoint(client, [self.run_id], checkpointer.path, "run")
            except BaseException:
                lock.release()
                raise
            return self.run_id, None, lock
        return self._resume_from_path(client, Path(str(self.resume)))

    def _resume_from_path(self, client: MlflowClient, path: Path):
        if not path.is_file():
            raise FileNotFoundError(f"resume: no checkpoint at {path}.")
        state = load_checkpoint(path)
        if not {"identity", "run_id", "config"} <= state.keys():
            raise ValueError(
                f"resume={path}: this file is not a run's checkpoint (it holds no run identity: "
                f"{', '.join(sorted(map(str, state))[:6]) or 'nothing'}); point resume at a "
                "last.pt under checkpoint.dir, or resume=true.")
        if state["identity"] != self.identity:
            saved, now = flatten(yaml.safe_load(state["config"])), flatten(self.config)
            differ = sorted(k for k in saved.keys() | now.keys() if saved.get(k) != now.get(k)
                            and not ignored(k, self.identity_ignores))
            raise ValueError(
                f"resume: {path} is a checkpoint of another config; keys that differ: "
                + ", ".join(f"{k} ({saved.get(k)} there, {now.get(k)} here)" for k in differ[:8]))
        self.run_id = state["run_id"]
        if not client.search_runs([self.experiment_id],
                                  filter_string=f"attributes.run_id = '{self.run_id}'"):
            raise LookupError(
                f"resume={path}: its run {self.run_id} is not in experiment {self.experiment_id} "
                f"of the tracking store {redact(client.tracking_uri)}; the checkpoint was logged "
                "to another store or experiment: resume with that mlflow.tracking_uri (and "
                "mlflow.experiment).")
        written = path.stat().st_mtime_ns
        lock = self._lock()
        if path.stat().st_mtime_ns != written:  # its writer ended between the read and the lock
            state = load_checkpoint(path)
        try:
            refuse_an_older_checkpoint(client, self.run_id, state, path)
        except BaseException:
            lock.release()
            raise
        return self.run_id, state, lock


def mlflow_command() -> str:
    """The ``mlflow`` command of this environment as a user can type it: ``mlflow`` when that is the
    one on ``PATH``, else its path."""
    beside = Path(sys.executable).with_name("mlflow")
    if not beside.exists():
        return "mlflow"
    on_path = shutil.which("mlflow")
    if on_path is not None and Path(on_path).resolve() == beside.resolve():
        return "mlflow"
    relative = os.path.relpath(beside, Path.cwd())
    return relative if not relative.startswith("..") else str(beside)


def mlflow_logged_steps(client: MlflowClient, run_id: str) -> int:
    """The last step an MLflow run logged (its ``train/frames``, else any metric's); -1 if none."""
    metrics = client.get_run(run_id).data.metrics
    if not metrics:
        return -1
    key = "train/frames" if "train/frames" in metrics else sorted(metrics)[0]
    return max((m.step for m in client.get_metric_history(run_id, key)), default=-1)


def refuse_an_older_checkpoint(client: MlflowClient, run_id: str, state: Mapping,
                               path: Path) -> None:
    """Refuse ``resume=<path>`` of a checkpoint older than what its run logged since (continuing
    would log those steps twice), naming both steps and the ways on."""
    checkpointed = int(state.get("frames", 0))
    logged = mlflow_logged_steps(client, run_id)
    if logged > checkpointed:
        raise ValueError(
            f"resume={path}: its run {run_id} logged steps up to {logged} frames, past this "
            f"checkpoint's {checkpointed} (an older copy of its last.pt?); continuing from it "
            "would log those steps twice. Resume the run's latest checkpoint (resume=true), or "
            "start a new run (resume=false).")


def run_identity(config: Mapping, identity_ignores: Iterable[str] = (),
                 retired: Mapping | None = None) -> str:
    """A run's identity: the hash of its redacted config less ``identity_ignores``, the ``retired``
    keys at their values. The tag, the checkpoint and ``resume=true``'s lookup read it."""
    return config_identity(redact_strings({**(retired or {}), **config}), tuple(identity_ignores))


def check_resume(resume: bool | str, checkpoint_dir) -> None:
    """``resume`` refused where it cannot work: without checkpoints; the recipe's config check
    and ``TrainingRun`` both call this."""
    if resume is not False and checkpoint_dir is None:
        raise ValueError("resume needs checkpoints: checkpoint.every=0 keeps none.")


def refuse_without_checkpoint(client: MlflowClient, run_ids: Iterable[str | None], path: Path,
                              what: str) -> None:
    """``resume=true`` found runs but no checkpoint at ``path``: refuse if any of them logged a
    metric (starting over would log every step again), naming where it looked and the two ways
    on."""
    logged = {}
    for run_id in filter(None, run_ids):
        step = mlflow_logged_steps(client, run_id)
        if step >= 0:
            logged[run_id] = step
    if not logged:
        return
    runs = ", ".join(f"{run_id} (up to step {step})" for run_id, step in logged.items())
    raise FileNotFoundError(
        f"resume=true: this config's {what} has logged metrics, {runs}, but its checkpoint is not "
        f"at {path}: is checkpoint.dir where the run wrote it? Point at the checkpoint with "
        f"resume=<path of its last.pt> (and checkpoint.dir=<its root>), or start a new run with "
        f"resume=false. Starting this one over would log its steps twice.")


def _latest_run_id(client: MlflowClient, experiment_id: str, identity: str) -> str | None:
    """The latest run of an identity (the tag ``run_identity``) in an experiment, if any."""
    runs = client.search_runs([experiment_id], filter_string=f"tags.run_identity = '{identity}'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].info.run_id if runs else None


#: the packages whose code computes a run's numbers (the envs' physics included)
PACKAGES = ("torch", "torchrl", "tensordict", "numpy", "numba", "gymnasium", "mujoco")

#: the names of the tags ``environment_tags`` sets
ENVIRONMENT_TAGS = ("machine", "machine.cpu_capability", "software.python",
                    *(f"software.{name}" for name in PACKAGES))

#: the tag that lists what differed each time a run was continued on another machine or software
RESUMED_ELSEWHERE = "resumed_elsewhere"


def cpu_model() -> str:
    """The processor's name (``/proc/cpuinfo``'s model name, else ``platform.processor()``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown processor"


def machine() -> str:
    """This machine as a run's tag and a study's ``runs.csv`` note name it:
    ``"vm (2 cores, AMD EPYC)"``."""
    return f"{platform.node()} ({os.cpu_count()} cores, {cpu_model()})"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment_tags() -> dict[str, str]:
    """This process's machine, torch's CPU instruction set (``machine.cpu_capability``) and the
    versions
    of Python and ``PACKAGES`` (``software.<name>``)."""
    values = (machine(), torch.backends.cpu.get_cpu_capability(), platform.python_version(),
              *(_version(name) for name in PACKAGES))
    return dict(zip(ENVIRONMENT_TAGS, values, strict=True))


def recorded_environment(tags: Mapping[str, str]) -> dict[str, str]:
    """Where a run computed, as it recorded it: its tags among ``ENVIRONMENT_TAGS``.

        >>> recorded_environment({"seed": "0", "machine": "vm (2 cores, X)"})
        {'machine': 'vm (2 cores, X)'}
    """
    return {name: tags[name] for name in ENVIRONMENT_TAGS if name in tags}


def changed(recorded: Mapping[str, str], now: Mapping[str, str]) -> str:
    """The entries of ``now`` that ``recorded`` holds otherwise (a key never recorded counts), as
    ``"key=value, …"``; ``""`` when none differ."""
    return ", ".join(f"{key}={value}" for key, value in now.items()
                     if recorded.get(key) != value)
