"""A lean collector: a gymnasium vector env and a Gaussian policy, batches in TorchRL's layout.

TorchRL's ``Collector`` pays for its generality at every step (a ``ProbabilisticActor`` on a
tensordict, the env's transforms, its own carrier). For continuous control with a Gaussian policy
that reduces to a network call, a normal sample and one vector-env step: ``VectorEnvCollector``
does that and assembles the batch once, with a ``Collector``'s keys
(``recipes/benchmarks/benchmark_sb3.py`` measures the difference)."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import gymnasium
import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase
from torch import Tensor, nn
from torchrl.collectors import BaseCollector
from torchrl.modules import MLP, IndependentNormal, TanhNormal

from torchrl_vase._validation import check_positive_int, module_device
from torchrl_vase.envs._checks import check_continuous_control
from torchrl_vase.envs.batched import LeanVectorEnv, unit_to_bounds
from torchrl_vase.modules.networks import FiniteLogProbNormal, activate, mlp_layers

__all__ = ["VectorEnvCollector"]

_STEP_KEYS = ("observation", "action", "next_observation", "reward", "terminated", "truncated",
              "step_count", "episode_reward")


class _PathLedger:
    """Which copy ran which path, from which step, for how long, the paths numbered in the order
    they start (rllab's one worker runs them one after another); the batch is the first ones up to
    ``budget`` steps."""

    def __init__(self, lanes: int, budget: int, whole_paths: bool) -> None:
        self.budget, self.whole_paths = budget, whole_paths
        self.lane = list(range(lanes))  # path -> its copy
        self.start = [0] * lanes  # path -> the step (of the copies' common clock) it began at
        self.length = [0] * lanes
        self.ended = [False] * lanes
        self.running = list(range(lanes))  # copy -> its path
        self.whole = 0  # paths 0 .. whole-1 have ended, and hold ...
        self.whole_steps = 0  # ... this many steps

    def step(self, done: np.ndarray, clock: int) -> None:
        """Every copy took a step (the clock now reads ``clock``); the ``done`` ones' paths
        ended, and they begin new ones."""
        for path in self.running:
            self.length[path] += 1
        for lane in np.flatnonzero(done).tolist():
            self.ended[self.running[lane]] = True
            self.running[lane] = len(self.lane)
            self.lane.append(lane)
            self.start.append(clock)
            self.length.append(0)
            self.ended.append(False)
        while (self.whole_steps < self.budget and self.whole < len(self.lane)
               and self.ended[self.whole]):
            self.whole_steps += self.length[self.whole]
            self.whole += 1

    def complete(self) -> bool:
        """The batch's paths are collected: whole ones until they hold the budget or, without
        ``whole_paths``, the budget's first steps of the paths in order."""
        if self.whole_steps >= self.budget:
            return True
        return not self.whole_paths and self.whole < len(self.lane) and (
            self.whole_steps + self.length[self.whole] >= self.budget)

    def batch_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """The batch's (step, copy) indices into the recorded ``[steps, copies]`` arrays,
        path after path."""
        steps, lanes, total = [], [], 0
        for path in range(len(self.lane)):
            if total >= self.budget:
                break
            length = self.length[path]
            if not self.whole_paths:
                length = min(length, self.budget - total)
            steps.append(np.arange(self.start[path], self.start[path] + length))
            lanes.append(np.full(length, self.lane[path]))
            total += length
        return np.concatenate(steps), np.concatenate(lanes)


def _gaussian_network(policy, *, squashed: bool = False) -> tuple[nn.Module, str, str, bool]:
    """A normal (or, with ``squashed``, SAC's ``TanhNormal``) actor's ``observation → (loc, scale)``
    network, its observation and log-probability keys and whether it squashes."""
    try:
        network_module, distribution_module = policy.module
        distribution = distribution_module.distribution_class
        in_keys, out_keys = list(network_module.in_keys), list(network_module.out_keys)
        network = network_module.module
        log_prob_key = distribution_module.log_prob_key
        bounds = dict(distribution_module.distribution_kwargs)
    except (AttributeError, TypeError, ValueError):
        network = distribution = None
    tanh = (squashed and distribution is TanhNormal
            and float(bounds.get("low", -1.0)) == -1.0 and float(bounds.get("high", 1.0)) == 1.0
            and not bounds.get("tanh_loc", False))
    if (
        (distribution not in (IndependentNormal, FiniteLogProbNormal) and not tanh)
        or len(in_keys) != 1
        or out_keys != ["loc", "scale"]
        or not isinstance(network, nn.Module)):
        raise TypeError(
            "VectorEnvCollector takes ProbabilisticActor(TensorDictModule(net, [observation], "
            "['loc', 'scale']), in_keys=['loc', 'scale'], distribution_class=IndependentNormal "
            "or FiniteLogProbNormal)"
            + (" or a TanhNormal with low=-1, high=1, tanh_loc=False (tanh_policy)"
               if squashed else "") + "; use torchrl's Collector for other policies.")
    return network, in_keys[0], log_prob_key, tanh


def _unrolled(network: nn.Module) -> tuple[list | None, nn.Module | None]:
    """``Sequential(MLP, tail)`` as its MLP's ``(weight, bias, activation)`` layers and the tail;
    ``(None, None)`` for another network (called as a module)."""
    if not (isinstance(network, nn.Sequential) and len(network) == 2
            and isinstance(network[0], MLP)):
        return None, None
    try:
        layers = mlp_layers(network[0])
    except TypeError:
        return None, None
    return [(network[0][i].weight, network[0][i].bias, activation)
            for i, activation in layers], network[1]


class VectorEnvCollector(BaseCollector):
    """Batches of ``[num_envs, frames_per_batch // num_envs]`` transitions from a vector env, or
    with ``paths=True`` rllab's batches of whole paths, ``[1, L]``.

    A torchrl ``BaseCollector``, lean where ``Collector`` is general: ``LeanVectorEnv`` steps the
    copies in one call (auto-reset off: an episode's last observation is its true last one) and the
    policy's network acts, with no per-step TensorDicts. The action ``loc + scale · ε`` (its
    ``tanh`` for SAC's ``tanh_policy``) is stored as sampled and sent mapped from [−1, 1] to the
    env's bounds and clipped (rllab's ``NormalizedEnv``); observations are float32, standardised
    by ``observation_loc`` and ``observation_scale``.

    With ``paths=True`` the batch is rllab's one-worker sampler's: fresh paths, each from a reset to
    its end, in the order they start, until they hold ``frames_per_batch`` steps, the last kept
    whole (``whole_paths``, the authors') or cut there; the copies run paths side by side and a path
    started once the earlier ones hold the batch is dropped.

    Each batch holds ``observation``, ``action``, ``loc``, ``scale``, ``action_log_prob`` (not for a
    ``TanhNormal`` actor) and under ``"next"`` ``observation``, ``reward``, ``done``,
    ``terminated``, ``truncated``, ``step_count`` and ``episode_reward`` (the extrinsic return so
    far): what a ``Collector`` over a ``TransformedEnv`` with ``DoubleToFloat``, ``ActionScaling``,
    ``ClipTransform``, ``StepCounter`` and ``RewardSum`` writes.

    Args:
        env_id: a registered gymnasium id with a vector observation and a bounded ``Box`` action.
        policy: ``ProbabilisticActor(TensorDictModule(net, ["observation"], ["loc", "scale"]),
            in_keys=["loc", "scale"], distribution_class=IndependentNormal)`` (or
            ``FiniteLogProbNormal``, or ``tanh_policy``'s ``TanhNormal``). A policy on another
            device acts through a CPU copy, which ``update_policy_weights_`` refreshes.

    Keyword Args:
        num_envs: copies stepped together.
        frames_per_batch: transitions per batch, a multiple of ``num_envs``.
        total_frames: stop after this many (``-1``: never).
        reset_at_each_iter: start fresh episodes at every batch.
        paths: rllab's batches of paths (above).
        whole_paths: with ``paths``, keep the last path whole; ``False`` cuts it.
        init_random_frames: the first batches, until they hold this many frames, act uniformly at
            random in [−1, 1] (SAC's warm-up; torchrl's ``Collector`` argument).
        seed: seeds the envs (copy ``i`` with ``seed + i``).
        observation_loc: subtracted from every observation (with ``observation_scale``).
        observation_scale: divides it.
        make_kwargs: passed to ``gymnasium.make`` for every copy.

    Examples:
        >>> import torchrl_vase
        >>> actor = torchrl_vase.gaussian_policy(2, 1, [32])
        >>> collector = VectorEnvCollector("torchrl_vase/SparseMountainCar-v1", actor,
        ...     num_envs=4, frames_per_batch=400, seed=0)
        >>> batch = next(iter(collector))
        >>> batch.shape, batch["next", "episode_reward"].shape
        (torch.Size([4, 100]), torch.Size([4, 100, 1]))
    """

    def __init__(self, env_id: str, policy: TensorDictModuleBase, *, num_envs: int,
                 frames_per_batch: int, total_frames: int = -1, reset_at_each_iter: bool = False,
                 paths: bool = False, whole_paths: bool = True, init_random_frames: int = 0,
                 seed: int | None = None, observation_loc: Tensor | None = None,
                 observation_scale: Tensor | None = None, make_kwargs: dict | None = None) -> None:
        check_positive_int("num_envs", num_envs)
        check_positive_int("frames_per_batch", frames_per_batch)
        if frames_per_batch % num_envs and not paths:
            raise ValueError(
                f"frames_per_batch ({frames_per_batch}) must be a multiple of num_envs "
                f"({num_envs}): every env takes the same number of steps.")
        self.paths, self.whole_paths = bool(paths), bool(whole_paths)
        self._learner = policy
        if module_device(policy).type != "cpu":
            # the envs step on the CPU: act with a CPU copy of a policy trained elsewhere (a
            # per-step round trip to the GPU costs more than a small MLP's forward)
            policy = copy.deepcopy(policy).to("cpu")
        self.network, self.observation_key, self.log_prob_key, self.squashed = \
            _gaussian_network(policy, squashed=True)
        self._layers, self._tail = _unrolled(self.network)
        self.init_random_frames = check_positive_int("init_random_frames", init_random_frames,
                                                     minimum=0)
        self.policy = policy
        self.env_id = env_id
        self.env = LeanVectorEnv(env_id, num_envs, **(make_kwargs or {}))
        space = self.env.single_action_space
        observation_space = self.env.single_observation_space
        check_continuous_control(env_id, observation_space, space)
        self.num_envs = num_envs
        self.steps = max(1, frames_per_batch // num_envs)
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.reset_at_each_iter = bool(reset_at_each_iter) or self.paths
        self.observation_dim = int(observation_space.shape[0])
        self.action_dim = int(space.shape[0])
        self._low, self._high = space.low, space.high
        self.observation_loc = observation_loc
        self.observation_scale = observation_scale
        self._frames = 0
        self._seed = seed
        self._observation = self._reset_all(seed)
        super().__init__()
        self.requested_frames_per_batch = frames_per_batch  # torchrl's name, for len()

    # -- Collector interface
    def set_seed(self, seed: int) -> None:
        """Reseed (and reset) every env: copy ``i`` with ``seed + i``."""
        self._observation = self._reset_all(seed)

    def update_policy_weights_(self, policy_or_weights: nn.Module | dict | None = None,
                               **kwargs) -> None:
        """Refresh the CPU copy of a policy that lives on another device (a CPU policy is held
        itself), or set the acting weights to ``policy_or_weights`` (a module or a state dict)."""
        if policy_or_weights is not None:
            weights = (policy_or_weights.state_dict() if isinstance(policy_or_weights, nn.Module)
                       else policy_or_weights)
            self.policy.load_state_dict(weights)
        elif self.policy is not self._learner:
            self.policy.load_state_dict(self._learner.state_dict())

    @property
    def observation_space(self) -> gymnasium.spaces.Box:
        """One copy's observation space (before any standardisation)."""
        return self.env.single_observation_space

    def fit_observation_normalization(self, num_steps: int) -> None:
        """Fix ``observation_loc`` and ``observation_scale`` to the statistics of ``num_steps``
        random steps in every copy (as ``ObservationNorm.init_stats``), then start fresh
        episodes."""
        check_positive_int("num_steps", num_steps)
        seen = []
        self.env.action_space.seed(self._seed)
        for _ in range(num_steps):
            observation, _, terminated, truncated, _ = self.env.step(self.env.action_space.sample())
            seen.append(observation)
            done = terminated | truncated
            if done.any():
                self.env.reset(options={"reset_mask": done})
        data = torch.as_tensor(np.stack(seen), dtype=torch.float32)
        data = data.reshape(-1, self.observation_dim)
        self.observation_loc = data.mean(0)
        self.observation_scale = data.std(0).clamp_min(1e-6)
        self._observation = self._reset_all(self._seed)

    def state_dict(self) -> dict:
        """The observation standardisation (all the collector learns) and the frames collected
        (which end ``init_random_frames``)."""
        return {"observation_loc": self.observation_loc,
                "observation_scale": self.observation_scale, "frames": self._frames}

    def load_state_dict(self, state: dict) -> None:
        self.observation_loc = state["observation_loc"]
        self.observation_scale = state["observation_scale"]
        self._frames = state.get("frames", self._frames)  # not in checkpoints before SAC

    def shutdown(self) -> None:
        self.env.close()

    def iterator(self) -> Iterator[TensorDict]:
        """The batches (``iter(collector)`` and ``next()`` go through it), with torchrl's
        pre- and post-collect hooks around each."""
        while self.total_frames < 0 or self._frames < self.total_frames:
            if self._pre_collect_hook is not None:
                self._pre_collect_hook()
            batch = self.rollout()
            if self._post_collect_hook is not None:
                self._post_collect_hook(batch)
            yield batch

    def _discards_in_flight_trajectories(self) -> bool:
        return self.reset_at_each_iter

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.env_id!r}, num_envs={self.num_envs}, "
                f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames})")

    # -- Collection
    def _reset_all(self, seed: int | None) -> np.ndarray:
        observation, _ = self.env.reset(seed=seed)
        self._step_count = np.zeros(self.num_envs, dtype=np.int64)
        self._episode_reward = np.zeros(self.num_envs, dtype=np.float32)
        return observation

    def _prepare(self, observation: np.ndarray) -> Tensor:
        tensor = torch.as_tensor(observation, dtype=torch.float32)
        if self.observation_loc is not None:
            tensor = (tensor - self.observation_loc) / self.observation_scale
        return tensor

    @torch.no_grad()
    def rollout(self) -> TensorDict:
        """One batch: ``[num_envs, frames_per_batch // num_envs]`` steps of every copy, or with
        ``paths`` rllab's first paths in the order they start, ``[1, L]``."""
        if self.reset_at_each_iter:
            self._observation = self._reset_all(None)
        paths = (_PathLedger(self.num_envs, self.frames_per_batch, self.whole_paths)
                 if self.paths else None)
        seen: dict[str, list] = {key: [] for key in _STEP_KEYS}
        observation = self._prepare(self._observation)
        random = self._acts_randomly()
        t = 0
        while not paths.complete() if paths else t < self.steps:
            if t % self.steps == 0:
                noise = self._rollout_noise(self.steps, random)
            action = noise[t % self.steps] if random else self._act(observation,
                                                                     noise[t % self.steps])
            next_raw, reward, term, trunc, _ = self.env.step(
                unit_to_bounds(action.numpy(), self._low, self._high))
            self._step_count += 1
            self._episode_reward += reward.astype(np.float32)
            for key, value in zip(_STEP_KEYS, (
                    observation, action, self._prepare(next_raw), np.asarray(reward, np.float32),
                    term, trunc, self._step_count.copy(), self._episode_reward.copy()),
                    strict=True):
                seen[key].append(value)
            done = term | trunc
            t += 1
            if paths:
                paths.step(done, t)
            if done.any():
                reset_raw, _ = self.env.reset(options={"reset_mask": done})
                next_raw = np.where(done[:, None], reset_raw, next_raw)
                self._step_count[done] = 0
                self._episode_reward[done] = 0.0
            self._observation, observation = next_raw, self._prepare(next_raw)
        if paths:
            steps, lane = paths.batch_indices()
            shape = (1, len(steps))
        else:  # every copy's steps in order: [num_envs, steps]
            lane, steps = np.indices((self.num_envs, self.steps))
            shape = (self.num_envs, self.steps)
        column = {key: torch.as_tensor(np.stack([np.asarray(v) for v in values])[steps, lane])
                  .reshape(*shape, -1) for key, values in seen.items()}
        terminated, truncated = column["terminated"].bool(), column["truncated"].bool()
        batch = TensorDict(
            {
                self.observation_key: column["observation"].float(),
                "action": column["action"].float(),
                "next": {self.observation_key: column["next_observation"].float(),
                         "reward": column["reward"].float(), "done": terminated | truncated,
                         "terminated": terminated, "truncated": truncated,
                         "step_count": column["step_count"].long(),
                         "episode_reward": column["episode_reward"].float()},
            },
            batch_size=shape,
        )
        self._set_log_prob(batch)
        self._frames += batch.numel()
        return batch

    def _acts_randomly(self) -> bool:
        """Whether this batch is one of the warm-up's (``init_random_frames``)."""
        return self._frames < self.init_random_frames

    def _act(self, observation: Tensor, noise: Tensor) -> Tensor:
        loc, scale = self._network(observation)
        action = loc + scale * noise
        return torch.tanh(action) if self.squashed else action

    def _set_log_prob(self, batch: TensorDict) -> None:
        if not self.squashed:  # a tanh-squashed policy's loss (SAC's) recomputes it
            batch.set(self.log_prob_key, self._log_prob(batch))

    def _rollout_noise(self, steps: int, uniform: bool = False) -> Tensor:
        """A batch's noise: N(0, 1), or with ``uniform`` the warm-up's actions, U(−1, 1)."""
        if uniform:
            return torch.rand(steps, self.num_envs, self.action_dim) * 2 - 1
        return torch.randn(steps, self.num_envs, self.action_dim)

    def _network(self, observation: Tensor) -> tuple[Tensor, Tensor]:
        """The network's ``(loc, scale)``; a leading torchrl ``MLP`` run as its own operations
        (the same ones: ``nn.Linear`` is ``addmm`` on a matrix) without a module call per layer,
        which on ten rows cost more than the arithmetic."""
        if self._layers is None:
            return self.network(observation)
        h = observation
        for weight, bias, activation in self._layers:
            h = activate(torch.addmm(bias, h, weight.T), activation)
        return self._tail(h)

    def _log_prob(self, batch: TensorDict) -> Tensor:
        """The policy's own (loc, scale) written and the log-probability of the batch's
        actions, for the whole batch in one call."""
        return self.policy.get_dist(batch).log_prob(batch.get("action"))
