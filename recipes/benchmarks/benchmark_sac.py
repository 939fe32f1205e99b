"""What a SAC update costs, without a bonus and with each bonus on the sampled batch.

    .venv/bin/python recipes/benchmarks/benchmark_sac.py                 # HalfCheetah's sizes
    .venv/bin/python recipes/benchmarks/benchmark_sac.py --obs 2 --action 1 --bnn 32  # MountainCar

The recipe's SAC (torchrl's ``SACLoss`` as ``FusedSACLoss``) at torchrl's example's defaults ([256,
256] networks, batches of 256) on a buffer of 20,000 random transitions; the bonus models at the
recipe's sizes. Rounds interleave the three kinds (none, VASE, RND), so a change in the machine's
load hits them alike; each round times ``--updates`` updates (``SACUpdate``: sample, bonus, loss,
Adam, soft update) and, apart, ``--updates`` samples alone (the sample and its bonus). Prints the
median of the rounds in ms per update and each bonus's cost as a ratio to no bonus, with the load
average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives import SoftUpdate

import torchrl_vase as tv
from torchrl_vase.objectives import FusedSACLoss

KINDS = ("none", "vase", "rnd")


def parts(kind: str, obs: int, action: int, bnn: int) -> tuple[tv.SACUpdate, ReplayBuffer]:
    torch.manual_seed(0)
    actor = tv.tanh_policy(obs, action, [256, 256])
    loss = FusedSACLoss(actor, tv.q_value_network(obs, action, [256, 256]),
                        action_spec=actor.spec, delay_qvalue=True, loss_function="l2")
    loss.make_value_estimator(gamma=0.99)
    replay = ReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=256)
    n = 20_000
    replay.extend(TensorDict({
        "observation": torch.randn(n, obs), "action": torch.rand(n, action) * 2 - 1,
        "next": {"observation": torch.randn(n, obs), "reward": torch.randn(n, 1),
                 "done": torch.zeros(n, 1, dtype=torch.bool),
                 "terminated": torch.zeros(n, 1, dtype=torch.bool)}}, [n]))
    if kind != "none":
        bonus = (tv.VASERewardTransform(tv.DynamicsModel.build(obs, action, [bnn, bnn],
                                                               sigma_c=0.5), eta=1e-4)
                 if kind == "vase" else tv.RNDRewardTransform(obs, eta=1e-4))
        exploration = tv.Exploration(bonus, pool=replay, pool_min=500, updates_per_iteration=10)
        exploration.fit(replay.storage.get(torch.arange(100)))
        replay.append_transform(tv.ReplayBonus(exploration))
    update = tv.SACUpdate(loss, replay, torch.optim.Adam(loss.parameters(), lr=3e-4),
                          SoftUpdate(loss, tau=0.005))
    return update, replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--obs", type=int, default=20)
    parser.add_argument("--action", type=int, default=6)
    parser.add_argument("--bnn", type=int, default=64, help="the BNN's hidden width (2 layers)")
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    built = {kind: parts(kind, args.obs, args.action, args.bnn) for kind in KINDS}
    for update, _ in built.values():
        update(10)  # warm-up
    timings = {kind: ([], []) for kind in KINDS}
    for _ in range(args.rounds):
        for kind, (update, replay) in built.items():
            start = time.perf_counter()
            update(args.updates)
            middle = time.perf_counter()
            for _ in range(args.updates):
                replay.sample()
            end = time.perf_counter()
            timings[kind][0].append((middle - start) / args.updates * 1e3)
            timings[kind][1].append((end - middle) / args.updates * 1e3)
    base = statistics.median(timings["none"][0])
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"obs {args.obs}, action {args.action}, {args.threads} thread(s), "
          f"{args.rounds} rounds of {args.updates} updates; load average {load}")
    for kind in KINDS:
        update_ms, sample_ms = (statistics.median(values) for values in timings[kind])
        print(f"{kind:>5}: {update_ms:6.1f} ms/update ({update_ms / base:.2f}x none), "
              f"sample and bonus {sample_ms:5.1f} ms")


if __name__ == "__main__":
    main()
