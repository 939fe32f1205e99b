"""TRPO with a surprise bonus: the paper's Algorithm 1, assembled from TorchRL parts.

Per iteration: collect a batch with the policy (a ``Collector`` over the envs stepped together); the
exploration side (``torchrl_vase.Exploration``) adds the bonus to the whole batch at once (the model
does not change during a rollout, so this equals computing it step by step), adds the transitions
to the replay pool, refreshes the model's standardisation over the pool and trains the model;
then the advantage (``ExplorationGAE``, with the structure of ``conf/advantage/``), TRPO's
natural-gradient step and the critic fit. The policy is scored on the extrinsic return only.
Diagnostics of whether the bonus steers the policy are logged every iteration.

    python recipes/trpo_vase.py                                     # MountainCar, VASE, seed 0
    python recipes/trpo_vase.py env=half_cheetah surprise=nll seed=3 surprise.delta=1e-3
    python recipes/trpo_vase.py advantage=dual surprise=rnd        # RND's two critics
    python recipes/trpo_vase.py preset=authors                      # the authors' settings
    python recipes/trpo_vase.py -m seed=0,1,2 surprise=none,vase,nll hydra/launcher=joblib
    python recipes/trpo_vase.py -m seed=0,1 hydra/launcher=submitit_local   # or submitit_slurm
    python recipes/trpo_vase.py resume=true                         # continue a killed run
    mlflow ui --backend-store-uri sqlite:///mlflow.db               # compare the runs

Configuration: ``conf/trpo_vase.yaml`` and the groups ``conf/env/``, ``conf/surprise/``,
``conf/advantage/`` and ``conf/preset/``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import gymnasium
import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import (
    ActionScaling,
    ClipTransform,
    Compose,
    DoubleToFloat,
    ObservationNorm,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.modules import MLP, ProbabilisticActor, ValueOperator

from torchrl_vase import (
    DynamicsModel,
    Exploration,
    ExplorationGAE,
    RNDRewardTransform,
    StandardizedRegressor,
    SurpriseRewardTransform,
    TRPOLoss,
    fit_critic,
    initialize_,
)
from torchrl_vase.checkpointing import (
    Checkpointer,
    StopSignals,
    check_writable,
    config_identity,
    load_checkpoint,
    rng_state,
    set_rng_state,
)
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.diagnostics import CoverageGrid, advantage_alignment
from torchrl_vase.envs import VECTORIZATIONS, check_continuous_control, make_batched_env
from torchrl_vase.evaluation import (
    WEIGHTS_FILE,
    check_video,
    evaluate,
    record_episode,
    run_weights,
    with_observation_standardization,
)
from torchrl_vase.modules import INITIALIZATIONS, gaussian_policy
from torchrl_vase.progress import Progress
from torchrl_vase.tracking import (
    MLflowTracker,
    RunLock,
    TrackingUnavailable,
    check_tracking_store,
    get_or_create_experiment,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))
# launchers that run the jobs in other processes (submitit) unpickle this script's functions
# there: they must find the schema module beside it too
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(ROOT / "recipes"), os.environ.get("PYTHONPATH")])
)
from trpo_vase_config import typed_config  # noqa: E402  (the schema beside this script)

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}
BNN_MEASURES = ("vase", "nll", "vime")
COLLECTIONS = ("continuous", "rllab")
COLLECTORS = ("lean", "torchrl")
# Exploration.step's metrics as the recipe logs them; the model's losses go under bnn/ or rnd/.
# Namespaces: Return/ (the extrinsic return; capitalised: MLflow's run page sorts its sections by
# ASCII, so it comes first), train/ (frames, episodes, timing), trpo/ (the policy step, critic fit),
# bonus/ (the intrinsic reward and its diagnostics), bnn/ or rnd/ (the bonus's model), eval/.
EXPLORATION_METRICS = {
    "bonus_mean": "bonus/mean",
    "bonus_std": "bonus/std",
    "novelty_spearman": "bonus/novelty_spearman",
}


# ------------------------------------------------------------------------------------------------
# Checks before anything runs
# ------------------------------------------------------------------------------------------------
def validate(cfg: DictConfig, observation_space: gymnasium.spaces.Space,
             action_space: gymnasium.spaces.Space) -> None:
    """Reject impossible settings, and an env the policy cannot drive, before any MLflow run
    exists."""
    env, surprise = cfg.env, cfg.surprise
    try:
        check_continuous_control(env.id, observation_space, action_space)
    except (TypeError, ValueError) as error:
        raise type(error)(f"env.id={env.id}: {error}") from None
    if cfg.eval.video:
        check_video(env.id, make_kwargs(cfg))
    if cfg.resume is not False and cfg.checkpoint.every == 0:
        raise ValueError("resume needs checkpoints: checkpoint.every=0 keeps none.")
    if cfg.device not in ("cpu", "cuda") and not cfg.device.startswith("cuda:"):
        raise ValueError(f"device must be cpu, cuda or cuda:<index>, got {cfg.device!r}.")
    if cfg.device != "cpu" and not torch.cuda.is_available():
        raise ValueError(f"device={cfg.device}: there is no CUDA device here "
                         "(torch.cuda.is_available() is False); use device=cpu.")
    if env.frames_per_batch < cfg.num_envs:
        raise ValueError(
            f"env.frames_per_batch ({env.frames_per_batch}) is smaller than num_envs "
            f"({cfg.num_envs}): every env must step at least once per batch."
        )
    if cfg.vectorization not in VECTORIZATIONS:
        raise ValueError(
            f"vectorization must be one of {VECTORIZATIONS}, got {cfg.vectorization!r}."
        )
    if cfg.trpo.init not in INITIALIZATIONS:
        raise ValueError(f"trpo.init must be one of {INITIALIZATIONS}, got {cfg.trpo.init!r}.")
    if cfg.collector not in COLLECTORS:
        raise ValueError(f"collector must be one of {COLLECTORS}, got {cfg.collector!r}.")
    if cfg.collector == "lean" and env.frames_per_batch % cfg.num_envs:
        raise ValueError(
            f"env.frames_per_batch ({env.frames_per_batch}) must be a multiple of num_envs "
            f"({cfg.num_envs}) with collector=lean: every env takes the same number of steps."
        )
    if cfg.collection not in COLLECTIONS:
        raise ValueError(f"collection must be one of {COLLECTIONS}, got {cfg.collection!r}.")
    if cfg.advantage.structure == "dual" and surprise.name == "none":
        raise ValueError(
            "advantage=dual needs an intrinsic reward for its intrinsic critic; choose a "
            "surprise measure (vase, nll, vime, rnd) or another advantage structure."
        )
    if surprise.name != "none":
        if env.pool_size < env.pool_min:
            raise ValueError(
                f"env.pool_size ({env.pool_size}) is smaller than env.pool_min "
                f"({env.pool_min}): the BNN would never be trained."
            )
        if surprise.elbo.batch_size > env.pool_min:
            raise ValueError(
                f"surprise.elbo.batch_size ({surprise.elbo.batch_size}) exceeds env.pool_min "
                f"({env.pool_min})."
            )
        if surprise.name in BNN_MEASURES and env.bnn.activation not in ACTIVATIONS:
            raise ValueError(
                f"env.bnn.activation must be one of {sorted(ACTIVATIONS)}, got "
                f"{env.bnn.activation!r}."
            )
    if cfg.trpo.critic_activation not in ACTIVATIONS:
        raise ValueError(
            f"trpo.critic_activation must be one of {sorted(ACTIVATIONS)}, got "
            f"{cfg.trpo.critic_activation!r}."
        )


def tracking_uri(cfg: DictConfig) -> str:
    """The config's URI, else ``$MLFLOW_TRACKING_URI``, else a SQLite file here."""
    return cfg.mlflow.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"


def experiment_tags(name: str, env_id: str) -> dict[str, str]:
    """A new experiment's description, and the kind that makes MLflow 3's UI open on its runs
    table (not on the GenAI traces page)."""
    return {
        "mlflow.experimentKind": "custom_model_development",
        "mlflow.note.content": (
            f"TRPO with surprise bonuses (VASE, NLL, VIME, RND; recipes/trpo_vase.py) on {env_id}: "
            "one run per measure, advantage structure, seed and changed settings. Metrics: "
            "Return/ (extrinsic), train/ (frames, timing), eval/ (deterministic policy), trpo/, "
            "bonus/ (the bonus and whether it steers the policy), bnn/ or rnd/. Figures and a "
            f"table: python recipes/compare.py --experiment {name}"
        ),
    }


def runs_table_link(uri: str, experiment_id: str) -> str:
    """Where the experiment's runs table is: the server's page, or how to serve a local store."""
    page = f"#/experiments/{experiment_id}/runs"
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/{page}"
    return f"mlflow ui --backend-store-uri {uri}, then http://127.0.0.1:5000/{page}"


# ------------------------------------------------------------------------------------------------
# Building blocks
# ------------------------------------------------------------------------------------------------
def make_env(cfg: DictConfig) -> TransformedEnv:
    """The task as a TorchRL env for torchrl's ``Collector`` (``collector=torchrl``), on the CPU
    whatever ``device`` is (the simulators run there)."""
    base = make_batched_env(
        cfg.env.id, cfg.num_envs, vectorization=cfg.vectorization, device="cpu",
        **make_kwargs(cfg),
    )
    # the policy acts in [-1, 1] whatever the env's bounds (rllab's normalize() did the same, and
    # clipped), so a unit-scale Gaussian explores the point robot's |v| <= 0.01 as it does
    # MountainCar's |a| <= 1; the batch keeps the policy's own (unclipped) sample
    clip = ClipTransform(in_keys_inv=["action"], low=-1.0, high=1.0)
    transforms = [DoubleToFloat(), ActionScaling(), clip, StepCounter(), RewardSum()]
    if cfg.env.normalize_observations:
        transforms.append(ObservationNorm(in_keys=["observation"], standard_normal=True))
    env = TransformedEnv(base, Compose(*transforms))
    env.set_seed(cfg.seed)
    if cfg.env.normalize_observations:
        # the paper normalises observations by statistics fixed before training
        env.transform[-1].init_stats(num_iter=cfg.obs_norm_steps, reduce_dim=(0, 1), cat_dim=1)
    return env


def make_critic(cfg: DictConfig, obs_dim: int, out_key: str = "state_value") -> ValueOperator:
    """An MLP (or linear) critic; with ``trpo.critic_standardize`` its inputs and targets are
    standardised per fit, as rllab's baselines do."""
    cells = list(cfg.env.critic_cells)
    net = (
        MLP(obs_dim, 1, num_cells=cells, activation_class=ACTIVATIONS[cfg.trpo.critic_activation])
        if cells
        else nn.Linear(obs_dim, 1)
    )
    initialize_(net, cfg.trpo.init, output_gain=1.0)
    if cfg.trpo.critic_standardize:
        net = StandardizedRegressor(net, in_features=obs_dim)
    return ValueOperator(net, in_keys=["observation"], out_keys=[out_key]).to(cfg.device)


def env_spaces(cfg: DictConfig) -> tuple[gymnasium.spaces.Space, gymnasium.spaces.Space]:
    """The task's observation and action spaces (one copy, before any transform)."""
    try:
        probe = gymnasium.make(cfg.env.id, **make_kwargs(cfg))
    except gymnasium.error.Error as error:
        raise ValueError(f"env.id={cfg.env.id}: {error} (or env.make_kwargs do not fit it).") \
            from None
    spaces = probe.observation_space, probe.action_space
    probe.close()
    return spaces


def make_kwargs(cfg: DictConfig) -> dict:
    kwargs = cfg.env.get("make_kwargs")
    return {} if kwargs is None else OmegaConf.to_container(kwargs, resolve=True)


def make_collector(cfg: DictConfig, actor: ProbabilisticActor):
    """The batches of the run: the lean vector-env collector (default) or torchrl's ``Collector``
    over the transformed batched env; both never stop (the loop counts iterations) and offer
    ``set_seed``, ``state_dict`` and ``load_state_dict`` (the observation normalisation). Both
    act and store on the CPU, with a copy of a policy trained on another ``device`` (refreshed
    by ``update_policy_weights_``)."""
    rllab = cfg.collection == "rllab"  # every iteration starts fresh paths
    if cfg.collector == "lean":
        collector = VectorEnvCollector(
            cfg.env.id, actor, num_envs=cfg.num_envs, frames_per_batch=cfg.env.frames_per_batch,
            reset_at_each_iter=rllab, seed=cfg.seed, make_kwargs=make_kwargs(cfg),
        )
        if cfg.env.normalize_observations:
            # the paper normalises observations by statistics fixed before training
            collector.fit_observation_normalization(cfg.obs_norm_steps)
        return collector
    return Collector(
        make_env(cfg), actor, frames_per_batch=cfg.env.frames_per_batch, total_frames=-1,
        reset_at_each_iter=rllab, policy_device="cpu", storing_device="cpu",
        # the policy is stateless: it needs no InitTracker (and torchrl warns until told so)
        auto_register_policy_transforms=False,
    )


def make_agent(
    cfg: DictConfig, obs_dim: int, action_dim: int
) -> tuple[ProbabilisticActor, ValueOperator]:
    actor = gaussian_policy(obs_dim, action_dim, list(cfg.env.policy_cells), cfg.trpo.init,
                            init_log_std=cfg.trpo.init_log_std, device=cfg.device)
    return actor, make_critic(cfg, obs_dim)


def make_exploration(
    cfg: DictConfig, obs_dim: int, action_dim: int, iterations: int | None = None
) -> Exploration:
    """The bonus of ``cfg.surprise``, its model and loss, in the library's ``Exploration``, on
    ``device`` with its pool; the pool holds at most what ``iterations`` collect (the paper's 5M
    would otherwise be reserved for a run that collects less)."""
    s, e = cfg.surprise, cfg.env
    pool_size = e.pool_size
    if iterations is not None:
        pool_size = max(e.pool_min, min(pool_size, iterations * e.frames_per_batch))
    if s.name == "rnd":
        bonus = RNDRewardTransform(
            obs_dim, eta=s.eta, num_cells=list(s.num_cells), embedding_dim=s.embedding_dim
        ).to(cfg.device)
        loss = bonus.make_loss(update_fraction=s.update_fraction)
    else:
        model = DynamicsModel.build(
            obs_dim,
            action_dim,
            list(e.bnn.num_cells),
            ACTIVATIONS[e.bnn.activation],
            prior_std=s.prior_std,
            init_mean=s.init_mean,
            sigma_c=s.sigma_c,
            target=s.target,
            standardize=s.standardize,
        )
        bonus = SurpriseRewardTransform(
            model,
            measure=s.name,
            eta=s.eta,
            delta=s.get("delta", 0.0),
            num_samples=s.num_samples,
            reward_normalization=s.reward_normalization,
        ).to(cfg.device)
        loss = bonus.make_loss(num_samples=s.num_samples, kl_weight=s.elbo.kl_weight)
    return Exploration(
        bonus,
        loss,
        pool_size=pool_size,
        pool_min=e.pool_min,
        updates_per_iteration=s.elbo.updates_per_iteration,
        batch_size=s.elbo.batch_size,
        lr=s.elbo.lr,
        compile=s.elbo.get("compile", False),
    )


def make_advantage(cfg: DictConfig, loss: TRPOLoss, obs_dim: int) -> ValueOperator | None:
    """Set the loss's value estimator; return the intrinsic critic of the dual structure.

    Plain TRPO (``surprise=none``) has no bonus: one critic on the reward (the ``combined``
    structure without a bonus is torchrl's GAE), with the same value targets as the others.
    """
    a = cfg.advantage
    structure = "combined" if cfg.surprise.name == "none" else a.structure
    intrinsic_critic = None
    kwargs = {}
    if structure == "dual":
        intrinsic_critic = make_critic(cfg, obs_dim, out_key="intrinsic_state_value")
        kwargs = {
            "intrinsic_value_network": intrinsic_critic,
            "intrinsic_gamma": a.intrinsic_gamma,
            "extrinsic_coef": a.extrinsic_coef,
            "intrinsic_coef": a.intrinsic_coef,
            "episodic_intrinsic": a.episodic_intrinsic,
        }
    estimator = ExplorationGAE(
        structure,
        gamma=cfg.trpo.gamma,
        lmbda=cfg.trpo.gae_lambda,
        value_network=loss.critic_network,
        value_target=a.value_target,
        center_bonus=a.center_bonus,
        terminal_path_ends=cfg.collection == "rllab",
        **kwargs,
    ).to(cfg.device)
    loss.make_value_estimator(estimator)
    return intrinsic_critic


# ------------------------------------------------------------------------------------------------
# Logging and checkpoints
# ------------------------------------------------------------------------------------------------
def flatten(config: dict, prefix: str = "") -> dict[str, str]:
    """``{"env": {"batch": 5}}`` → ``{"env.batch": "5"}``: MLflow params, one per leaf."""
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# command-line overrides a run's name leaves out: already in it (the seed, the groups), or not a
# setting (where the run logs and checkpoints, how it shows progress)
NAME_IGNORES = {"seed", "env", "surprise", "advantage", "resume", "progress_bar", "threads"}
NAME_IGNORED_PREFIXES = ("mlflow.", "checkpoint.", "hydra.", "hydra/")
# keys (and key groups) that do not change what a run computes: left out of MLflow's params
# (`iterations` is logged once, as the effective count); a run resumed with other values of
# these, or of `threads`, is the same run
PARAM_IGNORES = ("mlflow", "checkpoint", "progress_bar", "resume", "iterations", "env.iterations")
IDENTITY_IGNORES = (*PARAM_IGNORES, "threads")


def ignored(key: str, ignores: tuple[str, ...]) -> bool:
    """``key`` (dotted) is one of ``ignores`` or inside one of them."""
    return any(key == name or key.startswith(f"{name}.") for name in ignores)


def launch() -> tuple[list[str], str | None]:
    """The overrides given on the command line and, in a Hydra multirun, the sweep's id (its
    directory's name, the launch time); nothing under the compose API."""
    if not HydraConfig.initialized():
        return [], None
    hydra_config = HydraConfig.get()
    sweep = Path(hydra_config.sweep.dir).name if hydra_config.mode == RunMode.MULTIRUN else None
    return list(hydra_config.overrides.task), sweep


def run_name(cfg: DictConfig, overrides: list[str] = ()) -> str:
    """``<surprise>-<advantage>-seed<seed>`` (``none-seed<seed>``), then the overrides that
    change a setting: ``vase-extrinsic-seed0 surprise.delta=0.01``, so a sweep's runs differ."""
    base = (f"none-seed{cfg.seed}" if cfg.surprise.name == "none"
            else f"{cfg.surprise.name}-{cfg.advantage.structure}-seed{cfg.seed}")
    settings = []
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key not in NAME_IGNORES and not key.startswith(NAME_IGNORED_PREFIXES):
            settings.append(override.lstrip("+~"))
    return " ".join([base, *settings])


def run_params(cfg: DictConfig, iterations: int) -> dict[str, str]:
    """The run's settings as MLflow params, one per leaf, without where it logs or checkpoints;
    the iteration count once (the effective one)."""
    params = {key: value for key, value in flatten(OmegaConf.to_container(cfg, resolve=True))
              .items() if not ignored(key, PARAM_IGNORES)}
    return params | {"iterations": str(iterations)}


# metrics that measure the machine, not the run: they differ between a run and its replay
TIMING_METRICS = ("train/fps", "train/wall_time")


def run_identity(cfg: DictConfig) -> str:
    """The hash of every setting that changes what the run computes (the tag ``run_identity``)."""
    return config_identity(OmegaConf.to_container(cfg, resolve=True), IDENTITY_IGNORES)


def find_resumable(cfg: DictConfig, client: MlflowClient, experiment_id: str, root: Path,
                   identity: str) -> tuple[str | None, dict | None, RunLock | None]:
    """The run and checkpoint ``resume`` points at, and the run's lock, taken:
    ``(run id, state, lock)``, each may be ``None``.

    ``resume=true``: the latest run of this experiment with the same ``run_identity`` (whatever
    its status: a run killed before its first checkpoint restarts from scratch in the same MLflow
    run); none yet starts a new run. ``resume=<path>``: that checkpoint, if it is of this config
    and its run is in this store. The lock is taken before the checkpoint is read, so a second
    process continuing the same run is refused (``RunLocked``) before it logs anything.
    """
    if cfg.resume is False:
        return None, None, None
    if cfg.resume is True:
        runs = client.search_runs(
            [experiment_id], filter_string=f"tags.run_identity = '{identity}'",
            order_by=["attributes.start_time DESC"], max_results=1,
        )
        if not runs:
            print("resume: no earlier run of this config in this experiment; starting one.")
            return None, None, None
        run_id = runs[0].info.run_id
        lock = run_lock(root, run_id)
        checkpointer = Checkpointer(root / run_id)
        return run_id, checkpointer.load() if checkpointer.exists() else None, lock
    path = Path(str(cfg.resume))
    if not path.is_file():
        raise FileNotFoundError(f"resume: no checkpoint at {path}.")
    state = load_checkpoint(path)
    if state["identity"] != identity:
        saved, now = (flatten(c) for c in (OmegaConf.to_container(OmegaConf.create(
            state["config"])), OmegaConf.to_container(cfg, resolve=True)))
        differ = sorted(k for k in saved.keys() | now.keys() if saved.get(k) != now.get(k)
                        and not ignored(k, IDENTITY_IGNORES))
        raise ValueError(
            f"resume: {path} is a checkpoint of another config; keys that differ: "
            + ", ".join(f"{k} ({saved.get(k)} there, {now.get(k)} here)" for k in differ[:8])
        )
    run_id = state["run_id"]
    if not client.search_runs([experiment_id], filter_string=f"attributes.run_id = '{run_id}'"):
        raise LookupError(
            f"resume={path}: its run {run_id} is not in experiment {experiment_id} of the "
            f"tracking store {client.tracking_uri}; the checkpoint was logged to another store "
            "or experiment: resume with that mlflow.tracking_uri (and mlflow.experiment)."
        )
    written = path.stat().st_mtime_ns
    lock = run_lock(root, run_id)
    if path.stat().st_mtime_ns != written:  # its writer ended between the read and the lock
        state = load_checkpoint(path)
    return run_id, state, lock


def run_lock(root: Path, run_id: str) -> RunLock:
    """The run's lock (beside its checkpoint), taken; ``RunLocked`` if another process has it."""
    return RunLock(root / run_id / "run.lock", f"run {run_id}").acquire()


def iteration_seed(seed: int, iteration: int, stream: int = 0) -> int:
    """The seed of one iteration of a run: a function of the run's seed and the iteration only;
    ``stream`` > 0 gives independent seeds for other uses of the same iteration (evaluation)."""
    entropy = [seed, iteration] + ([stream] if stream else [])
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def check_finite(value: torch.Tensor, what: str, iteration: int) -> None:
    """Stop at the first non-finite value, naming it: a NaN would otherwise surface much later,
    blamed on the advantages or the policy step."""
    bad = ~torch.isfinite(value)
    if bad.any():
        raise FloatingPointError(
            f"{what} is not finite in {int(bad.sum())} of {value.numel()} transitions of "
            f"iteration {iteration} (e.g. {value[bad].flatten()[0].item()})."
        )


def check_artifact_store(location: str) -> None:
    """A local artifact store must be writable before the run starts (remote ones, e.g. a
    server's ``mlflow-artifacts:/1``, are checked by the first artifact, the config, logged
    before training)."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        check_writable(unquote(parsed.path), "the MLflow artifact store")
    elif not parsed.scheme:
        check_writable(location, "the MLflow artifact store")


def episode_metrics(batch) -> dict[str, float]:
    """The extrinsic return, success and length of the episodes that ended in the batch (NaN
    when none did): ``RewardSum`` runs before the bonus is added, so the return is extrinsic."""
    done = batch["next", "done"].squeeze(-1)
    returns = batch["next", "episode_reward"].squeeze(-1)[done]
    if not returns.numel():
        return dict.fromkeys(
            ("Return/mean", "Return/median", "Return/success_rate",
             "train/episode_length"), math.nan
        ) | {"train/episodes": 0.0}
    return {
        "Return/mean": returns.mean().item(),
        "Return/median": returns.median().item(),
        "Return/success_rate": (returns > 0).float().mean().item(),
        "train/episode_length": batch["next", "step_count"].squeeze(-1)[done].float().mean().item(),
        "train/episodes": float(returns.numel()),
    }


def acting_policy(actor: ProbabilisticActor, collector) -> TensorDictModuleBase:
    """The actor as it acts on the env's own observations: with the collector's fixed
    observation standardisation in front when the env normalises them."""
    if isinstance(collector, VectorEnvCollector):
        loc, scale = collector.observation_loc, collector.observation_scale
    else:  # torchrl's Collector: the ObservationNorm at the end of the env's transforms
        norm = collector.env.transform[-1]
        loc, scale = (norm.loc, norm.scale) if isinstance(norm, ObservationNorm) else (None, None)
    return with_observation_standardization(actor, loc, scale)


def evaluation_metrics(cfg: DictConfig, policy, iteration: int) -> dict[str, float]:
    """``eval/*``: ``eval.episodes`` episodes of the deterministic policy, from starts of their
    own (the training's random numbers are not touched: resume stays exact)."""
    result = evaluate(policy, cfg.env.id, episodes=cfg.eval.episodes,
                      seed=iteration_seed(cfg.seed, iteration, stream=1),
                      make_kwargs=make_kwargs(cfg))
    return {f"eval/{key}": value for key, value in result.items()}


def coverage_heatmap(grid: CoverageGrid, first_reward_step: int | None, path: Path) -> None:
    """Visits per cell of the coverage grid (the paper's exploration figure), goal at (1, 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    counts = grid.counts.numpy().astype(float)
    counts[counts == 0] = np.nan
    low, high = grid.low.tolist(), grid.high.tolist()
    fig, ax = plt.subplots(figsize=(4.5, 4))
    image = ax.imshow(counts.T, origin="lower", extent=[low[0], high[0], low[1], high[1]],
                      cmap="viridis", interpolation="nearest", norm=LogNorm())
    side = f"{grid.cell_size:g}"
    fig.colorbar(image, ax=ax, label=f"visits per {side} × {side} cell")
    ax.plot([1], [1], marker="*", color="red", markersize=12)
    found = "goal not reached" if first_reward_step is None else (
        f"first reward at step {first_reward_step:,}")
    ax.set_title(f"{found}; coverage {grid.coverage():.1%}", fontsize=10)
    ax.set_aspect("equal")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# Algorithm 1
# ------------------------------------------------------------------------------------------------
def train(cfg: DictConfig) -> dict:
    """Run (or resume) one training run; return its MLflow run id and final metrics.

    Metrics reach MLflow with each checkpoint (every iteration with ``checkpoint.every=0``), so
    every logged value belongs to a state the run can resume from: a run killed at any instant
    and resumed logs the same history as one never killed. SIGTERM or SIGINT end the iteration,
    write a checkpoint and end the run as KILLED (a second signal stops at once).
    """
    cfg = typed_config(cfg)
    observation_space, action_space = env_spaces(cfg)
    validate(cfg, observation_space, action_space)
    uri = tracking_uri(cfg)
    check_tracking_store(uri)
    torch.set_num_threads(cfg.threads)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    experiment = cfg.mlflow.experiment or cfg.env.name
    iterations = cfg.iterations if cfg.iterations is not None else cfg.env.iterations
    every = cfg.checkpoint.every
    root = None
    if every:
        root = check_writable(Path(cfg.checkpoint.dir) / experiment, "checkpoint.dir")

    client = MlflowClient(tracking_uri=uri)
    created = get_or_create_experiment(client, experiment,
                                       tags=experiment_tags(experiment, cfg.env.id))
    experiment_id = created.experiment_id
    overrides, sweep = launch()
    check_artifact_store(created.artifact_location)
    identity = run_identity(cfg)
    run_id, state, lock = find_resumable(cfg, client, experiment_id, root, identity)

    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)  # noqa: NPY002
    random.seed(cfg.seed)
    obs_dim, action_dim = observation_space.shape[0], action_space.shape[0]
    actor, critic = make_agent(cfg, obs_dim, action_dim)
    collector = make_collector(cfg, actor)
    loss = TRPOLoss(
        actor, critic, max_kl=cfg.env.max_kl, cg_iters=cfg.trpo.cg_iters,
        cg_damping=cfg.trpo.cg_damping, line_search_backtracks=cfg.trpo.backtracks,
    )
    intrinsic_critic = make_advantage(cfg, loss, obs_dim)
    critic_parameters = list(critic.parameters())
    if intrinsic_critic is not None:
        critic_parameters += list(intrinsic_critic.parameters())
    critic_optimizer = torch.optim.Adam(critic_parameters, lr=cfg.trpo.critic_lr)
    exploration = None
    if cfg.surprise.name != "none":
        exploration = make_exploration(cfg, obs_dim, action_dim, iterations)
    grid = None
    if cfg.env.get("coverage"):
        grid = CoverageGrid(observation_space.low.tolist(), observation_space.high.tolist(),
                            cfg.env.coverage.cell_size)
    # what a checkpoint holds besides the counters (load_state_dict restores each in place)
    stateful = {"actor": actor, "critic": critic, "critic_optimizer": critic_optimizer,
                "advantage": loss.value_estimator, "intrinsic_critic": intrinsic_critic,
                "collector": collector, "exploration": exploration, "coverage": grid}
    heatmap_counts = None  # the grid's counts when the first reward was found
    start_iteration, frames, first_reward_step, wall_time_before = 0, 0, None, 0.0
    pending: list[tuple[int, dict]] = []  # (frames, metrics) computed since the last checkpoint
    if state is not None:
        for name, part in stateful.items():
            if part is not None:
                part.load_state_dict(state[name])
        heatmap_counts = state["heatmap_counts"]
        start_iteration, frames = state["iteration"] + 1, state["frames"]
        first_reward_step, wall_time_before = state["first_reward_step"], state["wall_time"]
        pending = state["pending_metrics"]
        set_rng_state(state["rng"])
        collector.update_policy_weights_()  # its acting copy, if the actor is on a GPU
        if cfg.collection == "continuous":
            print("resume: collection=continuous restarts the episodes in progress at the "
                  "checkpoint (the envs' state is not saved); with collection=rllab resume is "
                  "exact.")

    name = run_name(cfg, overrides)
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    # from here on SIGTERM and SIGINT end the run after an iteration, with a checkpoint
    retry = cfg.mlflow.retry_minutes
    tags = ({"env": cfg.env.name, "surprise": cfg.surprise.name, "seed": str(cfg.seed),
             "advantage": cfg.advantage.structure, "git_commit": git_commit(),
             "run_identity": identity} | ({"sweep": sweep} if sweep else {}))
    with StopSignals() as signals, contextlib.ExitStack() as held:
        if run_id is None:  # created with its identity: resume=true can find it from the start
            tracker = MLflowTracker.create(uri, created, run_name=name, tags=tags,
                                           retry_minutes=retry)
            run_id = tracker.run_id
            if every:
                lock = run_lock(root, run_id)
        else:
            tracker = MLflowTracker.resume(uri, run_id, retry_minutes=retry)
        if lock is not None:
            held.enter_context(lock)
        status = "FAILED"
        checkpointer = None
        try:
            if not tracker.params:  # a new run (or one killed before it logged them)
                tracker.log_params(run_params(cfg, iterations))
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "config.yaml"
                    path.write_text(config_yaml)
                    tracker.log_artifact(path)
            print(f"MLflow run {run_id} ({name}) in experiment '{experiment}' at {uri}")
            weights = None
            if every:
                checkpointer = Checkpointer(root / run_id)
                weights = Checkpointer(root / run_id, WEIGHTS_FILE)
            # steps the killed process logged are the checkpoint's (metrics go out after it)
            logged_until = tracker.last_logged_step("train/frames")
            tracker.log([(step, metrics) for step, metrics in pending if step > logged_until])
            pending = []

            remaining = iterations - start_iteration
            if cfg.stop_at_first_reward and first_reward_step is not None:
                remaining = 0  # a resumed run that had already found the reward
            rllab = cfg.collection == "rllab"
            # a bar on a terminal; in a piped log (a cluster job) a line every few iterations
            progress = Progress(iterations, f"{cfg.env.name}/{cfg.surprise.name} seed {cfg.seed}",
                                initial=start_iteration, enabled=cfg.progress_bar)
            metrics: dict[str, float] = {}
            started = time.perf_counter()
            iteration = start_iteration - 1
            batches = iter(collector) if remaining > 0 else iter(())
            stopped_by = None
            for iteration in range(start_iteration, start_iteration + remaining):
                tick = time.perf_counter()
                torch.set_num_threads(cfg.threads)  # an env's close() may have changed it
                # each iteration's random numbers follow from (seed, iteration) alone; with
                # rllab's fresh paths, so do its envs' starts: an iteration replays from its seed
                seed = iteration_seed(cfg.seed, iteration)
                torch.manual_seed(seed)
                if rllab:
                    collector.set_seed(seed)
                batch = next(batches).to(cfg.device)  # collected on the CPU
                frames += batch.numel()
                extrinsic = batch["next", "reward"].clone()
                check_finite(extrinsic, "the env's reward ('next', 'reward')", iteration)
                if grid is not None:
                    grid.update(batch["next", "observation"])
                # [num_envs, T]: the envs step together, so time slice t ends at env step (t+1)·E
                rewarded = (extrinsic.reshape(*batch.shape) > 0).reshape(-1, batch.shape[-1]).any(0)
                if first_reward_step is None and rewarded.any():
                    first_slice = int(rewarded.nonzero()[0])
                    first_reward_step = frames - batch.numel() + (first_slice + 1) * cfg.num_envs
                    if grid is not None:
                        heatmap_counts = grid.counts.clone()

                metrics = {}
                if exploration is not None:
                    model_prefix = "rnd/" if cfg.surprise.name == "rnd" else "bnn/"
                    for key, value in exploration.step(batch).items():
                        metrics[EXPLORATION_METRICS.get(key, model_prefix + key)] = value

                with torch.no_grad():
                    loss.value_estimator(batch)
                if exploration is not None and metrics["bonus/std"] > 0:
                    alignment = advantage_alignment(batch["advantage"], batch["bonus_advantage"])
                    metrics.update({"bonus/advantage_corr": alignment["correlation"],
                                    "bonus/advantage_share": alignment["bonus_share"]})
                step = loss.natural_gradient_step(batch)
                critic_fit = fit_critic(loss, batch, critic_optimizer,
                                        epochs=cfg.trpo.critic_epochs,
                                        minibatch_size=cfg.trpo.critic_minibatch)
                collector.update_policy_weights_()
                metrics.update(episode_metrics(batch), **{
                    "train/frames": frames,
                    "train/iteration": iteration,
                    "trpo/kl": step["kl"].item(),
                    "trpo/surrogate_before": step["surrogate_before"].item(),
                    "trpo/surrogate_after": step["surrogate_after"].item(),
                    "trpo/step_accepted": float(step["step_accepted"]),
                    "trpo/backtracks": float(step["backtracks"]),
                    "trpo/critic_loss": critic_fit["loss_critic"].item(),
                    "trpo/explained_variance": critic_fit["explained_variance"].item(),
                    **{f"trpo/{k}": v.item() for k, v in critic_fit.items()
                       if k.startswith("intrinsic_")},
                    "train/fps": batch.numel() / (time.perf_counter() - tick),
                    "train/wall_time": wall_time_before + time.perf_counter() - started,
                })
                stop = cfg.stop_at_first_reward and first_reward_step is not None
                # read once: a signal that arrives after this is handled after the next iteration
                stopped_by = signals.received
                last = iteration == iterations - 1 or stop or stopped_by is not None
                if cfg.eval.every and ((iteration + 1) % cfg.eval.every == 0 or last):
                    metrics.update(evaluation_metrics(cfg, acting_policy(actor, collector),
                                                      iteration))
                if cfg.eval.video and last:
                    with tempfile.TemporaryDirectory() as tmp:
                        path = record_episode(acting_policy(actor, collector), cfg.env.id,
                                              Path(tmp) / f"episode_{frames}.mp4",
                                              seed=cfg.seed, make_kwargs=make_kwargs(cfg))
                        tracker.log_artifact(path, artifact_path="videos")
                if first_reward_step is not None:
                    metrics["train/first_reward_step"] = first_reward_step
                if grid is not None:
                    metrics["train/coverage"] = grid.coverage()
                pending.append((frames, metrics))
                progress.update(iteration, {"return": metrics["Return/mean"],
                                            "success": metrics["Return/success_rate"],
                                            "frames/s": metrics["train/fps"]})

                # (stop: the paper's exploration experiment counts steps to the first reward)
                if checkpointer is not None and ((iteration + 1) % every == 0 or last):
                    parts = {name: part.state_dict() if part is not None else None
                             for name, part in stateful.items()}
                    checkpointer.save({
                        **parts,
                        "heatmap_counts": heatmap_counts,
                        "iteration": iteration,
                        "frames": frames,
                        "first_reward_step": first_reward_step,
                        "wall_time": metrics["train/wall_time"],
                        "pending_metrics": pending,
                        "run_id": run_id,
                        "identity": identity,
                        "config": config_yaml,
                        "rng": rng_state(),
                    })
                    # the networks alone, for load_policy (the pool is not copied again)
                    tracker.log_artifact(weights.save(run_weights(parts)))
                if checkpointer is None or (iteration + 1) % every == 0 or last:
                    tracker.log(pending)
                    pending = []
                if stop or stopped_by is not None:
                    break
            progress.close()
            collector.shutdown()
            torch.set_num_threads(cfg.threads)

            if grid is not None and frames > 0:
                # the paper's figure: where the robot went until it first found the reward
                snapshot = grid if heatmap_counts is None else grid.like(heatmap_counts)
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "visited_positions.png"
                    coverage_heatmap(snapshot, first_reward_step, path)
                    tracker.log_artifact(path)
            if stopped_by is not None:
                status = "KILLED"
                print(f"{stopped_by}: stopped after iteration {iteration}"
                      + (f", checkpoint {checkpointer.path}" if checkpointer else "")
                      + "; continue with resume=true.")
            else:
                status = "FINISHED"
            return {"run_id": run_id, "iterations_done": iteration + 1,
                    "stopped_by": stopped_by,
                    "runs_table": runs_table_link(uri, experiment_id), **metrics}
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        except TrackingUnavailable as error:
            status = None  # the store cannot be told; the run stays RUNNING there
            where = (f"the checkpoint {checkpointer.path} holds every step not logged"
                     if checkpointer is not None and checkpointer.exists() else
                     "no checkpoint was written yet")
            raise RuntimeError(
                f"{error}. Stopped: {where}; once the store is back, continue with resume=true "
                "(mlflow.retry_minutes sets how long to wait)."
            ) from None
        finally:
            if status is not None:
                tracker.end(status)


@hydra.main(version_base=None, config_path=str(ROOT / "conf"), config_name="trpo_vase")
def main(cfg: DictConfig) -> float:
    result = train(cfg)
    print(
        f"done: {result['iterations_done']} iterations; extrinsic return "
        f"{result.get('Return/mean', math.nan):.3f}, success rate "
        f"{result.get('Return/success_rate', math.nan):.2f}. The runs table: "
        f"{result['runs_table']}"
    )
    if result["stopped_by"] is not None:
        sys.exit(128 + signal.Signals[result["stopped_by"]].value)
    return result.get("Return/mean", math.nan)


if __name__ == "__main__":
    main()
