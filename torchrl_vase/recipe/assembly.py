"""The recipe's parts from its config: ``build(cfg, ...)`` gives the loop's collector, step and
stateful parts as ``recipes/trpo_vase.py`` trains them, and ``check_memory`` what they will hold
(the pool's and the replay buffer's capacities are theirs). Every builder reads the typed config
(``torchrl_vase.recipe.config``); below this package, nothing in the library sees a config.

Examples:
    >>> from hydra import compose, initialize_config_dir
    >>> from torchrl_vase.recipe import config
    >>> with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base=None):
    ...     cfg = config.typed_config(compose("trpo_vase", overrides=["env=point_robot"]))
    >>> collector, step, state = seeded_build(cfg, *config.check_env(cfg))
    >>> type(step).__name__, sorted(state)[:3]
    ('OnPolicyStep', ['actor', 'advantage', 'collector'])
    >>> collector.shutdown()
"""

from __future__ import annotations

import itertools
import os
import random
import tempfile
from pathlib import Path

import gymnasium
import numpy as np
import torch
from omegaconf import DictConfig
from torch import nn
from torchrl.data import LazyMemmapStorage, LazyTensorStorage, ReplayBuffer
from torchrl.modules import MLP, ValueOperator
from torchrl.objectives import ClipPPOLoss, SoftUpdate, group_optimizers

from torchrl_vase._random_stream import EVALUATION_STREAM, iteration_seed
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.diagnostics import CoverageGrid
from torchrl_vase.evaluation import evaluate, record_episode
from torchrl_vase.exploration import Exploration
from torchrl_vase.loggers import Logger
from torchrl_vase.modules import (
    ACTIVATIONS,
    DynamicsModel,
    EnsembleMLP,
    ICMNetwork,
    StandardizedRegressor,
    gaussian_policy,
    initialize_,
    q_value_network,
    tanh_policy,
)
from torchrl_vase.objectives import ExplorationGAE, TRPOLoss
from torchrl_vase.objectives.critic_fit import CriticFit
from torchrl_vase.objectives.sac import FusedSACLoss
from torchrl_vase.off_policy import OffPolicyStep, SACUpdate
from torchrl_vase.recipe import config
from torchrl_vase.replay import ReplayJournal
from torchrl_vase.step import OnPolicyStep, PPOUpdate, TRPOUpdate
from torchrl_vase.transforms import (
    DisagreementRewardTransform,
    ICMRewardTransform,
    RNDRewardTransform,
    SurpriseRewardTransform,
)
from torchrl_vase.watchers import FirstReward

__all__ = ["build", "build_sac", "check_memory", "evaluation_metrics", "log_figures",
           "seeded_build"]



def collected_frames(cfg: DictConfig, run_iterations: int) -> int:
    """The most transitions ``run_iterations`` iterations collect (with whole paths, up to a path
    more each, less a step)."""
    frames = batch_layout(cfg)[1]
    if cfg.collection == "paths" and cfg.whole_paths:
        limit = config.make_kwargs(cfg).get("max_episode_steps") or gymnasium.spec(
            cfg.env.id).max_episode_steps
        frames += (limit or 1) - 1
    return run_iterations * frames


def batch_layout(cfg: DictConfig) -> tuple[int, int]:
    """``(envs stepped together, frames per batch)``: ``num_envs`` and ``env.frames_per_batch``, or
    SAC's ``sac.num_envs`` and ``sac.frames_per_batch``."""
    if cfg.algorithm == "sac":
        return cfg.sac.num_envs, cfg.sac.frames_per_batch
    return cfg.num_envs, cfg.env.frames_per_batch


def replay_capacity(cfg: DictConfig) -> int:
    """SAC's replay buffer: ``sac.buffer_size``, or what the run collects if that is less."""
    frames = collected_frames(cfg, config.iterations(cfg))
    return min(cfg.sac.buffer_size, max(cfg.sac.batch_size, frames))


def pool_capacity(cfg: DictConfig, run_iterations: int | None) -> int:
    """The replay pool's capacity: ``env.pool_size`` (the authors'), or what a run of
    ``run_iterations`` collects if that is less (a short run does not reserve 5 M transitions)."""
    if run_iterations is None:
        return cfg.env.pool_size
    return min(cfg.env.pool_size, max(cfg.env.pool_min, collected_frames(cfg, run_iterations)))


#: bytes a run holds besides its replay pool (envs, networks, batches): measured ~60 MB, rounded up
RUN_OVERHEAD = 200 * 2**20


def pool_bytes(cfg: DictConfig, obs: int | None = None, action: int | None = None) -> int:
    """The run's replay pool when full: (s, a, s') as float32 for the run's iterations (SAC's:
    its replay buffer); the env's sizes probed unless given."""
    if cfg.surprise.name == "none" and cfg.algorithm != "sac":
        return 0
    if obs is None or action is None:
        spaces = config.check_env(cfg)
        obs, action = spaces[0].shape[0], spaces[1].shape[0]
    capacity = (replay_capacity(cfg) if cfg.algorithm == "sac"
                else pool_capacity(cfg, config.iterations(cfg)))
    return capacity * (2 * obs + action) * 4


#: float32 values a collected frame may hold, per observation and action dimension and besides
#: them: a batch after the step held 283 bytes a frame on HalfCheetah (obs 20, action 6) and
#: 1,147 on Ant (125, 8) (measured 2026-12-04: ``batch.bytes()``, 19 keys); this allows about
#: twice that, for the copies made while a batch is built
BATCH_VALUES = (4, 4, 16)


#: an env's memory in a run: a MuJoCo task's env took 1.1 MiB, a Box2D one 0.1 MiB (100 made
#: in one process, measured 2026-12-07); doubled for the vector env's lanes and TorchRL's specs
ENV_BYTES = 2 * 2**20


def sample_bytes(cfg: DictConfig, obs: int, action: int) -> int:
    """The most the Bayesian model's ``num_samples`` draws hold at once (noise, activations,
    gradients); 0 without such a model."""
    if cfg.surprise.name not in ("vase", "nll", "vime"):
        return 0
    widths = [obs + action, *cfg.env.bnn.num_cells, obs]
    weights = sum((inputs + 1) * outputs for inputs, outputs in itertools.pairwise(widths))
    minibatch = cfg.surprise.elbo.batch_size * sum(widths[1:])
    return 3 * 4 * int(cfg.surprise.num_samples) * (weights + minibatch)


def check_memory(cfg: DictConfig, obs: int, action: int) -> None:
    """Refuse, before any run exists, a run whose envs, batch, pool and model samples would not fit
    in 80 % of the memory free here (they would grow for minutes, then crash)."""
    frames = collected_frames(cfg, 1)
    per_obs, per_action, rest = BATCH_VALUES
    parts = {
        f"a batch of {frames:,} frames": frames * (per_obs * obs + per_action * action + rest) * 4,
        "the replay pool": pool_bytes(cfg, obs, action),
        f"{cfg.num_envs:,} envs": cfg.num_envs * ENV_BYTES,
        f"{int(cfg.surprise.get('num_samples', 0) or 0):,} model samples": sample_bytes(
            cfg, obs, action),
    }
    needed = sum(parts.values()) + RUN_OVERHEAD
    free = available_memory()
    if needed > 0.8 * free:
        batch_key = "sac.frames_per_batch" if cfg.algorithm == "sac" else "env.frames_per_batch"
        largest = max(parts, key=parts.__getitem__)
        advice = {"the replay pool": "the pool's size", f"{cfg.num_envs:,} envs": "num_envs"}.get(
            largest, "surprise.num_samples" if "samples" in largest else batch_key)
        raise ValueError(
            f"this run needs about {needed / 2**30:.1f} GiB ("
            + "; ".join(f"{name}: {size / 2**30:.1f} GiB" for name, size in parts.items() if size)
            + f"), more than 80 % of the {free / 2**30:.1f} GiB free here: lower {advice}.")


def available_memory() -> int:
    """Bytes of memory free for new allocations (``MemAvailable``; the total elsewhere)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def make_collector(cfg: DictConfig, actor) -> VectorEnvCollector:
    """The vector-env collector, endless, on the CPU, with a copy of a policy trained on another
    device; its observation standardisation fitted when the task asks for it."""
    num_envs, frames_per_batch = batch_layout(cfg)
    collector = VectorEnvCollector(
        cfg.env.id, actor, num_envs=num_envs, frames_per_batch=frames_per_batch,
        paths=cfg.collection == "paths", whole_paths=cfg.whole_paths, seed=cfg.seed,
        reset_at_each_iter=cfg.collection == "rllab",
        make_kwargs=config.make_kwargs(cfg),
        init_random_frames=cfg.sac.init_random_frames if cfg.algorithm == "sac" else 0)
    if cfg.env.normalize_observations:
        collector.fit_observation_normalization(cfg.obs_norm_steps)
    return collector


def make_critic(cfg: DictConfig, obs_dim: int, out_key: str = "state_value") -> ValueOperator:
    """An MLP (or linear) critic; with ``trpo.critic_standardize`` its inputs and targets are
    standardised per fit, as rllab's baselines do."""
    cells = list(cfg.env.critic_cells)
    activation = ACTIVATIONS[cfg.trpo.critic_activation]
    net = MLP(obs_dim, 1, num_cells=cells, activation_class=activation) if cells \
        else nn.Linear(obs_dim, 1)
    initialize_(net, cfg.trpo.init, output_gain=1.0)
    if cfg.trpo.critic_standardize:
        net = StandardizedRegressor(net, in_features=obs_dim)
    return ValueOperator(net, in_keys=["observation"], out_keys=[out_key]).to(cfg.device)


def make_exploration(cfg: DictConfig, obs_dim: int, action_dim: int,
                     iterations: int | None = None, pool: ReplayBuffer | None = None
                     ) -> Exploration:
    """The bonus of ``cfg.surprise`` with its model and loss in an ``Exploration``; its pool sized
    to what the run collects, or ``pool`` (an off-policy learner's buffer)."""
    s, e, training = cfg.surprise, cfg.env, config.model_training(cfg)
    pool_size = pool_capacity(cfg, iterations)
    if s.name == "rnd":
        bonus = RNDRewardTransform(obs_dim, eta=s.eta, num_cells=list(s.num_cells),
                                   embedding_dim=s.embedding_dim).to(cfg.device)
        loss = bonus.make_loss(update_fraction=s.update_fraction)
    elif s.name == "disagreement":
        model = DynamicsModel(EnsembleMLP(obs_dim + action_dim, obs_dim, list(s.num_cells),
                                          members=s.members), standardize=s.standardize)
        bonus = DisagreementRewardTransform(model, eta=s.eta,
                                            reward_normalization=s.reward_normalization)
        loss = bonus.to(cfg.device).make_loss()
    elif s.name == "icm":
        model = DynamicsModel(ICMNetwork(obs_dim + action_dim, obs_dim, feature_dim=s.feature_dim,
                                         num_cells=list(s.num_cells)), standardize=s.standardize)
        bonus = ICMRewardTransform(model, eta=s.eta, reward_normalization=s.reward_normalization)
        loss = bonus.to(cfg.device).make_loss(beta=s.beta)
    else:
        model = DynamicsModel.build(
            obs_dim, action_dim, list(e.bnn.num_cells), ACTIVATIONS[e.bnn.activation],
            prior_std=s.prior_std, init_mean=s.init_mean, sigma_c=s.sigma_c, target=s.target,
            standardize=s.standardize, sampling=s.sampling,
            # the policy acts in [-1, 1] units; the env clips there before scaling to its bounds
            action_bounds=(-1.0, 1.0) if s.model_action == "applied" else None)
        bonus = SurpriseRewardTransform(
            model, measure=s.name, eta=s.eta, delta=s.delta,
            num_samples=s.num_samples, reward_normalization=s.reward_normalization,
        ).to(cfg.device)
        loss = bonus.make_loss(num_samples=s.num_samples, kl_weight=s.elbo.kl_weight)
    return Exploration(
        bonus, loss, pool_size=pool_size, pool_min=e.pool_min,
        updates_per_iteration=training.updates_per_iteration, batch_size=training.batch_size,
        lr=training.lr, backend=training.get("backend", "auto"), pool=pool,
        seed=cfg.seed,
        shuffle_bonus=cfg.shuffle_bonus)


def make_policy_update(cfg: DictConfig, actor, critic):
    """The policy's loss and its update: TRPO's natural-gradient step, or PPO's clipped epochs
    (``ClipPPOLoss`` without a critic term: the critic is fitted as for TRPO)."""
    if cfg.algorithm == "trpo":
        loss = TRPOLoss(actor, critic, max_kl=cfg.env.max_kl, cg_iters=cfg.trpo.cg_iters,
                        cg_damping=cfg.trpo.cg_damping,
                        line_search_backtracks=cfg.trpo.backtracks)
        return loss, TRPOUpdate(loss)
    p = cfg.ppo
    loss = ClipPPOLoss(actor, critic, clip_epsilon=p.clip_epsilon, critic_coeff=0.0,
                       entropy_bonus=p.entropy_coeff > 0, entropy_coeff=p.entropy_coeff or None,
                       loss_critic_type="l2", normalize_advantage=True, functional=False)
    optimizer = torch.optim.Adam(actor.parameters(), lr=p.lr)
    return loss, PPOUpdate(loss, optimizer, epochs=p.epochs, minibatch_size=p.minibatch_size,
                           max_grad_norm=p.max_grad_norm)


def make_advantage(cfg: DictConfig, loss) -> None:
    """Set the loss's value estimator. Plain TRPO (``surprise=none``) has one critic on the reward
    (``combined`` without a bonus)."""
    a = cfg.advantage
    structure = "combined" if cfg.surprise.name == "none" else a.structure
    loss.make_value_estimator(ExplorationGAE(
        structure, gamma=cfg.trpo.gamma, lmbda=cfg.trpo.gae_lambda,
        value_network=loss.critic_network, value_target=a.value_target,
        center_bonus=a.center_bonus, terminal_path_ends=cfg.collection != "continuous",
    ).to(cfg.device))


def coverage_watcher(cfg: DictConfig, observation_space) -> FirstReward:
    """The first reward's step and, for an env with a coverage grid, the positions visited."""
    grid = CoverageGrid(observation_space.low.tolist(), observation_space.high.tolist(),
                        cfg.env.coverage.cell_size) if cfg.env.get("coverage") else None
    return FirstReward(grid)


def build_sac(cfg: DictConfig, observation_space, action_space,
              make_collector=make_collector) -> tuple:
    """SAC's ``(collector, step, state)``: torchrl's ``SACLoss`` (as ``FusedSACLoss``) on a
    ``tanh_policy`` and twin critics as torchrl's SAC example builds them, its replay buffer,
    ``OffPolicyStep``."""
    obs_dim, action_dim = observation_space.shape[0], action_space.shape[0]
    s, activation = cfg.sac, ACTIVATIONS[cfg.sac.activation]
    actor = tanh_policy(obs_dim, action_dim, list(s.num_cells), activation=activation,
                        default_scale=s.default_policy_scale, scale_lb=s.scale_lb,
                        device=cfg.device)
    q_value = q_value_network(obs_dim, action_dim, list(s.num_cells), activation=activation,
                              device=cfg.device)
    collector = make_collector(cfg, actor)
    loss = FusedSACLoss(actor, q_value, num_qvalue_nets=2, loss_function="l2", delay_actor=False,
                   delay_qvalue=True, alpha_init=s.alpha_init, action_spec=actor.spec)
    loss.make_value_estimator(gamma=s.gamma)
    optimizer = group_optimizers(
        torch.optim.Adam(list(loss.actor_network_params.flatten_keys().values()), lr=s.lr,
                         eps=1e-8),
        torch.optim.Adam(list(loss.qvalue_network_params.flatten_keys().values()), lr=s.lr,
                         eps=1e-8),
        torch.optim.Adam([loss.log_alpha], lr=s.alpha_lr))
    storage = (LazyTensorStorage(replay_capacity(cfg), device=cfg.device)
               if s.storage == "memory" else LazyMemmapStorage(replay_capacity(cfg)))
    replay = ReplayBuffer(storage=storage, batch_size=s.batch_size)
    update = SACUpdate(loss, replay, optimizer, SoftUpdate(loss, tau=s.tau),
                       utd_ratio=s.utd_ratio)
    exploration = (None if cfg.surprise.name == "none"
                   else make_exploration(cfg, obs_dim, action_dim, pool=replay))
    state = {"actor": actor, "sac": update, "replay": ReplayJournal(replay),
             "collector": collector, "exploration": exploration,
             "first_reward": coverage_watcher(cfg, observation_space)}
    step = OffPolicyStep(replay, update, exploration, learning_starts=s.init_random_frames)
    return collector, step, state


def journal_replay(state: dict, directory: Path) -> None:
    """Checkpoint a run's transitions by appending them beside its checkpoint (``ReplayJournal``):
    SAC's buffer in ``replay/``, the bonus's pool in ``pool/``; a memmap buffer's files in
    ``replay_memmap/``, removed at exit. Call it before the loop saves or restores."""
    if state.get("replay") is not None:
        state["replay"].attach(directory / "replay")
        storage = state["replay"].buffer.storage
        if isinstance(storage, LazyMemmapStorage) and not storage.initialized:
            storage.scratch_dir = str(directory / "replay_memmap") + "/"
    exploration = state.get("exploration")
    if exploration is not None and exploration.owns_pool:
        exploration.journal_pool(directory / "pool")


def build(cfg: DictConfig, observation_space, action_space, make_collector=make_collector) -> tuple:
    """``(collector, step, state)``: the loop's parts, built in the order that fixes their initial
    weights; SAC's from ``build_sac``."""
    if cfg.algorithm == "sac":
        return build_sac(cfg, observation_space, action_space, make_collector)
    obs_dim, action_dim = observation_space.shape[0], action_space.shape[0]
    actor = gaussian_policy(obs_dim, action_dim, list(cfg.env.policy_cells), cfg.trpo.init,
                            init_log_std=cfg.trpo.init_log_std, device=cfg.device)
    critic = make_critic(cfg, obs_dim)
    collector = make_collector(cfg, actor)
    loss, update = make_policy_update(cfg, actor, critic)
    make_advantage(cfg, loss)
    critic_fit = CriticFit(loss, torch.optim.Adam(critic.parameters(), lr=cfg.trpo.critic_lr),
                           epochs=cfg.trpo.critic_epochs, minibatch_size=cfg.trpo.critic_minibatch,
                           prefix=f"{cfg.algorithm}/")
    exploration = (None if cfg.surprise.name == "none"
                   else make_exploration(cfg, obs_dim, action_dim, config.iterations(cfg)))
    # what a checkpoint holds besides the loop's counters (restored in place)
    state = {"actor": actor, "critic": critic, "critic_optimizer": critic_fit,
             "policy_optimizer": update if isinstance(update, PPOUpdate) else None,
             "advantage": loss.value_estimator, "collector": collector,
             "exploration": exploration, "first_reward": coverage_watcher(cfg, observation_space)}
    return collector, OnPolicyStep(loss.value_estimator, update, critic_fit, exploration), state


def seeded_build(cfg: DictConfig, observation_space, action_space,
                 make_collector=make_collector) -> tuple:
    """``build`` with torch's, NumPy's and Python's generators seeded by ``cfg.seed`` first: the
    same seed gives the same initial agent."""
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)  # noqa: NPY002
    random.seed(cfg.seed)
    return build(cfg, observation_space, action_space, make_collector=make_collector)


def evaluation_metrics(cfg: DictConfig, policy, iteration: int) -> dict[str, float]:
    """``eval/*``: ``eval.episodes`` episodes of the deterministic policy, from starts of their
    own (the training's random numbers are not touched: resume stays exact)."""
    result = evaluate(policy, cfg.env.id, episodes=cfg.eval.episodes,
                      seed=iteration_seed(cfg.seed, iteration, stream=EVALUATION_STREAM),
                      make_kwargs=config.make_kwargs(cfg))
    return {f"eval/{key}": value for key, value in result.items()}


def log_figures(cfg: DictConfig, logger: Logger, policy, first_reward: FirstReward,
                frames: int) -> None:
    """An episode's video (``eval.video``) and the coverage heatmap (envs with a grid)."""
    with tempfile.TemporaryDirectory() as tmp:
        if cfg.eval.video:
            path = record_episode(policy, cfg.env.id, Path(tmp) / f"episode_{frames}.mp4",
                                  seed=cfg.seed, make_kwargs=config.make_kwargs(cfg))
            logger.log_artifact(path, artifact_path="videos")
        if first_reward.grid is not None:
            logger.log_artifact(first_reward.heatmap(Path(tmp) / "visited_positions.png"))
