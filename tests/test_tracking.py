"""torchrl_vase.tracking: concurrent set-up, one owner per run, retries, and the recipe through
them (a second concurrent resume, a store that goes away, a store that comes back)."""

import contextlib
import importlib.util
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from hydra import compose, initialize_config_dir
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import (
    BAD_REQUEST,
    INTERNAL_ERROR,
    INVALID_PARAMETER_VALUE,
    RESOURCE_DOES_NOT_EXIST,
)
from mlflow.tracking import MlflowClient
from recipe_modules import load_recipe
from tracking_jobs import TAGS

from torchrl_vase.loop import StopSignals
from torchrl_vase.runs import TrainingRun
from torchrl_vase.tracking import (
    MLflowTracker,
    RunLock,
    RunLocked,
    TrackingUnavailable,
    check_tracking_store,
    get_or_create_experiment,
    retrying,
)

ROOT = Path(__file__).resolve().parents[1]
recipe = load_recipe("trpo_vase")
def test_a_tag_a_sibling_set_first_is_tolerated_and_a_real_refusal_is_not(tmp_path, sqlite_uri):
    uri = sqlite_uri
    client = MlflowClient(tracking_uri=uri)
    experiment = get_or_create_experiment(client, "e")

    class SiblingFirst(MlflowClient):
        """A client whose tag insert collides because a sibling inserted the tag just before."""

        def set_experiment_tag(self, experiment_id, key, value):
            MlflowClient(tracking_uri=uri).set_experiment_tag(experiment_id, key, value)
            raise MlflowException("duplicate key value violates unique constraint "
                                  '"experiment_tag_pk"', error_code=BAD_REQUEST)

    got = get_or_create_experiment(SiblingFirst(tracking_uri=uri), "e", tags=TAGS)
    assert got.experiment_id == experiment.experiment_id and TAGS.items() <= got.tags.items()

    class Refusing(MlflowClient):
        def set_experiment_tag(self, experiment_id, key, value):
            raise MlflowException("tag value too long", error_code=INVALID_PARAMETER_VALUE)

    with pytest.raises(MlflowException, match="too long"):
        get_or_create_experiment(Refusing(tracking_uri=uri), "e", tags={"another": "x"})
    client.delete_experiment(experiment.experiment_id)
    with pytest.raises(RuntimeError, match="'e' is deleted; restore it"):
        get_or_create_experiment(client, "e")


def test_retrying_waits_out_transient_failures_only(caplog):
    waits, calls = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 4:
            raise requests.exceptions.ConnectionError("refused")
        return "ok"

    with caplog.at_level(logging.WARNING, logger="torchrl_vase.tracking"):
        assert retrying(flaky, what="logging metrics", minutes=1, sleep=waits.append) == "ok"
    assert waits == [1.0, 2.0, 4.0]  # doubling back-off
    # the outage's start and end said once each, not once per attempt
    assert [r.getMessage() for r in caplog.records] == [
        "logging metrics: the tracking store is unreachable (ConnectionError: refused); "
        "retrying for up to 1 min",
        "logging metrics: the tracking store answered again after 3 failed attempts (0 s)"]
    caplog.clear()
    calls.clear()
    with caplog.at_level(logging.WARNING, logger="torchrl_vase.tracking"):
        assert retrying(lambda: "ok", what="x", minutes=1, sleep=waits.append) == "ok"
    assert not caplog.records  # a call that goes through at once says nothing
    refused = MlflowException("no such run", error_code=RESOURCE_DOES_NOT_EXIST)

    def refuse():
        calls.append(1)
        raise refused

    calls.clear()
    with pytest.raises(MlflowException, match="no such run"):
        retrying(refuse, what="x", minutes=1, sleep=waits.append)
    assert len(calls) == 1  # not retried

    def down():
        raise MlflowException("API request failed: Max retries exceeded",
                              error_code=INTERNAL_ERROR)

    with pytest.raises(TrackingUnavailable, match=r"logging: the tracking store stayed "
                                                  r"unreachable for 0 min"):
        retrying(down, what="logging", minutes=0, sleep=waits.append)
    # a SQLite store whose file is gone is not an outage: said at once
    waits.clear()
    with pytest.raises(TrackingUnavailable, match=r"database /nowhere/mlflow.db no longer "
                                                  r"exists"):
        retrying(down, what="logging", minutes=10, sleep=waits.append,
                 store="sqlite:////nowhere/mlflow.db")
    assert waits == []
    # once a signal asked the run to stop, an outage is not waited out (SIGKILL follows)
    waits.clear()
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received == "SIGTERM"
        with pytest.raises(TrackingUnavailable, match=r"SIGTERM asked the run to stop, so it "
                                                      r"does not wait for the store"):
            retrying(down, what="logging", minutes=10, sleep=waits.append)
    assert waits == []


def _hold_lock_in_a_child(path: Path) -> subprocess.Popen:
    code = ("import fcntl, json, os, sys, time; f = open(sys.argv[1], 'a+'); "
            "fcntl.flock(f, fcntl.LOCK_EX); f.seek(0); f.truncate(); "
            "f.write(json.dumps({'host': 'h', 'pid': os.getpid(), 'since': 'then'})); "
            "f.flush(); print('held', flush=True); time.sleep(120)")
    path.parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_run_lock_refuses_a_second_owner_and_is_taken_over_from_a_killed_one(tmp_path):
    path = tmp_path / "run.lock"
    child = _hold_lock_in_a_child(path)
    with pytest.raises(RunLocked, match=rf"run 7 is being continued by another process "
                                        rf"\(pid {child.pid} on h since then; lock {path}\)"):
        RunLock(path, "run 7").acquire()
    child.send_signal(signal.SIGKILL)  # dies holding it: the lock file stays, the lock does not
    child.wait()
    assert path.exists()
    with RunLock(path, "run 7") as lock:
        assert lock.held and f'"pid": {os.getpid()}' in path.read_text()
    assert not lock.held


def test_a_run_lock_that_is_a_symlink_is_refused_and_its_target_left_as_it_was(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    link = tmp_path / "run" / "run.lock"
    link.parent.mkdir()
    link.symlink_to(target)
    with pytest.raises(RuntimeError, match=r"is a symbolic link .*precious.txt.* Remove the link"):
        RunLock(link, "run 7").acquire()
    assert target.read_text() == "keep me\n"


# ------------------------------------------------------------------------------------------------
# The recipe
# ------------------------------------------------------------------------------------------------
def _config(tmp_path, *overrides):
    tiny = [
        f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"checkpoint.dir={tmp_path / 'checkpoints'}", "iterations=2", "num_envs=2",
        "env.frames_per_batch=64", "surprise=none", "progress_bar=false", "checkpoint.every=1",
        "trpo.critic_minibatch=32", "eval.every=0", "collection=rllab",  # 2 lanes of 32 steps
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return compose("trpo_vase", overrides=[*tiny, *overrides])


def _steps(uri: str, run_id: str) -> list[int]:
    history = MlflowClient(tracking_uri=uri).get_metric_history(run_id, "train/frames")
    return sorted(metric.step for metric in history)


def test_a_second_concurrent_resume_is_refused_before_it_logs_and_a_stale_lock_is_taken(
        tmp_path, sqlite_uri):
    uri = sqlite_uri
    first = recipe.train(_config(tmp_path))
    run_id = first["run_id"]
    lock_path = tmp_path / "checkpoints" / "mountain_car" / run_id / "run.lock"
    holder = _hold_lock_in_a_child(lock_path)  # another process continuing the run
    with pytest.raises(RunLocked, match=rf"run {run_id} is being continued by another process "
                                        rf"\(pid {holder.pid}"):
        recipe.train(_config(tmp_path, "iterations=3", "resume=true"))
    assert _steps(uri, run_id) == [64, 128]  # nothing logged by the refused one
    assert MlflowClient(tracking_uri=uri).get_run(run_id).info.status == "FINISHED"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    resumed = recipe.train(_config(tmp_path, "iterations=3", "resume=true"))
    assert resumed["run_id"] == run_id
    assert _steps(uri, run_id) == [64, 128, 192]


def test_a_store_that_stays_away_stops_the_run_with_a_checkpoint_and_resume_completes_it(
        tmp_path, monkeypatch, sqlite_uri):
    uri = sqlite_uri
    log = MLflowTracker.log
    calls = []

    def log_then_lose_the_store(self, steps):
        calls.append(1)
        if len(calls) == 2:  # the second iteration's metrics
            raise TrackingUnavailable("run x: logging metrics: the tracking store stayed "
                                      "unreachable for 10 min (ConnectionError: refused)")
        log(self, steps)

    monkeypatch.setattr(MLflowTracker, "log", log_then_lose_the_store)
    with pytest.raises(RuntimeError, match=r"unreachable for 10 min .*\. Stopped: the checkpoint "
                                           r".*last\.pt holds every step not logged; the store "
                                           r"still shows the run RUNNING .* Once the store is "
                                           r"back, continue with resume=true"):
        recipe.train(_config(tmp_path, "iterations=3"))
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("mountain_car").experiment_id])
    assert run.info.status == "RUNNING" and _steps(uri, run.info.run_id) == [64]
    monkeypatch.setattr(MLflowTracker, "log", log)
    resumed = recipe.train(_config(tmp_path, "iterations=3", "resume=true"))
    assert resumed["run_id"] == run.info.run_id
    assert _steps(uri, run.info.run_id) == [64, 128, 192]  # the checkpoint's step logged once


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(backend_store: str, artifacts: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("mlflow")), "server", "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1", "--backend-store-uri", backend_store,
         "--artifacts-destination", str(artifacts)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        # without MLflow's GenAI job runner, as recipes/tracking_server.sh starts it: no test
        # uses its eight processes, which made the start-up 25-35 s instead of 14 s here
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    for _ in range(120):
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                return server
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout):
            time.sleep(0.5)  # not listening yet, or too busy starting to answer in 1 s
    server.kill()
    raise AssertionError("the MLflow server did not start")


def _stop(server: subprocess.Popen) -> None:
    """The server and its workers stopped, all of them: a worker that outlives the server keeps
    the port (and answers a restarted server's health check in its place)."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
    except ProcessLookupError:  # stopped already
        return
    server.wait(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.killpg(server.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(server.pid, signal.SIGKILL)


class Outage:
    """A TCP relay in front of a server that can go away: ``cut()`` closes its port and every
    connection through it (new connections are refused, open ones reset: what a client sees of
    a server that stops), ``restore()`` opens the port again. The server behind it keeps
    running, so a test of a client that waits out a restart does not pay for starting MLflow's
    server twice."""

    def __init__(self, server_port: int) -> None:
        self.server = ("127.0.0.1", server_port)
        self.port = _free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self.restore()

    def restore(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))  # SO_REUSEADDR
        self._listener.settimeout(0.1)
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._listener.close()
            for end in self._sockets:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while listener.fileno() != -1:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by cut()
                return
            client.settimeout(None)
            upstream = socket.create_connection(self.server)
            with self._lock:
                if listener.fileno() == -1:  # cut() came between accept and here
                    client.close()
                    upstream.close()
                    return
                self._sockets |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
        except OSError:  # reset, or closed by cut()
            pass
        with contextlib.suppress(OSError):  # one side gone: so is the other
            sink.shutdown(socket.SHUT_RDWR)


def test_a_server_that_goes_away_mid_run_costs_the_run_nothing(tmp_path, fresh_store):
    server_port = _free_port()
    server = _serve(fresh_store(tmp_path / "server.db"), tmp_path / "artifacts", server_port)
    outage = Outage(server_port)
    uri = f"http://127.0.0.1:{outage.port}"
    command = [
        sys.executable, str(ROOT / "recipes" / "trpo_vase.py"), "surprise=none",
        "iterations=8", "num_envs=2", "env.frames_per_batch=64", "trpo.critic_minibatch=32",
        "collection=rllab", "checkpoint.every=1", "eval.every=0", f"mlflow.tracking_uri={uri}",
        f"checkpoint.dir={tmp_path / 'checkpoints'}", "mlflow.retry_minutes=2",
    ]
    # MLflow's own per-request retries off: the recipe's retries must carry the run
    environment = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    job = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                           stderr=subprocess.STDOUT, env=environment)
    seen = []
    try:
        for line in job.stdout:  # wait until training has started
            seen.append(line)
            if line.startswith("MLflow run"):
                break
        run_id = line.split()[2]
        client = MlflowClient(tracking_uri=uri)
        while len(_steps(uri, run_id)) < 3:
            assert job.poll() is None, "".join(seen)[-3000:]  # ended before its third step
            time.sleep(0.2)
        outage.cut()
        for line in job.stdout:  # the run says it waits for the store, and waits
            seen.append(line)
            if "the tracking store is unreachable" in line:
                break
        time.sleep(1.5)  # long enough for the first retry (1 s) to fail too
        assert job.poll() is None, "".join(seen)[-3000:]
        outage.restore()
        output = "".join(seen) + job.communicate(timeout=300)[0]
        assert job.returncode == 0, output[-3000:]
        assert output.count("the tracking store is unreachable") == 1, output[-3000:]
        assert re.search(r"the tracking store answered again after [2-9] failed attempts",
                         output), output[-3000:]
        # piped, not a terminal: one progress line per iteration (8 / 8), no bar
        assert "mountain_car/none seed 0: iteration 8/8 (100%), return" in output
        assert output.count("mountain_car/none seed 0: iteration ") == 8 and "\r" not in output
        assert client.get_run(run_id).info.status == "FINISHED"
        history = client.get_metric_history(run_id, "train/frames")
        assert [m.step for m in sorted(history, key=lambda m: m.step)] == [
            64 * (i + 1) for i in range(8)]  # every step, none twice
    finally:
        job.kill()
        _stop(server)


def test_a_sqlite_store_whose_creation_fails_is_removed_and_named(tmp_path, monkeypatch):
    import torchrl_vase.tracking as tracking

    database = tmp_path / "mlflow.db"

    class DiskFull(MlflowClient):
        def search_experiments(self, *args, **kwargs):
            # the store being created is half made, then the disk fills
            tracking.sqlite_path(self._tracking_client.tracking_uri).write_bytes(
                b"SQLite format 3\x00 half of the tables")
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(tracking, "MlflowClient", DiskFull)
    with pytest.raises(RuntimeError, match=r"cannot create or open the SQLite tracking store "
                                           r".*mlflow\.db' \(OSError: \[Errno 28\] No space left "
                                           r"on device\)\. Check that its folder is writable and "
                                           r"its disk has space"):
        check_tracking_store(f"sqlite:///{database}")
    # not left half-made for the next attempt, under its name or another
    assert list(tmp_path.iterdir()) == [tmp_path / "mlflow.db.lock"]
    database.write_bytes(b"an existing store")  # a store that existed before is never removed
    with pytest.raises(RuntimeError, match="cannot create or open"):
        check_tracking_store(f"sqlite:///{database}")
    assert database.exists()


def test_a_store_creation_killed_midway_leaves_no_half_made_store(tmp_path):
    """A process killed while MLflow builds the tables (kill -9: no clean-up runs) leaves only
    its temporary file; the next run removes it and creates the store."""
    database = tmp_path / "mlflow.db"
    left = tmp_path / ".mlflow.db.4242.creating"
    left.write_bytes(b"SQLite format 3\x00 half of the tables")
    journal = tmp_path / ".mlflow.db.4242.creating-journal"  # SQLite's, beside it
    journal.write_bytes(b"a rollback journal")
    assert not database.exists()
    check_tracking_store(f"sqlite:///{database}")
    assert database.exists() and not left.exists() and not journal.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    MlflowClient(tracking_uri=f"sqlite:///{database}").search_experiments()  # a whole store


@pytest.mark.usefixtures("sqlite_uri")  # the run's store, in tmp_path
def test_resuming_a_checkpoint_of_another_store_names_the_store(tmp_path, fresh_store):
    first = recipe.train(_config(tmp_path))
    checkpoint = tmp_path / "checkpoints" / "mountain_car" / first["run_id"] / "last.pt"
    other = tmp_path / "other"
    other.mkdir()
    fresh_store(other / "mlflow.db")
    with pytest.raises(LookupError, match=rf"resume={checkpoint}: its run {first['run_id']} is "
                                          rf"not in experiment 1 of the tracking store "
                                          rf"sqlite:///{other}/mlflow\.db; .* resume with that "
                                          rf"mlflow\.tracking_uri"):
        recipe.train(_config(tmp_path, f"mlflow.tracking_uri=sqlite:///{other / 'mlflow.db'}",
                             f"resume={checkpoint}", "iterations=3"))


# ------------------------------------------------------------------------------------------------
# Credentials in a tracking URI stay out of what is printed, logged or saved
# ------------------------------------------------------------------------------------------------
def test_a_uris_password_is_redacted_everywhere_it_would_be_shown():
    from torchrl_vase.tracking import redact

    assert redact("http://user:secret@host:5000") == "http://user:***@host:5000"
    assert redact("postgresql+psycopg2://me:p%40ss@db/mlflow") == \
        "postgresql+psycopg2://me:***@db/mlflow"
    assert redact("see 'https://a:b@x/y' and http://c:d@z") == "see 'https://a:***@x/y' and " \
        "http://c:***@z"
    for plain in ("sqlite:///mlflow.db", "http://host:5000", "https://user@host", "no uri"):
        assert redact(plain) == plain
    with pytest.raises(RuntimeError) as refused:  # nothing listens on port 9
        check_tracking_store("http://user:secret@127.0.0.1:9")
    assert "secret" not in str(refused.value) and "user:***@127.0.0.1:9" in str(refused.value)


@pytest.mark.parametrize(("uri", "shown"), [
    ("http://:Zq9SecretPW@host", "http://:***@host"),  # no user
    ("http://alice:Zq9@SecretPW@host", "http://alice:***@host"),  # an @ in the password
    ("http://alice:a:b:c@host:5000/x", "http://alice:***@host:5000/x"),  # a : in it
    ("http://alice:p/a?s#s@host", "http://alice:***@host"),  # / ? # unescaped
    ("postgresql://bob:p%3Aw%40d@db:5432/m", "postgresql://bob:***@db:5432/m"),  # escaped
    ("HTTPS://Carol:x@Host", "HTTPS://Carol:***@Host"),
])
def test_every_user_and_password_form_is_redacted_whole(uri, shown):
    from torchrl_vase.tracking import redact

    secret = uri.split("://", 1)[1].rpartition("@")[0].split(":", 1)[1]
    assert redact(uri) == shown
    said = redact(f"cannot reach '{uri}' (refused); also {uri}, and ({uri})")
    assert secret not in said and said.count(":***@") == 3


def test_a_runs_config_artifact_and_checkpoint_keep_no_password(tmp_path, capsys, sqlite_uri):
    uri = sqlite_uri
    config = {"seed": 0, "mlflow": {"tracking_uri": "http://user:secret@server:5000"},
              "other": ["postgresql://a:hunter2@db/x", "http://:Zq9SecretPW@host",
                        "http://alice:Zq9@SecretPW@host"]}
    with TrainingRun(uri, "redacted", config=config, run_name="r", params={"seed": "0"},
                     identity_ignores=("mlflow",), checkpoint_dir=tmp_path / "c") as run:
        path = run.save({"parts": {}, "step": 1})
    client = MlflowClient(tracking_uri=uri)
    local = client.download_artifacts(run.run_id, "config.yaml", str(tmp_path))
    saved = Path(local).read_text() + path.read_bytes().decode("latin-1")
    assert "secret" not in saved and "hunter2" not in saved and "user:***@server" in saved
    assert "Zq9" not in saved and "SecretPW" not in saved and "alice:***@host" in saved
    assert "secret" not in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# A full disk is said at once, not retried as an outage
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("error", [
    MlflowException("(sqlite3.OperationalError) database or disk is full",
                    error_code=INTERNAL_ERROR),
    OSError(28, "No space left on device"),
])
def test_a_full_store_disk_is_reported_at_once(error):
    waits = []

    def full():
        raise error

    with pytest.raises(OSError, match=r"logging metrics: the tracking store's disk is full .*"
                                      r"Free space there, then continue with resume=true"):
        retrying(full, what="logging metrics", minutes=10, sleep=waits.append)
    assert waits == []  # not one retry


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is not None,
                    reason="psycopg (SQLAlchemy's default PostgreSQL driver) is installed here")
def test_a_missing_driver_and_an_unknown_scheme_are_named_as_such():
    # SQLAlchemy's default PostgreSQL driver (psycopg 3) is not installed here: not "unreachable"
    with pytest.raises(RuntimeError, match=r"'postgresql://u:\*\*\*@127\.0\.0\.1:1/db' needs the "
                                           r"Python module 'psycopg', which is not installed"):
        check_tracking_store("postgresql://u:secret@127.0.0.1:1/db")
    with pytest.raises(ValueError, match=r"'foo://bar' has a scheme MLflow does not know; it "
                                         r"knows \[.*'sqlite', 'mssql'\]"):  # the whole list
        check_tracking_store("foo://bar")


def test_a_sweep_with_a_password_in_its_tracking_uri_is_refused_before_hydra_records_it(
        tmp_path, run_script):
    sweep = tmp_path / "sweep"
    refused = run_script("recipes/trpo_vase.py", "-m", "seed=0,1", "iterations=1",
                         "mlflow.tracking_uri=http://alice:Zq9@Secret@127.0.0.1:9",
                         f"hydra.sweep.dir={sweep}")
    assert refused.returncode == 1 and "MLFLOW_TRACKING_URI" in refused.stderr
    printed = refused.stdout + refused.stderr
    assert "Zq9" not in printed and "Secret" not in printed and not sweep.exists()
