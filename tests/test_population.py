"""Populations: each member's computations are the single run's, members do not interact, and the
recipe's ``seeds=[...]`` gives runs equal to the single runs of those seeds."""

import copy
import itertools
import math
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from recipe_modules import load_recipe, train_killed_in_critic_fit
from tensordict import TensorDict

from torchrl_vase import (
    DynamicsModel,
    Exploration,
    VASERewardTransform,
    gaussian_policy,
)
from torchrl_vase.checkpointing import config_identity
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.loggers import CSVLogger
from torchrl_vase.loop import TIMING_METRICS, TrainingLoop, iteration_seed
from torchrl_vase.objectives.elbo_steps import run_elbo_steps
from torchrl_vase.population import MemberStreams, PopulationCollector, PopulationMembers
from torchrl_vase.recipe import config as schema
from torchrl_vase.recipe import population as population_recipe

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
MOUNTAIN_CAR = "torchrl_vase/SparseMountainCar-v1"
recipe = load_recipe("trpo_vase")


# ------------------------------------------------------------------------------------------------
# The batched computations, member by member against the single ones (float64)
# ------------------------------------------------------------------------------------------------
def _explorations(members: int, dtype: torch.dtype = torch.float64, sampling: str = "weights",
                  activation: type[torch.nn.Module] = torch.nn.ReLU, backend: str = "auto"):
    out = []
    for k in range(members):
        torch.manual_seed(k)
        model = DynamicsModel.build(2, 1, [32], activation, sigma_c=0.5, sampling=sampling)
        bonus = VASERewardTransform(model, eta=0.1).to(dtype)
        out.append(Exploration(bonus, bonus.make_loss(kl_weight=0.2), pool_min=20,
                               updates_per_iteration=60, batch_size=5, backend=backend))
    return out


def _noise_stream(noise: torch.Tensor, dim: int = 0):
    """``noise(n)``: the next n steps of ``noise`` along ``dim``, as a random stream gives them."""
    taken = 0

    def draw(steps: int) -> torch.Tensor:
        nonlocal taken
        taken += steps
        return noise.narrow(dim, taken - steps, steps)

    return draw


@pytest.mark.parametrize(("dtype", "sampling", "activation", "backend"), [
    (torch.float64, "weights", torch.nn.ReLU, "numba"),
    (torch.float32, "weights", torch.nn.ReLU, "eager"),
    (torch.float32, "local_shared", torch.nn.ReLU, "numba"),
    (torch.float32, "local_shared", torch.nn.ReLU, "eager"),
    (torch.float32, "local", torch.nn.Tanh, "numba"),
    (torch.float32, "weights", torch.nn.Tanh, "eager")])
def test_each_members_elbo_steps_are_its_single_steps_bit_for_bit_and_independent(
        dtype, sampling, activation, backend):
    explorations = _explorations(3, dtype, sampling, activation, backend)
    assert {e.steps_backend for e in explorations} == {backend}
    singles, changed = copy.deepcopy(explorations), copy.deepcopy(explorations)
    steps, size = 60, 5
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, steps * size, 3, dtype=dtype, generator=generator)
    y = torch.randn(3, steps * size, 2, dtype=dtype, generator=generator)
    noise = torch.stack([e.loss.step_noise(size, steps=steps) for e in explorations])

    def stacked_noise():
        return _noise_stream(noise, dim=1)

    def elbo_steps(x, y, noise, members):
        return run_elbo_steps(members[0].loss, [e.loss.model.network for e in members],
                              [e.optimizer for e in members], x, y, noise, batch_size=size,
                              backend=backend)

    out = elbo_steps(x, y, stacked_noise(), explorations)
    for k, single in enumerate(singles):  # one run's steps, as Exploration takes them
        expected = elbo_steps(x[k:k + 1], y[k:k + 1], _noise_stream(noise[k:k + 1], dim=1),
                              [single])[0]
        assert out[k] == expected, k
        ours, theirs = explorations[k].loss.model.network, single.loss.model.network
        assert torch.equal(ours.mu, theirs.mu) and torch.equal(ours.rho, theirs.rho), k
        state, single_state = (e.optimizer.state_dict()["state"] for e in (explorations[k],
                                                                            single))
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(state[0][key], single_state[0][key]), (k, key)
    # another member's data leaves member 0's training as it was
    other_x = x.clone()
    other_x[1:] += 1.0
    other = elbo_steps(other_x, y, stacked_noise(), changed)
    assert other[0] == out[0] and other[1] != out[1]
    assert torch.equal(changed[0].loss.model.network.mu, explorations[0].loss.model.network.mu)


# ------------------------------------------------------------------------------------------------
# Streams and the collector
# ------------------------------------------------------------------------------------------------
def test_member_streams_draw_what_the_single_runs_global_stream_draws():
    streams = MemberStreams([4, 9])
    streams.seed_iteration(3)
    with streams.member(1):
        first = torch.randn(5)
    second = torch.randn(2, generator=streams.generators[1])
    torch.manual_seed(iteration_seed(9, 3))
    assert torch.equal(first, torch.randn(5)) and torch.equal(second, torch.randn(2))
    state = streams.state_dict()
    drawn = torch.rand(3, generator=streams.generators[0])
    streams.load_state_dict(state)
    assert torch.equal(drawn, torch.rand(3, generator=streams.generators[0]))


@pytest.mark.parametrize("seeds", [[], [1, 1], [0, -1], [0, True], "01"])
def test_bad_seeds_are_refused(seeds):
    with pytest.raises(ValueError, match="seeds"):
        MemberStreams(seeds)


def test_each_members_batch_is_the_single_collectors_batch_bit_for_bit():
    seeds = [3, 8]
    actors = []
    for seed in seeds:
        torch.manual_seed(seed)
        actors.append(gaussian_policy(2, 1, [16]))
    streams = MemberStreams(seeds)
    population = PopulationCollector(MOUNTAIN_CAR, actors, streams, num_envs=2,
                                     frames_per_batch=120, reset_at_each_iter=True)
    streams.seed_iteration(0)
    population.set_seed([iteration_seed(s, 0) for s in seeds])
    batch = population.rollout()
    assert batch.shape == (2, 2, 60)
    for k, seed in enumerate(seeds):
        single = VectorEnvCollector(MOUNTAIN_CAR, actors[k], num_envs=2, frames_per_batch=120,
                                    reset_at_each_iter=True, seed=seed)
        torch.manual_seed(iteration_seed(seed, 0))
        single.set_seed(iteration_seed(seed, 0))
        expected = single.rollout()
        for key in expected.keys(True, True):
            assert torch.equal(batch[k].get(key), expected.get(key)), (k, key)


class _Batches:
    """A stand-in collector: batches [K=2, 4] whose reward says the member and the iteration."""

    def __init__(self):
        self.iteration = 0

    def __iter__(self):
        while True:
            reward = torch.tensor([[1.0], [2.0]]).expand(2, 4)[..., None] * (1 + self.iteration)
            self.iteration += 1
            yield TensorDict({"next": {"reward": reward}}, [2, 4])

    def update_policy_weights_(self):
        pass

    def shutdown(self):
        pass


class _Logger:
    def __init__(self):
        self.steps = []

    def log(self, steps):
        self.steps += steps


def test_sigterm_stops_a_population_with_a_checkpoint_off_schedule():
    streams = MemberStreams([0, 1])
    saved, loggers = [], [_Logger(), _Logger()]

    def step(batch):  # the second iteration receives SIGTERM
        if float(batch[0]["next", "reward"][0, 0]) == 2.0:
            os.kill(os.getpid(), signal.SIGTERM)
        return [{"reward": float(b["next", "reward"].mean())} for b in batch.unbind(0)]

    loop = TrainingLoop(_Batches(), step, members=PopulationMembers(streams, loggers),
                        iterations=5, checkpoint=saved.append, checkpoint_every=10,
                        progress=False, state={"streams": streams})
    result = loop.run()
    assert result.stopped_by == "SIGTERM" and result.iterations_done == 2
    assert len(saved) == 1 and saved[0]["iterations_done"] == 2  # off the 10-iteration schedule
    # each member's logger got its own metrics, once each, after the checkpoint
    assert [m["reward"] for _, m in loggers[0].steps] == [1.0, 2.0]
    assert [m["reward"] for _, m in loggers[1].steps] == [2.0, 4.0]
    assert [frames for frames, _ in loggers[1].steps] == [4, 8]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


# ------------------------------------------------------------------------------------------------
# The recipe: seeds=[...]
# ------------------------------------------------------------------------------------------------
def _config(store, *overrides):
    uri, root = store
    tiny = [f"mlflow.tracking_uri={uri}", f"checkpoint.dir={root / 'checkpoints'}",
            "iterations=3", "num_envs=2", "env.frames_per_batch=64", "env.pool_size=1000",
            "env.pool_min=50", "progress_bar=false", "checkpoint.every=0", "eval.every=0",
            "trpo.critic_minibatch=32", "surprise.elbo.updates_per_iteration=4", "threads=1",
            "collection=rllab"]  # a population collects in lanes
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return compose("trpo_vase", overrides=[*tiny, *overrides])


def _history(uri: str, run_id: str) -> dict[str, list]:
    client = MlflowClient(tracking_uri=uri)
    return {key: [(m.step, "nan" if math.isnan(m.value) else m.value)
                  for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]
            for key in client.get_run(run_id).data.metrics if key not in TIMING_METRICS}


def test_the_populations_summary_averages_each_metric_over_the_members_that_logged_it():
    population = population_recipe
    summary = population.member_means([{"Return/mean": 1.0, "train/first_reward_step": 500.0},
                                       {"Return/mean": 0.0}])
    assert summary == {"Return/mean": 0.5, "train/first_reward_step": 500.0}


def test_populations_of_other_seeds_and_their_members_have_identities_of_their_own(store):
    """Two populations of one config run side by side (their locks and checkpoints apart), and
    ``resume=true`` of a single run never finds a member; the member's params are the single
    run's (``recipes/study/compare.py`` pools them)."""
    def identity(*overrides):
        cfg = schema.typed_config(_config(store, *overrides))
        return config_identity(OmegaConf.to_container(cfg), schema.identity_ignores(cfg))

    assert len({identity("seeds=[0,1]"), identity("seeds=[5,6]"), identity("seed=0"),
                identity("seed=0", "seeds=[0,1]")}) == 3  # seed=0 is the default
    member = schema.typed_config(_config(store, "seed=1", "seeds=[0,1]"))
    single = schema.typed_config(_config(store, "seed=1"))
    assert schema.run_params(member) == schema.run_params(single)


def test_a_population_of_one_is_the_single_run_metric_for_metric(store):
    single = recipe.train(_config(store, "seed=5", "mlflow.experiment=single"))
    population = recipe.train(_config(store, "seeds=[5]", "mlflow.experiment=one"))
    [run_id] = population["run_ids"]
    assert _history(store[0], run_id) == _history(store[0], single["run_id"])


def test_each_member_is_its_single_run_metric_for_metric_and_an_mlflow_run(store):
    population = recipe.train(_config(store, "seeds=[0,7,9]", "mlflow.experiment=pair",
                                      "eval.every=2"))
    client = MlflowClient(tracking_uri=store[0])
    for run_id, seed in zip(population["run_ids"], (0, 7, 9), strict=True):
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        assert run.data.tags["seed"] == str(seed) and run.data.tags["population"] == "seeds0,7,9"
        assert run.info.run_name.split(" ")[:2] == [f"vase-extrinsic-seed{seed}", "seeds0,7,9"]
        single = recipe.train(_config(store, f"seed={seed}", "mlflow.experiment=pair-singles",
                                      "eval.every=2"))
        ours, theirs = _history(store[0], run_id), _history(store[0], single["run_id"])
        assert len(theirs) > 25 and len(theirs["bnn/elbo"]) == 3
        assert ours == theirs  # every metric but the timings, every step, value for value


def test_a_killed_population_resumes_to_the_uninterrupted_histories(store, monkeypatch):
    overrides = ("seeds=[2,4]", "iterations=4", "checkpoint.every=1")
    whole = recipe.train(_config(store, *overrides, "mlflow.experiment=whole"))
    train_killed_in_critic_fit(5, _config(store, *overrides, "mlflow.experiment=killed"),
                                monkeypatch)
    client = MlflowClient(tracking_uri=store[0])
    killed = client.search_runs([client.get_experiment_by_name("killed").experiment_id])
    assert {run.info.status for run in killed} == {"KILLED"}
    resumed = recipe.train(_config(store, *overrides, "mlflow.experiment=killed",
                                   "resume=true"))
    assert sorted(resumed["run_ids"]) == sorted(run.info.run_id for run in killed)
    for ours, theirs in zip(resumed["run_ids"], whole["run_ids"], strict=True):
        assert client.get_run(ours).info.status == "FINISHED"
        assert _history(store[0], ours) == _history(store[0], theirs)
    # each member's pool appended beside the population's checkpoint, in a directory of its own
    directories = list((Path(store[1]) / "checkpoints").glob("*/population-*"))
    assert len(directories) == 2  # the uninterrupted population's and the resumed one's
    for directory, seed in ((d, s) for d in directories for s in (2, 4)):
        spans = sorted(tuple(map(int, chunk.stem.split("-")[1:]))
                       for chunk in (directory / f"seed{seed}" / "pool").iterdir())
        assert spans[0][0] == 0 and spans[-1][1] == 4 * 64
        assert all(end == start for (_, end), (start, _) in itertools.pairwise(spans))


def test_a_population_killed_before_its_first_checkpoint_starts_over_in_its_runs(
        store, monkeypatch):
    overrides = ("seeds=[1,3]", "iterations=2", "checkpoint.every=1", "mlflow.experiment=early")
    train_killed_in_critic_fit(1, _config(store, *overrides), monkeypatch)
    client = MlflowClient(tracking_uri=store[0])
    experiment = client.get_experiment_by_name("early").experiment_id
    killed = {run.info.run_id for run in client.search_runs([experiment])}
    resumed = recipe.train(_config(store, *overrides, "resume=true"))
    assert set(resumed["run_ids"]) == killed  # no second pair of runs
    assert len(client.search_runs([experiment])) == 2
    for run_id in resumed["run_ids"]:
        frames = client.get_metric_history(run_id, "train/frames")
        assert sorted(m.step for m in frames) == [64, 128]  # each step once


def test_a_population_resumed_from_elsewhere_than_its_checkpoint_is_refused(store, tmp_path):
    # resume=true with a checkpoint.dir that does not hold the population's checkpoint (the disk
    # filled up, a move): its runs logged steps, so starting over would log them twice
    overrides = ("seeds=[5,6]", "iterations=1", "checkpoint.every=1", "mlflow.experiment=moved")
    first = recipe.train(_config(store, *overrides))
    client = MlflowClient(tracking_uri=store[0])
    before = {run_id: _history(store[0], run_id) for run_id in first["run_ids"]}
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(FileNotFoundError, match=r"population has logged metrics, .* \(up to step "
                                                r"64\).* not at .*elsewhere.* resume=false"):
        recipe.train(_config(store, *overrides, "resume=true", f"checkpoint.dir={elsewhere}"))
    assert {run_id: _history(store[0], run_id) for run_id in first["run_ids"]} == before
    experiment = client.get_experiment_by_name("moved").experiment_id
    assert len(client.search_runs([experiment])) == 2  # and no new ones


@pytest.mark.parametrize(("override", "message"), [
    ("seeds=[]", "non-empty"),
    ("seeds=[1,2,1]", "more than once"),
    ("seeds=3", "list of ints"),
    ("seeds=[0,-2]", "non-negative"),
    ("seeds=[1,2] seed=5", "seed=5 with seeds"),
    ("seeds=[1,2] collector=torchrl", "collector=torchrl with seeds"),
    ("seeds=[1,2] collection=paths", r"collection=paths .* add collection=rllab"),
    ("seeds=[1,2] env.normalize_observations=true", "normalize_observations"),
])
def test_bad_population_settings_fail_before_any_run_exists(store, override, message):
    with pytest.raises(ValueError, match=message):
        recipe.train(_config(store, *override.split(), "mlflow.experiment=refused"))
    assert MlflowClient(tracking_uri=store[0]).get_experiment_by_name("refused") is None


def test_a_population_too_large_for_memory_is_refused_with_its_estimate(store, monkeypatch):
    monkeypatch.setattr(schema, "available_memory", lambda: 2**30)
    cfg = _config(store, "seeds=[0,1,2,3,4,5,6,7,8,9]", "env=half_cheetah", "iterations=600",
                  "env.pool_size=5000000", "env.frames_per_batch=5000")
    with pytest.raises(ValueError, match=r"10 members need about \d+\.\d GiB"):
        recipe.train(cfg)
    # the estimate: ten pools of 600 x 5,000 transitions of (s, a, s') in float32, and envs
    pool = 600 * 5000 * (2 * 20 + 6) * 4
    assert schema.population_pool_bytes(schema.typed_config(_config(
        store, "env=half_cheetah", "iterations=600", "env.pool_size=5000000",
        "env.frames_per_batch=5000"))) == pool
    assert np.isclose(10 * (pool + schema.MEMBER_OVERHEAD) / 2**30, 7.1, atol=0.1)


def test_a_population_with_logger_csv_writes_each_members_history_to_its_own_files(store,
                                                                                    tmp_path):
    overrides = ("seeds=[3,4]", "iterations=2")
    logged = recipe.train(_config(store, *overrides, "mlflow.experiment=members-mlflow"))
    in_files = recipe.train(_config(store, *overrides, "mlflow.experiment=members-csv",
                                    "logger=csv", f"csv_dir={tmp_path}"))
    for mlflow_run, csv_run in zip(logged["run_ids"], in_files["run_ids"], strict=True):
        files = CSVLogger(csv_run, log_dir=tmp_path / "members-csv")
        got = {key: [(step, "nan" if math.isnan(v) else v) for step, v in files.history(key)]
               for key in files.logged_keys() if key not in TIMING_METRICS}
        assert got == _history(store[0], mlflow_run) and len(got["bnn/elbo"]) == 2
