"""recipes/tracking_server.sh: MLflow on PostgreSQL, a sweep of two jobs through submitit's local
executor into it, resumed against it, and four jobs at once into fresh experiments."""

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tracking_jobs import TAGS, concurrent_set_up

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "recipes" / "tracking_server.sh"


def _postgres_available() -> bool:
    return any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or (
        os.geteuid() == 0 and shutil.which("apt-get") is not None  # the script installs it
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


pytestmark = pytest.mark.skipif(
    not _postgres_available(),
    reason="PostgreSQL is not installed and cannot be (apt-get needs root)",
)


@pytest.fixture(scope="module")
def server():
    # not under pytest's tmp_path: its parents are private to root, and PostgreSQL runs as the
    # postgres user
    directory = Path(tempfile.mkdtemp(prefix="vase-tracking-"))
    directory.chmod(0o755)
    environment = {**os.environ, "PGPORT": str(_free_port())}
    environment.pop("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", None)  # the script's default
    port = _free_port()
    started = subprocess.run(["bash", str(SCRIPT), "start", str(directory), str(port)],
                             capture_output=True, text=True, timeout=600, env=environment)
    assert started.returncode == 0, started.stderr[-3000:]
    yield started.stdout.strip().splitlines()[-1], directory
    subprocess.run(["bash", str(SCRIPT), "stop", str(directory)], timeout=120, env=environment)
    shutil.rmtree(directory, ignore_errors=True)


def _sweep(run_script, uri: str, workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    # the sweep's launcher in this process (seconds of imports less), its jobs in the processes
    # submitit's local executor starts
    return run_script(
        "recipes/trpo_vase.py", "-m",
        "hydra/launcher=submitit_local", "seed=0", "trpo.gamma=0.99,0.995", "surprise=none",
        "num_envs=2", "env.frames_per_batch=64", "trpo.critic_minibatch=32", "collection=rllab",
        "progress_bar=false", "checkpoint.every=1", "threads=1", "eval.every=0",
        f"mlflow.tracking_uri={uri}",
        f"checkpoint.dir={workdir / 'checkpoints'}", f"hydra.sweep.dir={workdir / 'sweep'}",
        *extra,
    )


def test_a_submitit_sweep_into_the_postgres_server_logs_every_step_and_resumes(server,
                                                                                tmp_path,
                                                                                run_script):
    uri, directory = server
    assert uri.startswith("http://127.0.0.1:")
    first = _sweep(run_script, uri, tmp_path, "iterations=2")
    assert first.returncode == 0, first.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("mountain_car")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted((r.data.params["seed"], r.data.params["trpo.gamma"]) for r in runs) == [
        ("0", "0.99"), ("0", "0.995")]
    for run in runs:  # two processes logged at once: every step of every run is there
        assert run.info.status == "FINISHED"
        frames = client.get_metric_history(run.info.run_id, "train/frames")
        assert sorted(m.step for m in frames) == [64, 128]
        assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"config.yaml",
                                                                             "weights.pt"}
    assert len({r.data.tags["sweep"] for r in runs}) == 1
    # the artifacts went through the server into its own store, none into the working directory
    assert any((directory / "artifacts").rglob("weights.pt"))
    assert not (tmp_path / "mlflow-artifacts:").exists()
    # the same sweep resumed against the server: each job continues its own run
    again = _sweep(run_script, uri, tmp_path, "iterations=3", "resume=true")
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_id for r in resumed) == sorted(r.info.run_id for r in runs)
    for run in resumed:
        assert run.info.status == "FINISHED"
        frames = client.get_metric_history(run.info.run_id, "train/frames")
        assert sorted(m.step for m in frames) == [64, 128, 192]


def test_a_password_in_the_tracking_uri_is_never_printed(server, run_script, tmp_path):
    uri, _ = server
    secret = "s3cret-Pw"
    with_password = uri.replace("http://", f"http://vase:{secret}@")
    result = run_script(
        "recipes/trpo_vase.py", "surprise=none", "iterations=1", "num_envs=2",
        "env.frames_per_batch=64", "trpo.critic_minibatch=32", "eval.every=0",
        "progress_bar=false", "mlflow.experiment=redacted", f"mlflow.tracking_uri={with_password}",
        f"checkpoint.dir={tmp_path / 'checkpoints'}", check=True)
    printed = result.stdout + result.stderr
    assert "The run's charts: http://vase:***@" in printed  # our link, the password redacted
    assert secret not in printed and "View run" not in printed  # nor MLflow's own line


def test_four_jobs_at_once_into_fresh_experiments_on_the_server_never_collide(server):
    uri, _ = server
    client = MlflowClient(tracking_uri=uri)
    # each a fresh experiment: creation and tags race every time
    for ids in concurrent_set_up(uri, ["fresh0", "fresh1", "fresh2"]):
        assert len(set(ids)) == 1
        assert TAGS.items() <= client.get_experiment(ids[0]).tags.items()
        runs = client.search_runs(ids)
        assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}


def test_the_server_listens_on_loopback_and_the_database_asks_for_a_password(server):
    uri, directory = server
    port = int(uri.rsplit(":", 1)[1])
    listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                               text=True).stdout
    addresses = {line.split()[3].rsplit(":", 1)[0] for line in listening.splitlines()}
    assert addresses and addresses <= {"127.0.0.1", "[::1]"}, listening
    bin_dir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    pgport = (directory / "pgdata" / "postmaster.pid").read_text().splitlines()[3].strip()
    refused = subprocess.run(  # no password file: refused, over TCP and on the socket alike
        [str(bin_dir / "psql"), "-h", "127.0.0.1", "-p", pgport, "-U", "postgres", "-w",
         "-c", "select 1"], capture_output=True, text=True, env={**os.environ, "PGPASSFILE":
                                                                 "/nonexistent"})
    assert refused.returncode != 0 and "password" in refused.stderr
    socket_dir = directory / "socket"
    assert socket_dir.stat().st_mode & 0o777 == 0o700
    assert (directory / "pgpass").stat().st_mode & 0o777 == 0o600


def _descendants(pid: int) -> list[str]:
    """The command lines of every process below ``pid`` (from one ``ps`` listing)."""
    listing = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True,
                             text=True, check=True).stdout
    rows = [line.split(None, 2) for line in listing.splitlines()]
    found, parents = [], {str(pid)}
    while below := [row for row in rows if row[1] in parents and row[0] not in parents]:
        found += [row[2] if len(row) > 2 else "" for row in below]
        parents |= {row[0] for row in below}
    return found


def test_the_server_runs_without_mlflows_job_runner(server):
    # MLflow's GenAI job runner (huey workers beside the server's) is off unless asked for
    _, directory = server
    processes = _descendants(int((directory / "mlflow.pid").read_text()))
    assert any("uvicorn" in command for command in processes), processes  # the server's own
    assert not [command for command in processes if "mlflow.server.jobs" in command]


def test_a_wrong_database_password_is_refused_at_the_first_attempt(server):
    import time

    from torchrl_vase.tracking import DatabaseRefused, check_tracking_store

    _, directory = server
    pgport = (directory / "pgdata" / "postmaster.pid").read_text().splitlines()[3].strip()
    uri = f"postgresql+psycopg2://postgres:Wr0ngPw@127.0.0.1:{pgport}/mlflow"
    started = time.monotonic()
    with pytest.raises(DatabaseRefused, match=r"refused the connection \(.*password "
                                              r"authentication failed") as refused:
        check_tracking_store(uri)
    assert time.monotonic() - started < 10  # MLflow's own engine retried for minutes
    assert "Wr0ngPw" not in str(refused.value)
