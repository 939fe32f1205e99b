"""Evaluate a trained policy of ``recipes/trpo_vase.py``: its deterministic action, whole episodes.

    python recipes/evaluate.py <run id> [--episodes 10] [--seed 0] [--tracking-uri sqlite:///mlflow.db]

The policy comes from the run's MLflow artifacts (``torchrl_vase.load_policy``), the env from its
config; the numbers are those the recipe logs as ``eval/*``.
"""

from __future__ import annotations

import argparse
import os

from torchrl_vase import evaluate, load_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_id", help="the MLflow run id (the UI's run page, or the recipe's log)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="episode i starts from seed + i")
    parser.add_argument("--tracking-uri",
                        default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    args = parser.parse_args()
    policy = load_policy(args.run_id, tracking_uri=args.tracking_uri)
    result = evaluate(policy, policy.env_id, episodes=args.episodes, seed=args.seed,
                      make_kwargs=policy.make_kwargs)
    print(f"{policy.env_id}, {args.episodes} episodes from seed {args.seed}, deterministic: "
          f"return {result['return']:.3f}, success rate {result['success_rate']:.2f}, "
          f"episode length {result['episode_length']:.1f}")


if __name__ == "__main__":
    main()
