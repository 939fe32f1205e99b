"""An MLflow run that survives concurrency and a tracking server that goes away for a while:
``get_or_create_experiment`` (any number of jobs create the same experiment at once),
``check_tracking_store`` (the fast start-up check), ``RunLock`` (one process continues a run at a
time; a killed holder's lock is taken over), ``MLflowTracker`` (one run's life, every call
retried with back-off for ``retry_minutes``, then ``TrackingUnavailable``) and the MLflow UI's
pages of a run (``return_first_view``, ``runs_table_url``, ``run_charts_url``).

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from torchrl_vase.tracking import MLflowTracker, RunLock, check_tracking_store
    >>> tmp = tempfile.mkdtemp()
    >>> uri = f"sqlite:///{tmp}/mlflow.db"
    >>> check_tracking_store(uri)
    >>> tracker = MLflowTracker.create(uri, "demo", run_name="seed0", tags={"seed": "0"})
    >>> tracker.log([(100, {"Return/mean": 0.5}), (200, {"Return/mean": 1.0})])
    >>> tracker.end("FINISHED")
    >>> [m.value for m in tracker.client.get_metric_history(tracker.run_id, "Return/mean")]
    [0.5, 1.0]
    >>> with RunLock(Path(tmp) / "run.lock", "run 1"):  # doctest: +ELLIPSIS
    ...     RunLock(Path(tmp) / "run.lock", "run 1").acquire()
    Traceback (most recent call last):
    ...
    torchrl_vase.tracking.RunLocked: run 1 is being continued by another process (...
    >>> import shutil; shutil.rmtree(tmp)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import requests
from filelock import FileLock
from mlflow.entities import Experiment, Metric, Param
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from torchrl_vase.loop import stop_requested

# MLflow prints "View run ... at <the tracking URI>" when a run against a server ends, a password
# in the URI included; the runs print their own links, the URI redacted (``redact``)
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# MLflow's SQL store logs each failed statement with its traceback (a full disk: three screens)
# before raising it; every failure reaches the run as an exception, said in one sentence
logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)

__all__ = ["MODEL_TRAINING_KIND", "RETURN_VIEW_KEY", "MLflowTracker", "RunLock", "RunLocked",
           "TrackingUnavailable", "check_tracking_store", "get_or_create_experiment", "redact",
           "return_first_view", "run_charts_url", "runs_table_url"]

T = TypeVar("T")
_log = logging.getLogger(__name__)


class TrackingUnavailable(RuntimeError):
    """The tracking store stayed unreachable for the whole retry budget."""


class RunLocked(RuntimeError):
    """Another live process holds the run."""


# -- Transient failures and retries
_TRANSIENT_CODES = {"TEMPORARILY_UNAVAILABLE", "INTERNAL_ERROR", "REQUEST_LIMIT_EXCEEDED"}


#: a failed run's ``error`` tag is cut to this (MLflow's limit on a tag's value is 8,000)
ERROR_TAG_CHARS = 5000
_DISK_FULL = ("database or disk is full", "No space left on device", "Disk quota exceeded")


def disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the store's disk is full (SQLite's "database or disk is full",
    ENOSPC): waiting does not cure it, so it is reported at once, not retried as an outage."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(text in str(error) for text in _DISK_FULL)


def is_transient(error: BaseException) -> bool:
    """A failure that waiting may cure (the store unreachable, busy, 5xx or 429); a refused request
    is not."""
    if isinstance(error, (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                          ConnectionError, TimeoutError)):
        return True
    if isinstance(error, MlflowException):
        status = error.get_http_status_code()
        return error.error_code in _TRANSIENT_CODES or status == 429 or status >= 500
    return False


def retrying(call: Callable[[], T], *, what: str, minutes: float, first_wait: float = 1.0,
             max_wait: float = 10.0, sleep: Callable[[float], None] = time.sleep,
             store: str | None = None) -> T:
    """``call()``, retried after transient failures with waits doubling from ``first_wait`` up to
    ``max_wait`` seconds, for at most ``minutes``; then ``TrackingUnavailable`` naming ``what``.
    The outage's start and end are logged as warnings; once a signal asked the run to stop, or a
    SQLite ``store``'s file is gone, it waits no more."""
    started = time.monotonic()
    deadline = started + 60.0 * minutes
    wait, failures = first_wait, 0
    while True:
        try:
            result = call()
        except Exception as error:
            if disk_full(error):
                raise OSError(errno.ENOSPC, f"{what}: the tracking store's disk is full "
                              f"({_describe(error)}); nothing was lost: the run's checkpoint "
                              "holds every step not logged. Free space there, then continue "
                              "with resume=true") from None
            if not is_transient(error):
                raise
            database = sqlite_path(store) if store else None
            if database is not None and not database.exists():
                raise TrackingUnavailable(
                    f"{what}: the tracking store's database {database} no longer exists "
                    "(deleted or moved while the run logged to it); no wait brings it back"
                ) from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TrackingUnavailable(
                    f"{what}: the tracking store stayed unreachable for {minutes:g} min "
                    f"({_describe(error)})") from error
            if (stopping := stop_requested()) is not None:  # a scheduler's SIGKILL follows
                raise TrackingUnavailable(
                    f"{what}: the tracking store is unreachable ({_describe(error)}) and "
                    f"{stopping} asked the run to stop, so it does not wait for the store"
                ) from error
            if not failures:
                _log.warning("%s: the tracking store is unreachable (%s); retrying for up to "
                             "%g min", what, _describe(error), minutes)
            failures += 1
            sleep(min(wait, remaining))
            wait = min(2 * wait, max_wait)
        else:
            if failures:
                _log.warning("%s: the tracking store answered again after %d failed attempts "
                             "(%.0f s)", what, failures, time.monotonic() - started)
            return result


# -- The store and the experiment
@contextlib.contextmanager
def _fast_http_failure() -> Iterator[None]:
    """No retries and a 5 s timeout for MLflow's HTTP requests inside the block only (MLflow reads
    these at each request; its session cache is keyed by them)."""
    saved = {key: os.environ.get(key) for key in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES",
                                                  "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "5"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: a URI in running text: a scheme, ``://`` and what follows up to a space or a quote
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def _hide_password(match: re.Match) -> str:
    """The URI with its userinfo's password replaced by ``***``; the authority taken to run to the
    URI's last ``@``, so a password holding ``/``, ``?`` or ``#`` is hidden whole."""
    uri = match.group(0)
    scheme, rest = uri.split("://", 1)
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return uri
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"


def redact(text: str) -> str:
    """``text`` with the password of every URI in it hidden: what a message prints or a file
    keeps of a tracking URI (``http://user:secret@host`` -> ``http://user:***@host``).

    Examples:
        >>> redact("postgresql://mlflow:s3cret@db:5432/mlflow")
        'postgresql://mlflow:***@db:5432/mlflow'
        >>> redact("cannot reach 'http://me:pw@host:5000' (refused)")
        "cannot reach 'http://me:***@host:5000' (refused)"
        >>> redact("sqlite:///mlflow.db")
        'sqlite:///mlflow.db'
        >>> redact("http://:pw@host and http://alice:Zq9@Secret:PW@host:5000/x")
        'http://:***@host and http://alice:***@host:5000/x'
    """
    return _URI.sub(_hide_password, text)


def redact_strings(node):
    """A config (nested dicts and lists) with every string that holds a URI :func:`redact`-ed."""
    if isinstance(node, Mapping):
        return {key: redact_strings(value) for key, value in node.items()}
    if isinstance(node, list | tuple):
        return type(node)(redact_strings(value) for value in node)
    return redact(node) if isinstance(node, str) and "://" in node else node


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def check_tracking_store(uri: str) -> None:
    """Fail now, naming the URI and the fix, if the store cannot be reached or created: a SQLite
    store is created here under a file lock and a temporary name (``_create_sqlite_store``), a
    server asked once with no retries and a 5 s timeout."""
    database = sqlite_path(uri)
    if database is None:
        try:
            _connect_once(uri)
            with _fast_http_failure():
                MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        except ImportError as error:  # SQLAlchemy's driver for the URI's database
            raise RuntimeError(
                f"the tracking store {redact(uri)!r} needs the Python module {error.name!r}, "
                "which is not installed here (PostgreSQL: `postgresql+psycopg2://…` with "
                "psycopg2-binary, the `server` extra; MySQL: mysqlclient).") from None
        except DatabaseRefused:
            raise
        except Exception as error:  # mlflow raises many types; all mean "unreachable" here
            if "Supported URI schemes are" in str(error):
                schemes = str(error).split("Supported URI schemes are:")[-1].strip().rstrip(".")
                raise ValueError(
                    f"the tracking store {redact(uri)!r} has a scheme MLflow does not know; "
                    f"it knows {schemes}.") from None
            raise RuntimeError(
                f"cannot reach the MLflow tracking store {redact(uri)!r} "
                f"({_describe(error)}). Start the "
                "server, fix mlflow.tracking_uri or MLFLOW_TRACKING_URI, or leave both unset for "
                "a local sqlite:///mlflow.db.") from None
        return
    try:
        lock = FileLock(str(database) + ".lock")
        with lock:
            if not database.exists():
                _create_sqlite_store(database)
            MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except Exception as error:
        raise RuntimeError(
            f"cannot create or open the SQLite tracking store {str(database)!r} "
            f"({_describe(error)}). Check that its folder is writable and its disk has space; "
            "a store half-created by an interrupted first run can be deleted. Or set "
            "mlflow.tracking_uri (or MLFLOW_TRACKING_URI) to another store.") from None


class DatabaseRefused(RuntimeError):
    """A tracking store's database refused the connection (a wrong password, no server)."""


#: the databases MLflow's SQLAlchemy store serves, by URI scheme (``postgresql+psycopg2`` too)
_DATABASES = ("postgresql", "mysql", "mssql")


def _connect_once(uri: str) -> None:
    """For a database URI, one connection with a 5 s timeout, before MLflow's own engine, which
    retries a refused login for minutes: a wrong password or an unknown host is said at once."""
    if uri.split(":", 1)[0].split("+", 1)[0] not in _DATABASES:
        return
    import sqlalchemy

    timeout = {"connect_timeout": 5}
    engine = sqlalchemy.create_engine(uri, connect_args=timeout)
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.OperationalError as error:
        reason = str(error.orig if error.orig is not None else error).strip().splitlines()[0]
        raise DatabaseRefused(
            f"the database of the tracking store {redact(uri)!r} refused the connection "
            f"({redact(reason)}): check the user, password, host and port in the URI.") from None
    finally:
        engine.dispose()


def _create_sqlite_store(database: Path) -> None:
    """A new SQLite store, its tables migrated under a temporary name and renamed into place, so a
    killed creation leaves no half-made store. Call it under the store's lock."""
    # a killed creation's file and SQLite's rollback journal beside it (``…creating-journal``)
    for stale in database.parent.glob(f".{database.name}.*.creating*"):
        stale.unlink(missing_ok=True)
    temporary = database.with_name(f".{database.name}.{os.getpid()}.creating")
    try:
        MlflowClient(tracking_uri=f"sqlite:///{temporary}").search_experiments(max_results=1)
        os.replace(temporary, database)
    finally:
        for left in (temporary, temporary.with_name(temporary.name + "-journal")):
            left.unlink(missing_ok=True)


def _describe(error: BaseException) -> str:
    """An error's type and first line, any URI's password hidden (a request error quotes the
    URL it could not reach)."""
    return redact(f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}")


def get_or_create_experiment(client: MlflowClient, name: str,
                             artifact_location: str | None = None,
                             tags: Mapping[str, str] | None = None) -> Experiment:
    """The experiment ``name``, created if missing, with ``tags`` set where missing; safe under
    concurrent callers (what a sibling got in first is taken as done); a deleted one is refused with
    the way out. On SQLite its artifacts go to ``mlruns/`` beside the database."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        database = sqlite_path(client.tracking_uri)
        if artifact_location is None and database is not None:
            artifact_location = (database.resolve().parent / "mlruns").as_uri()
        with contextlib.suppress(MlflowException):  # a sibling created it first: see below
            client.create_experiment(name, artifact_location=artifact_location)
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise RuntimeError(f"MLflow experiment {name!r} could not be created.")
    if experiment.lifecycle_stage != "active":
        raise RuntimeError(
            f"MLflow experiment {name!r} is deleted; restore it (mlflow experiments restore "
            f"--experiment-id {experiment.experiment_id}) or choose mlflow.experiment=<name>.")
    for key, value in (tags or {}).items():
        if key in experiment.tags:
            continue
        try:
            client.set_experiment_tag(experiment.experiment_id, key, value)
        except MlflowException:
            # on a server two inserts of one tag collide (a unique-key violation); if the tag is
            # there now, a sibling set it
            if key not in client.get_experiment(experiment.experiment_id).tags:
                raise
    return client.get_experiment(experiment.experiment_id)


# -- One owner per run
class RunLock:
    """An exclusive lock on one run, held by this process while it writes the run.

    An ``flock`` on ``path``: the operating system drops it when the holder exits in any way
    (SIGKILL included), so a lock left by a dead process is simply taken. The file keeps the
    holder's host, pid and start time for the refusal message. On a shared file system without
    ``flock`` (some NFS set-ups) two hosts are not kept apart.

    Args:
        path: the lock file (created with its folder).
        what: how messages name the run, e.g. ``"run 3f2a..."``."""

    def __init__(self, path: str | os.PathLike, what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._file = None

    def acquire(self) -> RunLock:
        """Take the lock now or raise ``RunLocked`` naming the holder; never waits."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # never through a link: a run.lock pointing at another file would truncate it
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
            raise RuntimeError(
                f"the lock file {self.path} of {self.what} is a symbolic link "
                f"(to {os.readlink(self.path)!r}): a lock is never taken through a link, whose "
                "target it would overwrite. Remove the link, then run again.") from None
        file = os.fdopen(descriptor, "r+")  # held open while locked
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip()
            file.close()
            try:
                info = json.loads(holder)
                who = f"pid {info['pid']} on {info['host']} since {info['since']}"
            except (ValueError, KeyError, TypeError):
                who = "an unknown process"
            raise RunLocked(
                f"{self.what} is being continued by another process ({who}; lock {self.path}). "
                "Wait for it to end or stop it (SIGTERM writes a checkpoint), then resume."
            ) from None
        file.seek(0)
        file.truncate()
        file.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                               "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
        file.flush()
        self._file = file
        return self

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def __enter__(self) -> RunLock:
        return self if self.held else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


# -- The run
class MLflowTracker:
    """One MLflow run through ``MlflowClient`` (no global active run; torchrl's ``MLFlowLogger``
    logs through it, a metric a request, with no retries and no way to continue a run by id).
    ``log`` sends whole steps per request, NaN and inf as they are; every call is retried while the
    store is unreachable, for ``retry_minutes``, then ``TrackingUnavailable``.

    Args:
        client: the store's client.
        run_id: the run.
        retry_minutes: how long a call may wait for the store."""

    def __init__(self, client: MlflowClient, run_id: str, retry_minutes: float = 10.0) -> None:
        self.client = client
        self.run_id = run_id
        self.retry_minutes = retry_minutes
        #: a resumed run's status before this process marked it RUNNING (``None``: a new run)
        self.status_before: str | None = None

    @classmethod
    def create(cls, uri: str, experiment: str | Experiment, run_name: str | None = None,
               tags: Mapping[str, str] | None = None, retry_minutes: float = 10.0,
               ) -> MLflowTracker:
        """A new run in ``experiment`` (a name, created if needed, or an ``Experiment``), with
        MLflow's own context tags (source, user, git commit) as ``mlflow.start_run`` sets them."""
        from mlflow.tracking.context.registry import resolve_tags

        client = MlflowClient(tracking_uri=uri)
        if isinstance(experiment, str):
            experiment = get_or_create_experiment(client, experiment)
        run = retrying(lambda: client.create_run(
            experiment.experiment_id, run_name=run_name, tags=resolve_tags(dict(tags or {}))),
            what="creating the MLflow run", minutes=retry_minutes)
        return cls(client, run.info.run_id, retry_minutes)

    @classmethod
    def resume(cls, uri: str, run_id: str, retry_minutes: float = 10.0) -> MLflowTracker:
        """Continue ``run_id`` (marked RUNNING again); refused with the store named if the run
        is not in it."""
        client = MlflowClient(tracking_uri=uri)
        try:
            before = retrying(lambda: client.get_run(run_id), what="reading the run",
                              minutes=retry_minutes)
        except MlflowException as error:
            if error.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            raise LookupError(
                f"run {run_id} is not in the tracking store {redact(uri)}: its checkpoint was "
                "logged to "
                "another store; resume against that one (mlflow.tracking_uri=...).") from None
        tracker = cls(client, run_id, retry_minutes)
        tracker.status_before = before.info.status
        tracker._call(lambda: client.update_run(run_id, status="RUNNING"), "marking it running")
        return tracker

    def _call(self, call: Callable[[], T], what: str) -> T:
        return retrying(call, what=f"run {self.run_id}: {what}", minutes=self.retry_minutes,
                        store=self.client.tracking_uri)

    @property
    def params(self) -> dict[str, str]:
        """The run's params as the store has them (empty for a run that has logged none)."""
        return self._call(lambda: self.client.get_run(self.run_id).data.params,
                          "reading its params")

    @property
    def tags(self) -> dict[str, str]:
        """The run's tags as the store has them."""
        return self._call(lambda: self.client.get_run(self.run_id).data.tags, "reading its tags")

    def set_tag(self, key: str, value: str) -> None:
        self._call(lambda: self.client.set_tag(self.run_id, key, value), f"setting its {key} tag")

    def log_params(self, params: Mapping[str, str]) -> None:
        items = [Param(key, str(value)) for key, value in params.items()]
        for start in range(0, len(items), 100):  # MLflow's limit per request
            chunk = items[start:start + 100]
            self._call(lambda chunk=chunk: self.client.log_batch(self.run_id, params=chunk),
                       "logging params")

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        self._call(lambda: self.client.log_artifact(self.run_id, str(path), artifact_path),
                   f"logging the artifact {Path(path).name}")

    def last_logged_step(self, key: str) -> int:
        """The last step logged for ``key`` (-1 if none)."""
        history = self._call(lambda: self.client.get_metric_history(self.run_id, key),
                             f"reading the history of {key}")
        return max((metric.step for metric in history), default=-1)

    def log(self, steps: Iterable[tuple[int, Mapping[str, float]]]) -> None:
        """Log each ``(step, metrics)``, whole steps per request."""
        now = int(time.time() * 1000)
        steps = list(steps)
        per_request = max(1, 1000 // max((len(m) for _, m in steps), default=1))
        for start in range(0, len(steps), per_request):
            metrics = [Metric(key, float(value), now, step)
                       for step, values in steps[start:start + per_request]
                       for key, value in values.items()]
            self._call(lambda metrics=metrics: self.client.log_batch(
                self.run_id, metrics=metrics, synchronous=True), "logging metrics")

    def end(self, status: str, error: str | None = None) -> None:
        """Mark the run ``FINISHED``, ``FAILED`` or ``KILLED``; a failed run's ``error`` goes in its
        ``error`` tag (removed if the run goes on to finish)."""
        if error is not None:
            message = error if len(error) <= ERROR_TAG_CHARS else error[:ERROR_TAG_CHARS - 1] + "…"
            self.set_tag("error", message)
        elif status == "FINISHED" and "error" in self.tags:
            self._call(lambda: self.client.delete_tag(self.run_id, "error"),
                       "clearing its former error")
        self._call(lambda: self.client.set_terminated(self.run_id, status),
                   f"marking it {status}")


MODEL_TRAINING_KIND = {"mlflow.experimentKind": "custom_model_development"}
RETURN_VIEW_KEY = "return-first"
_SHARED_VIEW_TAG = "mlflow.sharedViewState."
_MODEL_TRAINING = "workflowType=machine_learning"


def _metric_column(name: str) -> str:
    """The runs table's key for a metric column (the UI's ``makeCanonicalSortKey``)."""
    if "`" in name:
        raise ValueError(f"a metric name with a backtick cannot be a runs-table column: {name!r}")
    return f"metrics.`{name}`"


def return_first_view(metrics: Sequence[str]) -> dict[str, str]:
    """The experiment tag of a shared view whose runs table shows ``metrics`` as columns,
    sorted by the first, highest first (every other setting the UI's default)."""
    if not metrics:
        raise ValueError("return_first_view needs at least one metric to show and sort by")
    columns = [_metric_column(name) for name in metrics]
    state = {"selectedColumns": columns, "orderByKey": columns[0], "orderByAsc": False}
    return {f"{_SHARED_VIEW_TAG}{RETURN_VIEW_KEY}": json.dumps(state)}


def runs_table_url(server: str, experiment_id: str, *, charts: bool = False) -> str:
    """The experiment's runs table on ``server`` in the return-first view (its tag must be on the
    experiment); with ``charts``, the chart view."""
    return (f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?{_MODEL_TRAINING}"
            f"&viewStateShareKey={RETURN_VIEW_KEY}" + ("&compareRunsMode=CHART" if charts else ""))


def run_charts_url(server: str, experiment_id: str, run_id: str) -> str:
    """One run's metric charts on ``server`` (``Return/`` first), in model-training mode."""
    return (f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}/model-metrics?"
            f"{_MODEL_TRAINING}")
