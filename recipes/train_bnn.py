"""Train the VASE dynamics model on transitions of a gymnasium env and watch the ELBO go down.

Collects ``--frames`` transitions with a uniformly random policy through a TorchRL ``Collector``,
stores them in a ``ReplayBuffer``, holds out 20 % of them, and fits a ``DynamicsModel`` (a
``BayesianMLP``, its data standardised by the training pool's statistics) with
``VariationalELBOLoss`` (paper's classic settings: hidden [32] ReLU, σ_m = 0.5, N = 10 samples,
Adam lr 1e-3, KL weighted as the paper's ELBO implies per minibatch: |B| / |D|).

Each epoch prints the training ELBO per transition (the full-pool ELBO divided by |D|), its
NLL and KL parts, the held-out NLL per transition, and the mean posterior std.
Configuration: ``conf/train_bnn.yaml``; every key is a Hydra override::

    python recipes/train_bnn.py                   # Pendulum-v1, 5,000 transitions
    python recipes/train_bnn.py env_id=MountainCarContinuous-v0 train.epochs=30
    python recipes/train_bnn.py model.num_cells=[64,64] model.activation=tanh loss.normalize=true
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.envs import DoubleToFloat, GymEnv, TransformedEnv

from torchrl_vase import BayesianMLP, DynamicsModel, VariationalELBOLoss
from torchrl_vase.modules import ACTIVATIONS


def collect_transitions(env_id: str, frames: int, seed: int) -> ReplayBuffer:
    """Random-policy transitions, flattened into a replay buffer."""
    env = TransformedEnv(GymEnv(env_id), DoubleToFloat())
    env.set_seed(seed)
    collector = Collector(env, policy=None, frames_per_batch=min(frames, 1000), total_frames=frames)
    buffer = ReplayBuffer(storage=LazyTensorStorage(frames))
    for batch in collector:
        buffer.extend(batch.reshape(-1).select("observation", "action", ("next", "observation")))
    collector.shutdown()
    return buffer


@hydra.main(version_base=None, config_path=str(Path(__file__).parents[1] / "conf"),
            config_name="train_bnn")
def main(cfg: DictConfig) -> None:
    if cfg.model.activation not in ACTIVATIONS:
        raise ValueError(
            f"model.activation must be one of {sorted(ACTIVATIONS)}, got {cfg.model.activation!r}."
        )
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)

    start = time.perf_counter()
    data = collect_transitions(cfg.env_id, cfg.frames, cfg.seed)[:]
    data = data[torch.randperm(len(data))]  # hold out a random 20 %
    n_valid = len(data) // 5
    valid, train = data[:n_valid], data[n_valid:]
    obs_dim, act_dim = data["observation"].shape[-1], data["action"].shape[-1]
    print(
        f"collected {len(data)} transitions of {cfg.env_id} (obs {obs_dim}, action {act_dim}) "
        f"in {time.perf_counter() - start:.1f}s; training on {len(train)}, holding out {n_valid}"
    )

    network = BayesianMLP(
        obs_dim + act_dim,
        obs_dim,
        list(cfg.model.num_cells),
        ACTIVATIONS[cfg.model.activation],
        prior_std=cfg.model.prior_std,
        init_posterior_std=cfg.model.init_posterior_std,
        init_mean=cfg.model.init_mean,
    )
    model = DynamicsModel(
        network,
        sigma_c=cfg.loss.sigma_c,
        target=cfg.loss.target,
        standardize=cfg.loss.standardize,
    )
    # the statistics of the training pool, as the recipe refreshes them from its replay pool
    model.update_statistics(train["observation"], train["action"], train["next", "observation"])
    batch_size = cfg.train.batch_size
    loss_fn = VariationalELBOLoss(
        model, num_samples=cfg.loss.num_samples, kl_weight=batch_size / len(train)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, fused=True)
    pool = ReplayBuffer(
        storage=LazyTensorStorage(len(train)),
        sampler=SamplerWithoutReplacement(),
        batch_size=batch_size,
    )
    pool.extend(train)

    print(f"{'epoch':>5} {'ELBO/transition':>16} {'NLL':>9} {'KL/|D|':>9} "
          f"{'held-out NLL':>13} {'mean σ':>8}")
    for epoch in range(cfg.train.epochs + 1):
        if epoch == 0:  # the untrained model, on the whole pool at once (KL weight 1)
            with torch.no_grad():
                out = loss_fn(train)
            nll, kl = out["loss_nll"], out["kl"]
            totals = torch.stack([-(nll + kl), -nll, kl])
        else:
            totals = torch.zeros(3)
            for _ in range(len(train) // batch_size):
                out = loss_fn(pool.sample())
                optimizer.zero_grad()
                (out["loss_nll"] + out["loss_kl"]).backward()
                optimizer.step()
                totals += torch.stack([out["elbo"], -out["loss_nll"].detach(), out["loss_kl"]])
        with torch.no_grad():
            held_out = loss_fn(valid)["loss_nll"].item() / n_valid
        elbo, log_lik, kl = (totals / len(train)).tolist()
        print(
            f"{epoch:>5} {elbo:>16.4f} {-log_lik:>9.4f} {kl:>9.5f} {held_out:>13.4f} "
            f"{network.posterior_std().mean().item():>8.4f}"
        )
    print(f"done in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main()
