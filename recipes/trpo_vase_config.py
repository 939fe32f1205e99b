"""The typed schema of ``conf/trpo_vase.yaml`` and its groups: every key's type and range, checked
before anything is built, with the key named in the error.

``typed_config(cfg)`` merges the composed config into Hydra structured configs (dataclasses) of
the main file and of the chosen env, surprise and advantage, so ``iterations=abc``,
``iterations=2.5`` or an unknown key fail as ``ValueError: iterations: ...``; then each range is
checked (``num_envs=0``: ``num_envs must be >= 1, got 0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from torchrl_vase._validation import check_layer_widths


@dataclass
class BNN:
    num_cells: list[int] = field(default_factory=lambda: [32])
    activation: str = "relu"


@dataclass
class Coverage:
    cell_size: float = 0.1


@dataclass
class Env:
    name: str
    id: str
    iterations: int
    frames_per_batch: int
    normalize_observations: bool
    policy_cells: list[int]
    critic_cells: list[int]
    max_kl: float
    bnn: BNN
    pool_size: int
    pool_min: int
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    paper: dict[str, Any] = field(default_factory=dict)
    coverage: Coverage | None = None


@dataclass
class ModelTraining:
    updates_per_iteration: int = 500
    batch_size: int = 10
    lr: float = 1e-3


@dataclass
class ELBOTraining(ModelTraining):
    kl_weight: float = 0.2
    compile: bool = False


@dataclass
class NoSurprise:
    name: str = "none"


@dataclass
class BNNSurprise:
    name: str
    eta: float
    sigma_c: float
    num_samples: int
    prior_std: float
    init_mean: str
    target: str
    standardize: bool
    elbo: ELBOTraining
    reward_normalization: str | None = None
    delta: float = 0.0


@dataclass
class RNDSurprise:
    name: str
    eta: float
    num_cells: list[int]
    embedding_dim: int
    update_fraction: float
    elbo: ModelTraining
    reward_normalization: str | None = None


@dataclass
class Advantage:
    structure: str
    value_target: str
    center_bonus: bool


@dataclass
class DualAdvantage(Advantage):
    extrinsic_coef: float = 2.0
    intrinsic_coef: float = 1.0
    intrinsic_gamma: float = 0.995
    episodic_intrinsic: bool = False


@dataclass
class TRPO:
    gamma: float
    gae_lambda: float
    critic_epochs: int
    critic_lr: float
    critic_minibatch: int
    critic_standardize: bool
    critic_activation: str
    init: str
    init_log_std: float
    cg_iters: int
    cg_damping: float
    backtracks: int


@dataclass
class MLflow:
    tracking_uri: str | None = None
    experiment: str | None = None
    retry_minutes: float = 10.0


@dataclass
class Eval:
    every: int = 10
    episodes: int = 5
    video: bool = False


@dataclass
class Checkpoint:
    every: int = 10
    dir: str = "checkpoints"


@dataclass
class Main:
    seed: int
    iterations: int | None
    device: str
    threads: int
    num_envs: int
    collector: str
    vectorization: str
    collection: str
    progress_bar: bool
    stop_at_first_reward: bool
    obs_norm_steps: int
    trpo: TRPO
    mlflow: MLflow
    eval: Eval
    checkpoint: Checkpoint
    resume: Any  # false, true, or a checkpoint's path


SURPRISES = {"none": NoSurprise, "vase": BNNSurprise, "nll": BNNSurprise, "vime": BNNSurprise,
             "rnd": RNDSurprise}
ADVANTAGES = {"combined": Advantage, "extrinsic": Advantage, "dual": DualAdvantage}
GROUPS = ("env", "surprise", "advantage")

# (key, lowest allowed, inclusive?): every number the run needs in a range
RANGES = [
    ("seed", 0, True), ("iterations", 1, True), ("threads", 1, True), ("num_envs", 1, True),
    ("obs_norm_steps", 1, True), ("checkpoint.every", 0, True), ("eval.every", 0, True),
    ("eval.episodes", 1, True), ("mlflow.retry_minutes", 0, True),
    ("env.iterations", 1, True), ("env.frames_per_batch", 1, True), ("env.max_kl", 0, False),
    ("env.pool_size", 1, True), ("env.pool_min", 1, True), ("env.coverage.cell_size", 0, False),
    ("trpo.gamma", 0, False), ("trpo.gae_lambda", 0, True), ("trpo.critic_epochs", 1, True),
    ("trpo.critic_lr", 0, False), ("trpo.critic_minibatch", 1, True), ("trpo.cg_iters", 1, True),
    ("trpo.cg_damping", 0, True), ("trpo.backtracks", 1, True),
    ("surprise.eta", 0, True), ("surprise.delta", 0, True),
    ("surprise.num_samples", 1, True), ("surprise.prior_std", 0, False),
    ("surprise.embedding_dim", 1, True), ("surprise.update_fraction", 0, False),
    ("surprise.elbo.updates_per_iteration", 1, True), ("surprise.elbo.batch_size", 1, True),
    ("surprise.elbo.lr", 0, False), ("surprise.elbo.kl_weight", 0, True),
    ("advantage.intrinsic_gamma", 0, False),
]
# hidden-layer widths: lists of positive ints ([] is no hidden layer)
LAYER_WIDTHS = ("env.policy_cells", "env.critic_cells", "env.bnn.num_cells", "surprise.num_cells")
AT_MOST_ONE = ("trpo.gamma", "trpo.gae_lambda", "advantage.intrinsic_gamma",
               "surprise.update_fraction")


def _merge(schema: type, node: DictConfig, prefix: str) -> DictConfig:
    try:
        return OmegaConf.merge(OmegaConf.structured(schema), node)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "?"
        message = str(error).splitlines()[0]
        raise ValueError(f"{prefix}{key}: {message}") from None


def _choice(node: DictConfig, key: str, choices: dict, group: str) -> type:
    name = node.get(key)
    if name not in choices:
        raise ValueError(f"{group}.{key} must be one of {sorted(choices)}, got {name!r}.")
    return choices[name]


def typed_config(cfg: DictConfig) -> DictConfig:
    """``cfg`` checked against the schema (types, known keys, ranges); the typed copy."""
    resolved = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for group in GROUPS:
        if not isinstance(resolved.get(group), DictConfig):
            raise ValueError(f"the config has no {group!r} group.")
    typed = _merge(Main, OmegaConf.masked_copy(
        resolved, [key for key in resolved if key not in GROUPS]), "")
    env = _merge(Env, resolved.env, "env.")
    surprise = _merge(_choice(resolved.surprise, "name", SURPRISES, "surprise"),
                      resolved.surprise, "surprise.")
    advantage = _merge(_choice(resolved.advantage, "structure", ADVANTAGES, "advantage"),
                       resolved.advantage, "advantage.")
    # a plain (unstructured) config: the values converted, the keys as the groups chose them
    typed = OmegaConf.create({
        **OmegaConf.to_container(typed),
        **{name: OmegaConf.to_container(node) for name, node in
           (("env", env), ("surprise", surprise), ("advantage", advantage))},
    })
    for key, low, inclusive in RANGES:
        value = OmegaConf.select(typed, key)
        if value is None:
            continue
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            relation = ">=" if inclusive else ">"
            raise ValueError(f"{key} must be {relation} {low}, got {value}.")
        if key in AT_MOST_ONE and value > 1:
            raise ValueError(f"{key} must be <= 1, got {value}.")
    for key in LAYER_WIDTHS:
        widths = OmegaConf.select(typed, key)
        if widths is not None:
            check_layer_widths(key, widths)
    if not isinstance(typed.resume, (bool, str)):
        raise ValueError(f"resume must be true, false or a checkpoint path, got {typed.resume!r}.")
    return typed
