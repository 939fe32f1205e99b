"""The exploration side of the paper's Algorithm 1 as one object any training loop can use."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable

import torch
from tensordict import TensorDict, TensorDictBase
from torch import Tensor, nn
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives.common import LossModule

from torchrl_vase._device import module_device
from torchrl_vase.checkpointing import saveable_prefix
from torchrl_vase.diagnostics import novelty_correlation, spearman
from torchrl_vase.objectives.elbo import VariationalELBOLoss
from torchrl_vase.objectives.elbo_steps import (
    BACKENDS,
    CompiledELBOSteps,
    compiled_steps_unavailable,
    eager_elbo_steps,
)
from torchrl_vase.transforms.intrinsic import IntrinsicRewardTransform
from torchrl_vase.transforms.surprise_reward import SurpriseRewardTransform

__all__ = ["Exploration"]


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def _check_optimizer(optimizer, parameters: list[nn.Parameter]) -> None:
    """An optimiser that steps every trainable parameter of the loss (the model's)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            "optimizer must be a torch.optim.Optimizer over the loss's parameters, e.g. "
            f"torch.optim.Adam(loss.parameters(), lr=1e-3), got {optimizer!r}; or leave it out "
            "for Adam with lr."
        )
    stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
    missing = sum(id(p) not in stepped for p in parameters)
    if missing:
        raise ValueError(
            f"optimizer does not step {missing} of the loss's {len(parameters)} trainable "
            "parameters, so the bonus's model would not (fully) train: build it over "
            "loss.parameters()."
        )


class Exploration(nn.Module):
    """A bonus, the model behind it, its loss, optimiser and replay pool: Algorithm 1's exploration.

    Per iteration of an on-policy loop, on the batch just collected (``step(batch)``):

    1. ``add_bonus``: ``r = r_e + η·U`` for every transition, with the model as it was trained up
       to the previous iteration (the model does not change during a rollout, so this equals the
       paper's per-step computation). Until the model's first update the bonus is 0 and the reward
       left as it is (the authors add none in the first iteration), unless
       ``bonus_before_training``.
    2. Diagnostics: the bonus's mean and std, ``novelty_spearman``, the Spearman correlation
       between U and the k-NN novelty of s' among the states of the pool so far
       (``torchrl_vase.diagnostics.novelty_correlation``), and ``self_agreement``, the Spearman
       correlation between two evaluations of a Monte-Carlo bonus (VASE, NLL, VIME: N weight
       samples each) on the same transitions with fresh draws: how much of the bonus's ranking
       of transitions is the model's and how much its sampling noise (NaN for RND, whose
       bonus is deterministic).
    3. ``update``: the transitions go into the pool; once it holds ``pool_min`` of them, the data
       statistics are refreshed over the whole pool (``bonus.fit_statistics``: the dynamics model's
       standardisation, as the authors recompute it each iteration) and the model takes
       ``updates_per_iteration`` optimiser steps on minibatches of ``batch_size`` drawn uniformly
       from the pool (the authors: 500 of 10). For the ELBO these steps use its hand-written
       gradients (``VariationalELBOLoss.elbo_gradients``, equal to autograd's), all of an
       iteration's steps in one compiled call (``CompiledELBOSteps``, ``backend``): 3-7x the
       eager steps' speed at minibatches of 10, where dispatch, not arithmetic, is the cost.

    The policy update comes after ``step`` and uses the batch's reward, extrinsic and intrinsic
    reward keys (see ``ExplorationGAE``).

    Works with every bonus transform of this library: ``SurpriseRewardTransform`` (VASE, NLL,
    VIME) trained by ``VariationalELBOLoss``, and ``RNDRewardTransform`` trained by torchrl's
    ``RNDLoss``. The loss must train the model the bonus evaluates (checked at construction);
    ``loss=None`` builds it with ``bonus.make_loss()``.

    Everything that changes during training is in ``state_dict``: the model, its statistics, the
    bonus's scaling statistics, the optimiser, the pool and the update count.

    Args:
        bonus: the bonus transform (with its model; attach it to an env first if it builds one).
        loss: the loss that trains the bonus's model; ``None`` for ``bonus.make_loss()``.

    Keyword Args:
        pool_size: the replay pool's capacity (paper: 100,000 classic, 5,000,000 locomotion).
        pool_min: transitions in the pool before the model is trained (paper: 500).
        updates_per_iteration: optimiser steps per ``update`` (authors: 500).
        batch_size: transitions per step (authors: 10).
        lr: Adam's learning rate (paper: 1e-3), when no ``optimizer`` is given.
        optimizer: an optimiser over the loss's parameters, instead of Adam.
        bonus_before_training: compute the bonus with the untrained model too.
        novelty_k: k of the novelty diagnostic.
        novelty_queries: transitions of a batch the novelty diagnostic looks at.
        novelty_reference: pool states it compares them with.
        agreement_queries: transitions of a batch the self-agreement diagnostic evaluates twice.
        backend: how the ELBO's steps run (ignored for other losses): ``"auto"`` (default)
            the compiled kernel (``"numba"``) where it applies — a float32/float64 model on the
            CPU, plain Adam, ReLU or tanh layers — else ``"eager"``; ``"numba"`` that kernel or
            a ``ValueError`` saying why it cannot run; ``"eager"`` one torch call a step (the
            reference, any device and optimiser); ``"inductor"`` each step's gradients
            through ``torch.compile`` (needs a C++ compiler; compiles at the first update).
            The kernel compiles once per machine (cached on disk, seconds); its steps agree
            with the eager ones to float rounding, not bit for bit.

    Examples:
        >>> import torch
        >>> from torchrl.envs import GymEnv
        >>> from torchrl_vase import DynamicsModel, VASERewardTransform
        >>> bonus = VASERewardTransform(DynamicsModel.build(2, 1, sigma_c=0.5), eta=1e-4)
        >>> exploration = Exploration(bonus, bonus.make_loss(kl_weight=0.2), pool_min=100,
        ...                           updates_per_iteration=20)
        >>> env = GymEnv("torchrl_vase/SparseMountainCar-v1")
        >>> metrics = exploration.step(env.rollout(200))  # no bonus yet: the model learns
        >>> int(exploration.model_updates), len(exploration.pool)
        (20, 200)
        >>> batch = env.rollout(200)
        >>> metrics = exploration.step(batch)
        >>> bool(batch["next", "intrinsic_reward"].std() > 0)
        True
    """

    def __init__(
        self,
        bonus: IntrinsicRewardTransform,
        loss: LossModule | None = None,
        *,
        pool_size: int = 100_000,
        pool_min: int = 500,
        updates_per_iteration: int = 500,
        batch_size: int = 10,
        lr: float = 1e-3,
        optimizer: torch.optim.Optimizer | None = None,
        bonus_before_training: bool = False,
        novelty_k: int = 10,
        novelty_queries: int = 1000,
        novelty_reference: int = 10_000,
        agreement_queries: int = 500,
        backend: str = "auto",
        shuffle_bonus: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(bonus, IntrinsicRewardTransform):
            raise TypeError(
                "bonus must be a bonus transform of this library (SurpriseRewardTransform, "
                f"RNDRewardTransform, ...), got {type(bonus).__name__}."
            )
        loss = bonus.make_loss() if loss is None else loss
        bonus.check_loss(loss)
        self.pool_size = _positive_int("pool_size", pool_size)
        self.pool_min = _positive_int("pool_min", pool_min)
        self.updates_per_iteration = _positive_int("updates_per_iteration", updates_per_iteration)
        self.batch_size = _positive_int("batch_size", batch_size)
        if self.pool_min > self.pool_size:
            raise ValueError(
                f"pool_min ({pool_min}) exceeds pool_size ({pool_size}): the model would never "
                "be trained."
            )
        if self.batch_size > self.pool_min:
            raise ValueError(f"batch_size ({batch_size}) exceeds pool_min ({pool_min}).")
        self.bonus = bonus
        self.loss = loss
        parameters = [p for p in loss.parameters() if p.requires_grad]
        if not parameters:
            raise ValueError("the loss has no trainable parameters.")
        if optimizer is None:
            # fused: one kernel for all parameters per step (adam_step calls it directly)
            optimizer = torch.optim.Adam(parameters, lr=lr, fused=True)
        _check_optimizer(optimizer, parameters)
        self.optimizer = optimizer
        # (s, a, s') triples: each is one env step, so none crosses an episode boundary; kept
        # where the model is (batches from CPU envs are moved there as they are added)
        self.pool = ReplayBuffer(
            storage=LazyTensorStorage(self.pool_size, device=module_device(bonus))
        )
        self.bonus_before_training = bool(bonus_before_training)
        #: a placebo: each batch's bonus permuted across its transitions, so the reward keeps
        #: the bonus's size and spread but not which transition earned it
        self.shuffle_bonus = bool(shuffle_bonus)
        self.novelty_k = _positive_int("novelty_k", novelty_k)
        self.novelty_queries = _positive_int("novelty_queries", novelty_queries)
        self.novelty_reference = _positive_int("novelty_reference", novelty_reference)
        self.agreement_queries = _positive_int("agreement_queries", agreement_queries)
        #: How ``train`` runs the ELBO's steps: ``"numba"`` (one compiled call), ``"eager"``,
        #: ``"inductor"``, or ``None`` (another loss: autograd steps).
        self.steps_backend = self._steps_backend(backend)
        #: Optimiser steps taken so far.
        self.register_buffer("model_updates", torch.zeros((), dtype=torch.long,
                                                          device=module_device(bonus)))

    def _steps_backend(self, backend: str) -> str | None:
        """``backend`` resolved for this loss and optimiser; a clear error where it cannot run."""
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
        if not self.uses_elbo_gradients():
            return None
        unavailable = compiled_steps_unavailable(self.loss, self.optimizer)
        if backend == "numba" and unavailable:
            raise ValueError(f"backend='numba' cannot train this model: {unavailable}. Use "
                             "backend='auto' (the eager steps where the kernel cannot run).")
        if backend == "inductor" and not any(
            shutil.which(name) for name in (os.environ.get("CXX", "g++"), "c++", "clang++")
        ):
            raise RuntimeError(
                "backend='inductor' needs a C++ compiler for torch.compile (g++, c++ or clang++ "
                "on PATH, or $CXX); install one or use backend='auto'."
            )
        if backend == "auto":
            return "eager" if unavailable else "numba"
        return backend

    # ----------------------------------------------------------------------------------------
    # Algorithm 1
    # ----------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        # a summary: torchrl's loss modules' own reprs need in_keys that RNDLoss lacks
        return (
            f"{type(self).__name__}(bonus={type(self.bonus).__name__}, "
            f"loss={type(self.loss).__name__}, optimizer={type(self.optimizer).__name__}, "
            f"pool={len(self.pool)}/{self.pool_size}, pool_min={self.pool_min}, "
            f"updates_per_iteration={self.updates_per_iteration}, batch_size={self.batch_size})"
        )

    def step(self, batch: TensorDictBase) -> dict[str, float]:
        """``add_bonus``, the diagnostics, then ``update``, on one collected batch; the metrics."""
        metrics, sample = self.observe(batch)
        return metrics | self.train(sample)

    def observe(self, batch: TensorDictBase) -> tuple[dict[str, float], TensorDictBase | None]:
        """The first half of ``step``: the bonus written into ``batch``, its diagnostics, the
        batch added to the pool; returns the metrics and the minibatches the model trains on
        (``add_to_pool``'s). ``step(batch)`` is ``observe`` then ``train``; a population runs
        the members' ``train`` together."""
        active = self.add_bonus(batch)
        bonus = batch.get(("next", self.bonus.intrinsic_reward_key))
        metrics = {
            "bonus_mean": bonus.mean().item(),
            "bonus_std": bonus.std().item() if bonus.numel() > 1 else math.nan,
            "novelty_spearman": self.novelty(batch) if active else math.nan,
            "self_agreement": self.self_agreement(batch) if active else math.nan,
        }
        return metrics, self.add_to_pool(batch)

    def add_bonus(self, batch: TensorDictBase) -> bool:
        """Write the bonus into ``batch`` in place; ``False`` if it was 0 (model untrained)."""
        if int(self.model_updates) == 0 and not self.bonus_before_training:
            self.bonus.write_no_bonus(batch)
            return False
        self.bonus(batch)
        if self.shuffle_bonus:
            following = batch.get("next")
            values = following.get(self.bonus.intrinsic_reward_key).reshape(-1)
            # the global generator: seeded per iteration by the loop, checkpointed
            order = torch.randperm(values.numel(), device=values.device)
            # back to the batch's shape: an on-policy batch is [envs, steps]
            self.bonus.write_bonus(following, values[order].reshape(following.batch_size))
        return True

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """Add the batch to the pool; refresh statistics and train the model once it is big enough.

        Returns the mean of each scalar loss output over the steps (``loss_*``, and e.g. ``elbo``,
        ``kl``, ``entropy`` for the ELBO), empty when the model was not trained.
        """
        return self.train(self.add_to_pool(batch))

    def add_to_pool(self, batch: TensorDictBase) -> TensorDictBase | None:
        """The batch's transitions into the pool; once it holds ``pool_min``, the statistics
        refreshed over the whole pool and the iteration's minibatches drawn (``None`` before)."""
        transitions = batch.reshape(-1).select(*self.bonus.transition_keys).clone()
        self.pool.extend(transitions)
        if len(self.pool) < self.pool_min:
            return None
        # until the ring buffer wraps, the pool's slots are its transitions in arrival order
        # and this batch its last rows: the statistics then read only the batch
        grew = self.pool.writer.state_dict()["_write_count"] <= self.pool_size
        self.bonus.fit_statistics(self.pool.storage[: len(self.pool)],
                                  new=len(transitions) if grew else None)
        # all minibatches in one draw (uniform with replacement, as separate draws would be):
        # a replay-buffer sample call costs ~10x a tensordict split
        return self.pool.sample(self.updates_per_iteration * self.batch_size)

    def uses_elbo_gradients(self) -> bool:
        """Whether ``train`` takes the ELBO's hand-written gradient steps (``elbo_steps``)."""
        return isinstance(self.loss, VariationalELBOLoss) and self.loss.has_analytic_gradients()

    def train(self, sample: TensorDictBase | None) -> dict[str, float]:
        """``updates_per_iteration`` steps of the model on ``sample`` (``add_to_pool``'s);
        nothing for ``None``. Returns the loss's mean outputs."""
        if sample is None:
            return {}
        steps = self._elbo_steps if self.uses_elbo_gradients() else self._loss_steps
        return self.count_steps(steps(sample))

    def count_steps(self, metrics: dict[str, float]) -> dict[str, float]:
        """After a training: non-finite losses refused, the step count advanced."""
        bad = [key for key, value in metrics.items() if not math.isfinite(value)]
        if bad:
            raise FloatingPointError(
                f"training the bonus's model gave non-finite {', '.join(bad)} (with "
                f"{self.bonus.settings()}): a setting that makes the loss overflow (a tiny "
                "sigma_c, a large learning rate) or non-finite transitions in the pool."
            )
        self.model_updates += self.updates_per_iteration
        return metrics

    def _loss_steps(self, sample: TensorDictBase) -> dict[str, float]:
        """Optimiser steps on the sum of the loss's ``loss_*`` outputs, by autograd."""
        totals: dict[str, torch.Tensor] = {}
        for minibatch in sample.split(self.batch_size):
            out = self.loss(minibatch)
            objective = sum(value for key, value in out.items() if key.startswith("loss_"))
            self.optimizer.zero_grad()
            objective.backward()
            self.optimizer.step()
            for key, value in out.items():
                if value.numel() == 1:
                    totals[key] = totals.get(key, 0.0) + value.detach()
        return {key: (total / self.updates_per_iteration).item() for key, total in totals.items()}

    def _elbo_steps(self, sample: TensorDictBase) -> dict[str, float]:
        x, y = self.loss.model_inputs(sample)
        return self.elbo_steps(
            x, y, lambda steps: self.loss.step_noise(self.batch_size, steps=steps), [self])[0]

    @staticmethod
    def elbo_steps(x: Tensor, y: Tensor, noise: Callable[[int], Tensor],
                   members: list[Exploration]) -> list[dict[str, float]]:
        """The ELBO's steps with its hand-written gradients, for one model or for a
        population's models together, in one compiled call where ``steps_backend`` is
        ``"numba"`` (``CompiledELBOSteps``), else one torch call a step
        (``eager_elbo_steps``).

        One model (``members=[self]``): ``x``, ``y`` ``[steps·B, ·]`` as ``model_inputs`` gives
        them, ``noise(n)`` the next ``n`` steps' draws ``[n, *step_noise(B).shape]``
        (``VariationalELBOLoss.step_noise(B, steps=n)``). K models of one architecture and
        settings: ``x``, ``y`` ``[K, steps·B, ·]``, ``noise(n)`` the K members' stacked, each
        from the member's own stream; each member's numbers are those of its own steps, as its
        single run takes them (tested)."""
        first = members[0]
        loss, steps, size = first.loss, first.updates_per_iteration, first.batch_size
        population = x.dim() == 3
        if not population:
            x, y = x[None], y[None]
            single_noise = noise
            noise = lambda n: single_noise(n)[None]  # noqa: E731
        x = x.view(x.shape[0], steps, size, x.shape[-1])
        y = y.view(y.shape[0], steps, size, y.shape[-1])
        networks = [member.loss.model.network for member in members]
        optimizers = [member.optimizer for member in members]
        if first.steps_backend == "numba":
            terms = CompiledELBOSteps(loss)(networks, optimizers, x, y, noise)
        else:
            terms = eager_elbo_steps(loss, networks, optimizers, x, y, noise, stack=population,
                                     compile=first.steps_backend == "inductor")
        means = terms.mean(1).tolist()
        return [{"loss_nll": nll, "loss_kl": loss.kl_weight * kl,
                 "elbo": -(nll + loss.kl_weight * kl), "kl": kl, "entropy": entropy}
                for nll, kl, entropy in means]

    def novelty(self, batch: TensorDictBase) -> float:
        """Spearman's ρ between the batch's bonus and its next states' k-NN novelty in the pool.

        Call it before ``update`` adds the batch to the pool. The subsamples come from a generator
        of their own, so the diagnostic does not change the training's random numbers.
        """
        key = ("next", self.bonus.observation_key)
        if len(self.pool) <= self.novelty_k:
            return math.nan
        generator = torch.Generator().manual_seed(int(self.model_updates))
        return novelty_correlation(
            batch.get(("next", self.bonus.intrinsic_reward_key)),
            batch.get(key),
            self.pool.storage[: len(self.pool)].get(key),
            k=self.novelty_k,
            num_queries=self.novelty_queries,
            num_reference=self.novelty_reference,
            generator=generator,
        )

    def self_agreement(self, batch: TensorDictBase) -> float:
        """Spearman's ρ between two evaluations of the bonus on the same ``agreement_queries``
        transitions of ``batch``, each with fresh weight samples (NaN for a bonus without
        sampling noise, RND's).

        With N samples per evaluation the bonus's ranking of transitions is partly sampling
        noise; ρ near 1 says the ranking is the model's, near 0 that it is mostly noise. The
        subsample and both evaluations draw from a generator of their own (seeded by the update
        count), so the diagnostic does not change the training's random numbers.

        Examples:
            >>> import torch
            >>> from torchrl.envs import GymEnv
            >>> from torchrl_vase import DynamicsModel, VASERewardTransform
            >>> bonus = VASERewardTransform(DynamicsModel.build(2, 1, sigma_c=0.5), eta=1e-4)
            >>> exploration = Exploration(bonus, pool_min=100, updates_per_iteration=20)
            >>> env = GymEnv("torchrl_vase/SparseMountainCar-v1")
            >>> _ = exploration.step(env.rollout(200))
            >>> -1.0 <= exploration.self_agreement(env.rollout(200)) <= 1.0
            True
        """
        if not isinstance(self.bonus, SurpriseRewardTransform):
            return math.nan
        flat = batch.reshape(-1)
        if flat.numel() < 2:
            return math.nan
        generator = torch.Generator().manual_seed(int(self.model_updates))
        index = torch.randperm(flat.numel(), generator=generator)[: self.agreement_queries]
        queries = flat[index]
        obs, action, next_obs = (queries.get(key) for key in self.bonus.transition_keys)
        with torch.no_grad():
            first, second = (self.bonus.surprise(obs, action, next_obs, generator=generator)
                             for _ in range(2))
        return spearman(first, second)

    # ----------------------------------------------------------------------------------------
    # State
    # ----------------------------------------------------------------------------------------
    def get_extra_state(self) -> dict:
        """The optimiser and the pool's *filled* part (not its preallocated capacity), as plain
        tensors and numbers (``torch.load(..., weights_only=True)`` reads them back). The filled
        rows share the pool's memory (``checkpointing.saveable_prefix``: no second copy of a
        pool of gigabytes at each checkpoint), so save the state before the pool changes."""
        filled = len(self.pool)
        writer = self.pool.writer.state_dict()
        transitions = None
        if filled:
            transitions = self.pool.storage[:filled].apply(
                lambda rows: saveable_prefix(rows, filled)).to_dict()
        return {
            "optimizer": self.optimizer.state_dict(),
            "pool": {
                "transitions": transitions,
                "cursor": int(writer["_cursor"]),
                "write_count": int(writer["_write_count"]),
            },
        }

    def set_extra_state(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        pool = state["pool"]
        self.pool.empty()
        if pool["transitions"] is not None:
            transitions = TensorDict(pool["transitions"]).auto_batch_size_(batch_dims=1)
            if len(transitions) > self.pool_size:
                raise ValueError(
                    f"the saved pool holds {len(transitions)} transitions, more than pool_size "
                    f"({self.pool_size})."
                )
            # slot i of the saved storage goes back to slot i; the cursor says where the next
            # write lands (after a wrap-around, not at the end)
            self.pool.extend(transitions)
            cursor = pool["cursor"] if len(transitions) == self.pool_size else len(transitions)
            self.pool.writer.load_state_dict(
                {"_cursor": cursor, "_write_count": pool["write_count"]}
            )
