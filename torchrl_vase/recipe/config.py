"""The typed config of ``recipes/trpo_vase.py`` and what it determines: every key's type, range
and choices, the checks between keys and against the env, and the run's name, experiment,
checkpoint root, params and identity. ``typed_config(cfg)`` merges the composed config into
structured configs (dataclasses), so a wrong type or an unknown key fails as ``ValueError:
<key>: ...``, then checks each range, choice and relation; ``check_env(cfg)`` probes the env
once. All before any MLflow run exists."""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import sys
import typing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from torchrl_vase._validation import check_layer_widths, check_sigma_c
from torchrl_vase.envs import check_continuous_control, declares_sparse_goal
from torchrl_vase.evaluation import check_video
from torchrl_vase.modules import ACTIVATIONS as MODULE_ACTIVATIONS
from torchrl_vase.modules import INITIALIZATIONS, SAMPLINGS
from torchrl_vase.objectives.trainer import BACKENDS
from torchrl_vase.runs import check_resume, flatten, ignored
from torchrl_vase.tracking import MODEL_TRAINING_KIND, redact, return_first_view
from torchrl_vase.watchers import episode_metrics

#: the recipe's Hydra configs (``conf/`` of the repository)
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def at_least(low: float, *, high: float | None = None) -> Any:
    """A field whose value must be ``>= low`` (and ``<= high``)."""
    return field(metadata={"range": (low, True, high)})


def above(low: float, *, high: float | None = None) -> Any:
    """A field whose value must be ``> low`` (and ``<= high``)."""
    return field(metadata={"range": (low, False, high)})


def one_of(*choices: Any) -> Any:
    """A field whose value must be one of ``choices``."""
    return field(metadata={"choices": choices})


#: a field of hidden-layer widths: a list of positive ints (``[]``: no hidden layer)
WIDTHS = {"widths": True}


ACTIVATIONS = tuple(MODULE_ACTIVATIONS)


@dataclass
class BNN:
    num_cells: list[int] = field(metadata=WIDTHS)
    activation: str = one_of(*ACTIVATIONS)


@dataclass
class Coverage:
    cell_size: float = above(0)


@dataclass
class Env:
    name: str
    id: str
    iterations: int = at_least(1)
    frames_per_batch: int = at_least(1)
    normalize_observations: bool
    policy_cells: list[int] = field(metadata=WIDTHS)
    critic_cells: list[int] = field(metadata=WIDTHS)
    max_kl: float = above(0)
    bnn: BNN
    pool_size: int = at_least(1)
    pool_min: int = at_least(1)
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    paper: dict[str, Any] = field(default_factory=dict)
    coverage: Coverage | None = None


@dataclass
class ModelTraining:
    updates_per_iteration: int = at_least(1)
    batch_size: int = at_least(1)
    lr: float = above(0)


@dataclass
class ELBOTraining(ModelTraining):
    kl_weight: float = at_least(0)
    backend: str = one_of(*BACKENDS)


@dataclass
class NoSurprise:
    name: str


@dataclass
class BNNSurprise:
    name: str
    eta: float = at_least(0)
    sigma_c: float
    num_samples: int = at_least(1)
    prior_std: float = above(0)
    init_mean: str
    target: str
    standardize: bool
    elbo: ELBOTraining
    reward_normalization: str | None
    delta: float = at_least(0)
    sampling: str = one_of(*SAMPLINGS)  # conf/surprise/<measure>.yaml sets it (VIME: weights)
    model_action: str = one_of("raw", "applied")


@dataclass
class TrainedSurprise:
    """What the bonuses whose model trains by ``surprise.predictor`` share."""

    name: str
    eta: float = at_least(0)
    num_cells: list[int] = field(metadata=WIDTHS)
    predictor: ModelTraining
    reward_normalization: str | None


@dataclass
class RNDSurprise(TrainedSurprise):
    embedding_dim: int = at_least(1)
    update_fraction: float = above(0, high=1)


@dataclass
class DisagreementSurprise(TrainedSurprise):
    members: int = at_least(2)
    standardize: bool


@dataclass
class ICMSurprise(TrainedSurprise):
    feature_dim: int = at_least(1)
    beta: float = at_least(0, high=1)
    standardize: bool


@dataclass
class Advantage:
    structure: str
    value_target: str
    center_bonus: bool


@dataclass
class TRPO:
    gamma: float = above(0, high=1)
    gae_lambda: float = at_least(0, high=1)
    critic_epochs: int = at_least(1)
    critic_lr: float = above(0)
    critic_minibatch: int = at_least(1)
    critic_standardize: bool
    critic_activation: str = one_of(*ACTIVATIONS)
    init: str = one_of(*INITIALIZATIONS)
    init_log_std: float
    cg_iters: int = at_least(1)
    cg_damping: float = at_least(0)
    backtracks: int = at_least(1)


@dataclass
class PPO:
    epochs: int = at_least(1)
    minibatch_size: int = at_least(1)
    clip_epsilon: float = above(0)
    lr: float = above(0)
    entropy_coeff: float = at_least(0)
    max_grad_norm: float | None = above(0)


@dataclass
class SAC:
    frames: int = at_least(1)
    frames_per_batch: int = at_least(1)
    num_envs: int = at_least(1)
    init_random_frames: int = at_least(0)
    buffer_size: int = at_least(1)
    storage: str = one_of("memory", "memmap")
    batch_size: int = at_least(1)
    utd_ratio: float = above(0)
    gamma: float = above(0, high=1)
    lr: float = above(0)
    alpha_lr: float = above(0)
    alpha_init: float = above(0)
    tau: float = above(0, high=1)
    num_cells: list[int] = field(metadata=WIDTHS)
    activation: str = one_of(*ACTIVATIONS)
    default_policy_scale: float = above(0)
    scale_lb: float = above(0)


@dataclass
class MLflow:
    tracking_uri: str | None
    experiment: str | None
    retry_minutes: float = at_least(0)


@dataclass
class Eval:
    every: int = at_least(0)
    episodes: int = at_least(1)
    video: bool


@dataclass
class Checkpoint:
    every: int = at_least(0)
    dir: str
    trust_unsigned: bool


@dataclass
class Main:
    seed: int = at_least(0)
    iterations: int | None = at_least(1)
    device: str
    threads: Any  # auto, or a count (threads_for)
    num_envs: int = at_least(1)
    collection: str = one_of("paths", "rllab", "continuous")
    progress_bar: bool
    stop_at_first_reward: bool
    obs_norm_steps: int = at_least(1)
    trpo: TRPO
    mlflow: MLflow
    eval: Eval
    checkpoint: Checkpoint
    resume: Any  # false, true, or a checkpoint's path
    algorithm: str = one_of("trpo", "ppo", "sac")
    ppo: PPO
    sac: SAC
    whole_paths: bool
    shuffle_bonus: bool  # a placebo: each batch's bonus permuted across its transitions


SURPRISES = {"none": NoSurprise, "vase": BNNSurprise, "nll": BNNSurprise, "vime": BNNSurprise,
             "rnd": RNDSurprise, "disagreement": DisagreementSurprise, "icm": ICMSurprise}
ADVANTAGES = {"combined": Advantage, "extrinsic": Advantage}
GROUPS = ("env", "surprise", "advantage")


def check_fields(schema: type, node: DictConfig, prefix: str = "") -> None:
    """Each value of ``node`` against its field's range, choices or widths in ``schema``
    (nested dataclasses walked); a ``ValueError`` naming the key."""
    hints = typing.get_type_hints(schema)
    for spec in dataclasses.fields(schema):
        key, value = prefix + spec.name, node.get(spec.name)
        nested = [t for t in (hints[spec.name], *typing.get_args(hints[spec.name]))
                  if dataclasses.is_dataclass(t)]
        if nested and isinstance(value, DictConfig):
            check_fields(nested[0], value, f"{key}.")
        if value is None:
            continue
        if "range" in spec.metadata:
            low, inclusive, high = spec.metadata["range"]
            if not math.isfinite(value) or value < low or (value == low and not inclusive):
                raise ValueError(f"{key} must be {'>=' if inclusive else '>'} {low}, got {value}.")
            if high is not None and value > high:
                raise ValueError(f"{key} must be <= {high}, got {value}.")
        if "choices" in spec.metadata and value not in spec.metadata["choices"]:
            raise ValueError(f"{key} must be one of {sorted(spec.metadata['choices'])}, "
                             f"got {value!r}.")
        if "widths" in spec.metadata:
            check_layer_widths(key, value)


def _merge(schema: type, node: DictConfig, prefix: str) -> DictConfig:
    """``node`` typed by ``schema``, whose fields hold no defaults: every value comes from the
    YAML under ``conf/`` (one place), and a key it lacks is named."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), node)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "?"
        message = str(error).splitlines()[0]
        raise ValueError(f"{prefix}{key}: {message}") from None
    missing = sorted(OmegaConf.missing_keys(merged))
    if missing:
        raise ValueError(f"the config gives no value for {', '.join(prefix + k for k in missing)} "
                         f"(conf/ holds every setting's value).")
    return merged


def _choice(node: DictConfig, key: str, choices: dict, group: str) -> type:
    name = node.get(key)
    if name not in choices:
        raise ValueError(f"{group}.{key} must be one of {sorted(choices)}, got {name!r}.")
    return choices[name]


ENV_CONFIGS = CONF_DIR / "env"


def env_name(name: str, env_id: str) -> str:
    """The env's name: ``name``, unless an ``env.id`` given on its own
    (``env.id=InvertedPendulum-v5``) is not the ``conf/env`` file's task: then that id."""
    config = ENV_CONFIGS / f"{name}.yaml"
    if not config.is_file():
        return name
    own = OmegaConf.load(config).id
    return name if env_id == own else env_id


def typed_config(cfg: DictConfig) -> DictConfig:
    """``cfg`` checked against the schema (types, known keys, ranges); the typed copy."""
    resolved = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for group in GROUPS:
        if not isinstance(resolved.get(group), DictConfig):
            raise ValueError(f"the config has no {group!r} group.")
    typed = _merge(Main, OmegaConf.masked_copy(
        resolved, [key for key in resolved if key not in GROUPS]), "")
    env = _merge(Env, resolved.env, "env.")
    env.name = env_name(env.name, env.id)
    surprise_schema = _choice(resolved.surprise, "name", SURPRISES, "surprise")
    advantage_schema = _choice(resolved.advantage, "structure", ADVANTAGES, "advantage")
    surprise = _merge(surprise_schema, resolved.surprise, "surprise.")
    advantage = _merge(advantage_schema, resolved.advantage, "advantage.")
    # a plain (unstructured) config: the values converted, the keys as the groups chose them
    typed = OmegaConf.create({
        **OmegaConf.to_container(typed),
        **{name: OmegaConf.to_container(node) for name, node in
           (("env", env), ("surprise", surprise), ("advantage", advantage))},
    })
    for schema, key in ((Main, None), (Env, "env"), (surprise_schema, "surprise"),
                        (advantage_schema, "advantage")):
        check_fields(schema, typed[key] if key else typed, f"{key}." if key else "")
    _check_relations(typed)
    return typed


def _check_relations(cfg: DictConfig) -> None:
    """What no single key's type or range says."""
    check_threads(cfg)
    if not isinstance(cfg.resume, (bool, str)):
        raise ValueError(f"resume must be true, false or a checkpoint path, got {cfg.resume!r}.")
    check_resume(cfg.resume, checkpoint_root(cfg))
    if cfg.device not in ("cpu", "cuda") and not cfg.device.startswith("cuda:"):
        raise ValueError(f"device must be cpu, cuda or cuda:<index>, got {cfg.device!r}.")
    if cfg.env.frames_per_batch < cfg.num_envs:
        raise ValueError(
            f"env.frames_per_batch ({cfg.env.frames_per_batch}) is smaller than num_envs "
            f"({cfg.num_envs}): every env must step at least once per batch.")
    if not cfg.whole_paths and cfg.collection != "paths":
        raise ValueError(f"whole_paths=false cuts the last of rllab's paths: it needs "
                         f"collection=paths, not {cfg.collection}.")
    if cfg.collection != "paths" and cfg.env.frames_per_batch % cfg.num_envs:
        raise ValueError(
            f"env.frames_per_batch ({cfg.env.frames_per_batch}) must be a multiple of num_envs "
            f"({cfg.num_envs}) with collection={cfg.collection}: every env takes the same "
            "number of steps.")
    if cfg.mlflow.experiment is not None and not str(cfg.mlflow.experiment).strip():
        raise ValueError("mlflow.experiment is empty: give the experiment a name, or leave it "
                         "null (the env's name).")
    name = str(cfg.mlflow.experiment or "")
    if name in (".", "..") or any(character in name for character in "/\\\0"):
        raise ValueError(
            f"mlflow.experiment must be a name, not a path: {name!r} names a folder under "
            "checkpoint.dir (its checkpoints go there), and a '/', '\\' or '..' would take "
            "them elsewhere. Choose another name; checkpoint.dir says where checkpoints go.")
    if cfg.algorithm == "ppo" and cfg.ppo.minibatch_size > cfg.env.frames_per_batch:
        raise ValueError(f"ppo.minibatch_size ({cfg.ppo.minibatch_size}) exceeds the batch "
                         f"(env.frames_per_batch, {cfg.env.frames_per_batch}).")
    training = model_training_key(cfg)
    batch_size = OmegaConf.select(cfg, f"{training}.batch_size") if training else None
    if batch_size is not None and batch_size > cfg.env.pool_min:
        raise ValueError(f"{training}.batch_size ({batch_size}) exceeds env.pool_min "
                         f"({cfg.env.pool_min}): the model's first minibatches would be drawn "
                         "from a pool smaller than one of them.")
    if cfg.algorithm == "sac":
        _check_sac(cfg)
    sigma_c = OmegaConf.select(cfg, "surprise.sigma_c")
    if sigma_c is not None:  # here, not at the model's construction: before any store exists
        try:
            check_sigma_c(sigma_c)
        except ValueError as error:
            raise ValueError(f"surprise.{error}") from None
    if cfg.shuffle_bonus and cfg.surprise.name == "none":
        raise ValueError("shuffle_bonus=true with surprise=none: the placebo shuffles a bonus "
                         "across each batch; choose a measure (vase, nll, vime, rnd, "
                         "disagreement, icm).")


def _check_sac(cfg: DictConfig) -> None:
    """``algorithm=sac``: the settings that mean nothing for SAC, or that it cannot do, refused
    with the reason; the buffer at least a batch."""
    extrinsic = OmegaConf.load(CONF_DIR / "advantage" / "extrinsic.yaml")
    if any(cfg.advantage.get(key) != value for key, value in extrinsic.items()):
        raise ValueError(
            f"algorithm=sac with advantage={cfg.advantage.structure} (or advantage.* changed): "
            "SAC has no advantage; the bonus reaches it as the reward of every batch it samples "
            "from its replay buffer. Leave the advantage group out.")
    if cfg.collection == "rllab":
        raise ValueError(
            "algorithm=sac with collection=rllab: rllab's lanes restart every env each batch, "
            f"so with sac.frames_per_batch={cfg.sac.frames_per_batch} no episode would run "
            "past a lane's length. Use collection=paths (the default: whole paths, exact "
            "resume) or continuous (episodes run on across batches; a resume restarts them).")
    if cfg.surprise.name == "vime":
        raise ValueError(
            "algorithm=sac with surprise=vime: VIME's bonus is the information gain of a "
            "transition under the model as it was when the transition was seen (normalised by "
            "the recent batches' medians); recomputed for old transitions sampled from a replay "
            "buffer it is another quantity. Use vase, nll or rnd with SAC.")
    s = cfg.sac
    if s.buffer_size < s.frames_per_batch:
        raise ValueError(f"sac.buffer_size ({s.buffer_size}) is smaller than a collected batch "
                         f"(sac.frames_per_batch, {s.frames_per_batch}).")
    if s.batch_size > s.buffer_size:
        raise ValueError(f"sac.batch_size ({s.batch_size}) exceeds sac.buffer_size "
                         f"({s.buffer_size}).")
    if s.frames_per_batch < s.num_envs:
        raise ValueError(f"sac.frames_per_batch ({s.frames_per_batch}) is smaller than "
                         f"sac.num_envs ({s.num_envs}).")
    frames = iterations(cfg) * s.frames_per_batch
    if s.init_random_frames >= frames:
        raise ValueError(f"sac.init_random_frames ({s.init_random_frames}) is not below the "
                         f"run's {frames} frames: SAC would never update.")


def make_kwargs(cfg: DictConfig) -> dict:
    """``env.make_kwargs``: the env's constructor arguments, for ``gymnasium.make``."""
    kwargs = cfg.env.get("make_kwargs")
    return {} if kwargs is None else OmegaConf.to_container(kwargs, resolve=True)


def check_env(cfg: DictConfig) -> tuple[gymnasium.spaces.Space, gymnasium.spaces.Space]:
    """Probe the env once: one the policy can drive (bounded vector actions, flat vector
    observations), a video it can render, a CUDA device if asked for; its spaces."""
    try:
        probe = gymnasium.make(cfg.env.id, **make_kwargs(cfg))
    except gymnasium.error.Error as error:
        raise ValueError(f"env.id={cfg.env.id}: {error} (or env.make_kwargs do not fit it).") \
            from None
    spaces = probe.observation_space, probe.action_space
    probe.close()
    try:
        check_continuous_control(cfg.env.id, *spaces)
    except (TypeError, ValueError) as error:
        raise type(error)(f"env.id={cfg.env.id}: {error}") from None
    if cfg.eval.video:
        check_video(cfg.env.id, make_kwargs(cfg))
    if cfg.stop_at_first_reward and not declares_sparse_goal(cfg.env.id):
        raise ValueError(f"stop_at_first_reward: env.id={cfg.env.id} declares no sparse goal "
                         "(torchrl_vase.envs.declares_sparse_goal), so its first reward means "
                         "nothing; leave stop_at_first_reward=false.")
    if cfg.device != "cpu" and not torch.cuda.is_available():
        raise ValueError(f"device={cfg.device}: there is no CUDA device here "
                         "(torch.cuda.is_available() is False); use device=cpu.")
    return spaces


# -- What a config makes of its run: name, params, identity
# command-line overrides a run's name leaves out: already in it (the seed, the groups), or not a
# setting (where the run logs and checkpoints, how it shows progress)
NAME_IGNORES = {"seed", "env", "surprise", "advantage", "resume", "progress_bar", "threads"}
NAME_IGNORED_PREFIXES = ("mlflow.", "checkpoint.", "hydra.", "hydra/")
# keys (and key groups) that do not change what a run computes: left out of MLflow's params
# (`iterations` is logged once, as the effective count); a run resumed with other values of
# these, or of `threads`, is the same run
PARAM_IGNORES = ("mlflow", "checkpoint", "progress_bar", "resume", "iterations", "env.iterations")


# keys added after runs existed: at these values a config keeps the identity it had before, so
# resume=true still finds the runs (and checkpoints) made before each key came
LATER_KEYS = {"algorithm": "trpo", "surprise.sampling": "weights", "whole_paths": True,
              "surprise.model_action": "raw", "shuffle_bonus": False}


# keys removed since runs existed, at the value every run had (``TrainingRun(retired=...)``)
RETIRED_KEYS = {"collector": "lean", "vectorization": "sync"}


# what another algorithm's run does not read: its blocks, and for SAC the on-policy learner's
UNREAD = {"trpo": ("ppo", "sac"), "ppo": ("sac",),
          "sac": ("trpo", "ppo", "advantage", "num_envs", "env.frames_per_batch",
                  "env.policy_cells", "env.critic_cells", "env.max_kl")}


def identity_ignores(cfg: DictConfig) -> tuple[str, ...]:
    """What the tag ``run_identity`` leaves out: what does not change the computation (the settings
    its algorithm does not read among them) and the ``LATER_KEYS`` at their defaults."""
    later = [key for key, default in LATER_KEYS.items() if OmegaConf.select(cfg, key) == default]
    return (*PARAM_IGNORES, "threads", *later, *UNREAD[cfg.algorithm])


def iterations(cfg: DictConfig) -> int:
    """The run's iteration count: ``iterations``, else the env's (the paper's); for SAC its
    frame budget in batches (``sac.frames / sac.frames_per_batch``, rounded up)."""
    if cfg.iterations is not None:
        return cfg.iterations
    if cfg.algorithm == "sac":
        return -(-cfg.sac.frames // cfg.sac.frames_per_batch)
    return cfg.env.iterations


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a cluster job's allocation)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def jobs_together() -> int:
    """How many jobs of this launch run at once here: a joblib sweep's ``n_jobs`` (``-1``: one a
    core); 1 otherwise."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return 1
    launcher = HydraConfig.get().launcher
    if "joblib" not in str(launcher.get("_target_", "")).lower():
        return 1
    n_jobs = int(launcher.get("n_jobs", -1))
    return usable_cores() if n_jobs < 0 else max(1, n_jobs)


def check_threads(cfg: DictConfig) -> None:
    """``threads`` is ``auto`` or a whole number in ``[1, cores]``; else a ``ValueError``."""
    cores = usable_cores()
    if cfg.threads != "auto" and (isinstance(cfg.threads, bool) or not isinstance(
            cfg.threads, int) or not 1 <= cfg.threads <= cores):
        raise ValueError(f"threads must be auto or a whole number from 1 to the {cores} cores "
                         f"this process may use, got {cfg.threads!r}.")


def threads_for(cfg: DictConfig, jobs: int | None = None) -> int:
    """``threads`` as a count. ``auto``: the cores shared among the jobs run at once, and no more
    than the cores not already busy (less the one-minute load), at least one. A count whose threads
    times the jobs exceed the cores is said once: torch's spinning threads without a core each slow
    their job (recipes/benchmarks/benchmark_threads.py)."""
    check_threads(cfg)
    cores, jobs = usable_cores(), jobs_together() if jobs is None else jobs
    if cfg.threads == "auto":
        idle = cores - round(os.getloadavg()[0]) if hasattr(os, "getloadavg") else cores
        return max(1, min(cores // jobs, idle))
    if cfg.threads * jobs > cores:
        print(f"threads={cfg.threads} in each of {jobs} jobs at once is more threads than the "
              f"{cores} cores: torch's threads will wait on each other and every job run "
              "slower; threads=auto gives each job its share.", file=sys.stderr)
    return cfg.threads


def launch() -> tuple[list[str], str | None]:
    """The overrides given on the command line and, in a Hydra multirun, the sweep's id (its
    directory's name, the launch time); nothing under the compose API."""
    if not HydraConfig.initialized():
        return [], None
    hydra_config = HydraConfig.get()
    sweep = Path(hydra_config.sweep.dir).name if hydra_config.mode == RunMode.MULTIRUN else None
    return list(hydra_config.overrides.task), sweep


def run_name(cfg: DictConfig, overrides: list[str] = ()) -> str:
    """``[ppo-|sac-]<surprise>[-<advantage>]-seed<seed>`` (``none-seed<seed>``), then the overrides
    that change a setting: ``vase-extrinsic-seed0 surprise.delta=0.01``."""
    base = (f"none-seed{cfg.seed}" if cfg.surprise.name == "none"
            else f"{cfg.surprise.name}-seed{cfg.seed}" if cfg.algorithm == "sac"
            else f"{cfg.surprise.name}-{cfg.advantage.structure}-seed{cfg.seed}")
    settings = [override.lstrip("+~") for override in overrides
                if (key := override.split("=", 1)[0].lstrip("+~")) not in NAME_IGNORES
                and key != "algorithm" and not key.startswith(NAME_IGNORED_PREFIXES)]
    prefix = "" if cfg.algorithm == "trpo" else f"{cfg.algorithm}-"
    return " ".join([prefix + base, *settings])


def run_params(cfg: DictConfig) -> dict[str, str]:
    """The run's settings as MLflow params, one per leaf, less where it logs and what its algorithm
    does not read; the effective iteration count."""
    ignores = (*PARAM_IGNORES, *UNREAD[cfg.algorithm])
    params = {key: value for key, value in flatten(OmegaConf.to_container(cfg, resolve=True))
              .items() if not ignored(key, ignores)}
    return params | {"iterations": str(iterations(cfg))}


def run_tags(cfg: DictConfig, commit: str, sweep: str | None) -> dict[str, str]:
    advantage = {} if cfg.algorithm == "sac" else {"advantage": cfg.advantage.structure}
    return ({"env": cfg.env.name, "surprise": cfg.surprise.name, "seed": str(cfg.seed),
             **advantage, "algorithm": cfg.algorithm, "git_commit": commit}
            | ({"sweep": sweep} if sweep else {}))


def runs_table_metrics(sparse: bool) -> list[str]:
    """The runs table's columns (best first): the success rate and the first reward's step only for
    a sparse goal; the bonus's mean beside the return."""
    columns = ("Return/mean", "Return/success_rate", "bonus/mean", "eval/return",
               "train/first_reward_step", "train/frames")
    sparse_only = {"Return/success_rate", "train/first_reward_step"}
    return [column for column in columns if sparse or column not in sparse_only]


def experiment_tags(name: str, env_id: str) -> dict[str, str]:
    """A new experiment's description, its kind (model training, not GenAI) and the runs-table
    view with the extrinsic return first (``torchrl_vase.tracking``)."""
    columns = runs_table_metrics(declares_sparse_goal(env_id))
    return MODEL_TRAINING_KIND | return_first_view(columns) | {
        "mlflow.note.content": (
            "TRPO (or PPO, SAC) with surprise bonuses (VASE, NLL, VIME, RND; "
            "recipes/trpo_vase.py) on "
            f"{env_id}: one run per measure, advantage structure, seed and changed settings. "
            "Metrics: Return/ (extrinsic), train/ (frames, timing), eval/ (deterministic policy), "
            "trpo/, ppo/ or sac/, bonus/ (the bonus and whether it steers the policy), bnn/ or "
            "rnd/. "
            f"Figures and a table: python recipes/study/compare.py --experiment {name}"),
    }


def episode_watchers(cfg: DictConfig, first_reward) -> list:
    """What the loop reads off each batch: the episodes' extrinsic return; for a sparse goal
    also the success rate and the first reward's step (``first_reward``)."""
    if declares_sparse_goal(cfg.env.id):
        return [episode_metrics, first_reward]
    return [partial(episode_metrics, success=False)]


def progress_keys(cfg: DictConfig) -> dict[str, str]:
    """The metrics a progress line shows, by label."""
    success = {"success": "Return/success_rate"} if declares_sparse_goal(cfg.env.id) else {}
    return {"return": "Return/mean", **success, "frames/s": "train/fps"}


def tracking_uri(cfg: DictConfig) -> str:
    """The config's URI, else ``$MLFLOW_TRACKING_URI``, else a SQLite file here."""
    return cfg.mlflow.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"


def experiment_name(cfg: DictConfig) -> str:
    """The MLflow experiment of a run: ``mlflow.experiment``, else the env's name."""
    return cfg.mlflow.experiment or cfg.env.name


def checkpoint_root(cfg: DictConfig) -> Path | None:
    """Where a run's checkpoint directory goes:
    ``<checkpoint.dir>/<experiment>``; ``None`` without checkpoints (``checkpoint.every=0``)."""
    if not cfg.checkpoint.every:
        return None
    return Path(cfg.checkpoint.dir) / experiment_name(cfg)


def model_training_key(cfg: DictConfig) -> str | None:
    """Where the bonus's model training settings live: ``surprise.elbo`` (a Bayesian model's
    ELBO steps), ``surprise.predictor`` (RND's predictor, Disagreement's ensemble, ICM's
    networks), ``None`` without a bonus."""
    if cfg.surprise.name == "none":
        return None
    return "surprise.elbo" if cfg.surprise.name in ("vase", "nll", "vime") else "surprise.predictor"


def model_training(cfg: DictConfig) -> DictConfig | None:
    """The bonus's model training settings (``model_training_key``), ``None`` without a bonus."""
    key = model_training_key(cfg)
    return None if key is None else OmegaConf.select(cfg, key)



class NoPasswordInSweeps(Callback):
    """Refuse a sweep whose tracking URI carries a password before Hydra writes it in clear (into
    ``multirun.yaml`` and its launch lines): such a URI goes in ``$MLFLOW_TRACKING_URI``."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        shown = [*config.hydra.overrides.task, str(config.mlflow.tracking_uri or "")]
        if any(redact(text) != text for text in shown):
            raise SystemExit(
                "recipes/trpo_vase.py: a sweep (-m) records its command line and config in "
                "multirun.yaml and prints each job's overrides, so a password in "
                "mlflow.tracking_uri would be kept in clear: give that URI in the environment "
                "(MLFLOW_TRACKING_URI=... python recipes/trpo_vase.py -m ...) and leave "
                "mlflow.tracking_uri unset.")


#: the recipe's config groups (a group's keys are its options' keys)
RECIPE_GROUPS = ("env", "surprise", "advantage", "preset")


def known_settings() -> set[str]:
    """Every dotted key the recipe's config can hold: ``conf/trpo_vase.yaml``'s, and under each
    group the keys of any of its options (``env.policy_cells``, ``surprise.elbo.lr``)."""
    def keys(node, prefix: str) -> set[str]:
        found = set()
        for key, value in (node or {}).items():
            if key == "defaults":
                continue
            found.add(f"{prefix}{key}")
            if isinstance(value, dict):
                found |= keys(value, f"{prefix}{key}.")
        return found

    known = keys(OmegaConf.to_container(OmegaConf.load(CONF_DIR / "trpo_vase.yaml")), "")
    for group in RECIPE_GROUPS:
        known.add(group)
        for option in (CONF_DIR / group).glob("*.yaml"):
            known |= keys(OmegaConf.to_container(OmegaConf.load(option)), f"{group}.")
    return known


def refuse_unknown_settings(arguments: list[str], program: str) -> None:
    """End the program with ``did you mean …?`` for an override that names no setting
    (``iteraions=3``), before Hydra's advice to append it; Hydra's own keys, ``+``, ``~`` and flags
    are left to Hydra."""
    known = None
    for argument in arguments:
        key = argument.split("=", 1)[0]
        if ("=" not in argument or key.startswith(("+", "~", "-", "hydra"))
                or key.split("@", 1)[0] in RECIPE_GROUPS):
            continue
        known = known_settings() if known is None else known
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            raise SystemExit(f"{program}: unknown setting {key!r}"
                             + (f"; did you mean {close[0]!r}?" if close else ".")
                             + f" (`python {program} --help` lists the settings.)")
