"""A population's envs: every member's copies in one gymnasium vector env, stepped in one call."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase
from torch import Tensor

from torchrl_vase.collectors import VectorEnvCollector, _gaussian_network
from torchrl_vase.population.streams import MemberStreams

__all__ = ["PopulationCollector"]


class PopulationCollector(VectorEnvCollector):
    """``VectorEnvCollector`` for K members: K × ``num_envs`` envs in one vector env, member k
    acting in its own ``num_envs`` with its own policy; batches ``[K, num_envs, steps]``.

    Member k's envs are seeded as a single run seeded ``seeds[k]`` seeds its own (copy i with
    ``seeds[k] + i``; ``set_seed`` takes one seed per member), its action noise comes from its
    stream (``streams.generators[k]``, drawn as the single collector draws it), and its actions
    from its own policy's network, called on its envs' observations as the single collector
    calls it. So member k's batch is, bit for bit, the batch of the single run with seed
    ``seeds[k]``. (One call of the K networks on stacked weights would differ from the single
    call in the last bit where a layer has one output — a different BLAS kernel — and the
    physics of the sparse tasks amplifies that into other trajectories within a few dozen
    steps; the network is a few percent of a step, the envs the rest.)

    Args:
        env_id: as ``VectorEnvCollector``.
        policies: the members' ``gaussian_policy`` actors (on the CPU), one architecture.
        streams: the members' random streams.

    Keyword Args:
        num_envs: envs per member.
        frames_per_batch: transitions per member and batch.
        reset_at_each_iter: start fresh episodes at every batch (rllab's batches).
        make_kwargs: passed to ``gymnasium.make`` for every copy.
    """

    def __init__(self, env_id: str, policies: Sequence[TensorDictModuleBase],
                 streams: MemberStreams, *, num_envs: int, frames_per_batch: int,
                 reset_at_each_iter: bool = False, make_kwargs: dict | None = None) -> None:
        if len(policies) != len(streams):
            raise ValueError(f"{len(policies)} policies for {len(streams)} members.")
        if frames_per_batch % num_envs:
            raise ValueError(f"frames_per_batch ({frames_per_batch}) must be a multiple of "
                             f"num_envs ({num_envs}).")
        self.members, self.member_envs, self.streams = len(policies), num_envs, streams
        self.policies = list(policies)
        super().__init__(env_id, self.policies[0], num_envs=num_envs * len(policies),
                         frames_per_batch=frames_per_batch * len(policies),
                         reset_at_each_iter=reset_at_each_iter,
                         seed=self._env_seeds(streams.seeds), make_kwargs=make_kwargs)
        self.networks = [_gaussian_network(policy)[0] for policy in self.policies]

    def _env_seeds(self, seeds: Sequence[int]) -> list[int]:
        return [seed + i for seed in seeds for i in range(self.member_envs)]

    def set_seed(self, seeds: Sequence[int]) -> None:
        """Reseed (and reset) every env: member k's copy i with ``seeds[k] + i``."""
        self._observation = self._reset_all(self._env_seeds(seeds))

    def update_policy_weights_(self, *args, **kwargs) -> None:
        """Nothing to do: the members' (CPU) policies act themselves."""

    def fit_observation_normalization(self, num_steps: int) -> None:
        raise NotImplementedError("a population does not standardise observations yet.")

    def _network(self, observation: Tensor) -> tuple[Tensor, Tensor]:
        outputs = [network(part) for network, part in
                   zip(self.networks, observation.split(self.member_envs), strict=True)]
        return torch.cat([loc for loc, _ in outputs]), torch.cat([scale for _, scale in outputs])

    def _rollout_noise(self, steps: int, uniform: bool = False) -> Tensor:
        # a population has no warm-up of random actions (init_random_frames is 0)
        return torch.cat([torch.randn(steps, self.member_envs, self.action_dim, generator=g)
                          for g in self.streams.generators], dim=1)

    def _log_prob(self, batch: TensorDict) -> Tensor:
        """Each member's policy on its part of the batch, as the single collector."""
        parts = batch.split(self.member_envs)
        log_probs = [policy.get_dist(part).log_prob(part.get("action"))
                     for policy, part in zip(self.policies, parts, strict=True)]
        batch.update(torch.cat(parts))
        return torch.cat(log_probs)

    @torch.no_grad()
    def rollout(self) -> TensorDict:
        """One batch, ``[members, num_envs, steps]``."""
        batch = super().rollout()
        return batch.view(self.members, self.member_envs, *batch.shape[1:])
