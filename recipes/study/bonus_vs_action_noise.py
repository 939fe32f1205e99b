"""Does a run's bonus pay its policy to widen its action noise? One batch from a finished run.

The run's policy collects one batch (its own seed, or ``--seed``); each transition's surprise is
computed under the run's model as the run computes it, on the policy's raw action, and again on
the action the env applied (clipped to [−1, 1], the policy's units, where the env clips it before
scaling it to its bounds). Per action dimension it
prints the policy's log-std and Spearman's ρ between the surprise and z² = ((a − μ)/σ)², the
dimension's standardised noise squared, and the action's size as the model takes it in (after
its pool's standardisation). The policy gradient of a log-std is the advantage times
(z² − 1), so a bonus that grows with z² (ρ > 0) pays the policy to widen that dimension; where ρ
holds on raw actions but vanishes on the applied ones, the model is rewarding the size of an
input the env never sees.

    python recipes/study/bonus_vs_action_noise.py <run id> [--tracking-uri sqlite:///mlflow.db]

The Figure 3 study's HalfCheetah VIME runs whose log-std ran away are what it was written for
(docs/guides/transforms.md, "Watch the policy's std under VIME").
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from scipy.stats import spearmanr

from torchrl_vase.evaluation import check_registered
from torchrl_vase.recipe import assembly, config
from torchrl_vase.runs import reported_errors

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def trained_parts(run_id: str, tracking_uri: str):
    """The run's config and its loop's parts, built as the recipe builds them and loaded with the
    run's final weights (``weights.pt``): ``(cfg, collector, state)``."""
    client = MlflowClient(tracking_uri=tracking_uri)
    with tempfile.TemporaryDirectory() as folder:
        cfg = OmegaConf.load(client.download_artifacts(run_id, "config.yaml", folder))
        if cfg.algorithm not in ("trpo", "ppo") or cfg.surprise.name == "none":
            raise ValueError(f"run {run_id} is {cfg.algorithm} with surprise="
                             f"{cfg.surprise.name}: this reads an on-policy run that trained a "
                             "bonus's model.")
        weights = torch.load(client.download_artifacts(run_id, "weights.pt", folder),
                             weights_only=True)
    check_registered(cfg.env.id, f"run {run_id}'s config")  # no module a file names imported
    observation_space, action_space = config.check_env(cfg)
    collector, _, state = assembly.build(cfg, observation_space, action_space)
    for name, part in state.items():
        if part is not None and name in weights:
            if not isinstance(part, torch.nn.Module):
                part.load_state_dict(weights[name])
                continue
            # weights.pt holds weights and statistics, not a checkpoint's extra state (the pool)
            result = part.load_state_dict(weights[name], strict=False)
            left = [key for key in (*result.missing_keys, *result.unexpected_keys)
                    if not key.endswith("_extra_state")]
            if left:
                raise ValueError(f"run {run_id}'s weights.pt does not fit its config's {name}: "
                                 f"{', '.join(left)}")
    return cfg, collector, state


def noise_table(batch, exploration, low: torch.Tensor, high: torch.Tensor,
                seed: int) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Per action dimension: log-std, ρ(surprise, z²) on raw and applied actions and the median
    and 99th percentile of the raw action's magnitude as the model takes it in; and each
    surprise's mean. ``batch`` a collected batch with the policy's ``loc`` and ``scale``."""
    flat = batch.reshape(-1)
    obs, action = flat["observation"], flat["action"]
    next_obs = flat["next", "observation"]
    z2 = ((action - flat["loc"]) / flat["scale"]) ** 2
    surprise = {}
    for name, acted in (("raw", action), ("applied", action.clamp(low, high))):
        generator = torch.Generator().manual_seed(seed)  # the same draws for both
        surprise[name] = exploration.bonus.surprise(obs, acted, next_obs, generator=generator)
    # the action as the model takes it in (standardised by its pool's statistics, if it is)
    _, seen, _ = exploration.bonus.model.prepare(obs, action, next_obs)
    rows = [{"dimension": d, "log_std": flat["scale"][:, d].log().mean().item(),
             **{f"rho_{name}": spearmanr(values.numpy(), z2[:, d].numpy()).statistic
                for name, values in surprise.items()},
             "input_median": seen[:, d].abs().median().item(),
             "input_p99": seen[:, d].abs().quantile(0.99).item()}
            for d in range(action.shape[-1])]
    return rows, {name: values.mean().item() for name, values in surprise.items()}


def run_arguments(doc: str) -> argparse.ArgumentParser:
    """The arguments of a script that reads one finished run and collects one batch with it: the
    run's id, its store and the batch's seed (``doc``'s first paragraph the description)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("run_id")
    parser.add_argument("--tracking-uri",
                        default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--seed", type=int, default=None,
                        help="the batch's seed (default: the run's)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = run_arguments(__doc__).parse_args(argv)
    with reported_errors("bonus_vs_action_noise.py", (MlflowException, ValueError, OSError)):
        cfg, collector, state = trained_parts(args.run_id, args.tracking_uri)
    seed = cfg.seed if args.seed is None else args.seed
    torch.manual_seed(seed)
    batch = next(iter(collector))
    collector.shutdown()
    # the batch holds the policy's actions in [-1, 1] units, where the env clips them
    low, high = torch.tensor(-1.0), torch.tensor(1.0)
    rows, means = noise_table(batch, state["exploration"], low, high, seed)
    print(f"run {args.run_id} ({cfg.env.name}, {cfg.surprise.name}, seed {cfg.seed}): one batch "
          f"of {batch.numel()} transitions; mean surprise {means['raw']:.4g} on the policy's "
          f"actions, {means['applied']:.4g} on the applied (clipped) ones")
    print("dimension  log-std  rho(surprise, z^2) raw  applied  |model's input| median  99 %")
    for row in rows:
        print(f"{row['dimension']:>9}  {row['log_std']:7.2f}  {row['rho_raw']:+22.3f}  "
              f"{row['rho_applied']:+7.3f}  {row['input_median']:22.3g}  "
              f"{row['input_p99']:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
