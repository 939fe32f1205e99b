"""TRPO (or PPO) with a surprise bonus: the paper's Algorithm 1, assembled from the library.

The loop is ``torchrl_vase.TrainingLoop`` (seeding, checkpoints, signals, logging cadence, exact
resume), the run around it ``torchrl_vase.TrainingRun`` (its MLflow run, lock and end status), the
step it calls each iteration ``torchrl_vase.OnPolicyStep``: the bonus over the whole batch, the
replay pool and the model's ELBO steps (``Exploration``), the advantage (``ExplorationGAE`` with
the structure of ``conf/advantage/``), TRPO's natural-gradient step or PPO's clipped epochs, the
critic fit and the diagnostics of whether the bonus steers the policy. This script builds the
parts from the config. The policy is scored on the extrinsic return only.

    python recipes/trpo_vase.py                                     # MountainCar, VASE, seed 0
    python recipes/trpo_vase.py env=half_cheetah surprise=nll seed=3 surprise.delta=1e-3
    python recipes/trpo_vase.py algorithm=ppo                       # torchrl's ClipPPOLoss
    python recipes/trpo_vase.py advantage=combined surprise=rnd    # one critic on r_e + η·U
    python recipes/trpo_vase.py preset=authors                      # the authors' settings
    python recipes/trpo_vase.py -m seed=0,1,2 surprise=none,vase,nll hydra/launcher=joblib
    python recipes/trpo_vase.py resume=true                         # continue a killed run
    mlflow ui --backend-store-uri sqlite:///mlflow.db               # compare the runs

Configuration: ``conf/trpo_vase.yaml`` and the groups ``conf/env/``, ``conf/surprise/``,
``conf/advantage/`` and ``conf/preset/``; its schema and checks: ``torchrl_vase/recipe/config.py``;
the parts built from it: ``torchrl_vase/recipe/assembly.py``.
"""

from __future__ import annotations

import logging
import math
import signal
import sys
from pathlib import Path


def _interrupted_while_importing(signum, frame):
    # Ctrl-C in the seconds of imports: a sentence, not the import machinery's traceback
    print(f"recipes/trpo_vase.py: interrupted ({signal.Signals(signum).name}) while starting, "
          "before any run existed", file=sys.stderr)
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _interrupted_while_importing)

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from torchrl_vase import TrainingLoop, TrainingRun
from torchrl_vase.evaluation import acting_policy
from torchrl_vase.recipe import config as schema
from torchrl_vase.recipe.assembly import (
    check_memory,
    evaluation_metrics,
    journal_replay,
    log_figures,
    seeded_build,
)
from torchrl_vase.runs import git_commit, reported_errors
from torchrl_vase.tracking import redact

ROOT = Path(__file__).resolve().parents[1]


def train(cfg: DictConfig) -> dict:
    """Run (or resume) one training run; its MLflow run id and
    final metrics. Every check runs before any MLflow run exists: the config's, the env's
    (``check_env``), the store's and checkpoint directory's (``TrainingRun``), the parts'."""
    cfg = schema.typed_config(cfg)
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # its INFO lines, every iteration
    spaces = schema.check_env(cfg)
    check_memory(cfg, spaces[0].shape[0], spaces[1].shape[0])
    cfg.threads = schema.threads_for(cfg)  # auto: this job's share of the cores
    torch.set_num_threads(cfg.threads)
    experiment = schema.experiment_name(cfg)
    overrides, sweep = schema.launch()
    run = TrainingRun(
        schema.tracking_uri(cfg), experiment, config=OmegaConf.to_container(cfg, resolve=True),
        run_name=schema.run_name(cfg, overrides), identity_ignores=schema.identity_ignores(cfg),
        retired=schema.RETIRED_KEYS,
        params=schema.run_params(cfg), tags=schema.run_tags(cfg, git_commit(ROOT), sweep),
        checkpoint_dir=schema.checkpoint_root(cfg),
        resume=cfg.resume, retry_minutes=cfg.mlflow.retry_minutes,
        experiment_tags=schema.experiment_tags(experiment, cfg.env.id),
        trust_unsigned=cfg.checkpoint.trust_unsigned)
    collector, step, state = seeded_build(cfg, *spaces)
    first_reward, actor = state["first_reward"], state["actor"]
    with run:
        if run.checkpointer is not None:  # each checkpoint appends the new transitions there
            journal_replay(state, run.checkpointer.directory)
        loop = TrainingLoop(
            collector, step, iterations=schema.iterations(cfg), seed=cfg.seed, state=state,
            logger=run.tracker, checkpoint=run.save if cfg.checkpoint.every else None,
            checkpoint_every=cfg.checkpoint.every or 1, eval_every=cfg.eval.every,
            watchers=schema.episode_watchers(cfg, first_reward), device=cfg.device,
            evaluate=lambda iteration: evaluation_metrics(cfg, policy, iteration),
            reseed_collector=cfg.collection != "continuous", threads=cfg.threads,
            # the paper's exploration experiment counts the steps to the first reward
            stop_when=(lambda: first_reward.step is not None) if cfg.stop_at_first_reward
            else None, progress=cfg.progress_bar, progress_keys=schema.progress_keys(cfg),
            name=f"{cfg.env.name}/{cfg.surprise.name} seed {cfg.seed}")
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
        if result.iterations_done > started and result.dropped is None:
            log_figures(cfg, run.tracker, policy, first_reward, loop.frames)
    if result.dropped is not None:
        saved = run.checkpointer is not None and run.checkpointer.exists()
        print(f"{result.stopped_by}: the iteration still running {loop.stop_grace:g} s later "
              "was dropped; "
              + (f"the checkpoint {run.checkpointer.path} holds the run after iteration "
                 f"{result.iterations_done - 1} ({result.dropped} iteration(s) since are "
                 "computed again); continue with resume=true." if saved else
                 "no checkpoint was written yet: run it again to start it."))
    elif result.stopped_by is not None:
        print(f"{result.stopped_by}: stopped after iteration {result.iterations_done - 1}"
              + (f", checkpoint {run.checkpointer.path}" if run.checkpointer else "")
              + "; continue with resume=true.")
    return {"run_id": run.run_id, "iterations_done": result.iterations_done,
            "stopped_by": result.stopped_by, "runs_table": run.runs_table(),
            "run_charts": run.run_charts(), **result.metrics}


@hydra.main(version_base=None, config_path=str(schema.CONF_DIR), config_name="trpo_vase")
def main(cfg: DictConfig) -> float:
    # from here a run may exist: Ctrl-C is an interrupt that ends it KILLED (reported_errors)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with reported_errors("recipes/trpo_vase.py"):  # a refused input: its message, no traceback
        result = train(cfg)
    where = f"The run's charts: {result['run_charts']}\nThe runs table: {result['runs_table']}"
    print(f"done: {result['iterations_done']} iterations; extrinsic return "
          f"{result.get('Return/mean', math.nan):.3f}" + (f", success rate {s:.2f}" if (
              s := result.get("Return/success_rate")) is not None else "")  # a sparse goal's
          + f".\n{where}")
    if result["stopped_by"] is not None:
        sys.exit(128 + signal.Signals[result["stopped_by"]].value)
    return result.get("Return/mean", math.nan)


if __name__ == "__main__":
    schema.refuse_unknown_settings(sys.argv[1:], "recipes/trpo_vase.py")
    main()
