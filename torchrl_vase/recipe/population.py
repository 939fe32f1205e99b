"""``seeds=[...]``: the recipe's config trained for several seeds in one process.

Each member is built exactly as the single run of its seed (``seeded_build``: the same initial
weights), then the members run in lockstep: one vector env for all their envs
(``PopulationCollector``), one ``PopulationStep`` (the ELBO's steps for all members at once),
one ``TrainingLoop`` whose ``members`` are the population's; each member logs to its own MLflow
run (tags ``seed``, ``population``), the population keeps one checkpoint. Called by
``recipes/trpo_vase.py``'s ``train`` when ``seeds`` is set.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from torchrl_vase.loop import TrainingLoop
from torchrl_vase.population import (
    MemberParts,
    MemberStreams,
    PopulationCollector,
    PopulationMembers,
    PopulationStep,
)
from torchrl_vase.recipe import config as schema
from torchrl_vase.recipe.assembly import (
    evaluation_metrics,
    journal_replay,
    run_logger,
    seeded_build,
)
from torchrl_vase.runs import PopulationRun, git_commit


def member_config(cfg: DictConfig, seed: int) -> DictConfig:
    member = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    member.seed = seed
    return member


def checkpoint_directory(cfg: DictConfig) -> Path | None:
    """The checkpoint directory of the population of ``cfg`` (a typed config with ``seeds``):
    the one ``resume=true`` continues; ``None`` without checkpoints."""
    root = schema.checkpoint_root(cfg)
    if root is None:
        return None
    return PopulationRun.directory(root, OmegaConf.to_container(cfg, resolve=True),
                                   schema.identity_ignores(cfg))


def train_population(cfg: DictConfig, root: Path) -> dict:
    """Run (or resume) the population of ``cfg.seeds`` (a typed config); each member's run id
    and metrics; ``root``: the repository whose commit the runs are tagged with."""
    spaces = schema.check_env(cfg)
    torch.set_num_threads(cfg.threads)
    seeds = list(cfg.seeds)
    members = [member_config(cfg, seed) for seed in seeds]
    built = [seeded_build(member, *spaces, make_collector=lambda *args: None)
             for member in members]
    streams = MemberStreams(seeds)
    states = [state for _, _, state in built]
    collector = PopulationCollector(
        cfg.env.id, [state["actor"] for state in states], streams, num_envs=cfg.num_envs,
        frames_per_batch=cfg.env.frames_per_batch, reset_at_each_iter=cfg.collection == "rllab",
        make_kwargs=schema.make_kwargs(cfg))
    experiment = schema.experiment_name(cfg)
    overrides, sweep = schema.launch()
    commit = git_commit(root)
    population = PopulationRun(
        [dict(tracking_uri=schema.tracking_uri(member), experiment=experiment,
              config=OmegaConf.to_container(member, resolve=True),
              run_name=member_run_name(member, cfg, overrides),
              identity_ignores=schema.identity_ignores(member), params=schema.run_params(member),
              tags=schema.run_tags(member, commit, sweep) | {"population": population_name(cfg)},
              retry_minutes=cfg.mlflow.retry_minutes,
              experiment_tags=schema.experiment_tags(experiment, cfg.env.id))
         for member in members],
        config=OmegaConf.to_container(cfg, resolve=True),
        identity_ignores=schema.identity_ignores(cfg),
        checkpoint_dir=schema.checkpoint_root(cfg), resume=cfg.resume)
    watchers = [schema.episode_watchers(cfg, state["first_reward"]) for state in states]
    policies = [state["actor"] for state in states]  # no observation standardisation
    with population:
        if population.checkpointer is not None:  # each member's pool appended beside it
            for seed, state in zip(seeds, states, strict=True):
                journal_replay(state, population.checkpointer.directory / f"seed{seed}")
        loop = TrainingLoop(
            collector, PopulationStep([step for _, step, _ in built], streams),
            members=PopulationMembers(
                streams, [run_logger(cfg, run) for run in population.runs], watchers),
            iterations=schema.iterations(cfg),
            state={"streams": streams, "members": MemberParts(
                [{k: v for k, v in state.items() if k != "collector"} for state in states])},
            checkpoint=population.save if cfg.checkpoint.every else None,
            checkpoint_every=cfg.checkpoint.every or 1,
            evaluate=lambda i: [evaluation_metrics(m, p, i)
                                for m, p in zip(members, policies, strict=True)],
            eval_every=cfg.eval.every, reseed_collector=cfg.collection == "rllab",
            threads=cfg.threads, progress=cfg.progress_bar, progress_keys=schema.progress_keys(cfg),
            name=f"{cfg.env.name}/{cfg.surprise.name} seeds {seeds}")
        population.restore(loop)
        print(f"population {population_name(cfg)}: MLflow runs "
              f"{[run.run_id for run in population.runs]} in experiment '{experiment}'")
        result = loop.run()
        population.stopped_by = result.stopped_by
    if result.stopped_by is not None:
        print(f"{result.stopped_by}: stopped after iteration {result.iterations_done - 1}; "
              "continue with resume=true.")
    return {"run_ids": [run.run_id for run in population.runs],
            "iterations_done": result.iterations_done, "stopped_by": result.stopped_by,
            "runs_table": population.runs[0].runs_table(), "members": result.members,
            "run_charts": population.runs[0].runs_table(charts=True),
            **member_means(result.members)}


def member_means(members: list[dict[str, float]]) -> dict[str, float]:
    """Each metric's mean over the members that logged it (a member that has not found the
    reward yet logs no ``train/first_reward_step``)."""
    keys = sorted({key for metrics in members for key in metrics})
    return {key: float(np.mean([m[key] for m in members if key in m])) for key in keys}


def member_run_name(member: DictConfig, cfg: DictConfig, overrides: list[str]) -> str:
    """The single run's name with the population after its seed, where a narrow runs table
    still shows it: ``vase-extrinsic-seed3 seeds0-9 surprise.delta=0.01``."""
    base, *settings = schema.run_name(member, overrides).split(" ")
    return " ".join([base, population_name(cfg), *settings])


def population_name(cfg: DictConfig) -> str:
    """The ``population`` tag: the seeds, e.g. ``seeds0-9`` or ``seeds0,3,5``."""
    seeds = list(cfg.seeds)
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"seeds{seeds[0]}-{seeds[-1]}"
    return "seeds" + ",".join(map(str, seeds))
