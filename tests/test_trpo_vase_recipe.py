"""recipes/trpo_vase.py through Hydra's compose API, tiny budgets, a throw-away MLflow store."""

import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import ClassVar

import gymnasium
import imageio
import mlflow
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from recipe_modules import load_recipe, train_killed_in_critic_fit
from tensordict import TensorDict
from torchrl.collectors import Collector
from torchrl.envs import GymEnv
from torchrl.envs.utils import ExplorationType, set_exploration_type

import torchrl_vase
from torchrl_vase import Exploration
from torchrl_vase.envs import PointRobot2DEnv
from torchrl_vase.loop import is_clock
from torchrl_vase.objectives import critic_fit as algorithm
from torchrl_vase.recipe import assembly
from torchrl_vase.recipe import config as schema
from torchrl_vase.runs import flatten, run_identity

ROOT = Path(__file__).resolve().parents[1]
ENVS = ["point_robot", "mountain_car", "cartpole_swingup", "double_pendulum", "half_cheetah",
        "ant", "lunar_lander"]
SURPRISES = ["none", "vase", "nll", "vime", "rnd"]


recipe = load_recipe("trpo_vase")


def _identity(config, ignores):
    """The identity the recipe gives a config (``TrainingRun``'s, with its retired keys)."""
    return run_identity(config, ignores, schema.RETIRED_KEYS)


def _config(store, *overrides):
    uri, root = store
    tiny = [
        f"mlflow.tracking_uri={uri}",
        f"checkpoint.dir={root / 'checkpoints'}",
        "iterations=2",
        "num_envs=2",
        "env.frames_per_batch=64",
        "env.pool_size=1000",
        "env.pool_min=50",
        "obs_norm_steps=20",
        "progress_bar=false",
        "checkpoint.every=0",
        # evaluation has its own tests (and the env matrix's none column): 5 whole episodes at
        # every run's end would cost more than its two iterations
        "eval.every=0",
        "trpo.critic_minibatch=32",
        # lanes of 32 steps: the machinery's tests count 64 frames a batch (rllab's whole paths,
        # the default, run to the env's 500-step limit: test_paths_* and test_collectors.py)
        "collection=rllab",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("trpo_vase", overrides=[*tiny, *overrides])
    if cfg.surprise.name != "none":
        schema.model_training(cfg).updates_per_iteration = 3
    return cfg


@pytest.mark.parametrize("surprise", SURPRISES)
@pytest.mark.parametrize("env", ENVS)
def test_every_env_and_surprise_runs_two_iterations(store, env, surprise):
    # each env's evaluation once: in its none column (the bonus plays no part in it)
    evaluation = ("eval.every=2", "eval.episodes=2") if surprise == "none" else ()
    result = recipe.train(_config(store, f"env={env}", f"surprise={surprise}", "seed=7",
                                  *evaluation))
    assert result["iterations_done"] == 2
    run = MlflowClient(tracking_uri=store[0]).get_run(result["run_id"])
    evaluated = {key for key in run.data.metrics if key.startswith("eval/")}
    # every task is sparse: a success is a positive return
    assert evaluated == ({"eval/return", "eval/success_rate", "eval/episode_length"}
                         if evaluation else set())
    assert run.info.status == "FINISHED"
    assert run.data.tags["env"] == env and run.data.tags["surprise"] == surprise
    expected_name = "none-seed7" if surprise == "none" else f"{surprise}-extrinsic-seed7"
    assert run.info.run_name == expected_name
    experiment = MlflowClient(tracking_uri=store[0]).get_experiment(run.info.experiment_id)
    assert experiment.name == env
    if surprise == "none" and env in ("point_robot", "mountain_car"):
        # no reward in 128 steps: every value target is 0, nothing to fit: neither the fit's
        # loss (float noise) nor its explained variance (NaN) is logged; the policy's step is
        assert "trpo/kl" in run.data.metrics
        assert not {"trpo/critic_loss", "trpo/explained_variance"} & set(run.data.metrics)


def test_mlflow_holds_flattened_params_metrics_and_artifacts(store):
    cfg = _config(store, "env=point_robot", "surprise=vase", "seed=11", "checkpoint.every=1",
                  "advantage=extrinsic")
    result = recipe.train(cfg)
    client = MlflowClient(tracking_uri=store[0])
    run = client.get_run(result["run_id"])
    params = run.data.params
    assert params["env.frames_per_batch"] == "64"
    assert params["surprise.delta"] == str(cfg.surprise.delta)
    assert params["env.bnn.num_cells"] == "[32]"
    assert params["iterations"] == "2" and "env.iterations" not in params  # the count, once
    noise = [k for k in params if k.startswith(("mlflow.", "checkpoint.", "progress_bar"))]
    assert not noise and "resume" not in params
    assert run.data.tags["git_commit"]
    experiment = client.get_experiment(run.info.experiment_id)
    # MLflow 3's UI opens an experiment of this kind on its runs table, not on GenAI traces
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    note = experiment.tags["mlflow.note.content"]
    assert "recipes/study/compare.py --experiment point_robot" in note
    # the runs table opens on a shared view whose columns are metrics this recipe logs, sorted
    # by the extrinsic return, best first; both pages in model-training mode
    view = json.loads(experiment.tags["mlflow.sharedViewState.return-first"])
    columns = [key.removeprefix("metrics.`").removesuffix("`") for key in view["selectedColumns"]]
    logged = set(run.data.metrics) | {"eval/return", "train/first_reward_step"}  # off here
    assert columns[0] == "Return/mean" and set(columns) <= logged, columns
    assert view["orderByKey"] == "metrics.`Return/mean`" and view["orderByAsc"] is False
    assert result["runs_table"].endswith(
        f"#/experiments/{experiment.experiment_id}/runs?workflowType=machine_learning"
        "&viewStateShareKey=return-first")
    assert result["run_charts"].endswith(
        f"#/experiments/{experiment.experiment_id}/runs/{run.info.run_id}/model-metrics"
        "?workflowType=machine_learning")
    for key in ("bonus/mean", "bonus/std", "bnn/elbo", "bnn/loss_kl", "bnn/entropy", "trpo/kl",
                "trpo/surrogate_after", "trpo/step_accepted", "train/fps", "train/wall_time",
                "train/frames", "train/coverage"):
        history = client.get_metric_history(run.info.run_id, key)
        assert [m.step for m in history] == [64, 128], key  # stepped by frames
    # where the time went, by phase: they add up to the iteration, which is the loop's own
    # clock's (train/wall_time) from one iteration to the next, and "other" (no phase) is small
    times = {key: {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}
             for key in run.data.metrics if key.startswith("time/")}
    phases = {"collection", "watchers", "bonus", "diagnostics", "pool", "model", "advantage",
              "policy", "critic", "checkpoint", "logging", "other"}
    assert {key.removeprefix("time/") for key in times} == phases | {"iteration",
                                                                     "exploration_share"}
    # the checkpoint and logging after iteration 1 are in iteration 2's lap; the diagnostic
    # (the advantage's alignment) starts with the bonus, once the model has been trained
    assert set(times["time/checkpoint"]) == set(times["time/diagnostics"]) == {128}
    for step in (64, 128):
        laps = sum(times[f"time/{name}"].get(step, 0.0) for name in phases)
        np.testing.assert_allclose(laps, times["time/iteration"][step], rtol=1e-9)
    times = {key: [by_step[step] for step in sorted(by_step)] for key, by_step in times.items()
             if len(by_step) == 2}
    wall = [m.value for m in sorted(client.get_metric_history(run.info.run_id, "train/wall_time"),
                                    key=lambda m: m.step)]
    np.testing.assert_allclose(times["time/iteration"][1], wall[1] - wall[0], rtol=0.05)
    # the work is in named phases (a forgotten phase would put its seconds here); loose, as a
    # loaded machine stalls unphased code too (5 % failed under a parallel suite's load)
    assert sum(times["time/other"]) <= 0.25 * sum(times["time/iteration"]), times
    for key in ("bonus/advantage_corr", "bonus/advantage_share"):
        history = client.get_metric_history(run.info.run_id, key)
        assert [m.step for m in history] == [128], key
    corr = client.get_metric_history(run.info.run_id, "bonus/advantage_corr")[0].value
    assert corr > 0.999  # no reward yet: the authors' structure leaves the bonus alone
    coverage = [m.value for m in client.get_metric_history(run.info.run_id, "train/coverage")]
    assert 0 < coverage[0] <= coverage[1] < 0.05  # 128 steps of ≤ 0.01 from the origin
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "weights.pt", "visited_positions.png"} <= artifacts
    weights = torch.load(client.download_artifacts(run.info.run_id, "weights.pt"),
                         weights_only=True)
    assert set(weights) == {"actor", "critic", "collector", "exploration",
                            "_content_sha256"}  # the digest it is checked against on loading
    assert not any("extra_state" in key for key in weights["exploration"])  # no pool


def _history(uri: str, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Every metric's (step, value) but the timings, NaN as a string so that it compares equal."""
    client = MlflowClient(tracking_uri=uri)
    return {
        key: [(m.step, "nan" if np.isnan(m.value) else m.value)
              for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]
        for key in client.get_run(run_id).data.metrics if not is_clock(key)
    }


@pytest.mark.parametrize(("seed", "collection"), [
    (21, ("collection=rllab",)),
    # rllab's whole paths (the default), of 32 steps here: two a batch
    (22, ("collection=paths", "+env.make_kwargs.max_episode_steps=32")),
])
def test_kill_and_resume_ends_with_the_uninterrupted_runs_metric_values(store, monkeypatch,
                                                                         seed, collection):
    overrides = ("env=mountain_car", "surprise=vase", f"seed={seed}", "iterations=5",
                 "checkpoint.every=2", *collection)
    uninterrupted = recipe.train(_config(store, *overrides, "mlflow.experiment=uninterrupted"))
    train_killed_in_critic_fit(4, _config(store, *overrides), monkeypatch)
    client = MlflowClient(tracking_uri=store[0])
    [killed] = client.search_runs([client.get_experiment_by_name("mountain_car").experiment_id],
                                  filter_string=f"tags.seed = '{seed}'")
    assert killed.info.status == "KILLED"
    # metrics go out with checkpoints: iterations 0-1 are logged, 2 was computed and lost
    frames = client.get_metric_history(killed.info.run_id, "train/frames")
    assert [m.step for m in frames] == [64, 128]
    result = recipe.train(_config(store, *overrides, "resume=true"))
    assert result["run_id"] == killed.info.run_id
    assert client.get_run(result["run_id"]).info.status == "FINISHED"
    resumed = _history(store[0], result["run_id"])
    assert resumed == _history(store[0], uninterrupted["run_id"])
    assert [step for step, _ in resumed["trpo/kl"]] == [64, 128, 192, 256, 320]
    # one checkpoint per run, under its run id; plain tensors (weights_only); the pool not in
    # it but appended beside it, each of its 5 x 64 transitions once
    path = Path(store[1]) / "checkpoints" / "mountain_car" / result["run_id"] / "last.pt"
    state = torch.load(path, weights_only=True)
    assert state["iterations_done"] == 5 and state["frames"] == 320 and state["pending_metrics"]
    pool = state["parts"]["exploration"]["_extra_state"]["pool"]
    assert list(pool) == ["journal"] and pool["journal"]["write_count"] == 320
    chunks = sorted(path.parent.joinpath("pool").glob("*.pt"))
    spans = [tuple(map(int, chunk.stem.split("-")[1:])) for chunk in chunks]
    # the kill left its checkpoint at iteration 2 (128 transitions); the resumed run wrote the
    # rest at its checkpoints, every 2 iterations and at the end
    assert spans == [(0, 128), (128, 256), (256, 320)]


def test_a_run_checkpointed_with_its_pool_whole_resumes_exactly_and_journals_from_then_on(
        store, monkeypatch):
    # a checkpoint of the version before the pool's journal held the pool whole: a run killed
    # then and resumed now must continue as if never stopped (the study resumes such runs)
    overrides = ("env=mountain_car", "surprise=vase", "seed=23", "iterations=4",
                 "checkpoint.every=1")
    uninterrupted = recipe.train(_config(store, *overrides, "mlflow.experiment=uninterrupted"))
    with monkeypatch.context() as before:
        before.setattr(Exploration, "journal_pool", lambda self, directory: None)
        train_killed_in_critic_fit(3, _config(store, *overrides), monkeypatch)
    client = MlflowClient(tracking_uri=store[0])
    [killed] = client.search_runs([client.get_experiment_by_name("mountain_car").experiment_id],
                                  filter_string="tags.seed = '23'")
    directory = Path(store[1]) / "checkpoints" / "mountain_car" / killed.info.run_id
    saved = torch.load(directory / "last.pt", weights_only=True)
    assert len(saved["parts"]["exploration"]["_extra_state"]["pool"]["transitions"][
        "observation"]) == 128 and not (directory / "pool").exists()
    result = recipe.train(_config(store, *overrides, "resume=true"))
    assert result["run_id"] == killed.info.run_id
    assert _history(store[0], result["run_id"]) == _history(store[0], uninterrupted["run_id"])
    pool = torch.load(directory / "last.pt", weights_only=True)["parts"]["exploration"][
        "_extra_state"]["pool"]
    assert pool["journal"]["write_count"] == 256
    # the resumed run's first checkpoint wrote the whole pool once, then each batch
    assert sorted(chunk.name for chunk in (directory / "pool").glob("*.pt")) == [
        "chunk-000000000000-000000000192.pt", "chunk-000000000192-000000000256.pt"]


def test_resume_with_the_checkpoint_elsewhere_is_refused_and_logs_nothing(store, tmp_path):
    # resume=true finds the run by its config (checkpoint.* is not part of it); without its
    # checkpoint it would start over inside the same MLflow run and log every step twice
    overrides = ("surprise=none", "seed=8", "iterations=2", "checkpoint.every=1",
                 "mlflow.experiment=moved")
    first = recipe.train(_config(store, *overrides))
    before = _history(store[0], first["run_id"])
    assert [step for step, _ in before["train/frames"]] == [64, 128]
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(FileNotFoundError, match=rf"run has logged metrics, {first['run_id']} "
                                                r"\(up to step 128\).* not at .*elsewhere"):
        recipe.train(_config(store, *overrides, "resume=true", "iterations=3",
                             f"checkpoint.dir={elsewhere}"))
    assert _history(store[0], first["run_id"]) == before
    client = MlflowClient(tracking_uri=store[0])
    assert len(client.search_runs([client.get_experiment_by_name("moved").experiment_id])) == 1
    # pointed at its checkpoint, the same run continues
    path = Path(store[1]) / "checkpoints" / "moved" / first["run_id"] / "last.pt"
    resumed = recipe.train(_config(store, *overrides, f"resume={path}", "iterations=3"))
    assert resumed["run_id"] == first["run_id"]
    assert [m.step for m in client.get_metric_history(first["run_id"], "train/frames")] == [
        64, 128, 192]


def test_resume_refuses_a_checkpoint_of_another_config(store):
    cfg = _config(store, "surprise=none", "seed=4", "iterations=1", "checkpoint.every=1")
    result = recipe.train(cfg)
    path = Path(store[1]) / "checkpoints" / "mountain_car" / result["run_id"] / "last.pt"
    with pytest.raises(ValueError, match=r"another config; keys that differ: seed \(4 there"):
        recipe.train(_config(store, "surprise=none", "seed=5", "checkpoint.every=1",
                             f"resume={path}"))


def test_resume_from_an_older_copy_of_last_pt_is_refused_and_logs_no_step_twice(store, tmp_path):
    overrides = ("surprise=none", "seed=6", "checkpoint.every=1", "mlflow.experiment=older")
    result = recipe.train(_config(store, *overrides, "iterations=3"))
    last = Path(store[1]) / "checkpoints" / "older" / result["run_id"] / "last.pt"
    older = tmp_path / "older.pt"
    shutil.copy(last, older)  # the checkpoint after iteration 3
    recipe.train(_config(store, *overrides, "iterations=5", "resume=true"))
    client = MlflowClient(tracking_uri=store[0])
    before = [m.step for m in client.get_metric_history(result["run_id"], "train/iteration")]
    assert len(before) == 5
    with pytest.raises(ValueError, match=r"logged steps up to 320 frames, past this "
                                         r"checkpoint's 192 \(an older copy of its last.pt\?\)"):
        recipe.train(_config(store, *overrides, "iterations=6", f"resume={older}"))
    after = [m.step for m in client.get_metric_history(result["run_id"], "train/iteration")]
    assert after == before  # nothing logged, nothing twice
    assert client.get_run(result["run_id"]).info.status == "FINISHED"  # left as it was
    recipe.train(_config(store, *overrides, "iterations=6", f"resume={last}"))  # the latest
    steps = [m.step for m in client.get_metric_history(result["run_id"], "train/iteration")]
    assert len(steps) == len(set(steps)) == 6


def test_a_run_too_big_for_the_memory_is_refused_before_any_mlflow_run(store, monkeypatch):
    client = MlflowClient(tracking_uri=store[0])
    with pytest.raises(ValueError, match=r"this run needs about \d+\.\d GiB \(a batch of "
                                         r"2,000,000,\d+ frames: .* lower env.frames_per_batch"):
        recipe.train(_config(store, "surprise=none", "env.frames_per_batch=2000000000",
                             "mlflow.experiment=huge"))
    assert client.get_experiment_by_name("huge") is None  # no experiment, no run
    # the estimate against a known free memory: a batch of 5,000 MountainCar frames fits in 1
    # GiB, a pool of 100,000 transitions too; the same run with 1 MiB free does not
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = schema.typed_config(compose("trpo_vase", overrides=["surprise=vase"]))
    monkeypatch.setattr(assembly, "available_memory", lambda: 2**30)
    assembly.check_memory(cfg, 2, 1)
    monkeypatch.setattr(assembly, "available_memory", lambda: 2**20)
    with pytest.raises(ValueError, match=r"more than 80 % of the 0\.0 GiB free here"):
        assembly.check_memory(cfg, 2, 1)
    # the envs and the model's samples count too, each named with its own key to lower
    monkeypatch.setattr(assembly, "available_memory", lambda: 8 * 2**30)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        many_envs = schema.typed_config(compose("trpo_vase", overrides=[
            "surprise=none", "num_envs=5000", "env.frames_per_batch=5000"]))
        many_samples = schema.typed_config(compose("trpo_vase", overrides=[
            "env=half_cheetah", "surprise.num_samples=100000000"]))
    with pytest.raises(ValueError, match=r"5,000 envs: 9\.8 GiB.* lower num_envs"):
        assembly.check_memory(many_envs, 2, 1)
    # HalfCheetah's model: 7,188 weights and biases, 148 units a row, 10 rows a minibatch, 12
    # bytes a value (noise, activation, gradient) for each of the 1e8 samples
    expected = 12 * 10**8 * (7_188 + 10 * 148) / 2**30
    with pytest.raises(ValueError, match=rf"100,000,000 model samples: {expected:.1f} GiB.* "
                                         r"lower surprise\.num_samples"):
        assembly.check_memory(many_samples, 20, 6)


def test_a_parallel_sweep_with_checkpoints_gives_two_runs_that_each_resume_themselves(
        tmp_path, sqlite_uri, run_script):
    uri = sqlite_uri

    def sweep(iterations: int, resume: bool) -> None:
        # the sweep's launcher in this process, its jobs in joblib's worker processes (which the
        # second sweep reuses while they idle: seconds of imports less)
        run_script(
            "recipes/trpo_vase.py", "-m", "hydra/launcher=joblib",
            "surprise.delta=0.01,0", f"iterations={iterations}", "num_envs=2",
            "env.frames_per_batch=64", "collection=rllab", "env.pool_min=50",
            "surprise.elbo.updates_per_iteration=3", "trpo.critic_minibatch=32", "eval.every=0",
            "progress_bar=false", "checkpoint.every=1",
            f"resume={str(resume).lower()}", f"mlflow.tracking_uri={uri}",
            f"checkpoint.dir={tmp_path / 'checkpoints'}", f"hydra.sweep.dir={tmp_path / 'mr'}",
            check=True)

    sweep(1, resume=False)
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("mountain_car").experiment_id])
    # a run's name carries the overrides that change a setting, not where it logs or resumes
    assert sorted(r.info.run_name for r in runs) == [
        f"vase-extrinsic-seed0 surprise.delta={delta} iterations=1 num_envs=2 "
        "env.frames_per_batch=64 collection=rllab env.pool_min=50 "
        "surprise.elbo.updates_per_iteration=3 trpo.critic_minibatch=32 eval.every=0"
        for delta in ("0", "0.01")]
    # one tag for the sweep: its directory's name (by default its launch time)
    assert {r.data.tags["sweep"] for r in runs} == {"mr"}
    sweep(2, resume=True)  # each job finds its own run by its config's identity, and extends it
    runs = client.search_runs([client.get_experiment_by_name("mountain_car").experiment_id])
    assert sorted(r.data.params["surprise.delta"] for r in runs) == ["0.0", "0.01"]
    for run in runs:
        assert run.info.status == "FINISHED"
        frames = client.get_metric_history(run.info.run_id, "train/frames")
        assert sorted(m.step for m in frames) == [64, 128]
        state = torch.load(tmp_path / "checkpoints" / "mountain_car" / run.info.run_id / "last.pt",
                           weights_only=True)
        assert state["run_id"] == run.info.run_id
        assert f"delta: {run.data.params['surprise.delta']}" in state["config"]
    mlflow.set_tracking_uri(None)


def test_sigterm_ends_the_run_killed_with_a_checkpoint_and_resume_finishes_it(tmp_path,
                                                                             sqlite_uri):
    uri = sqlite_uri
    command = [
        sys.executable, str(ROOT / "recipes" / "trpo_vase.py"), "surprise=none",
        "iterations=100", "num_envs=2", "env.frames_per_batch=64", "collection=rllab",
        "trpo.critic_minibatch=32", "checkpoint.every=100",
        "eval.every=0", f"mlflow.tracking_uri={uri}",
        f"checkpoint.dir={tmp_path / 'checkpoints'}",
    ]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                               stderr=subprocess.STDOUT)
    for line in process.stdout:  # piped: a progress line every 5 iterations, after them
        if "seed 0: iteration " in line:  # iterations done, whatever the machine's load
            break
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=120)[0]
    assert process.returncode == 128 + signal.SIGTERM, output
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("mountain_car").experiment_id])
    assert run.info.status == "KILLED"
    state = torch.load(tmp_path / "checkpoints" / "mountain_car" / run.info.run_id / "last.pt",
                       weights_only=True)
    done = state["iterations_done"]
    assert 1 <= done < 100  # not a checkpoint of the schedule (every 100): the signal's
    frames = client.get_metric_history(run.info.run_id, "train/frames")
    assert sorted(m.step for m in frames) == [64 * (i + 1) for i in range(done)]
    overrides = [*command[2:], f"iterations={done + 2}", "resume=true"]  # the last one wins
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        recipe.train(compose("trpo_vase", overrides=overrides))  # in this process: seconds less
    run = client.get_run(run.info.run_id)
    assert run.info.status == "FINISHED"
    assert len(client.get_metric_history(run.info.run_id, "train/frames")) == done + 2
    mlflow.set_tracking_uri(None)


def test_threads_hold_for_the_whole_run(store, monkeypatch):
    seen = []
    original = algorithm.fit_critic
    monkeypatch.setattr(algorithm, "fit_critic", lambda *a, **k: seen.append(
        torch.get_num_threads()) or original(*a, **k))
    torch.set_num_threads(2)
    try:
        recipe.train(_config(store, "threads=1", "surprise=none", "iterations=3"))
        assert seen == [1, 1, 1] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(2)


@pytest.mark.parametrize(("cores", "jobs", "load", "expected"), [
    (2, 1, 0.1, 2), (2, 2, 0.1, 1), (2, 3, 0.0, 1), (16, 4, 0.0, 4), (16, 5, 0.3, 3),
    (2, 1, 1.2, 1),  # a core busy with something else: one thread
    (16, 1, 13.6, 2), (2, 1, 5.0, 1)])
def test_auto_threads_share_the_idle_cores_among_the_jobs_run_at_once(monkeypatch, cores, jobs,
                                                                      load, expected):
    monkeypatch.setattr(schema, "usable_cores", lambda: cores)
    monkeypatch.setattr(schema.os, "getloadavg", lambda: (load, load, load))
    assert schema.threads_for(OmegaConf.create({"threads": "auto"}), jobs=jobs) == expected


def test_a_joblib_sweep_counts_its_jobs_and_an_oversubscribing_count_says_so(monkeypatch,
                                                                            capsys):
    class Sweep:  # what HydraConfig.get() holds in a joblib multirun
        mode = schema.RunMode.MULTIRUN
        launcher = OmegaConf.create({
            "_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
            "n_jobs": -1})

    monkeypatch.setattr(schema, "usable_cores", lambda: 2)
    monkeypatch.setattr(schema.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(schema.HydraConfig, "initialized", staticmethod(lambda: True))
    monkeypatch.setattr(schema.HydraConfig, "get", staticmethod(Sweep))
    assert schema.jobs_together() == 2  # n_jobs=-1: one a core
    assert schema.threads_for(OmegaConf.create({"threads": "auto"})) == 1
    assert capsys.readouterr().err == ""
    assert schema.threads_for(OmegaConf.create({"threads": 2})) == 2  # as asked, but said
    assert "threads=2 in each of 2 jobs at once is more threads than the 2 cores" in (
        capsys.readouterr().err)
    Sweep.launcher = OmegaConf.create({"_target_": "hydra._internal.BasicLauncher"})
    assert schema.jobs_together() == 1  # one job after another


def test_replay_pool_never_crosses_an_episode_boundary(store):
    cfg = _config(store, "env=point_robot", "surprise=vase")
    exploration = assembly.make_exploration(cfg, obs_dim=2, action_dim=2)
    env = GymEnv("torchrl_vase/PointRobot2D-v0", max_episode_steps=7)  # many resets
    collector = Collector(env, policy=None, frames_per_batch=100, total_frames=100)
    batch = next(iter(collector))
    collector.shutdown()
    assert batch["next", "truncated"].sum() >= 10
    exploration.fit(batch)
    stored = exploration.pool[:]
    step = (stored["next", "observation"] - stored["observation"]).abs()
    # every stored (s, a, s') is one step of at most 0.01 per axis: never a jump back to the start
    assert len(stored) == 100 and step.max() <= 0.01 + 1e-6


@pytest.mark.parametrize(
    ("env_name", "bound"),
    [("point_robot", 0.01), ("mountain_car", 1.0), ("cartpole_swingup", 10.0)],
)
def test_the_policy_acts_in_the_unit_box_whatever_the_env_bounds(store, env_name, bound):
    cfg = schema.typed_config(_config(store, f"env={env_name}", "surprise=none",
                                      "env.frames_per_batch=8"))
    collector = assembly.seeded_build(cfg, *schema.check_env(cfg))[0]
    sent = []
    original = collector.env.step
    collector.env.step = lambda action: sent.append(action.copy()) or original(action)
    batch = collector.rollout()
    collector.shutdown()
    # the env receives the policy's action clipped to [-1, 1] times its bound; the batch keeps
    # the policy's own sample
    expected = batch["action"].clamp(-1, 1).transpose(0, 1).reshape(-1, *sent[0].shape) * bound
    torch.testing.assert_close(torch.as_tensor(np.stack(sent), dtype=torch.float32), expected)
    assert batch["action"].abs().max() > 1


@pytest.mark.parametrize("stop", [True, False])
def test_stop_at_first_reward_ends_the_run_in_the_iteration_that_found_it(store, stop):
    # a goal that covers the start: every env is rewarded at its first step
    if "tests/PointRobotGoalAtStart-v0" not in gymnasium.registry:
        gymnasium.register("tests/PointRobotGoalAtStart-v0", entry_point=PointRobot2DEnv,
                           kwargs={"goal": (0.02, 0.0), "goal_radius": 0.05}, max_episode_steps=50)
    cfg = _config(store, "env=point_robot", "env.id=tests/PointRobotGoalAtStart-v0",
                  "surprise=none", "iterations=3", f"stop_at_first_reward={stop}",
                  f"mlflow.experiment=stop_{stop}")
    result = recipe.train(cfg)
    assert result["train/first_reward_step"] == cfg.num_envs  # the first time slice of the envs
    assert result["iterations_done"] == (1 if stop else 3)
    client = MlflowClient(tracking_uri=store[0])
    history = client.get_metric_history(result["run_id"], "train/frames")
    assert len(history) == result["iterations_done"]


def test_bad_inputs_fail_before_training(store):
    with pytest.raises(ConfigCompositionException, match="env"):
        _config(store, "env=mountain_bike")
    with pytest.raises(ConfigCompositionException, match="surprise"):
        _config(store, "surprise=curiosity")
    with pytest.raises(ValueError, match=r"pool_min \(50\) exceeds pool_size \(10\)"):
        recipe.train(_config(store, "env.pool_size=10", "env.pool_min=50"))
    cfg = _config(store, "mlflow.tracking_uri=http://127.0.0.1:9")
    with pytest.raises(RuntimeError, match="cannot reach the MLflow tracking store"):
        recipe.train(cfg)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        recipe.train(_config(store, "resume=/nonexistent/last.pt", "checkpoint.every=1"))
    with pytest.raises(ValueError, match="resume needs checkpoints"):
        recipe.train(_config(store, "resume=true"))
    with pytest.raises(ConfigCompositionException, match="advantage"):
        _config(store, "advantage=intrinsic")
    with pytest.raises(ValueError, match="shuffle_bonus=true with surprise=none"):
        recipe.train(_config(store, "shuffle_bonus=true", "surprise=none"))
    with pytest.raises(ValueError, match=r"critic_activation must be one of \['relu', 'tanh'\]"):
        recipe.train(_config(store, "trpo.critic_activation=sigmoid"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("iterations=abc", r"^iterations: Value 'abc' of type 'str' could not be converted"),
        ("iterations=2.5", r"^iterations: Value '2.5' of type 'float' could not be converted"),
        ("num_envs=0", r"^num_envs must be >= 1, got 0"),
        ("threads=0", r"^threads must be auto or a whole number from 1 to the \d+ cores"),
        ("threads=-1", r"^threads must be auto or a whole number from 1"),
        ("threads=1000", r"^threads must be auto .* cores this process may use, got 1000"),
        ("threads=abc", r"^threads must be auto or a whole number"),
        ("env.bnn.num_cells=[32,x]", r"^env.bnn.num_cells\[1\]: Value 'x'"),
        ("+surprise.sigma=1", r"^surprise.sigma: Key 'sigma' not in 'BNNSurprise'"),
        ("+seed_list=3", r"^seed_list: Key 'seed_list' not in 'Main'"),
        ("surprise.sigma_c=0", r"^surprise.sigma_c must be a finite number > 0, got 0.0"),
        ("surprise.sigma_c=inf", r"^surprise.sigma_c must be a finite number > 0, got inf"),
        ("surprise.sigma_c=1e-20", r"^surprise.sigma_c must be in \[1e-06, 1e\+06\], got 1e-20"),
        ("surprise.sigma_c=1e-300", r"^surprise.sigma_c must be in \[1e-06, 1e\+06\], got "
                                    r"1e-300: below, the surprise .* overflows float32"),
        ("trpo.init_log_std=1e6", r"^init_log_std must be in \[-20, 20\], got 1000000.0"),
        ("env.policy_cells=[-1]", r"^env.policy_cells must be a list of positive layer widths, "
                                  r"got \[-1\]"),
        ("env.critic_cells=[32,0]", r"^env.critic_cells must be a list of positive layer widths"),
        ("env.id=NoSuchEnv-v0", r"^env.id=NoSuchEnv-v0: Environment `NoSuchEnv` doesn't exist"),
        ("trpo.gamma=1.5", r"^trpo.gamma must be <= 1, got 1.5"),
        ("device=gpu", r"^device must be cpu, cuda or cuda:<index>"),
        ("resume=3", r"^resume must be true, false or a checkpoint path"),
    ],
)
def test_a_bad_setting_fails_with_its_key_before_any_run_exists(store, override, message):
    before = _all_runs(store[0])
    with pytest.raises(ValueError, match=message):
        recipe.train(_config(store, override))
    assert _all_runs(store[0]) == before


def test_a_refused_setting_leaves_no_store_behind(tmp_path, store):
    fresh = tmp_path / "never.db"
    with pytest.raises(ValueError, match=r"surprise\.sigma_c must be a finite number"):
        recipe.train(_config(store, "surprise.sigma_c=inf",
                             f"mlflow.tracking_uri=sqlite:///{fresh}"))
    assert not fresh.exists()
    # a torch file that is no run's checkpoint: a sentence, not a KeyError
    stray = tmp_path / "stray.pt"
    torch.save({"weights": torch.zeros(2)}, stray)
    with pytest.raises(ValueError, match=r"carries no digest of its content"):
        recipe.train(_config(store, "checkpoint.every=1", f"resume={stray}"))
    with pytest.raises(ValueError, match=r"this file is not a run's checkpoint \(it holds no run "
                                         r"identity: weights\)"):
        recipe.train(_config(store, "checkpoint.every=1", "checkpoint.trust_unsigned=true",
                             f"resume={stray}"))


class DictObservationEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Dict({"position": gymnasium.spaces.Box(-1, 1, (2,))})
    action_space = gymnasium.spaces.Box(-1, 1, (1,))


gymnasium.register("test/DictObservation-v0", entry_point=DictObservationEnv)


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("CartPole-v1", r"^env.id=CartPole-v1: CartPole-v1 has the action space Discrete\(2\): "
                        r"the Gaussian policy needs a bounded vector Box action space"),
        ("test/DictObservation-v0", r"^env.id=test/DictObservation-v0: .* has the observation "
                                    r"space Dict\(.*\): the policy, critics and bonus models "
                                    r"need a flat vector observation .*FlattenObservation"),
    ],
)
def test_an_env_the_policy_cannot_drive_fails_before_any_run_exists(store, env_id, message):
    before = _all_runs(store[0])
    with pytest.raises(TypeError, match=message):
        recipe.train(_config(store, f"env.id={env_id}"))
    assert _all_runs(store[0]) == before


def test_an_env_id_without_a_config_file_trains_under_its_own_name(store, capsys):
    cfg = _config(store, "env.id=InvertedPendulum-v5", "surprise=vase", "eval.every=2",
                  "eval.episodes=1", "progress_bar=true")
    result = recipe.train(cfg)
    client = MlflowClient(tracking_uri=store[0])
    run = client.get_run(result["run_id"])
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.name == "InvertedPendulum-v5" and run.data.tags["env"] == experiment.name
    progress = capsys.readouterr().err.splitlines()[-1]
    assert progress.startswith("InvertedPendulum-v5/vase seed 0: iteration 2/2 (100%), return ")
    assert "success" not in progress
    # a dense task: a return, an evaluation, but no success rate nor first reward
    assert {"Return/mean", "eval/return", "train/frames"} <= set(run.data.metrics)
    assert not {"Return/success_rate", "eval/success_rate", "train/first_reward_step"} & set(
        run.data.metrics)
    view = json.loads(experiment.tags["mlflow.sharedViewState.return-first"])
    assert "metrics.`Return/success_rate`" not in view["selectedColumns"]
    with pytest.raises(ValueError, match="declares no sparse goal"):
        recipe.train(_config(store, "env.id=InvertedPendulum-v5", "stop_at_first_reward=true"))


@pytest.mark.parametrize(("overrides", "name"), [
    (["env=half_cheetah"], "half_cheetah"),
    (["env=lunar_lander", "env.id=LunarLanderContinuous-v3"], "LunarLanderContinuous-v3"),
    (["env=half_cheetah", "env.id=HalfCheetah-v5"], "HalfCheetah-v5"),
    (["env.id=Pendulum-v1", "env.name=pendulum"], "pendulum"),  # named by the user
])
def test_an_env_is_named_by_its_config_file_unless_its_id_is_another_task(store, overrides,
                                                                          name):
    assert schema.typed_config(_config(store, *overrides)).env.name == name


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_device_cuda_without_a_gpu_fails_before_any_run_exists(store):
    before = _all_runs(store[0])
    with pytest.raises(ValueError, match=r"^device=cuda: there is no CUDA device here"):
        recipe.train(_config(store, "device=cuda"))
    assert _all_runs(store[0]) == before


def _all_runs(uri: str) -> int:
    client = MlflowClient(tracking_uri=uri)
    return len(client.search_runs([e.experiment_id for e in client.search_experiments()]))


def test_an_unwritable_checkpoint_dir_fails_before_any_run_exists(store, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    before = _all_runs(store[0])
    with pytest.raises(PermissionError, match=r"checkpoint.dir: cannot write to .*a_file"):
        recipe.train(_config(store, f"checkpoint.dir={blocker}", "checkpoint.every=1"))
    assert _all_runs(store[0]) == before


def test_a_nan_reward_stops_the_run_at_its_first_step_naming_the_key(store):
    if "tests/NaNRewardPointRobot-v0" not in gymnasium.registry:
        gymnasium.register(
            "tests/NaNRewardPointRobot-v0", max_episode_steps=50,
            entry_point=lambda: gymnasium.wrappers.TransformReward(PointRobot2DEnv(),
                                                                   lambda r: float("nan")),
        )
    cfg = _config(store, "env=point_robot", "env.id=tests/NaNRewardPointRobot-v0")
    with pytest.raises(FloatingPointError, match=r"reward \('next', 'reward'\) is not finite "
                       r"in 64 of 64 transitions of iteration 0"):
        recipe.train(cfg)


@pytest.mark.parametrize("activation, layer", [("relu", torch.nn.ReLU), ("tanh", torch.nn.Tanh)])
def test_the_critic_uses_the_configured_activation(store, activation, layer):
    cfg = _config(store, f"trpo.critic_activation={activation}", "trpo.critic_standardize=false")
    critic = assembly.make_critic(cfg, obs_dim=3)
    kinds = {type(m) for m in critic.modules()}
    assert layer in kinds and ({torch.nn.ReLU, torch.nn.Tanh} - {layer}).isdisjoint(kinds)


def test_flatten_is_one_param_per_leaf():
    assert flatten({"env": {"bnn": {"num_cells": [32]}, "id": "x"}, "seed": 0}) == {
        "env.bnn.num_cells": "[32]", "env.id": "x", "seed": "0",
    }


def test_the_combined_advantage_structure_runs(store):
    result = recipe.train(_config(store, "env=point_robot", "advantage=combined", "seed=3"))
    run = MlflowClient(tracking_uri=store[0]).get_run(result["run_id"])
    assert run.info.run_name == "vase-combined-seed3"
    assert run.data.params["advantage.structure"] == "combined"


def test_authors_preset_sets_their_settings():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("trpo_vase", overrides=["preset=authors", "surprise=vase"])
    assert cfg.advantage.structure == "extrinsic" and cfg.advantage.center_bonus is False
    assert cfg.surprise.sigma_c == 0.5 and cfg.surprise.delta == 0.0
    assert cfg.surprise.init_mean == "normal"
    assert (cfg.trpo.init, cfg.trpo.cg_damping, cfg.trpo.backtracks) == ("glorot", 1e-5, 15)
    assert cfg.collection == "paths" and cfg.whole_paths is True


@pytest.mark.parametrize("surprise", ["vase", "nll", "vime", "rnd", "none"])
@pytest.mark.parametrize("env", ["mountain_car", "ant"])
def test_the_defaults_are_the_authors_code(env, surprise):
    # preset=authors states the authors' settings explicitly: the defaults compose to the same
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        default = compose("trpo_vase", overrides=[f"env={env}", f"surprise={surprise}"])
        authors = compose("trpo_vase", overrides=[f"env={env}", f"surprise={surprise}",
                                                  "preset=authors"])
    assert OmegaConf.to_container(default, resolve=True) == OmegaConf.to_container(
        authors, resolve=True)


# identities the recipe gave these configs at 8f1884c, when its defaults were the ones
# preset=former_defaults now sets
FORMER_IDENTITIES = [
    (["env=mountain_car", "surprise=vase", "seed=0"], "d9cf02b8dd3e"),
    (["env=half_cheetah", "surprise=none", "seed=3"], "1e43e87b5278"),
    (["env=ant", "surprise=nll", "seed=7"], "76c4363045c5"),
    (["env=cartpole_swingup", "surprise=vime", "seed=1"], "b09cae240b4a"),
    # RND's at 8f1884c was 7bee4f89525e: its training settings moved from surprise.elbo to
    # surprise.predictor (issue 40), a change of its config and so of its identity, on purpose
    (["env=lunar_lander", "surprise=rnd", "seed=2"], "41a3d5e0873c"),
]


@pytest.mark.parametrize(("overrides", "identity"), FORMER_IDENTITIES)
def test_the_former_defaults_preset_gives_the_earlier_runs_identity(overrides, identity):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        former = schema.typed_config(compose("trpo_vase",
                                             overrides=["preset=former_defaults", *overrides]))
        default = schema.typed_config(compose("trpo_vase", overrides=overrides))
    ours = _identity(OmegaConf.to_container(former, resolve=True),
                           schema.identity_ignores(former))
    assert ours == identity
    assert _identity(OmegaConf.to_container(default, resolve=True),
                           schema.identity_ignores(default)) != identity


def test_settings_that_cannot_run_fail_before_any_run_naming_their_keys():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        for overrides, message in [
            (["collection=rllab", "whole_paths=false"], r"whole_paths=false .* collection=paths"),
            (["collection=lanes"], r"collection must be one of \['continuous', 'paths', 'rllab'\]"),
            # the keys a user set, named as the config names them
            (["mlflow.experiment=''"], r"mlflow.experiment is empty"),
            # a name, never a path out of checkpoint.dir
            (["mlflow.experiment=../x"], r"mlflow.experiment must be a name, not a path: '../x'"),
            (["mlflow.experiment=a/b"], r"must be a name, not a path"),
            (["mlflow.experiment=.."], r"must be a name, not a path"),
            (["algorithm=ppo", "ppo.minibatch_size=100000"],
             r"ppo.minibatch_size \(100000\) exceeds the batch \(env.frames_per_batch, 5000\)"),
            (["surprise.elbo.batch_size=5000"],
             r"surprise.elbo.batch_size \(5000\) exceeds env.pool_min \(500\)"),
        ]:
            with pytest.raises(ValueError, match=message):
                schema.typed_config(compose("trpo_vase", overrides=overrides))


@pytest.mark.parametrize("env", ENVS)
def test_envs_are_the_authors_and_the_paper_preset_resolves_for_each(env):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        default = compose("trpo_vase", overrides=[f"env={env}"])
        paper = compose("trpo_vase", overrides=[f"env={env}", "preset=paper"])
        trpo = compose("trpo_vase", overrides=[f"env={env}", "preset=authors_trpo"])
    if env != "point_robot":
        assert default.env.id.endswith("-v1")  # the authors' task
    assert default.env.normalize_observations is False  # their NormalizedEnv's default
    assert default.env.bnn.activation == "relu"
    expected_norm = env not in ("point_robot", "mountain_car")  # the paper's text
    assert paper.env.normalize_observations is expected_norm
    assert paper.env.bnn.activation == ("tanh" if env in ("half_cheetah", "ant") else "relu")
    assert dict(paper.env.make_kwargs) == ({"goal": "position"} if env == "ant" else {})
    assert paper.surprise.sigma_c == 5.0 and paper.surprise.delta == 1e-3
    assert trpo.surprise.name == "none" and (trpo.trpo.gamma, trpo.trpo.gae_lambda) == (0.99, 1.0)


def test_evaluation_is_logged_and_the_loaded_policy_reproduces_it(store):
    cfg = _config(store, "env=point_robot", "surprise=vase", "seed=31", "iterations=3",
                  "eval.every=2", "eval.episodes=3", "checkpoint.every=1",
                  "mlflow.experiment=evaluation")
    result = recipe.train(cfg)
    client = MlflowClient(tracking_uri=store[0])
    history = client.get_metric_history(result["run_id"], "eval/return")
    assert sorted(m.step for m in history) == [128, 192]  # every 2 iterations, and the last
    # the two lines of the docs: the policy from MLflow, acting on the env's own observations
    policy = torchrl_vase.load_policy(result["run_id"], tracking_uri=store[0])
    assert policy.env_id == "torchrl_vase/PointRobot2D-v0"
    again = assembly.evaluation_metrics(schema.typed_config(cfg), policy, iteration=2)
    logged = {key: client.get_metric_history(result["run_id"], key)[-1].value
              for key in ("eval/return", "eval/success_rate", "eval/episode_length")}
    assert again == logged
    action = policy(TensorDict({"observation": torch.zeros(4, 2)}, [4]))["action"]
    assert action.shape == (4, 2) and torch.isfinite(action).all()


def test_load_policy_puts_the_runs_observation_standardisation_in_front(store):
    cfg = _config(store, "env=mountain_car", "surprise=none", "seed=32", "iterations=1",
                  "env.normalize_observations=true", "checkpoint.every=1",
                  "mlflow.experiment=normalised")
    result = recipe.train(cfg)
    policy = torchrl_vase.load_policy(result["run_id"], tracking_uri=store[0])
    weights = torch.load(
        Path(store[1]) / "checkpoints" / "normalised" / result["run_id"] / "weights.pt",
        weights_only=True,
    )
    loc, scale = (weights["collector"][k] for k in ("observation_loc", "observation_scale"))
    observation = torch.tensor([[-0.5, 0.01]])
    actor = torchrl_vase.gaussian_policy(2, 1, [32])
    actor.load_state_dict(weights["actor"])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        got = policy(TensorDict({"observation": observation}, [1]))["action"]
        expected = actor(TensorDict({"observation": (observation - loc) / scale}, [1]))["action"]
    torch.testing.assert_close(got, expected)


def test_load_policy_refuses_an_env_id_that_would_import_a_module(store, tmp_path):
    # a run's config.yaml edited to name "module:Env": gymnasium.make would import the module;
    # load_policy refuses it
    result = recipe.train(_config(store, "surprise=vase", "seed=36", "iterations=1",
                                  "checkpoint.every=1", "mlflow.experiment=tampered"))
    client = MlflowClient(tracking_uri=store[0])
    local = Path(client.download_artifacts(result["run_id"], "config.yaml", str(tmp_path)))
    marker = tmp_path / "imported"
    (tmp_path / "evil_env.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    local.write_text(local.read_text().replace("torchrl_vase/SparseMountainCar-v1",
                                               "evil_env:Env"))
    client.log_artifact(result["run_id"], str(local))  # replaces the run's config.yaml
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ValueError, match=r"'evil_env:Env', which is not registered"):
            torchrl_vase.load_policy(result["run_id"], tracking_uri=store[0])
    finally:
        sys.path.remove(str(tmp_path))
    assert not marker.exists()


class _RunsACommand:
    def __reduce__(self):
        return os.system, ("true",)


def test_load_policy_of_a_tampered_weights_file_names_the_run_not_a_temporary_path(store,
                                                                                    tmp_path):
    result = recipe.train(_config(store, "surprise=none", "seed=37", "iterations=1",
                                  "checkpoint.every=1", "mlflow.experiment=tampered_weights"))
    evil = tmp_path / "weights.pt"
    torch.save({"actor": _RunsACommand()}, evil)
    MlflowClient(tracking_uri=store[0]).log_artifact(result["run_id"], str(evil))
    with pytest.raises(RuntimeError) as error:
        torchrl_vase.load_policy(result["run_id"], tracking_uri=store[0])
    message = str(error.value)
    assert message.startswith(f"cannot load run {result['run_id']}'s weights.pt artifact: it "
                              "holds objects other than tensors")
    assert tempfile.gettempdir() not in message  # where the artifact was downloaded
    assert "resume" not in message and "weights_only" not in message


def _flip_first_weight(path: Path) -> None:
    """Four floats of the actor's first weight matrix changed inside the file (torch would load
    it without a word)."""
    def weights(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, torch.Tensor) and str(key).endswith("weight"):
                    yield value
                yield from weights(value)

    state = torch.load(path, weights_only=True)
    weight = next(w for w in weights(state) if w.dtype == torch.float32 and w.numel() >= 64)
    data = path.read_bytes()
    at = data.index(weight.reshape(-1)[:4].numpy().tobytes())
    path.write_bytes(data[:at] + torch.full((4,), 7.0).numpy().tobytes() + data[at + 16:])


def test_a_copied_checkpoint_or_weights_artifact_with_a_changed_tensor_is_refused(
        store, tmp_path, run_script):
    result = recipe.train(_config(store, "surprise=none", "seed=38", "iterations=1",
                                  "checkpoint.every=1", "mlflow.experiment=flipped"))
    checkpoint = next((store[1] / "checkpoints" / "flipped").rglob("last.pt"))
    copy = tmp_path / "copied" / "last.pt"  # the file alone: nothing beside it
    copy.parent.mkdir()
    shutil.copy(checkpoint, copy)
    _flip_first_weight(copy)
    with pytest.raises(ValueError, match=r"does not match the digest it was saved with"):
        recipe.train(_config(store, "surprise=none", "seed=38", "iterations=2",
                             "checkpoint.every=1", "mlflow.experiment=flipped",
                             f"resume={copy}"))
    client = MlflowClient(tracking_uri=store[0])
    weights = Path(client.download_artifacts(result["run_id"], "weights.pt", str(tmp_path)))
    _flip_first_weight(weights)
    client.log_artifact(result["run_id"], str(weights))  # replaces the run's weights.pt
    out = run_script("recipes/evaluate.py", result["run_id"], "--tracking-uri", store[0])
    assert out.returncode == 1 and "does not match the digest it was saved with" in out.stderr
    # a file written without a digest (by hand) is refused unless the user trusts it
    state = torch.load(weights, weights_only=True)
    torch.save({k: v for k, v in state.items() if k != "_content_sha256"}, weights)
    client.log_artifact(result["run_id"], str(weights))
    out = run_script("recipes/evaluate.py", result["run_id"], "--tracking-uri", store[0])
    assert out.returncode == 1 and "carries no digest" in out.stderr
    out = run_script("recipes/evaluate.py", result["run_id"], "--tracking-uri", store[0],
                     "--trust-unsigned", "--episodes", "1")
    assert out.returncode == 0, out.stderr


def test_load_policy_of_a_run_without_weights_says_why(store):
    result = recipe.train(_config(store, "surprise=none", "seed=33", "iterations=1",
                                  "mlflow.experiment=no_weights"))
    with pytest.raises(FileNotFoundError, match=r"no weights.pt artifact.*checkpoint.every=0"):
        torchrl_vase.load_policy(result["run_id"], tracking_uri=store[0])


def test_evaluate_script_prints_the_runs_evaluation_and_films_it_beside_the_run(
        store, tmp_path, run_script):
    result = recipe.train(_config(store, "surprise=none", "seed=34", "iterations=1",
                                  "checkpoint.every=1", "mlflow.experiment=script"))
    out = run_script("recipes/evaluate.py", result["run_id"], "--episodes", "2",
                     "--tracking-uri", store[0], "--video", "--seed", "3", check=True)
    assert "torchrl_vase/SparseMountainCar-v1, 2 episodes from seed 3, deterministic: return" \
        in out.stdout
    client = MlflowClient(tracking_uri=store[0])
    [video] = client.list_artifacts(result["run_id"], "videos")
    assert video.path == "videos/watch_seed3.mp4" and (tmp_path / "watch_seed3.mp4").is_file()
    with imageio.v2.get_reader(tmp_path / "watch_seed3.mp4") as reader:
        assert reader.get_data(0).shape == (400, 600, 3) and reader.count_frames() > 1
        assert reader.get_meta_data()["fps"] == 20  # the car's real time: 0.05 s a step


def test_evaluate_script_of_an_unknown_run_says_so_without_a_traceback(store, run_script):
    out = run_script("recipes/evaluate.py", "0" * 32, "--tracking-uri", store[0])
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("evaluate.py: ") and "0" * 32 in out.stderr


def test_with_video_on_the_run_logs_an_mp4_of_one_episode(store, tmp_path):
    cfg = _config(store, "env=point_robot", "surprise=none", "seed=35", "iterations=1",
                  "eval.video=true", "mlflow.experiment=video")
    result = recipe.train(cfg)
    client = MlflowClient(tracking_uri=store[0])
    [video] = client.list_artifacts(result["run_id"], "videos")
    local = client.download_artifacts(result["run_id"], video.path, str(tmp_path))
    with imageio.v2.get_reader(local) as reader:
        first = reader.get_data(0)
        count = reader.count_frames()
    # the whole episode, its start and 500 steps: a policy with a near-zero mean action stays
    # far from the goal (its actions start at 0.01 x the unit scale)
    assert video.path.endswith(".mp4") and count == 501
    assert first.shape == (480, 480, 3)  # a readable size
    red = (first[..., 0] > 150) & (first[..., 1] < 80) & (first[..., 2] < 80)
    centre = np.argwhere(red).mean(0)  # the robot starts at the origin, drawn as a visible disc
    assert red.sum() > 50 and np.allclose(centre, [240, 240], atol=4), (red.sum(), centre)


class NoRendererEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,))
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,))

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}


gymnasium.register("test/NoRenderer-v0", entry_point=NoRendererEnv)


# the test's own env, which renders nothing (what the test is about)
@pytest.mark.filterwarnings("ignore:.*not in the possible render_modes:UserWarning")
def test_video_of_an_env_without_rendering_fails_before_any_run_exists(store):
    before = _all_runs(store[0])
    with pytest.raises(ValueError,
                       match=r"test/NoRenderer-v0 (cannot render|renders no) rgb_array frame"):
        recipe.train(_config(store, "eval.video=true", "env.id=test/NoRenderer-v0"))
    assert _all_runs(store[0]) == before


class FailingRendererEnv(NoRendererEnv):
    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"]}

    def render(self):
        raise RuntimeError("gladLoadGL error (no OpenGL context)")


gymnasium.register("test/FailingRenderer-v0", entry_point=FailingRendererEnv)


@pytest.mark.filterwarnings("ignore:.*No render fps was declared:UserWarning")  # its own env
def test_a_renderer_that_fails_says_how_a_mujoco_task_renders_without_a_display(monkeypatch):
    from torchrl_vase.evaluation import check_video

    monkeypatch.delenv("MUJOCO_GL", raising=False)
    with pytest.raises(ValueError, match=r"cannot render rgb_array frames \(RuntimeError: "
                                         r"gladLoadGL error .*\)\. For a MuJoCo task without a "
                                         r"display, set MUJOCO_GL=egl \(or osmesa\)"):
        check_video("test/FailingRenderer-v0")
    monkeypatch.setenv("MUJOCO_GL", "egl")  # already chosen: no advice to choose it
    with pytest.raises(ValueError, match=r"\)\. otherwise turn the video off") as refused:
        check_video("test/FailingRenderer-v0")
    assert "MUJOCO_GL" not in str(refused.value)


@pytest.mark.parametrize(("overrides", "identity"), [
    # preset=authors_trpo before the authors' code became the defaults: their TRPO in lanes,
    # the bonus centred (a key of the advantage group, though plain TRPO has no bonus)
    (["preset=authors_trpo", "collection=rllab", "advantage.center_bonus=true"], "3366375a9e7b"),
    # the study's cells and SAC's at acdf3e12, before `collector` and `vectorization` retired
    (["surprise=vase"], "0d85716e1a8d"), (["preset=authors_trpo"], "f0c06d4902e0"),
    (["algorithm=sac", "env=half_cheetah", "surprise=vase"], "3fbde07c0c1b"),
    (["surprise=nll", "env=ant"], "7a987ad92de1"),
])
def test_the_run_identity_of_configs_from_before_ppo_is_unchanged(overrides, identity):
    # the identities the recipe gave these configs at 0b17d37, before `algorithm`, `ppo` and
    # `whole_paths` existed: resume=true still finds those runs (plain TRPO: no BNN, whose
    # numbers changed)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = schema.typed_config(compose("trpo_vase", overrides=overrides))
    config = OmegaConf.to_container(cfg, resolve=True)
    ours = _identity(config, schema.identity_ignores(cfg))
    assert ours == identity
    changed = schema.typed_config(OmegaConf.merge(cfg, {"algorithm": "ppo"}))
    assert _identity(OmegaConf.to_container(changed, resolve=True),
                           schema.identity_ignores(changed)) != ours


@pytest.mark.parametrize(("overrides", "before"), [
    (["preset=former_defaults", "surprise.sampling=weights"], "9e17d44f21c0"),
    (["preset=former_defaults", "env=half_cheetah", "surprise=nll", "seed=3",
      "surprise.sampling=weights"], "62428298c3ef"),
])
def test_bnn_runs_changed_identity_with_the_compiled_elbo_steps(overrides, before):
    # every BNN run's numbers changed with surprise.elbo.backend (the noise drawn an iteration at
    # a time, the kernel's rounding): its identity changed with them, by that key alone, so
    # resume=true starts a new run and resume=<old checkpoint> names the key
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = schema.typed_config(compose("trpo_vase", overrides=overrides))
    assert cfg.surprise.elbo.backend == "auto"
    config = OmegaConf.to_container(cfg, resolve=True)
    ignores = schema.identity_ignores(cfg)
    assert _identity(config, ignores) != before
    del config["surprise"]["elbo"]["backend"]
    config["surprise"]["elbo"]["compile"] = False  # the key the configs had before
    assert _identity(config, ignores) == before
    autograd = schema.typed_config(OmegaConf.merge(
        cfg, {"surprise": {"elbo": {"backend": "autograd"}}}))
    assert _identity(OmegaConf.to_container(autograd, resolve=True), ignores) != before


def test_an_unknown_elbo_backend_or_key_fails_before_any_run():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        # the backends retired with the hand-written gradients are unknown names now
        for backend in ("fast", "eager", "inductor"):
            with pytest.raises(ValueError, match=r"surprise.elbo.backend must be one of "
                                                 r"\['auto', 'autograd', 'numba'\]"):
                schema.typed_config(compose("trpo_vase",
                                            overrides=[f"surprise.elbo.backend={backend}"]))
        with pytest.raises(ValueError, match=r"surprise.elbo.compile: Key 'compile' not in"):
            schema.typed_config(compose("trpo_vase", overrides=["+surprise.elbo.compile=true"]))


def test_ppo_runs_through_the_same_loop_and_resumes_exactly(store, monkeypatch):
    overrides = ("algorithm=ppo", "surprise=vase", "seed=23", "iterations=4", "checkpoint.every=2",
                 "ppo.epochs=2", "ppo.minibatch_size=32", "mlflow.experiment=ppo")
    uninterrupted = recipe.train(_config(store, *overrides, "mlflow.experiment=ppo_reference"))
    client = MlflowClient(tracking_uri=store[0])
    run = client.get_run(uninterrupted["run_id"])
    assert run.info.run_name == "ppo-vase-extrinsic-seed23"
    assert run.data.tags["algorithm"] == "ppo" and run.data.params["ppo.epochs"] == "2"
    for key in ("ppo/loss_objective", "ppo/kl_approx", "ppo/clip_fraction",
                "bonus/advantage_corr", "bnn/elbo"):
        assert key in run.data.metrics, key
    # the extrinsic critic's targets are all 0 before a reward: its fit is not logged then (no
    # loss of float noise, no NaN explained variance), and both are logged together after
    histories = [[m.step for m in client.get_metric_history(run.info.run_id, f"ppo/{key}")]
                 for key in ("critic_loss", "explained_variance")]
    assert histories[0] == histories[1]
    assert not any(key.startswith("trpo/") for key in run.data.metrics)
    train_killed_in_critic_fit(3, _config(store, *overrides), monkeypatch)
    resumed = recipe.train(_config(store, *overrides, "resume=true"))
    assert _history(store[0], resumed["run_id"]) == _history(store[0], uninterrupted["run_id"])
    path = Path(store[1]) / "checkpoints" / "ppo" / resumed["run_id"] / "last.pt"
    assert torch.load(path, weights_only=True)["parts"]["policy_optimizer"]["state"]


def test_a_trpo_run_logs_no_ppo_params(store):
    result = recipe.train(_config(store, "surprise=none", "seed=24", "iterations=1"))
    params = MlflowClient(tracking_uri=store[0]).get_run(result["run_id"]).data.params
    assert params["algorithm"] == "trpo" and not any(key.startswith("ppo.") for key in params)


def test_the_bnns_sampling_is_an_option_of_the_bnn_measures(store):
    # the authors' layer by default (VASE, NLL), weight sampling for VIME, either on request
    result = recipe.train(_config(store, "surprise=vase", "seed=25", "iterations=1",
                                  "surprise.sampling=weights"))
    run = MlflowClient(tracking_uri=store[0]).get_run(result["run_id"])
    assert run.data.params["surprise.sampling"] == "weights"
    assert np.isfinite(run.data.metrics["bnn/elbo"])
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        defaults = {name: compose("trpo_vase", overrides=[f"surprise={name}"]).surprise.sampling
                    for name in ("vase", "nll", "vime")}
    assert defaults == {"vase": "local_shared", "nll": "local_shared", "vime": "weights"}
    before = _all_runs(store[0])
    with pytest.raises(ValueError, match=r"^measure='vime' needs weight sampling"):
        recipe.train(_config(store, "surprise=vime", "surprise.sampling=local_shared"))
    with pytest.raises(ValueError, match=r"^surprise.sampling must be one of \['local', "
                                         r"'local_shared', 'weights'\], got 'shared'"):
        recipe.train(_config(store, "surprise.sampling=shared"))
    assert _all_runs(store[0]) == before


@pytest.mark.parametrize(("overrides", "capacity"), [
    # rllab's whole paths: a batch holds up to a path more, less a step (Ant's fall early, so
    # its runs collect more than 600 x 5,000): the pool holds all of it, as the authors' 5 M
    (["env=ant"], 600 * (5000 + 499)),
    (["env=ant", "whole_paths=false"], 600 * 5000),
    (["env=ant", "collection=rllab"], 600 * 5000),
    (["env=lunar_lander"], 100_000),  # the authors' 100,000 for the classic tasks: a ring
    (["env=mountain_car", "iterations=2"], 2 * (5000 + 499)),
    (["env=point_robot", "+env.make_kwargs.max_episode_steps=40", "iterations=3"],
     3 * (5000 + 39)),
])
def test_the_pool_holds_what_a_run_collects_up_to_the_authors_size(overrides, capacity):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = schema.typed_config(compose("trpo_vase", overrides=overrides))
    assert assembly.pool_capacity(cfg, schema.iterations(cfg)) == capacity


def test_the_recipe_explains_itself_and_a_refused_input_ends_with_its_message(tmp_path,
                                                                             run_script):
    helped = run_script("recipes/trpo_vase.py", "--help", check=True)
    assert helped.stdout.startswith("recipes/trpo_vase.py: TRPO (or PPO, or SAC)")
    # the groups a user chooses, each with every option conf/ holds (not the presets' parts)
    for group in ("advantage", "env", "preset", "surprise"):
        options = ", ".join(sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml")))
        assert f"\n{group}: {options}\n" in helped.stdout, group
    assert "preset_surprise" not in helped.stdout and "seeds=" not in helped.stdout
    assert "python recipes/evaluate.py <run id> --video" in helped.stdout
    refused = run_script("recipes/trpo_vase.py", "env.id=CartPole-v1",
                         f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert refused.stderr.strip().splitlines()[-1].startswith(
        "recipes/trpo_vase.py: env.id=CartPole-v1: CartPole-v1 has the action space Discrete(2)")


def test_the_printed_mlflow_ui_command_is_this_environment_s(monkeypatch, tmp_path):
    from torchrl_vase import runs

    beside = Path(sys.executable).with_name("mlflow")
    assert beside.is_file()  # the project's environment has its own mlflow
    monkeypatch.setattr(runs.shutil, "which", lambda name: None)  # not on PATH
    assert Path(runs.mlflow_command()).resolve() == beside.resolve()
    monkeypatch.chdir(beside.parents[2])  # from the project's root: .venv/bin/mlflow
    assert runs.mlflow_command() == os.path.relpath(beside, beside.parents[2])
    monkeypatch.setattr(runs.shutil, "which", lambda name: str(beside))  # activated
    assert runs.mlflow_command() == "mlflow"


@pytest.mark.parametrize("measure", ["vase", "nll", "vime"])
def test_model_action_applied_clips_the_models_actions_to_the_policys_unit_box(measure):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        default = schema.typed_config(compose("trpo_vase", overrides=[f"surprise={measure}"]))
        applied = schema.typed_config(compose("trpo_vase", overrides=[
            f"surprise={measure}", "surprise.model_action=applied"]))
        with pytest.raises(ValueError, match=r"surprise.model_action must be one of "
                                             r"\['applied', 'raw'\], got 'clipped'"):
            schema.typed_config(compose("trpo_vase", overrides=[
                f"surprise={measure}", "surprise.model_action=clipped"]))
    assert not assembly.make_exploration(default, 2, 2, iterations=2).bonus.model.clips_actions
    model = assembly.make_exploration(applied, 2, 2, iterations=2).bonus.model
    # the batch holds the policy's sample in [-1, 1] units; the env clips there, then scales
    torch.testing.assert_close(model.action_low, torch.full((2,), -1.0))
    torch.testing.assert_close(model.action_high, torch.full((2,), 1.0))
    # a key added after runs existed: at its default, a config keeps the identity it had
    config = OmegaConf.to_container(default, resolve=True)
    ignores = schema.identity_ignores(default)
    before = copy.deepcopy(config)
    del before["surprise"]["model_action"]
    assert _identity(config, ignores) == _identity(before, ignores)
    assert _identity(OmegaConf.to_container(applied, resolve=True),
                           schema.identity_ignores(applied)) != _identity(config, ignores)


def test_rnds_training_settings_are_under_their_own_name():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = schema.typed_config(compose("trpo_vase", overrides=[
            "surprise=rnd", "surprise.predictor.updates_per_iteration=7"]))
        assert schema.model_training(cfg).updates_per_iteration == 7 and "elbo" not in cfg.surprise
        with pytest.raises(ValueError, match=r"surprise.elbo: Key 'elbo' not in 'RNDSurprise'"):
            schema.typed_config(compose("trpo_vase", overrides=[
                "surprise=rnd", "+surprise.elbo.updates_per_iteration=7"]))
    exploration = assembly.make_exploration(cfg, 2, 1, iterations=2)
    assert exploration.updates_per_iteration == 7


@pytest.mark.parametrize("algorithm_name", ["trpo", "ppo"])
def test_vase_at_eta_zero_trains_the_policy_bit_for_bit_as_no_bonus_does(store, monkeypatch,
                                                                         algorithm_name):
    """The exact control: the bonus's model trains and draws (its own random stream), its
    bonus weighs nothing, and every policy and critic number is plain TRPO's (PPO's)."""
    # LunarLander: rewards from the first batch, so TRPO's critic has targets to fit
    overrides = ("env=lunar_lander", f"algorithm={algorithm_name}", "seed=3", "iterations=4",
                 "ppo.minibatch_size=32")

    def history(*more):
        result = recipe.train(_config(store, *overrides, *more))
        return _history(store[0], result["run_id"])

    plain = history("surprise=none", "mlflow.experiment=plain")
    zero = history("surprise=vase", "surprise.eta=0", "mlflow.experiment=zero")
    assert "bnn/elbo" in zero  # the model did train
    shared = sorted(key for key in plain if key in zero)
    assert "Return/mean" in shared and any(key.startswith(("trpo/", "ppo/")) for key in shared)
    assert {key: zero[key] for key in shared} == {key: plain[key] for key in shared}
    # the test can fail: with the bonus drawing from torch's default generator (as before
    # 2026-12-05) the learner's minibatches follow the model's draws and the runs part
    monkeypatch.setattr(Exploration, "_own_random", lambda self: contextlib.nullcontext())
    leaky = history("surprise=vase", "surprise.eta=0", "mlflow.experiment=leaky")
    assert any(leaky[key] != plain[key] for key in shared)


def test_a_misspelled_setting_is_answered_with_the_setting_it_resembles(run_script):
    for given, meant in (("iteraions=3", "iterations"), ("trpo.gama=0.9", "trpo.gamma"),
                         ("surprise.sigma=1", "surprise.sigma_c"),
                         ("env.policy_cell=[8]", "env.policy_cells")):
        out = run_script("recipes/trpo_vase.py", given)
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert f"unknown setting {given.split('=')[0]!r}; did you mean {meant!r}?" in out.stderr
        assert "+" + given not in out.stdout + out.stderr  # not Hydra's advice to append it
    assert {"iterations", "surprise.elbo.lr", "env.bnn.num_cells", "sac.utd_ratio",
            "checkpoint.trust_unsigned"} <= schema.known_settings()


def test_a_checkpoint_that_cannot_be_restored_leaves_its_run_as_it_was(store, tmp_path):
    overrides = ("surprise=vase", "seed=12", "checkpoint.every=1", "mlflow.experiment=moved_pool")
    result = recipe.train(_config(store, *overrides, "iterations=2"))
    client = MlflowClient(tracking_uri=store[0])
    folder = Path(store[1]) / "checkpoints" / "moved_pool" / result["run_id"]
    moved = tmp_path / "moved"
    shutil.move(folder, moved)  # the run's folder, replay chunks and all, moved elsewhere
    with pytest.raises(FileNotFoundError, match=r"a chunk is missing"):
        recipe.train(_config(store, *overrides, "iterations=3",
                             f"resume={moved / 'last.pt'}"))
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and "error" not in run.data.tags  # as it was
    # a run that failed once, then finishes, loses the error that no longer says why it stopped
    client.set_tag(result["run_id"], "error", "ValueError: an earlier attempt")
    assert not (folder / "last.pt").exists()  # the refused attempt wrote no checkpoint there
    shutil.rmtree(folder)
    shutil.move(moved, folder)
    recipe.train(_config(store, *overrides, "iterations=3", "resume=true"))
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and "error" not in run.data.tags
