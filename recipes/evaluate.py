"""Evaluate a trained policy of ``recipes/trpo_vase.py``: its deterministic action, whole episodes;
with ``--video``, watch it: an mp4 of one episode, logged beside the run.

    python recipes/evaluate.py <run id> [--episodes 10] [--seed 0] [--tracking-uri sqlite:///mlflow.db]
    python recipes/evaluate.py <run id> --video            # also videos/watch_seed0.mp4 in the run

The policy comes from the run's MLflow artifacts (``torchrl_vase.load_policy``), the env from its
config; the numbers are those the recipe logs as ``eval/*`` (a success rate for a sparse goal
only). The video (``torchrl_vase.record_episode``: the ``video`` extra, ``MUJOCO_GL=egl`` for the
MuJoCo tasks) is written to ``--video-dir`` (the working directory) and logged as the run's
artifact ``videos/watch_seed<seed>.mp4`` unless ``--no-log``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from torchrl_vase import evaluate, load_policy
from torchrl_vase.evaluation import check_video, record_episode
from torchrl_vase.runs import reported_errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id", help="the MLflow run id (the UI's run page, or the recipe's log)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="episode i starts from seed + i")
    parser.add_argument("--tracking-uri",
                        default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--video", action="store_true",
                        help="also film one episode (from --seed) as an mp4")
    parser.add_argument("--video-dir", type=Path, default=Path.cwd())
    parser.add_argument("--no-log", action="store_true",
                        help="keep the video here only (not logged to the run)")
    parser.add_argument("--trust-unsigned", action="store_true",
                        help="load a weights.pt that carries no digest (a run from before "
                             "2026-12-07) instead of refusing it")
    args = parser.parse_args()
    with reported_errors("evaluate.py", (MlflowException, ValueError, TypeError, OSError,
                                          ImportError, RuntimeError)):
        policy = load_policy(args.run_id, tracking_uri=args.tracking_uri,
                             trust_unsigned=args.trust_unsigned)
        if args.video:  # before the evaluation: a missing renderer is said at once
            check_video(policy.env_id, policy.make_kwargs)
        result = evaluate(policy, policy.env_id, episodes=args.episodes, seed=args.seed,
                          make_kwargs=policy.make_kwargs)
    success = (f", success rate {result['success_rate']:.2f}" if "success_rate" in result
               else "")
    print(f"{policy.env_id}, {args.episodes} episodes from seed {args.seed}, deterministic: "
          f"return {result['return']:.3f}{success}, episode length "
          f"{result['episode_length']:.1f}")
    if args.video:
        args.video_dir.mkdir(parents=True, exist_ok=True)
        path = record_episode(policy, policy.env_id,
                              args.video_dir / f"watch_seed{args.seed}.mp4", seed=args.seed,
                              make_kwargs=policy.make_kwargs)
        print(f"video: {path}")
        if not args.no_log:
            MlflowClient(tracking_uri=args.tracking_uri).log_artifact(args.run_id, str(path),
                                                                      "videos")
            print(f"logged to run {args.run_id} as videos/{path.name}")


if __name__ == "__main__":
    main()
