"""Where does a run's bonus come from? VASE's surprise split over the observation's dimensions.

With δ = 0 (the authors' code) VASE's surprise of a transition is a sum over the D dimensions of
the model's target: ``U = Σ_d mean_n (f_d(s, a; θ_n) − y_d)² / (2σ_c²)`` (no constant, as the
authors compute it), the target ``y`` standardised by the pool's mean and std
(``DynamicsModel.prepare``). The run's policy collects one batch (its own seed, or ``--seed``);
this prints which dimensions (and, for a task whose observation has named parts, which parts)
carry the batch's mean surprise, the pool's std of each (a dimension that is nearly constant in
the pool has a tiny std, and its rare changes become large standardised errors), and how much of
the batch's total surprise its most surprising 1 % of transitions carry.

    python recipes/study/bonus_by_dimension.py <run id> [--tracking-uri sqlite:///mlflow.db]

Written for the Figure 3 study's Ant, where the bonus ends up dominating the policy's advantage
(docs/results.md).
"""

from __future__ import annotations

import torch
from bonus_vs_action_noise import run_arguments, trained_parts  # beside this script
from mlflow.exceptions import MlflowException
from torch import Tensor

from torchrl_vase.runs import reported_errors

#: the named parts of an observation, in order, with their sizes (rllab's Ant: qpos, qvel, the
#: 14 bodies' external contact forces clipped to [−1, 1], the torso's rotation and position)
PARTS = {"ant": (("qpos", 15), ("qvel", 14), ("contact forces", 84), ("torso rotation", 9),
                 ("torso position", 3)),
         "half_cheetah": (("qpos", 9), ("qvel", 9), ("centre of mass", 2))}


@torch.no_grad()
def per_dimension_surprise(bonus, obs: Tensor, action: Tensor, next_obs: Tensor, *,
                           generator: torch.Generator | None = None) -> Tensor:
    """``[*batch, D]``: each dimension's ``mean_n (f_d(θ_n) − y_d)² / (2σ_c²)``, whose sum over
    ``D`` is VASE's surprise with δ = 0."""
    model = bonus.model
    obs, action, target = model.prepare(obs, action, next_obs)
    network = model.network
    predictions = network.sample_outputs(network.check_inputs((obs, action)), bonus.num_samples,
                                         generator=generator)
    return (predictions - target).square().mean(0) / (2 * model.sigma_c**2)


def concentration(per_transition: Tensor, top: float = 0.01) -> float:
    """The share of the total that the largest ``top`` fraction of transitions carry."""
    values = per_transition.flatten().sort(descending=True).values
    count = max(1, round(top * values.numel()))
    return float(values[:count].sum() / values.sum())


def part_shares(per_dimension: Tensor, parts: tuple[tuple[str, int], ...]
                ) -> list[tuple[str, float]]:
    """Each named part's share of the mean surprise (``per_dimension``: ``[B, D]``)."""
    means = per_dimension.mean(0)
    if sum(size for _, size in parts) != means.numel():
        raise ValueError(f"the parts cover {sum(size for _, size in parts)} dimensions, the "
                         f"observation has {means.numel()}.")
    shares, start = [], 0
    for name, size in parts:
        shares.append((name, float(means[start:start + size].sum() / means.sum())))
        start += size
    return shares


def main(argv: list[str] | None = None) -> int:
    parser = run_arguments(__doc__)
    parser.add_argument("--top", type=int, default=15, help="dimensions listed")
    args = parser.parse_args(argv)
    with reported_errors("bonus_by_dimension.py", (MlflowException, ValueError, OSError)):
        cfg, collector, state = trained_parts(args.run_id, args.tracking_uri)
        if cfg.surprise.name not in ("vase", "nll"):
            raise ValueError(f"run {args.run_id} has surprise={cfg.surprise.name}: the split is "
                             "of the model's squared error (VASE, NLL).")
    seed = cfg.seed if args.seed is None else args.seed
    torch.manual_seed(seed)
    batch = next(iter(collector)).reshape(-1)
    collector.shutdown()
    bonus = state["exploration"].bonus
    generator = torch.Generator().manual_seed(seed)
    per_dimension = per_dimension_surprise(bonus, batch["observation"], batch["action"],
                                           batch["next", "observation"], generator=generator)
    per_transition = per_dimension.sum(-1)
    means = per_dimension.mean(0)
    model = bonus.model  # the target's pool std: of s', or of s' − s
    scale = model.delta_scale if model.target == "delta" else model.observation_scale
    print(f"run {args.run_id} ({cfg.env.name}, {cfg.surprise.name}, seed {cfg.seed}): one batch "
          f"of {batch.numel()} transitions, {means.numel()} dimensions; squared-error surprise "
          f"mean {float(per_transition.mean()):.4g}, std {float(per_transition.std()):.4g} "
          f"(η × that: {cfg.surprise.eta * float(per_transition.mean()):.3g} and "
          f"{cfg.surprise.eta * float(per_transition.std()):.3g} a step), "
          f"{float(per_transition.mean()) / means.numel():.3g} a dimension; its most surprising "
          f"1 % of transitions carry {100 * concentration(per_transition):.0f} % of the total")
    if cfg.env.name in PARTS:
        print("part                share of the mean")
        for name, share in part_shares(per_dimension, PARTS[cfg.env.name]):
            print(f"{name:<18}  {100 * share:6.1f} %")
    print("dimension  share of the mean  pool std  transitions with |y| > 10 (standardised)")
    order = means.argsort(descending=True)[: args.top]
    target = bonus.model.prepare(batch["observation"], batch["action"],
                                 batch["next", "observation"])[2]
    for d in order.tolist():
        print(f"{d:>9}  {100 * float(means[d] / means.sum()):16.1f} %  {float(scale[d]):8.3g}  "
              f"{int((target[:, d].abs() > 10).sum()):>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
