"""The exploration side of the paper's Algorithm 1 as one object any training loop can use."""

from __future__ import annotations

import contextlib
import math
import os

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives.common import LossModule

from torchrl_vase._device import module_device
from torchrl_vase._random_stream import EXPLORATION_STREAM, RandomStream, iteration_seed
from torchrl_vase._validation import check_positive_int
from torchrl_vase.checkpointing import saveable_prefix
from torchrl_vase.diagnostics import novelty_correlation, spearman
from torchrl_vase.objectives.elbo import VariationalELBOLoss
from torchrl_vase.objectives.elbo_trainer import BACKENDS, ELBOTrainer
from torchrl_vase.replay import ReplayJournal
from torchrl_vase.timing import phase
from torchrl_vase.transforms.intrinsic import IntrinsicRewardTransform
from torchrl_vase.transforms.surprise_reward import SurpriseRewardTransform

__all__ = ["Exploration", "ReplayBonus"]

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
    2. Diagnostics: the bonus's mean and std; every ``diagnostics_every``-th iteration with a
       bonus (the first among them), ``novelty_spearman``, the Spearman correlation
       between U and the k-NN novelty of s' among the states of the pool so far
       (``torchrl_vase.diagnostics.novelty_correlation``), and ``self_agreement``, the Spearman
       correlation between two evaluations of a Monte-Carlo bonus (VASE, NLL, VIME: N weight
       samples each) on the same transitions with fresh draws: how much of the bonus's ranking
       of transitions is the model's and how much its sampling noise (NaN for RND, whose
       bonus is deterministic). These two are ours, not the paper's: computed exactly where
       they run, absent from the other iterations' metrics.
    3. ``update``: the transitions go into the pool; once it holds ``pool_min`` of them, the data
       statistics are refreshed over the whole pool (``bonus.fit_statistics``: the dynamics model's
       standardisation, as the authors recompute it each iteration) and the model takes
       ``updates_per_iteration`` optimiser steps on minibatches of ``batch_size`` drawn uniformly
       from the pool (the authors: 500 of 10). The ELBO's steps are ``ELBOTrainer``'s: on a CPU
       all of an iteration's steps in one compiled call (``backend``), since at minibatches of
       10 dispatch, not arithmetic, is the cost (docs/benchmarks.md); autograd elsewhere.

    The policy update comes after ``step`` and uses the batch's reward, extrinsic and intrinsic
    reward keys (see ``ExplorationGAE``).

    Works with every bonus transform of this library: ``SurpriseRewardTransform`` (VASE, NLL,
    VIME) trained by ``VariationalELBOLoss``, and ``RNDRewardTransform`` trained by torchrl's
    ``RNDLoss``. The loss must train the model the bonus evaluates (checked at construction);
    ``loss=None`` builds it with ``bonus.make_loss()``.

    Its random numbers are its own (``random_stream``): the model's weights and noise, the pool's
    minibatches and the bonus's draws come from a stream seeded by ``seed``, and torch's default
    generators are left as they were. What a learner draws after it (a critic's minibatches,
    SAC's samples) is then what it would draw without a bonus, so with η = 0 the policy trains
    bit for bit as with no bonus: an exact control for a bonus's effect and cost.

    Everything that changes during training is in ``state_dict``: the model, its statistics, the
    bonus's scaling statistics, the optimiser, the pool, the update count and the random stream.

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
        diagnostics_every: the novelty and self-agreement diagnostics on every k-th iteration
            with a bonus, counting from the first (0: never). Their cost is a few k-NN
            searches and two bonus evaluations: every iteration, about a quarter of a VASE
            iteration on HalfCheetah (docs/benchmarks.md); every 10th, under 5 %.
        pool: an off-policy learner's replay buffer (torchrl's ``ReplayBuffer`` holding the
            bonus's ``transition_keys``): the model trains on it and its statistics are read
            from it, instead of a pool of its own. Its owner extends it (before ``observe`` or
            ``update``, with the same batch) and checkpoints it: ``Exploration`` does neither,
            and ``pool_size`` is its capacity. See ``ReplayBonus`` for the bonus on its samples.
        backend: how the ELBO's steps run (``ELBOTrainer``; ignored for other losses):
            ``"auto"`` (default) the compiled kernel (``"numba"``) where it applies — a
            float32/float64 model on the CPU, plain Adam, ReLU or tanh layers, the analytic KL
            — else ``"autograd"``; ``"numba"`` that kernel or a ``ValueError`` saying why it
            cannot run; ``"autograd"`` one step at a time through ``backward`` (any device,
            activation and optimiser). The kernel compiles once per machine (cached on disk);
            its steps agree with autograd's to float rounding, not bit for bit.
        seed: the run's seed, which the random stream's derives from
            (``iteration_seed(seed, 0, stream=EXPLORATION_STREAM)``); ``None`` takes the seed
            torch's default generator was last given (``torch.initial_seed()``: the run's,
            where it seeds torch before building its parts).
        shuffle_bonus: a placebo: ``add_bonus`` permutes each batch's bonus across its
            transitions (an on-policy iteration's batch, an off-policy learner's sample), so
            the reward keeps the bonus's size and spread but not which transition earned it;
            the permutation comes from the random stream (the learner's numbers untouched;
            the model's later minibatches then differ as another seed's would).

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
        diagnostics_every: int = 10,
        pool: ReplayBuffer | None = None,
        backend: str = "auto",
        seed: int | None = None,
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
        if pool is not None:
            if not isinstance(pool, ReplayBuffer):
                raise TypeError(f"pool must be a torchrl ReplayBuffer, got {type(pool).__name__}.")
            pool_size = pool.storage.max_size
        self._check_sizes(pool_size, pool_min, updates_per_iteration, batch_size)
        self.bonus = bonus
        self.loss = loss
        parameters = [p for p in loss.parameters() if p.requires_grad]
        if not parameters:
            raise ValueError("the loss has no trainable parameters.")
        if optimizer is None:
            # fused: one kernel for all parameters a step (the autograd steps'; the compiled
            # kernel reads and writes its state)
            optimizer = torch.optim.Adam(parameters, lr=lr, fused=True)
        _check_optimizer(optimizer, parameters)
        self.optimizer = optimizer
        # (s, a, s') triples: each is one env step, so none crosses an episode boundary; kept
        # where the model is (batches from CPU envs are moved there as they are added)
        #: Whether the pool is this object's (extended and saved by it) or a learner's buffer.
        self.owns_pool = pool is None
        self.pool = pool if pool is not None else ReplayBuffer(
            storage=LazyTensorStorage(self.pool_size, device=module_device(bonus))
        )
        # how the own pool goes into a checkpoint: whole in this object's state until
        # ``journal_pool`` gives the journal a directory, appended there from then on
        self._pool_journal = ReplayJournal(self.pool) if self.owns_pool else None
        self.bonus_before_training = bool(bonus_before_training)
        #: A placebo: each batch's bonus permuted across its transitions, so the reward keeps
        #: the bonus's size and spread but not which transition earned it.
        self.shuffle_bonus = bool(shuffle_bonus)
        self.novelty_k = check_positive_int("novelty_k", novelty_k)
        self.novelty_queries = check_positive_int("novelty_queries", novelty_queries)
        self.novelty_reference = check_positive_int("novelty_reference", novelty_reference)
        self.agreement_queries = check_positive_int("agreement_queries", agreement_queries)
        self.diagnostics_every = check_positive_int("diagnostics_every", diagnostics_every,
                                                    minimum=0)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
        #: The model's training: ``ELBOTrainer`` for the ELBO, autograd steps on another loss
        self.trainer = (ELBOTrainer(loss, optimizer, batch_size=self.batch_size, backend=backend)
                        if isinstance(loss, VariationalELBOLoss) else None)
        #: Optimiser steps taken so far.
        self.register_buffer("model_updates", torch.zeros((), dtype=torch.long,
                                                          device=module_device(bonus)))
        #: Where every random number of the exploration comes from (see the class).
        self.random_stream = RandomStream(iteration_seed(
            torch.initial_seed() if seed is None else seed, 0, stream=EXPLORATION_STREAM))

    def _check_sizes(self, pool_size: int, pool_min: int, updates_per_iteration: int,
                     batch_size: int) -> None:
        self.pool_size = check_positive_int("pool_size", pool_size)
        self.pool_min = check_positive_int("pool_min", pool_min)
        self.updates_per_iteration = check_positive_int("updates_per_iteration",
                                                        updates_per_iteration)
        self.batch_size = check_positive_int("batch_size", batch_size)
        if self.pool_min > self.pool_size:
            raise ValueError(
                f"pool_min ({pool_min}) exceeds pool_size ({pool_size}): the model would never "
                "be trained."
            )
        if self.batch_size > self.pool_min:
            raise ValueError(f"batch_size ({batch_size}) exceeds pool_min ({pool_min}).")

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
        return metrics | self.update_model(sample)

    def observe(self, batch: TensorDictBase) -> tuple[dict[str, float], TensorDictBase | None]:
        """The first half of ``step``: the bonus written into ``batch``, its diagnostics, the
        batch added to the pool; returns the metrics and the minibatches the model trains on
        (``add_to_pool``'s). ``step(batch)`` is ``observe`` then ``update_model``."""
        return self.diagnose(batch), self.add_to_pool(batch)

    def diagnose(self, batch: TensorDictBase) -> dict[str, float]:
        """The bonus written into ``batch`` (``add_bonus``) and its diagnostics: ``bonus_mean``,
        ``bonus_std``, and where they are due (``diagnostics_due``) ``novelty_spearman``
        (against the pool as it is: call it before the batch is added) and
        ``self_agreement``. ``observe``'s first half."""
        with self.own_random():
            active = self.add_bonus(batch)
            bonus = batch.get(("next", self.bonus.intrinsic_reward_key))
            metrics = {
                "bonus_mean": bonus.mean().item(),
                "bonus_std": bonus.std().item() if bonus.numel() > 1 else math.nan,
            }
            if active and self.diagnostics_due():
                with phase("diagnostics"):
                    metrics["novelty_spearman"] = self.novelty(batch)
                    metrics["self_agreement"] = self.self_agreement(batch)
        return metrics | self._confidence_metrics(metrics["bonus_mean"] if active else None)

    def own_random(self) -> contextlib.AbstractContextManager[None]:
        """A block whose draws from torch's default generators come from ``random_stream`` (the
        model's device's too, on a GPU), leaving them as they were: ``diagnose``,
        ``add_bonus``, ``add_to_pool`` and ``update_model`` run in one; wrap in it any other
        draw made for the bonus."""
        return self.random_stream.active(module_device(self.bonus))

    def diagnostics_due(self) -> bool:
        """Whether this iteration computes ``novelty_spearman`` and ``self_agreement``: the
        model's k-th training so far (its update count over ``updates_per_iteration``) with
        ``(k − 1) % diagnostics_every == 0``. A count the checkpoint holds, so a resumed run
        computes them on the same iterations."""
        if not self.diagnostics_every:
            return False
        trainings = int(self.model_updates) // self.updates_per_iteration
        return (trainings - 1) % self.diagnostics_every == 0

    def _confidence_metrics(self, bonus_mean: float | None) -> dict[str, float]:
        """VASE's ``δ·H(q)`` (``confidence``) and its share of the surprise it is taken from,
        ``δ·H / (mean U + δ·H)`` (``confidence_share``), where the bonus has such a term
        (``confidence_term``); nothing otherwise."""
        term = self.bonus.confidence_term()
        if term is None:
            return {}
        if bonus_mean is None:
            return {"confidence": math.nan, "confidence_share": math.nan}
        return {"confidence": term, "confidence_share": term / (bonus_mean + term)}

    def add_bonus(self, batch: TensorDictBase) -> bool:
        """Write the bonus into ``batch`` in place; ``False`` if it was 0 (model untrained).
        With ``shuffle_bonus``, the batch's bonus permuted across its transitions (the
        permutation drawn from ``random_stream``)."""
        with self.own_random(), phase("bonus"):
            if int(self.model_updates) == 0 and not self.bonus_before_training:
                self.bonus.write_no_bonus(batch)
                return False
            self.bonus(batch)
            if self.shuffle_bonus:
                following = batch.get("next")
                values = following.get(self.bonus.intrinsic_reward_key).reshape(-1)
                order = torch.randperm(values.numel(), device=values.device)
                # back to the batch's shape: an on-policy batch is [envs, steps]
                self.bonus.write_bonus(following, values[order].reshape(following.batch_size))
            return True

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """Add the batch to the pool; refresh statistics and train the model once it is big enough.

        Returns the mean of each scalar loss output over the steps (``loss_*``, and e.g. ``elbo``,
        ``kl``, ``entropy`` for the ELBO), empty when the model was not trained.
        """
        return self.update_model(self.add_to_pool(batch))

    def add_to_pool(self, batch: TensorDictBase) -> TensorDictBase | None:
        """The batch's transitions into the pool (a learner's buffer: already there); once it
        holds ``pool_min``, the statistics refreshed over the whole pool and the iteration's
        minibatches drawn (``None`` before)."""
        with self.own_random(), phase("pool"):
            return self._add_to_pool(batch)

    def _add_to_pool(self, batch: TensorDictBase) -> TensorDictBase | None:
        transitions = batch.reshape(-1).select(*self.bonus.transition_keys)
        if self.owns_pool:
            self.pool.extend(transitions.clone())
        if len(self.pool) < self.pool_min:
            return None
        # until the ring buffer wraps, the pool's slots are its transitions in arrival order
        # and this batch its last rows: the statistics then read only the batch
        grew = self.pool.writer.state_dict()["_write_count"] <= self.pool_size
        self.bonus.fit_statistics(self.pool.storage[: len(self.pool)],
                                  new=len(transitions) if grew else None)
        # all minibatches in one draw (uniform with replacement, as separate draws would be):
        # a replay-buffer sample call costs many tensordict splits (docs/benchmarks.md). The
        # buffer's sampler and storage, not its ``sample``: a learner's buffer may carry a
        # transform (the bonus itself) that the model's minibatches must not go through
        index, _ = self.pool.sampler.sample(self.pool.storage,
                                            self.updates_per_iteration * self.batch_size)
        return self.pool.storage.get(index).select(*self.bonus.transition_keys)

    def update_model(self, sample: TensorDictBase | None) -> dict[str, float]:
        """``updates_per_iteration`` steps of the model on ``sample`` (``add_to_pool``'s);
        nothing for ``None``. Returns the loss's mean outputs. (Not ``train``: that is
        ``nn.Module.train(mode)``, which torch code calls on any module tree.)"""
        if sample is None:
            return {}
        with self.own_random(), phase("model"):
            return self.count_steps(self._loss_steps(sample) if self.trainer is None
                                    else self.trainer(sample))

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
    def journal_pool(self, directory: str | os.PathLike) -> None:
        """Checkpoint the pool by appending to ``directory`` (a ``ReplayJournal``): each
        ``state_dict`` from now on writes there the transitions added since the previous one
        and holds only their count, instead of the whole pool (3 GB of Ant's by the end of its
        run, every few iterations); ``load_state_dict`` reads them back from there. Call it
        before the first save or load, with the directory the checkpoint lives beside (the
        recipe's: ``pool/`` in the run's checkpoint directory). A checkpoint that holds the
        pool whole (written before this, or by an earlier version) still loads.

        Examples:
            >>> import tempfile, torch
            >>> from tensordict import TensorDict
            >>> from torchrl_vase import DynamicsModel, VASERewardTransform
            >>> def make():
            ...     bonus = VASERewardTransform(DynamicsModel.build(2, 1, [8], sigma_c=0.5))
            ...     return Exploration(bonus, pool_min=20, updates_per_iteration=2)
            >>> directory = tempfile.mkdtemp()
            >>> exploration = make(); exploration.journal_pool(directory)
            >>> batch = TensorDict({"observation": torch.randn(30, 2), "action": torch.randn(30, 1),
            ...                     "next": {"observation": torch.randn(30, 2)}}, [30])
            >>> _ = exploration.add_to_pool(batch)
            >>> state = exploration.state_dict()  # the 30 transitions go to a file there
            >>> state["_extra_state"]["pool"]
            {'journal': {'write_count': 30, 'capacity': 100000}}
            >>> restored = make(); restored.journal_pool(directory)
            >>> _ = restored.load_state_dict(state)
            >>> torch.equal(restored.pool.storage[:30]["observation"], batch["observation"])
            True
        """
        if not self.owns_pool:
            raise ValueError("the pool is a learner's replay buffer: its owner checkpoints it "
                             "(a ReplayJournal of that buffer), not this object.")
        self._pool_journal.attach(directory)

    def get_extra_state(self) -> dict:
        """The optimiser, the random stream and the pool (``_pool_state``)."""
        return {"optimizer": self.optimizer.state_dict(), "random": self.random_stream.state_dict(),
                "pool": self._pool_state()}

    def _pool_state(self) -> dict | None:
        """The pool: with ``journal_pool``, the count of the transitions
        appended to its files; otherwise its *filled* part (not its preallocated capacity).
        Plain tensors and numbers (``torch.load(..., weights_only=True)`` reads them back). The
        filled rows share the pool's memory (``checkpointing.saveable_prefix``: no second copy
        of a pool of gigabytes at each checkpoint), so save the state before the pool
        changes."""
        if not self.owns_pool:  # a learner's buffer: its owner saves it
            return None
        if self._pool_journal.directory is not None:
            return {"journal": self._pool_journal.state_dict()}
        filled = len(self.pool)
        writer = self.pool.writer.state_dict()
        transitions = None
        if filled:
            transitions = self.pool.storage[:filled].apply(
                lambda rows: saveable_prefix(rows, filled)).to_dict()
        return {
            "transitions": transitions,
            "cursor": int(writer["_cursor"]),
            "write_count": int(writer["_write_count"]),
        }

    def set_extra_state(self, state: dict) -> None:
        if "random" not in state:
            raise ValueError(
                "the saved Exploration has no random stream of its own: it was written by "
                "torchrl-vase before 2026-12-05, whose bonus drew from torch's default "
                "generator. Resume it with that version, or start the run afresh.")
        self.optimizer.load_state_dict(state["optimizer"])
        self.random_stream.load_state_dict(state["random"])
        pool = state["pool"]
        if (pool is None) == self.owns_pool:
            raise ValueError("the saved state is of an Exploration " + (
                "that trained on a learner's replay buffer" if pool is None else
                "with a pool of its own") + "; this one's pool is the other kind.")
        if pool is None:
            return
        if "journal" in pool:
            if self._pool_journal.directory is None:
                raise ValueError(
                    "the checkpoint's pool is in the files of a journal beside it (pool/ in the "
                    "run's checkpoint directory): call journal_pool(that directory) first.")
            self._pool_journal.load_state_dict(pool["journal"])
            return
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
        if self._pool_journal.directory is not None:  # the journal starts again from here
            self._pool_journal.reset()


class ReplayBonus:
    """The bonus on an off-policy learner's samples: a replay buffer's transform that writes
    ``r = r_e + η·U`` into every sampled batch under the bonus's model as it is at sampling time
    (so transitions grow less rewarding as the model learns them), the stored extrinsic reward
    untouched (the sample is a copy). Until the model's first update the bonus is 0
    (``Exploration.add_bonus``'s rule). The bonus's scaling statistics (RND's running moments,
    VIME's medians) are read, not updated: they follow the collected batches
    (``Exploration.observe``), not how often a transition happens to be sampled.

    Examples:
        >>> import torch
        >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
        >>> from torchrl.envs import GymEnv
        >>> from torchrl_vase import DynamicsModel, VASERewardTransform
        >>> buffer = ReplayBuffer(storage=LazyTensorStorage(10_000), batch_size=64)
        >>> bonus = VASERewardTransform(DynamicsModel.build(2, 1, sigma_c=0.5), eta=1e-4)
        >>> exploration = Exploration(bonus, pool=buffer, pool_min=100, updates_per_iteration=5)
        >>> _ = buffer.append_transform(ReplayBonus(exploration))
        >>> batch = GymEnv("torchrl_vase/SparseMountainCar-v1").rollout(200)
        >>> _ = buffer.extend(batch.reshape(-1))
        >>> _ = exploration.step(batch)  # the model's first steps, on the buffer
        >>> sample, info = buffer.sample(return_info=True)  # r = r_e + eta * U, U > 0
        >>> stored = buffer.storage.get(info["index"])["next", "reward"]  # r_e, as stored
        >>> bool(sample["next", "intrinsic_reward"].abs().sum() > 0), torch.equal(
        ...     sample["next", "extrinsic_reward"], stored)
        (True, True)
    """

    def __init__(self, exploration: Exploration) -> None:
        if not isinstance(exploration, Exploration):
            raise TypeError(
                f"exploration must be an Exploration, got {type(exploration).__name__}.")
        self.exploration = exploration

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        bonus = self.exploration.bonus
        training = bonus.training
        bonus.train(False)  # the statistics are read, not updated
        try:
            with torch.no_grad():
                self.exploration.add_bonus(tensordict)  # shuffled there, for a placebo
        finally:
            bonus.train(training)
        return tensordict

    def __repr__(self) -> str:
        shuffled = ", shuffle_bonus=True" if self.exploration.shuffle_bonus else ""
        return f"{type(self).__name__}({type(self.exploration.bonus).__name__}{shuffled})"

