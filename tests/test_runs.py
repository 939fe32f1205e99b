"""TrainingRun: a run's MLflow life, its identity, resume lookup and end status, on a SQLite
store (the recipe's end-to-end tests exercise it with real training)."""

import os
import platform
import subprocess

import pytest
import torch
import torchrl
import yaml
from mlflow.tracking import MlflowClient

from torchrl_vase import TrainingRun
from torchrl_vase.modules import gaussian_policy
from torchrl_vase.runs import git_commit
from torchrl_vase.tracking import ERROR_TAG_CHARS, RunLocked


@pytest.fixture(scope="module")
def uri(tmp_path_factory, fresh_store):
    return fresh_store(tmp_path_factory.mktemp('runs') / 'mlflow.db')


def _run(uri, tmp_path, config, experiment="runs", **kwargs):
    return TrainingRun(uri, experiment, config=config, run_name="toy",
                       identity_ignores=["where"], checkpoint_dir=tmp_path / "checkpoints",
                       **kwargs)


def _state(iterations_done: int) -> dict:
    actor = gaussian_policy(2, 1, [4])
    parts = {"actor": actor.state_dict(), "critic": {}, "collector": {}, "exploration": None}
    return {"iterations_done": iterations_done, "parts": parts}


def test_a_new_run_carries_its_identity_params_and_config(uri, tmp_path):
    config = {"seed": 1, "lr": 0.1, "where": "here", "net": {"cells": [4]}}
    with _run(uri, tmp_path, config, tags={"seed": "1"}) as run:
        run.save(_state(1))
    client = MlflowClient(tracking_uri=uri)
    stored = client.get_run(run.run_id)
    assert stored.info.status == "FINISHED"
    assert stored.data.tags["seed"] == "1" and stored.data.tags["run_identity"] == run.identity
    assert stored.data.params == {"seed": "1", "lr": "0.1", "where": "here", "net.cells": "[4]"}
    assert {a.path for a in client.list_artifacts(run.run_id)} == {"config.yaml", "weights.pt"}
    saved = torch.load(run.checkpointer.path, weights_only=True)
    assert saved["run_id"] == run.run_id and saved["identity"] == run.identity
    assert yaml.safe_load(saved["config"]) == config


def test_the_identity_ignores_what_does_not_change_the_run(uri, tmp_path):
    one = _run(uri, tmp_path, {"seed": 1, "where": "a"})
    assert one.identity == _run(uri, tmp_path, {"where": "b", "seed": 1}).identity
    assert one.identity != _run(uri, tmp_path, {"seed": 2, "where": "a"}).identity


def test_resume_true_continues_the_latest_run_of_the_same_identity(uri, tmp_path):
    config = {"seed": 7, "where": "x"}
    with _run(uri, tmp_path, config, experiment="resume") as first:
        first.save(_state(3))
    with _run(uri, tmp_path, {"seed": 8, "where": "x"}, experiment="resume") as other:
        pass
    with _run(uri, tmp_path, {**config, "where": "y"}, experiment="resume",
              resume=True) as again:
        assert again.run_id == first.run_id and again.state["iterations_done"] == 3
        with pytest.raises(RunLocked, match=f"run {first.run_id} is being continued"), \
                _run(uri, tmp_path, config, experiment="resume", resume=True):
            pass
        restored = []

        class Loop:
            def load_state_dict(self, state):
                restored.append(state["iterations_done"])

        # restore loads the checkpoint found into the loop once, then lets it go
        assert again.restore(Loop()) and restored == [3] and again.state is None
        assert not again.restore(Loop()) and restored == [3]
    assert other.run_id != first.run_id
    assert not other.restore(Loop())  # a new run: nothing to restore


@pytest.mark.parametrize(("stopped_by", "error", "status"), [
    (None, None, "FINISHED"), ("SIGTERM", None, "KILLED"), (None, KeyboardInterrupt, "KILLED"),
    (None, ValueError, "FAILED"),
])
def test_the_end_status(uri, tmp_path, stopped_by, error, status):
    run = _run(uri, tmp_path, {"seed": 0}, experiment="status")
    try:
        with run:
            run.stopped_by = stopped_by
            if error is not None:
                raise error("end")
    except (KeyboardInterrupt, ValueError) as raised:
        assert type(raised) is error
    ended = MlflowClient(tracking_uri=uri).get_run(run.run_id)
    assert ended.info.status == status
    # a failed run says why in the UI; the others carry no error
    assert ended.data.tags.get("error") == ("ValueError: end" if status == "FAILED" else None)


def test_a_long_error_is_cut_to_what_mlflow_keeps(uri, tmp_path):
    run = _run(uri, tmp_path, {"seed": 0}, experiment="long error")
    with pytest.raises(RuntimeError), run:
        raise RuntimeError("x" * 20_000)
    tag = MlflowClient(tracking_uri=uri).get_run(run.run_id).data.tags["error"]
    assert len(tag) == ERROR_TAG_CHARS and tag.startswith("RuntimeError: xxx") and tag[-1] == "…"


def test_a_run_records_where_it_computed_and_a_resume_elsewhere_once(uri, tmp_path,
                                                                     monkeypatch):
    config = {"seed": 3, "where": "x"}
    with _run(uri, tmp_path, config, experiment="where") as first:
        first.save(_state(1))
    client = MlflowClient(tracking_uri=uri)
    tags = client.get_run(first.run_id).data.tags
    # each tag against its own source, not against provenance's own reading
    assert tags["machine.cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert tags["software.torch"] == torch.__version__
    assert tags["software.torchrl"] == torchrl.__version__
    assert tags["machine"].startswith(f"{platform.node()} ({os.cpu_count()} cores, ")
    assert "resumed_elsewhere" not in tags
    with _run(uri, tmp_path, config, experiment="where", resume=True) as here:
        assert here.run_id == first.run_id  # the same machine: nothing noted
    assert "resumed_elsewhere" not in client.get_run(first.run_id).data.tags

    elsewhere = {**tags, "machine": "other (64 cores, Intel Xeon)"}
    elsewhere = {key: value for key, value in elsewhere.items()
                 if key.startswith(("machine", "software."))}
    monkeypatch.setattr("torchrl_vase.runs.environment_tags", lambda: elsewhere)
    for _ in range(2):  # resumed there twice: noted once
        with _run(uri, tmp_path, config, experiment="where", resume=True):
            pass
    assert (client.get_run(first.run_id).data.tags["resumed_elsewhere"]
            == "machine=other (64 cores, Intel Xeon)")
    newer = {**elsewhere, "software.torch": "9.9"}
    monkeypatch.setattr("torchrl_vase.runs.environment_tags", lambda: newer)
    with _run(uri, tmp_path, config, experiment="where", resume=True):
        pass
    assert (client.get_run(first.run_id).data.tags["resumed_elsewhere"]
            == "machine=other (64 cores, Intel Xeon); machine=other (64 cores, Intel Xeon), "
            "software.torch=9.9")


def test_resume_without_checkpoints_is_refused_at_construction(uri):
    with pytest.raises(ValueError, match="resume needs checkpoints"):
        TrainingRun(uri, "x", config={}, run_name="x", resume=True)


def test_git_commit_says_dirty_when_the_code_a_run_executes_differs_from_head(tmp_path):
    assert git_commit(tmp_path) == "unknown"  # not a work tree

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    (tmp_path / "torchrl_vase").mkdir()
    (tmp_path / "torchrl_vase" / "loss.py").write_text("ETA = 1e-4\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    head = git("rev-parse", "HEAD").strip()
    assert git_commit(tmp_path) == head
    (tmp_path / "notes.md").write_text("not code a run executes\n")
    (tmp_path / "torchrl_vase" / "run.log").write_text("ignored\n")
    assert git_commit(tmp_path) == head
    (tmp_path / "torchrl_vase" / "loss.py").write_text("ETA = 1.0\n")  # an uncommitted change
    assert git_commit(tmp_path) == f"{head}-dirty"
    git("checkout", "--", "torchrl_vase/loss.py")
    (tmp_path / "torchrl_vase" / "new.py").write_text("")  # a new module
    assert git_commit(tmp_path) == f"{head}-dirty"


def test_a_second_signal_ends_the_program_with_a_sentence_and_the_signal_s_status(capfd):
    import signal

    from torchrl_vase.loop import StopAtOnce, StopSignals
    from torchrl_vase.runs import reported_errors

    with pytest.raises(SystemExit) as stopped, reported_errors("demo"), StopSignals():
        os.kill(os.getpid(), signal.SIGTERM)  # the first: a line at once, the run goes on
        assert "SIGTERM: stopping after this iteration" in capfd.readouterr().err
        os.kill(os.getpid(), signal.SIGTERM)  # the second: at once
        raise AssertionError("not stopped")
    assert stopped.value.code == 128 + signal.SIGTERM
    err = capfd.readouterr().err
    assert "demo: second SIGTERM: stopped at once" in err and "Traceback" not in err
    assert issubclass(StopAtOnce, KeyboardInterrupt)  # a TrainingRun ends KILLED on it
