"""TRPO (or PPO) with a surprise bonus: the paper's Algorithm 1, assembled from the library.

The loop is ``torchrl_vase.OnPolicyLoop`` (seeding, checkpoints, signals, logging cadence, exact
resume), the run around it ``torchrl_vase.TrainingRun`` (its MLflow run, lock and end status), the
step it calls each iteration ``torchrl_vase.OnPolicyStep``: the bonus over the whole batch, the
replay pool and the model's ELBO steps (``Exploration``), the advantage (``ExplorationGAE`` with
the structure of ``conf/advantage/``), TRPO's natural-gradient step or PPO's clipped epochs, the
critic fit and the diagnostics of whether the bonus steers the policy. This script builds the
parts from the config. The policy is scored on the extrinsic return only.

    python recipes/trpo_vase.py                                     # MountainCar, VASE, seed 0
    python recipes/trpo_vase.py env=half_cheetah surprise=nll seed=3 surprise.delta=1e-3
    python recipes/trpo_vase.py algorithm=ppo                       # torchrl's ClipPPOLoss
    python recipes/trpo_vase.py advantage=dual surprise=rnd        # RND's two critics
    python recipes/trpo_vase.py preset=authors                      # the authors' settings
    python recipes/trpo_vase.py -m seed=0,1,2 surprise=none,vase,nll hydra/launcher=joblib
    python recipes/trpo_vase.py resume=true                         # continue a killed run
    python recipes/trpo_vase.py seeds=[0,1,2,3]                     # 4 seeds in one process
    mlflow ui --backend-store-uri sqlite:///mlflow.db               # compare the runs

Configuration: ``conf/trpo_vase.yaml`` and the groups ``conf/env/``, ``conf/surprise/``,
``conf/advantage/`` and ``conf/preset/``; its schema and checks: ``recipes/trpo_vase_config.py``.
"""

from __future__ import annotations

import logging
import math
import os
import random
import signal
import sys
import tempfile
from pathlib import Path

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torchrl.collectors import Collector
from torchrl.modules import MLP, ValueOperator
from torchrl.objectives import ClipPPOLoss

from torchrl_vase import (
    CriticFit,
    DynamicsModel,
    Exploration,
    ExplorationGAE,
    OnPolicyLoop,
    OnPolicyStep,
    PPOUpdate,
    RNDRewardTransform,
    StandardizedRegressor,
    SurpriseRewardTransform,
    TrainingRun,
    TRPOLoss,
    TRPOUpdate,
    gaussian_policy,
    initialize_,
)
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.diagnostics import CoverageGrid
from torchrl_vase.envs import make_training_env
from torchrl_vase.evaluation import acting_policy, evaluate, record_episode
from torchrl_vase.loop import iteration_seed
from torchrl_vase.runs import git_commit
from torchrl_vase.tracking import redact
from torchrl_vase.watchers import FirstReward, episode_metrics

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))
# launchers that run the jobs in other processes (submitit) unpickle this script's functions
# there: they must find the config module beside it too
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "recipes"),
                                                        os.environ.get("PYTHONPATH")]))
import trpo_vase_config as schema  # noqa: E402  (the config module beside this script)
from trpo_vase_population import train_population  # noqa: E402

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}
PROGRESS = {"return": "Return/mean", "success": "Return/success_rate", "frames/s": "train/fps"}


def make_collector(cfg: DictConfig, actor):
    """The lean vector-env collector (default) or torchrl's ``Collector`` over the transformed
    batched env; both endless, on the CPU, with a copy of a policy trained on another device."""
    rllab = cfg.collection == "rllab"  # every iteration starts fresh paths, in lanes
    if cfg.collector == "lean":
        collector = VectorEnvCollector(
            cfg.env.id, actor, num_envs=cfg.num_envs, frames_per_batch=cfg.env.frames_per_batch,
            reset_at_each_iter=rllab, paths=cfg.collection == "paths",
            whole_paths=cfg.whole_paths, seed=cfg.seed, make_kwargs=schema.make_kwargs(cfg))
        if cfg.env.normalize_observations:
            collector.fit_observation_normalization(cfg.obs_norm_steps)
        return collector
    env = make_training_env(
        cfg.env.id, cfg.num_envs, vectorization=cfg.vectorization, seed=cfg.seed,
        normalize_observations=cfg.env.normalize_observations,
        obs_norm_steps=cfg.obs_norm_steps, **schema.make_kwargs(cfg))
    return Collector(
        env, actor, frames_per_batch=cfg.env.frames_per_batch, total_frames=-1,
        reset_at_each_iter=rllab, policy_device="cpu", storing_device="cpu",
        # the policy is stateless: it needs no InitTracker (and torchrl warns until told so)
        auto_register_policy_transforms=False)


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
                     iterations: int | None = None) -> Exploration:
    """The bonus of ``cfg.surprise``, its model and loss, in the library's ``Exploration``; the
    pool holds at most what ``iterations`` collect (not the paper's 5M for a shorter run)."""
    s, e = cfg.surprise, cfg.env
    pool_size = schema.pool_capacity(cfg, iterations)
    if s.name == "rnd":
        bonus = RNDRewardTransform(obs_dim, eta=s.eta, num_cells=list(s.num_cells),
                                   embedding_dim=s.embedding_dim).to(cfg.device)
        loss = bonus.make_loss(update_fraction=s.update_fraction)
    else:
        model = DynamicsModel.build(
            obs_dim, action_dim, list(e.bnn.num_cells), ACTIVATIONS[e.bnn.activation],
            prior_std=s.prior_std, init_mean=s.init_mean, sigma_c=s.sigma_c, target=s.target,
            standardize=s.standardize, sampling=s.sampling)
        bonus = SurpriseRewardTransform(
            model, measure=s.name, eta=s.eta, delta=s.get("delta", 0.0),
            num_samples=s.num_samples, reward_normalization=s.reward_normalization,
        ).to(cfg.device)
        loss = bonus.make_loss(num_samples=s.num_samples, kl_weight=s.elbo.kl_weight)
    return Exploration(
        bonus, loss, pool_size=pool_size, pool_min=e.pool_min,
        updates_per_iteration=s.elbo.updates_per_iteration, batch_size=s.elbo.batch_size,
        lr=s.elbo.lr, backend=s.elbo.get("backend", "auto"), shuffle_bonus=cfg.shuffle_bonus)


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


def make_advantage(cfg: DictConfig, loss, obs_dim: int) -> ValueOperator | None:
    """Set the loss's value estimator; return the intrinsic critic of the dual structure. Plain
    TRPO (``surprise=none``) has one critic on the reward (``combined`` without a bonus)."""
    a = cfg.advantage
    structure = "combined" if cfg.surprise.name == "none" else a.structure
    intrinsic_critic, kwargs = None, {}
    if structure == "dual":
        intrinsic_critic = make_critic(cfg, obs_dim, out_key="intrinsic_state_value")
        kwargs = {"intrinsic_value_network": intrinsic_critic,
                  "intrinsic_gamma": a.intrinsic_gamma, "extrinsic_coef": a.extrinsic_coef,
                  "intrinsic_coef": a.intrinsic_coef, "episodic_intrinsic": a.episodic_intrinsic}
    loss.make_value_estimator(ExplorationGAE(
        structure, gamma=cfg.trpo.gamma, lmbda=cfg.trpo.gae_lambda,
        value_network=loss.critic_network, value_target=a.value_target,
        center_bonus=a.center_bonus, terminal_path_ends=cfg.collection != "continuous", **kwargs,
    ).to(cfg.device))
    return intrinsic_critic


def build(cfg: DictConfig, observation_space, action_space, make_collector=make_collector) -> tuple:
    """``(collector, step, state)``: the loop's parts, in the order that fixes their initial
    weights (the same seed gives the same agent whatever the algorithm, or population)."""
    obs_dim, action_dim = observation_space.shape[0], action_space.shape[0]
    actor = gaussian_policy(obs_dim, action_dim, list(cfg.env.policy_cells), cfg.trpo.init,
                            init_log_std=cfg.trpo.init_log_std, device=cfg.device)
    critic = make_critic(cfg, obs_dim)
    collector = make_collector(cfg, actor)
    loss, update = make_policy_update(cfg, actor, critic)
    intrinsic_critic = make_advantage(cfg, loss, obs_dim)
    critics = [*critic.parameters(), *(intrinsic_critic.parameters() if intrinsic_critic else ())]
    critic_fit = CriticFit(loss, torch.optim.Adam(critics, lr=cfg.trpo.critic_lr),
                           epochs=cfg.trpo.critic_epochs, minibatch_size=cfg.trpo.critic_minibatch,
                           prefix=f"{cfg.algorithm}/")
    exploration = (None if cfg.surprise.name == "none"
                   else make_exploration(cfg, obs_dim, action_dim, schema.iterations(cfg)))
    grid = CoverageGrid(observation_space.low.tolist(), observation_space.high.tolist(),
                        cfg.env.coverage.cell_size) if cfg.env.get("coverage") else None
    # what a checkpoint holds besides the loop's counters (restored in place)
    state = {"actor": actor, "critic": critic, "critic_optimizer": critic_fit,
             "policy_optimizer": update if isinstance(update, PPOUpdate) else None,
             "advantage": loss.value_estimator, "intrinsic_critic": intrinsic_critic,
             "collector": collector, "exploration": exploration,
             "first_reward": FirstReward(grid)}
    return collector, OnPolicyStep(loss.value_estimator, update, critic_fit, exploration), state


def evaluation_metrics(cfg: DictConfig, policy, iteration: int) -> dict[str, float]:
    """``eval/*``: ``eval.episodes`` episodes of the deterministic policy, from starts of their
    own (the training's random numbers are not touched: resume stays exact)."""
    result = evaluate(policy, cfg.env.id, episodes=cfg.eval.episodes,
                      seed=iteration_seed(cfg.seed, iteration, stream=1),
                      make_kwargs=schema.make_kwargs(cfg))
    return {f"eval/{key}": value for key, value in result.items()}


def log_figures(cfg: DictConfig, run: TrainingRun, policy, first_reward: FirstReward,
                frames: int) -> None:
    """An episode's video (``eval.video``) and the coverage heatmap (envs with a grid)."""
    with tempfile.TemporaryDirectory() as tmp:
        if cfg.eval.video:
            path = record_episode(policy, cfg.env.id, Path(tmp) / f"episode_{frames}.mp4",
                                  seed=cfg.seed, make_kwargs=schema.make_kwargs(cfg))
            run.tracker.log_artifact(path, artifact_path="videos")
        if first_reward.grid is not None:
            run.tracker.log_artifact(first_reward.heatmap(Path(tmp) / "visited_positions.png"))


def train(cfg: DictConfig) -> dict:
    """Run (or resume) one training run (a population with ``seeds``); its MLflow run id and
    final metrics. Every check runs before any MLflow run exists: the config's, the env's
    (``check_env``), the store's and checkpoint directory's (``TrainingRun``), the parts'."""
    cfg = schema.typed_config(cfg)
    if cfg.seeds is not None:  # several seeds in one process
        return train_population(cfg, build, evaluation_metrics, ROOT, PROGRESS)
    spaces = schema.check_env(cfg)
    torch.set_num_threads(cfg.threads)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    experiment = cfg.mlflow.experiment or cfg.env.name
    overrides, sweep = schema.launch()
    run = TrainingRun(
        schema.tracking_uri(cfg), experiment, config=OmegaConf.to_container(cfg, resolve=True),
        run_name=schema.run_name(cfg, overrides), identity_ignores=schema.identity_ignores(cfg),
        params=schema.run_params(cfg), tags=schema.run_tags(cfg, git_commit(ROOT), sweep),
        checkpoint_dir=Path(cfg.checkpoint.dir) / experiment if cfg.checkpoint.every else None,
        resume=cfg.resume, retry_minutes=cfg.mlflow.retry_minutes,
        experiment_tags=schema.experiment_tags(experiment, cfg.env.id))
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)  # noqa: NPY002
    random.seed(cfg.seed)
    collector, step, state = build(cfg, *spaces)
    first_reward, actor = state["first_reward"], state["actor"]
    with run:
        loop = OnPolicyLoop(
            collector, step, iterations=schema.iterations(cfg), seed=cfg.seed, state=state,
            logger=run.tracker, checkpoint=run.save if cfg.checkpoint.every else None,
            checkpoint_every=cfg.checkpoint.every or 1, watchers=[episode_metrics, first_reward],
            evaluate=lambda iteration: evaluation_metrics(cfg, policy, iteration),
            eval_every=cfg.eval.every, reseed_collector=cfg.collection != "continuous",
            # the paper's exploration experiment counts the steps to the first reward
            stop_when=(lambda: first_reward.step is not None) if cfg.stop_at_first_reward
            else None, device=cfg.device, threads=cfg.threads, progress=cfg.progress_bar,
            progress_keys=PROGRESS, name=f"{cfg.env.name}/{cfg.surprise.name} seed {cfg.seed}")
        if run.restore(loop) and cfg.collection == "continuous":
            print("resume: collection=continuous restarts the episodes in progress (the "
                  "envs' state is not saved); with collection=paths or rllab resume is exact.")
        # the observation standardisation is fixed (fitted before training, or restored)
        policy = acting_policy(actor, collector)
        print(f"MLflow run {run.run_id} ({run.run_name}) in experiment '{experiment}' at "
              f"{redact(run.uri)}")
        started = loop.iteration
        result = loop.run()
        run.stopped_by = result.stopped_by
        if result.iterations_done > started:
            log_figures(cfg, run, policy, first_reward, loop.frames)
    if result.stopped_by is not None:
        print(f"{result.stopped_by}: stopped after iteration {result.iterations_done - 1}"
              + (f", checkpoint {run.checkpointer.path}" if run.checkpointer else "")
              + "; continue with resume=true.")
    return {"run_id": run.run_id, "iterations_done": result.iterations_done,
            "stopped_by": result.stopped_by, "runs_table": run.runs_table(), **result.metrics}


@hydra.main(version_base=None, config_path=str(ROOT / "conf"), config_name="trpo_vase")
def main(cfg: DictConfig) -> float:
    result = train(cfg)
    print(f"done: {result['iterations_done']} iterations; extrinsic return "
          f"{result.get('Return/mean', math.nan):.3f}, success rate "
          f"{result.get('Return/success_rate', math.nan):.2f}. The runs table: "
          f"{result['runs_table']}")
    if result["stopped_by"] is not None:
        sys.exit(128 + signal.Signals[result["stopped_by"]].value)
    return result.get("Return/mean", math.nan)


if __name__ == "__main__":
    main()
