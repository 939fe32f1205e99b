"""Benchmark the surprise measures and the cost of the bonus transform on a collection.

Prints:

* transitions per second of VASE, NLL and VIME on a batch of 5,000 transitions with N = 10 weight
  samples, for hidden [32] (obs 4 + act 1), [64, 64] tanh (obs 20 + act 6) and the paper grid's
  Ant model ([64, 64] ReLU, obs 125 + act 8); VIME three ways: ours (matrix products over pairs
  of weight samples), the same batched backward pass with per-transition outer products (our
  form until 0d82290) and per transition (one backward pass per transition, as VIME's original
  code); and the ratios VASE / VIME and VASE / NLL;
* the bonus of the recipe's models against their arithmetic (``--arithmetic``, issue 79's
  bar): VASE's U of 5,000 transitions × 10 draws with each sampling, for HalfCheetah v1's
  model ([64, 64] tanh, obs 20 + act 6) and Ant v1's ([64, 64] ReLU, obs 125 + act 8), beside
  its FLOP count, the core's speed on the same matrix products, and the time those products
  alone take at that speed;
* the wall-clock overhead of ``VASERewardTransform`` on the batch path (applied to a collected
  batch) as a percentage of collecting 5,000 steps of HalfCheetah-v5 with a TorchRL ``Collector``.

    python recipes/benchmarks/benchmark_surprise.py [--threads 2] [--per-transition-sample 500]
    python recipes/benchmarks/benchmark_surprise.py --threads 1 --arithmetic  # that table alone
"""

from __future__ import annotations

import argparse
import logging
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import DoubleToFloat, GymEnv, TransformedEnv
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal
from torchrl.modules.distributions import NormalParamExtractor

from torchrl_vase import (
    SAMPLINGS,
    BayesianMLP,
    DynamicsModel,
    VASERewardTransform,
    nll_surprise,
    vase_surprise,
    vime_information_gain,
)
from torchrl_vase.objectives.elbo import gaussian_nll
from torchrl_vase.surprise import _inverse_rho_hessian

CONFIGS = {
    "[32] ReLU, obs 4 + act 1": (4, 1, [32], nn.ReLU),
    "[64, 64] tanh, obs 20 + act 6": (20, 6, [64, 64], nn.Tanh),
    "[64, 64] ReLU, obs 125 + act 8": (125, 8, [64, 64], nn.ReLU),
}


def vime_outer_products(model, obs, action, next_obs, *, num_samples=10, sigma_c=5.0, step=0.01,
                        chunk_size=256, generator=None):
    """VIME from the same batched backward pass, forming every per-transition gradient as a
    ``[N, T, out, in]`` tensor of outer products (our form until 0d82290)."""
    noise = model.sample_noise(num_samples, generator=generator)
    sig, inv_h_rho = torch.sigmoid(model.rho), _inverse_rho_hessian(model.rho)
    flat = [model.unflatten(v.detach()) for v in (noise, model.posterior_std().square(), sig,
                                                   inv_h_rho)]
    weights = model.unflatten(model.parameters_from_noise(noise).detach())
    gains = []
    for x, y in zip(torch.cat([obs, action], -1).split(chunk_size), next_obs.split(chunk_size),
                    strict=True):
        inputs, pre_activations, h = [], [], x.expand(num_samples, *x.shape)
        for i, (w, b) in enumerate(weights):
            z = torch.baddbmm(b.unsqueeze(-2), h, w.mT)
            if i == 0:
                z.requires_grad_()
            inputs.append(h.detach())
            pre_activations.append(z)
            h = model.activations[i](z) if i < len(weights) - 1 else z
        errors = torch.autograd.grad(gaussian_nll(h, y, sigma_c).sum(), pre_activations)
        terms = x.new_zeros(x.shape[0])
        for layer, (h_in, delta) in enumerate(zip(inputs, errors, strict=True)):
            (eps_w, eps_b), (s2_w, s2_b), (sig_w, sig_b), (ih_w, ih_b) = (f[layer] for f in flat)
            g_mu_w = torch.bmm(delta.permute(1, 2, 0).contiguous(),
                               h_in.transpose(0, 1).contiguous()) / num_samples
            outer = delta.unsqueeze(-1) * h_in.unsqueeze(-2)  # [N, T, out, in]
            g_rho_w = (outer * eps_w.unsqueeze(1)).mean(0) * sig_w
            g_rho_b = torch.einsum("nto,no->to", delta, eps_b) * (sig_b / num_samples)
            terms += (g_mu_w.square() * s2_w).sum((-2, -1))
            terms += (g_rho_w.square() * ih_w).sum((-2, -1))
            terms += delta.mean(0).square() @ s2_b + g_rho_b.square() @ ih_b
        gains.append(terms)
    return (step**2 * torch.cat(gains)).clamp(0, 1000)


def vime_per_transition(model, obs, action, next_obs, *, num_samples=10, sigma_c=5.0, step=0.01):
    """VIME as its original computes it: a forward and a backward pass per transition."""
    inv_h_mu, inv_h_rho = model.posterior_std().detach().square(), _inverse_rho_hessian(model.rho)
    gains = []
    for x_t, y_t in zip(torch.cat([obs, action], -1), next_obs, strict=True):
        theta = model.sample_parameters(num_samples)
        prediction = model.apply_weights(x_t.unsqueeze(0), model.unflatten(theta))
        loss = gaussian_nll(prediction, y_t.unsqueeze(0), sigma_c).mean()
        g_mu, g_rho = torch.autograd.grad(loss, (model.mu, model.rho))
        gain = step**2 * ((g_mu.square() * inv_h_mu).sum() + (g_rho.square() * inv_h_rho).sum())
        gains.append(gain.clamp(0, 1000).detach())
    return torch.stack(gains)


def rate(fn, n: int, repeats: int = 5) -> float:
    """Best-of-``repeats`` transitions per second of ``fn()`` over ``n`` transitions."""
    return n / best_seconds(fn, repeats)


def measure_rates(batch: int, per_transition_sample: int) -> None:
    print(f"Transitions per second, batch {batch:,}, N = 10 weight samples")
    header = f"{'model':<32} {'VASE':>10} {'NLL':>10} {'VIME':>10} {'VIME outer':>11}"
    header += f" {'VIME loop':>10} {'VIME/outer':>11} {'VASE/VIME loop':>15} {'VASE/VIME':>10}"
    print(header + f" {'VASE/NLL':>9}")
    differences = []
    for name, (obs_dim, act_dim, cells, act_cls) in CONFIGS.items():
        torch.manual_seed(0)
        model = BayesianMLP(obs_dim + act_dim, obs_dim, cells, act_cls)
        obs, action = torch.randn(batch, obs_dim), torch.randn(batch, act_dim)
        next_obs = torch.randn(batch, obs_dim)
        args = (model, obs, action, next_obs)
        vase = rate(lambda a=args: vase_surprise(*a), batch)
        nll = rate(lambda a=args: nll_surprise(*a), batch)
        vime = rate(lambda a=args: vime_information_gain(*a), batch, repeats=2)
        outer = rate(lambda a=args: vime_outer_products(*a), batch, repeats=2)
        same = (vime_information_gain(*args, generator=torch.Generator().manual_seed(1)),
                vime_outer_products(*args, generator=torch.Generator().manual_seed(1)))
        differences.append(((same[0] - same[1]).abs() / same[1].abs()).max().item())
        k = per_transition_sample
        subset = (model, obs[:k], action[:k], next_obs[:k])
        loop = rate(lambda a=subset: vime_per_transition(*a), k, repeats=1)
        print(
            f"{name:<32} {vase:>10,.0f} {nll:>10,.0f} {vime:>10,.0f} {outer:>11,.0f} "
            f"{loop:>10,.0f} {vime / outer:>10.1f}x {vase / loop:>14,.0f}x {vase / vime:>9,.0f}x "
            f"{vase / nll:>8.2f}x"
        )
    print(f"VIME against VIME outer (the same noise), largest relative difference: "
          f"{max(differences):.1e} (float32)")


RECIPE_MODELS = {"HalfCheetah v1": (20, 6, nn.Tanh, 12.0), "Ant v1": (125, 8, nn.ReLU, 35.0)}


def matrix_products(model: BayesianMLP, rows: int, num_samples: int, sampling: str
                    ) -> list[tuple[int, int, int]]:
    """The (m, k, n) matrix products of one bonus evaluation: per layer one (weight sets) or
    two (the local samplings: means and variances), the first layer's once for every draw
    where its input is shared (local samplings)."""
    products = []
    for layer, (n_in, n_out) in enumerate(model.layer_sizes):
        if sampling == "weights":
            products.append((num_samples * rows, n_in, n_out))
        else:
            first = layer == 0
            products += [(rows if first else num_samples * rows, n_in, n_out)] * 2
    return products


def arithmetic(batch: int, num_samples: int = 10, repeats: int = 30) -> None:
    """The bonus of a batch against its matrix products' FLOPs and this core's speed on them."""
    print(f"VASE's U of {batch:,} transitions x {num_samples} draws (float32, best of "
          f"{repeats}), against its matrix products on this core")
    print(f"{'model':<15} {'sampling':<13} {'MFLOP':>7} {'GEMM GFLOP/s':>13} "
          f"{'products ms':>12} {'U ms':>7} {'GFLOP/s':>8} {'bar ms':>7}")
    for name, (obs_dim, act_dim, activation, bar) in RECIPE_MODELS.items():
        for sampling in SAMPLINGS:
            torch.manual_seed(0)
            model = BayesianMLP(obs_dim + act_dim, obs_dim, [64, 64], activation,
                                init_mean="normal", sampling=sampling)
            obs, action = torch.randn(batch, obs_dim), torch.randn(batch, act_dim)
            next_obs = torch.randn(batch, obs_dim)
            shapes = matrix_products(model, batch, num_samples, sampling)
            flops = sum(2 * m * k * n for m, k, n in shapes)
            operands = [(torch.randn(m, k), torch.randn(k, n), torch.empty(m, n))
                        for m, k, n in shapes]

            def products(operands=operands):
                for a, b, out in operands:
                    torch.mm(a, b, out=out)

            floor = best_seconds(products, repeats)
            with torch.no_grad():
                seconds = best_seconds(lambda m=model, o=obs, a=action, n=next_obs: vase_surprise(
                    m, o, a, n, num_samples=num_samples, sigma_c=0.5, delta=0.0), repeats)
            print(f"{name:<15} {sampling:<13} {flops / 1e6:>7,.0f} {flops / floor / 1e9:>13,.0f} "
                  f"{floor * 1e3:>12.1f} {seconds * 1e3:>7.1f} {flops / seconds / 1e9:>8,.0f} "
                  f"{bar if sampling == 'local_shared' else '':>7}")


def best_seconds(fn, repeats: int) -> float:
    """The shortest of ``repeats`` calls of ``fn()`` after a warm-up call, seconds."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def collection_overhead(frames: int) -> None:
    env = TransformedEnv(GymEnv("HalfCheetah-v5"), DoubleToFloat())
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = env.action_spec.shape[-1]
    network = nn.Sequential(
        MLP(obs_dim, 2 * act_dim, num_cells=[64, 32], activation_class=nn.Tanh),
        NormalParamExtractor(),
    )
    policy = ProbabilisticActor(
        module=TensorDictModule(network, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=env.action_spec,
        distribution_class=TanhNormal,
    )
    transform = VASERewardTransform(
        DynamicsModel(BayesianMLP(obs_dim + act_dim, obs_dim, [64, 64], nn.Tanh)), eta=1e-4
    )
    batch_path = _timed_collection(env, policy, frames, postproc=transform)
    step_env = TransformedEnv(GymEnv("HalfCheetah-v5"), DoubleToFloat())
    step_env.append_transform(VASERewardTransform(transform.model, eta=1e-4))
    step_path = _timed_collection(step_env, policy, frames)
    collect, bonus = batch_path
    print(
        f"\nHalfCheetah-v5, {frames:,} steps with a [64, 32] tanh actor: collection "
        f"{collect:.2f} s ({frames / collect:,.0f} frames/s); VASERewardTransform on the batch "
        f"([64, 64] tanh BNN, N = 10): {bonus * 1e3:.1f} ms = {100 * bonus / collect:.2f} % of "
        f"the collection.\nThe same transform per step inside the env instead: collection "
        f"{step_path[0]:.2f} s, {100 * (step_path[0] - collect) / collect:+.1f} %."
    )


def _timed_collection(env, policy, frames: int, postproc=None) -> tuple[float, float]:
    """(collection seconds, postproc seconds) of the second of two batches (the first warms up)."""
    collector = Collector(env, policy, frames_per_batch=frames, total_frames=2 * frames,
                          auto_register_policy_transforms=False)
    timings = []
    start = time.perf_counter()
    for batch in collector:
        collected = time.perf_counter() - start
        start = time.perf_counter()
        if postproc is not None:
            postproc(batch)
        timings.append((collected, time.perf_counter() - start))
        start = time.perf_counter()
    collector.shutdown()
    return timings[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument(
        "--per-transition-sample",
        type=int,
        default=500,
        help="transitions timed for the per-transition VIME loop (its rate is per transition)",
    )
    parser.add_argument("--frames", type=int, default=5000, help="HalfCheetah steps per batch")
    parser.add_argument("--arithmetic", action="store_true",
                        help="only the recipe's models against their matrix products")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    arithmetic(args.batch)
    if args.arithmetic:
        return
    print()
    measure_rates(args.batch, args.per_transition_sample)
    collection_overhead(args.frames)


if __name__ == "__main__":
    main()
