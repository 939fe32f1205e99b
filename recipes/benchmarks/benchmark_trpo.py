"""Benchmark TRPOLoss: a learning curve on a dense task and end-to-end frames per second.

Everything is TorchRL: ``SerialEnv`` of ``GymEnv`` (batching envs amortises TorchRL's per-step
overhead), a ``Collector`` with a Gaussian ``ProbabilisticActor`` (rllab's state-independent
log-std), GAE, ``TRPOLoss.natural_gradient_step`` for the policy and ``fit_critic`` (Adam) for
the value network. Frames per second count collection *and* updates.

    python recipes/benchmarks/benchmark_trpo.py                       # all of the below
    python recipes/benchmarks/benchmark_trpo.py --learn-iterations 40 --skip-fps
    python recipes/benchmarks/benchmark_trpo.py --skip-learning       # only the frames/s table
"""

from __future__ import annotations

import argparse
import functools
import logging
import time

import torch
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import Compose, DoubleToFloat, GymEnv, RewardSum, SerialEnv, TransformedEnv
from torchrl.modules import MLP, IndependentNormal, ProbabilisticActor, ValueOperator
from torchrl.objectives import ValueEstimators

from torchrl_vase import TRPOLoss, fit_critic


def make_env(env_id: str, num_envs: int) -> TransformedEnv:
    base = SerialEnv(num_envs, functools.partial(GymEnv, env_id))
    return TransformedEnv(base, Compose(DoubleToFloat(), RewardSum()))


def make_agent(env, policy_cells, critic_cells, critic_activation):
    obs_dim = env.observation_spec["observation"].shape[-1]
    action_dim = env.action_spec.shape[-1]
    head = nn.Sequential(
        MLP(obs_dim, action_dim, num_cells=policy_cells, activation_class=nn.Tanh),
        AddStateIndependentNormalScale(action_dim, scale_lb=0.0),
    )
    actor = ProbabilisticActor(
        TensorDictModule(head, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=IndependentNormal,
        return_log_prob=True,
    )
    if critic_cells:
        critic_net = MLP(obs_dim, 1, num_cells=critic_cells, activation_class=critic_activation)
    else:
        critic_net = nn.Linear(obs_dim, 1)  # the paper's linear baseline for locomotion
    critic = ValueOperator(critic_net, in_keys=["observation"])
    return actor, critic


def train(
    env_id: str,
    *,
    iterations: int,
    frames_per_batch: int,
    num_envs: int,
    policy_cells: list[int],
    critic_cells: list[int],
    max_kl: float,
    seed: int,
    log: bool,
    critic_activation=nn.ReLU,
) -> tuple[list[float], float]:
    """Run TRPO; return the per-iteration mean episode return and the end-to-end frames/s."""
    torch.manual_seed(seed)
    env = make_env(env_id, num_envs)
    env.set_seed(seed)
    actor, critic = make_agent(env, policy_cells, critic_cells, critic_activation)
    loss = TRPOLoss(actor, critic, max_kl=max_kl)
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.995, lmbda=0.95)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    collector = Collector(
        env, actor, frames_per_batch=frames_per_batch, total_frames=iterations * frames_per_batch,
        auto_register_policy_transforms=False)  # a stateless policy
    returns, durations = [], []
    start = time.perf_counter()
    for iteration, batch in enumerate(collector):
        with torch.no_grad():
            loss.value_estimator(batch)
        info = loss.natural_gradient_step(batch)
        fit_critic(loss, batch, critic_optimizer, epochs=5, minibatch_size=500)
        collector.update_policy_weights_()
        done = batch["next", "done"].squeeze(-1)
        finished = batch["next", "episode_reward"].squeeze(-1)[done]
        mean_return = finished.mean().item() if finished.numel() else float("nan")
        returns.append(mean_return)
        durations.append(time.perf_counter() - start)
        start = time.perf_counter()
        if log:
            fps = frames_per_batch / durations[-1]
            print(
                f"{env_id:<28} iter {iteration:>3}  return {mean_return:>9.1f} "
                f"({finished.numel():>3} episodes)  kl {info['kl'].item():.4f}  "
                f"accepted {bool(info['step_accepted'])}  {fps:,.0f} f/s"
            )
    collector.shutdown()
    # the first iteration carries start-up costs; frames/s over the others
    steady = durations[1:] or durations
    return returns, frames_per_batch * len(steady) / sum(steady)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learn-env", default="InvertedPendulum-v5")
    parser.add_argument("--learn-iterations", type=int, default=25)
    parser.add_argument("--fps-iterations", type=int, default=4)
    parser.add_argument("--frames-per-batch", type=int, default=5000)
    parser.add_argument("--num-envs", type=int, default=16, help="envs in the SerialEnv")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-learning", action="store_true")
    parser.add_argument("--skip-fps", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    common = {
        "frames_per_batch": args.frames_per_batch,
        "num_envs": args.num_envs,
        "seed": args.seed,
    }
    print(f"torch {torch.__version__}, {args.threads} threads, SerialEnv({args.num_envs})\n")
    if not args.skip_learning:
        print(f"Learning curve: {args.learn_env}, policy [32] tanh, critic [32] ReLU, max KL 0.01")
        returns, fps = train(
            args.learn_env,
            iterations=args.learn_iterations,
            policy_cells=[32],
            critic_cells=[32],
            max_kl=0.01,
            log=True,
            **common,
        )
        best = max(r for r in returns if r == r)
        print(f"best mean return {best:.1f}; last {returns[-1]:.1f}; {fps:,.0f} frames/s\n")
    if not args.skip_fps:
        print("End-to-end frames/s (collection + TRPO step + critic fit), policy [64, 32] tanh")
        for env_id, max_kl, critic_cells in (
            ("HalfCheetah-v5", 0.05, []),
            ("MountainCarContinuous-v0", 0.01, [32]),
        ):
            _, fps = train(
                env_id,
                iterations=args.fps_iterations,
                policy_cells=[64, 32],
                critic_cells=critic_cells,
                max_kl=max_kl,
                log=False,
                **common,
            )
            print(f"{env_id:<28} {fps:>8,.0f} frames/s")


if __name__ == "__main__":
    main()
