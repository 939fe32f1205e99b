"""Benchmark the Bayesian dynamics model: batched N-sample forward and ELBO training steps.

Prints, for hidden [32] (classic tasks, 4-dim obs + 1-dim action like CartpoleSwingup) and
[64, 64] (locomotion, 20-dim obs + 6-dim action like HalfCheetah):

* the time of one N = 10 sample forward on a batch of 5,000 transitions (one TRPO batch) and of 8
  (one step of 8 batched envs), batched (``model(x, num_samples=10)``) against N looped
  single-sample forwards (``[model(x) for _ in range(10)]``), and their ratio;
* ELBO optimisation steps per second (forward, backward, Adam) for minibatches of 10 and 256;
* one iteration of the model's training as ``Exploration`` does it (500 minibatches of 10 drawn from
  a pool), ``ModelTrainer``'s two backends timed in turns: ``autograd`` (the loss, ``backward``
  and fused Adam, a step at a time) and ``numba`` (all steps in one compiled call, the default);
* weight sampling against the local samplings (``sampling="local"``, per row, and
  ``"local_shared"``, the authors' layer): the training iteration, the bonus of a batch, and the
  two values they estimate (the difference in standard errors);
* one ELBO step of the recipe's models on MountainCar, HalfCheetah and Ant, per sampling:
  autograd, compiled, and the compiled step's GFLOP/s beside a 1024² matrix product's
  (``--steps-only`` prints this table alone).

    python recipes/benchmarks/benchmark_bnn.py [--threads 2] [--steps-only]
"""

from __future__ import annotations

import argparse
import copy
import functools
import statistics
import time

import numpy as np
import torch
from tensordict import TensorDict
from torch import nn

from torchrl_vase import (
    SAMPLINGS,
    BayesianMLP,
    DynamicsModel,
    Exploration,
    ModelTrainer,
    VariationalELBOLoss,
    VASERewardTransform,
)

CONFIGS = {
    "[32] ReLU, obs 4 + act 1": (4, 1, [32], nn.ReLU),
    "[64, 64] tanh, obs 20 + act 6": (20, 6, [64, 64], nn.Tanh),
}


def seconds(stmt, min_run_time: float) -> float:
    """Median seconds per call of ``stmt`` (a callable) over rounds of repeated calls.

    A warm-up of ``min_run_time / 4`` comes first: the allocator's first large blocks (page
    faults) otherwise land in the measurement.
    """
    deadline = time.perf_counter() + min_run_time / 4
    calls = 0
    while time.perf_counter() < deadline or calls < 3:
        stmt()
        calls += 1
    per_round = max(1, calls // 5)  # about 50 ms rounds
    rounds = []
    deadline = time.perf_counter() + min_run_time
    while time.perf_counter() < deadline or len(rounds) < 5:
        start = time.perf_counter()
        for _ in range(per_round):
            stmt()
        rounds.append((time.perf_counter() - start) / per_round)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, nargs="+", default=[5000, 8])
    parser.add_argument("--num-samples", type=int, default=10)
    parser.add_argument("--min-run-time", type=float, default=1.0, help="seconds per timing")
    parser.add_argument("--updates", type=int, default=500, help="minibatches per iteration")
    parser.add_argument("--rounds", type=int, default=7, help="turns of the iteration timing")
    parser.add_argument("--pool", type=int, default=1_000_000,
                        help="transitions in the pool of the statistics' timing")
    parser.add_argument("--value-draws", type=int, default=200,
                        help="draws of the values compared under local reparameterisation")
    parser.add_argument("--steps-only", action="store_true",
                        help="only the table of one ELBO step (autograd, compiled, GFLOP/s)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n = args.num_samples
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    if args.steps_only:
        elbo_steps_table(args)
        return

    print(f"Forward with N = {n} weight samples")
    print(f"{'model':<32} {'batch':>6} {'batched ms':>11} {'looped ms':>10} {'looped/batched':>15}")
    for name, (obs_dim, act_dim, cells, act_cls) in CONFIGS.items():
        model = BayesianMLP(obs_dim + act_dim, obs_dim, cells, act_cls)
        for size in args.batch:
            x = torch.randn(size, obs_dim + act_dim)
            with torch.no_grad():
                batched = seconds(lambda m=model, x=x: m(x, num_samples=n), args.min_run_time)
                looped = seconds(lambda m=model, x=x: [m(x) for _ in range(n)], args.min_run_time)
            print(
                f"{name:<32} {size:>6,} {batched * 1e3:>11.3f} {looped * 1e3:>10.3f} "
                f"{looped / batched:>14.2f}x"
            )

    print(f"\nELBO steps per second (N = {n} samples, forward + backward + Adam)")
    print(f"{'model':<32} {'minibatch 10':>13} {'minibatch 256':>14}")
    for name, (obs_dim, act_dim, cells, act_cls) in CONFIGS.items():
        model = DynamicsModel(BayesianMLP(obs_dim + act_dim, obs_dim, cells, act_cls))
        loss_fn = VariationalELBOLoss(model, num_samples=n, kl_weight=0.2)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        rates = []
        for size in (10, 256):
            batch = TensorDict(
                {
                    "observation": torch.randn(size, obs_dim),
                    "action": torch.randn(size, act_dim),
                    ("next", "observation"): torch.randn(size, obs_dim),
                },
                [size],
            )

            def step(batch=batch, loss_fn=loss_fn, optimizer=optimizer):
                out = loss_fn(batch)
                optimizer.zero_grad()
                (out["loss_nll"] + out["loss_kl"]).backward()
                optimizer.step()

            rates.append(1.0 / seconds(step, args.min_run_time))
        print(f"{name:<32} {rates[0]:>13,.0f} {rates[1]:>14,.0f}")

    print(f"\nOne iteration of the model's training: {args.updates} minibatches of 10 from a pool "
          f"(median of {args.rounds} turns)")
    print(f"{'model':<32} {'autograd':>9} {'numba':>8} {'speed-up':>9}")
    for name, (obs_dim, act_dim, cells, act_cls) in CONFIGS.items():
        torch.manual_seed(0)
        loss = VariationalELBOLoss(DynamicsModel.build(obs_dim, act_dim, cells, act_cls),
                                   kl_weight=0.2)
        sample = TensorDict({
            "observation": torch.randn(args.updates * 10, obs_dim),
            "action": torch.randn(args.updates * 10, act_dim),
            ("next", "observation"): torch.randn(args.updates * 10, obs_dim)},
            [args.updates * 10])
        trainers = {backend: ModelTrainer(copy.deepcopy(loss), backend=backend)
                    for backend in ("autograd", "numba")}
        trainers["numba"](sample)  # the kernel compiles or loads from numba's cache
        paths = {backend: functools.partial(trainer, sample)
                 for backend, trainer in trainers.items()}
        slow, kernel = in_turns(paths, args.rounds).values()
        print(f"{name:<32} {slow * 1e3:>6.0f} ms {kernel * 1e3:>5.0f} ms {slow / kernel:>8.1f}x")

    samplings(args)
    pool_statistics(args)
    elbo_steps_table(args)


def in_turns(paths: dict, rounds: int) -> dict[str, float]:
    """The median seconds of each call in ``paths``, the calls taking turns ``rounds`` times (so
    a change in the machine's load falls on all of them)."""
    times = {path: [] for path in paths}
    for _ in range(rounds):
        for path, run in paths.items():
            start = time.perf_counter()
            run()
            times[path].append(time.perf_counter() - start)
    return {path: statistics.median(seconds) for path, seconds in times.items()}


def pool_statistics(args) -> None:
    """The model's standardisation statistics over a pool of ``--pool`` transitions, read
    whole against an update that reads only the iteration's 5,000 new ones (``new=``)."""
    print(f"\nStatistics over a pool of {args.pool:,} transitions (median of {args.rounds} turns)")
    print(f"{'model':<38} {'every row':>10} {'5,000 new rows':>15}")
    for name, (obs_dim, act_dim, cells) in TASK_MODELS.items():
        model = DynamicsModel.build(obs_dim, act_dim, cells)
        pool = [torch.randn(args.pool, dim) for dim in (obs_dim, act_dim, obs_dim)]
        model.update_statistics(*pool)
        times = {"whole": [], "new": []}
        for _ in range(args.rounds):
            for key, new in (("whole", None), ("new", 5000)):
                if new is not None:  # the moments of the rows before the new ones
                    model.update_statistics(*(t[:-new] for t in pool))
                start = time.perf_counter()
                model.update_statistics(*pool, new=new)
                times[key].append(time.perf_counter() - start)
        whole, new = (statistics.median(times[key]) for key in ("whole", "new"))
        print(f"{name:<38} {whole * 1e3:>7.0f} ms {new * 1e3:>12.1f} ms")


#: the recipe's BNNs (the authors': ReLU everywhere) on three tasks
TASK_MODELS = {
    "MountainCar [32], obs 2 + act 1": (2, 1, [32]),
    "HalfCheetah [64, 64], obs 20 + act 6": (20, 6, [64, 64]),
    "Ant [64, 64], obs 125 + act 8": (125, 8, [64, 64]),
}


def elbo_steps_table(args) -> None:
    """One ELBO step (minibatch 10, N samples, gradients and Adam) of the recipe's models, per
    sampling: ``ModelTrainer``'s autograd backend (a few dozen torch calls a step) and its
    compiled kernel (an iteration's steps in one call), each timed on whole iterations of
    ``--updates`` steps with their noise drawn as training draws it; and the kernel's arithmetic
    rate (its matrix products' FLOPs a second) beside a large matrix product's on the same
    threads."""
    steps = args.updates
    print(f"\nOne ELBO step (N = {args.num_samples}, minibatch 10, gradients and Adam), timed "
          f"on iterations of {steps} steps (median of {args.rounds} turns)")
    print(f"{'model':<38} {'sampling':<13} {'autograd':>9} {'compiled':>9} {'speed-up':>9} "
          f"{'GFLOP/s':>8}")
    for name, (obs_dim, act_dim, cells) in TASK_MODELS.items():
        for sampling in SAMPLINGS:
            loss = VariationalELBOLoss(DynamicsModel.build(obs_dim, act_dim, cells,
                                                           sampling=sampling),
                                       num_samples=args.num_samples, kl_weight=0.2)
            x = torch.randn(steps, 10, obs_dim + act_dim)
            y = torch.randn(steps, 10, obs_dim)
            paths = {backend: _steps_call(loss, x, y, backend)
                     for backend in ("autograd", "numba")}
            for run in paths.values():
                run()  # compiles (or loads the kernel from numba's cache)
            slow, compiled = (t / steps for t in in_turns(paths, args.rounds).values())
            flops = step_flops(loss.model.network.layer_sizes, args.num_samples, 10, sampling)
            print(f"{name:<38} {sampling:<13} {slow * 1e6:>6.0f} µs {compiled * 1e6:>6.0f} µs "
                  f"{slow / compiled:>8.1f}x {flops / compiled / 1e9:>8.1f}")
    size = 1024
    a, b = torch.randn(size, size), torch.randn(size, size)
    big = seconds(lambda: torch.mm(a, b), args.min_run_time)
    a_np, b_np = a.numpy(), b.numpy()
    big_np = seconds(lambda: np.dot(a_np, b_np), args.min_run_time)
    print(f"A {size}x{size} matrix product on the same threads: torch {2 * size**3 / big / 1e9:.0f}"
          f" GFLOP/s, numpy (the kernel's BLAS) {2 * size**3 / big_np / 1e9:.0f} GFLOP/s")


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def step_flops(layer_sizes: list[tuple[int, int]], num_samples: int, rows: int,
               sampling: str) -> float:
    """The matrix products' FLOPs of one ELBO step (forward and backward; the elementwise work
    uncounted). Local sampling: the means' and variances' products, the first layer's once per
    row (its input is every draw's), the others' on the N·B rows; weight sampling: N networks
    on B rows."""
    total = 0
    for i, (n_in, n_out) in enumerate(layer_sizes):
        product = 2 * n_in * n_out
        if sampling == "weights":
            total += num_samples * rows * product * (3 if i else 2)
        else:
            layer_rows = rows if i == 0 else num_samples * rows
            total += 2 * layer_rows * product * (3 if i else 2)
    return float(total)


def _steps_call(loss: VariationalELBOLoss, x: torch.Tensor, y: torch.Tensor, backend: str):
    """A call running one iteration of the model's ELBO steps on ``backend``, from a fresh copy
    of its parameters and optimiser each time (the noise drawn inside, as training draws it)."""
    network = loss.model.network
    start = copy.deepcopy(network.state_dict())

    def run() -> None:
        network.load_state_dict(start)
        trainer = ModelTrainer(loss, backend=backend)
        trainer.steps(x, y, lambda n: loss.step_noise(10, steps=n))

    return run


def samplings(args) -> None:
    """Weight sampling against the local samplings (per row; shared by the rows, the authors'
    layer), per model: one training iteration (the compiled kernel), the VASE bonus
    of a 5,000-transition batch (timed in turns), and what they compute: the bonus's mean and
    the ELBO's data term on one batch, each the mean of many draws, with the difference from
    weight sampling in standard errors (all three agree in expectation)."""
    print(f"\nThe BNN's sampling, weights → local / local_shared (N = {args.num_samples}; "
          f"median of {args.rounds} turns; values: mean of {args.value_draws} draws)")
    print(f"{'model':<32} {'sampling':<13} {'training iteration':>26} "
          f"{'bonus, 5,000 transitions':>26} {'bonus mean (SE)':>16} {'NLL term (SE)':>14}")
    for name, (obs_dim, act_dim, cells, act_cls) in CONFIGS.items():
        paths, values = {}, {}
        for sampling in SAMPLINGS:
            torch.manual_seed(0)
            model = DynamicsModel.build(obs_dim, act_dim, cells, act_cls, sampling=sampling)
            bonus = VASERewardTransform(model, num_samples=args.num_samples, delta=0.0)
            exploration = Exploration(bonus, bonus.make_loss(kl_weight=0.2), pool_min=500,
                                      updates_per_iteration=args.updates)
            data = TensorDict({"observation": torch.randn(5000, obs_dim),
                               "action": torch.randn(5000, act_dim),
                               ("next", "observation"): torch.randn(5000, obs_dim)}, [5000])
            exploration.pool.extend(data)
            model.update_statistics(data["observation"], data["action"],
                                    data["next", "observation"])
            sample = exploration.pool.sample(args.updates * 10)
            x, y = exploration.loss.model_inputs(data[:10])
            batch = (data["observation"], data["action"], data["next", "observation"])
            paths[sampling] = (functools.partial(exploration.trainer, sample),
                               functools.partial(bonus.surprise, *batch))
            with torch.no_grad():
                draws = [(bonus.surprise(*batch).mean().item(),
                          exploration.loss.terms_from_noise(
                              x, y, exploration.loss.step_noise(10))[0].item())
                         for _ in range(args.value_draws)]
            values[sampling] = torch.tensor(draws, dtype=torch.float64)
        times = {(sampling, k): [] for sampling in paths for k in (0, 1)}
        for _ in range(args.rounds):
            for sampling, runs in paths.items():
                for k, run in enumerate(runs):
                    start = time.perf_counter()
                    run()
                    times[(sampling, k)].append(time.perf_counter() - start)
        ms = {key: statistics.median(t) * 1e3 for key, t in times.items()}
        weights = values["weights"]
        for sampling in SAMPLINGS[1:]:
            ours = values[sampling]
            mean = weights.mean(0) - ours.mean(0)
            error = ((weights.var(0) + ours.var(0)) / args.value_draws).sqrt()
            cells_text = [f"{ms[('weights', k)]:.0f} → {ms[(sampling, k)]:.0f} ms "
                          f"{ms[('weights', k)] / ms[(sampling, k)]:.2f}x" for k in (0, 1)]
            print(f"{name:<32} {sampling:<13} {cells_text[0]:>26} {cells_text[1]:>26} "
                  f"{mean[0] / error[0]:>+15.1f} {mean[1] / error[1]:>+13.1f}")


if __name__ == "__main__":
    main()
