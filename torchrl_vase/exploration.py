"""The exploration side of the paper's Algorithm 1 as one object any training loop can use
(``Exploration``): ``reward(batch)`` writes ``r = r_e + η·U``, ``fit(batch)`` puts the batch into
the pool and takes the model's steps. An off-policy learner calls the same two around its replay
buffer's extension and puts ``ReplayBonus`` on the buffer."""

from __future__ import annotations

import contextlib
import math
import os

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives.common import LossModule

from torchrl_vase._random_stream import EXPLORATION_STREAM, RandomStream, iteration_seed
from torchrl_vase._validation import check_positive_int, module_device
from torchrl_vase.checkpointing import saveable_prefix
from torchrl_vase.objectives.trainer import ModelTrainer
from torchrl_vase.replay import ReplayJournal
from torchrl_vase.timing import phase
from torchrl_vase.transforms.intrinsic import IntrinsicRewardTransform

__all__ = ["Exploration", "ReplayBonus"]


class Exploration(nn.Module):
    """A bonus, the model behind it, its trainer and replay pool: Algorithm 1's exploration.

    Per iteration of an on-policy loop, on the batch just collected:

    1. ``reward(batch)``: ``r = r_e + η·U`` under the model as trained up to the previous iteration
       (0 before its first update, as the authors', unless ``bonus_before_training``). Returns
       ``bonus/mean``, ``bonus/std`` and VASE's ``bonus/confidence`` (δ·H(q)).
    2. ``fit(batch)``: the batch joins the pool; once it holds ``pool_min``, the data statistics are
       refreshed over the pool and the ``ModelTrainer`` takes ``updates_per_iteration`` steps on
       minibatches of ``batch_size`` (the authors: 500 of 10). Returns the loss's outputs under the
       bonus's ``metric_prefix`` (``bnn/``, ``rnd/``).

    Any bonus transform of this library works, with the loss that trains its model (checked;
    ``None``: ``bonus.make_loss()``). Its random numbers are its own (``random_stream``): a learner
    draws what it would without a bonus, so η = 0 trains the policy bit for bit as no bonus does.
    Everything that changes in training is in ``state_dict``.

    Args:
        bonus: the bonus transform (with its model; attach it to an env first if it builds one).
        loss: the loss that trains the bonus's model; ``None`` for ``bonus.make_loss()``.

    Keyword Args:
        pool_size: the pool's capacity (paper: 100,000 classic, 5,000,000 locomotion).
        pool_min: transitions in the pool before the model is trained (paper: 500).
        updates_per_iteration: optimiser steps per ``fit`` (authors: 500).
        batch_size: transitions per step (authors: 10).
        lr: Adam's learning rate (paper: 1e-3), when no ``optimizer`` is given.
        optimizer: an optimiser over the loss's parameters, instead of Adam.
        bonus_before_training: compute the bonus with the untrained model too.
        pool: an off-policy learner's replay buffer to train on instead of a pool of its own
            (its owner extends it before ``fit`` and checkpoints it; ``ReplayBonus`` rewards
            its samples).
        backend: how the ELBO's steps run (``ModelTrainer``): ``"auto"``, ``"numba"`` or
            ``"autograd"``.
        seed: the run's seed, from which the random stream's derives; ``None``:
            ``torch.initial_seed()``.
        shuffle_bonus: a placebo: each batch's bonus is permuted across its transitions, keeping
            its size and spread but not which transition earned it.

    Examples:
        >>> import torch
        >>> from torchrl.envs import GymEnv
        >>> from torchrl_vase import DynamicsModel, VASERewardTransform
        >>> bonus = VASERewardTransform(DynamicsModel.build(2, 1, sigma_c=0.5), eta=1e-4)
        >>> exploration = Exploration(bonus, bonus.make_loss(kl_weight=0.2), pool_min=100,
        ...                           updates_per_iteration=20)
        >>> env = GymEnv("torchrl_vase/SparseMountainCar-v1")
        >>> batch = env.rollout(200)
        >>> exploration.reward(batch)["bonus/mean"]  # no bonus yet
        0.0
        >>> metrics = exploration.fit(batch)  # the model's first steps
        >>> int(exploration.model_updates), len(exploration.pool), "bnn/elbo" in metrics
        (20, 200, True)
        >>> batch = env.rollout(200)
        >>> exploration.reward(batch)["bonus/std"] > 0
        True
    """

    def __init__(self, bonus: IntrinsicRewardTransform, loss: LossModule | None = None, *,
                 pool_size: int = 100_000, pool_min: int = 500, updates_per_iteration: int = 500,
                 batch_size: int = 10, lr: float = 1e-3,
                 optimizer: torch.optim.Optimizer | None = None,
                 bonus_before_training: bool = False, pool: ReplayBuffer | None = None,
                 backend: str = "auto", seed: int | None = None,
                 shuffle_bonus: bool = False) -> None:
        super().__init__()
        if not isinstance(bonus, IntrinsicRewardTransform):
            raise TypeError(
                "bonus must be a bonus transform of this library (SurpriseRewardTransform, "
                f"RNDRewardTransform, ...), got {type(bonus).__name__}.")
        loss = bonus.make_loss() if loss is None else loss
        bonus.check_loss(loss)
        if pool is not None:
            if not isinstance(pool, ReplayBuffer):
                raise TypeError(f"pool must be a torchrl ReplayBuffer, got {type(pool).__name__}.")
            pool_size = pool.storage.max_size
        self._check_sizes(pool_size, pool_min, updates_per_iteration, batch_size)
        self.bonus, self.loss = bonus, loss
        #: The model's steps, whatever its loss
        self.trainer = ModelTrainer(loss, optimizer, lr=lr, batch_size=self.batch_size,
                                    backend=backend)
        # (s, a, s') triples: each is one env step, so none crosses an episode boundary; kept
        # where the model is (batches from CPU envs are moved there as they are added)
        #: Whether the pool is this object's (extended and saved by it) or a learner's buffer.
        self.owns_pool = pool is None
        self.pool = pool if pool is not None else ReplayBuffer(
            storage=LazyTensorStorage(self.pool_size, device=module_device(bonus)))
        # how the own pool goes into a checkpoint: whole in this object's state until
        # ``journal_pool`` gives the journal a directory, appended there from then on
        self._pool_journal = ReplayJournal(self.pool) if self.owns_pool else None
        self.bonus_before_training = bool(bonus_before_training)
        self.shuffle_bonus = bool(shuffle_bonus)
        #: Optimiser steps taken so far.
        self.register_buffer("model_updates", torch.zeros((), dtype=torch.long,
                                                          device=module_device(bonus)))
        #: Where every random number of the exploration comes from (see the class).
        self.random_stream = RandomStream(iteration_seed(
            torch.initial_seed() if seed is None else seed, 0, stream=EXPLORATION_STREAM))

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The model's optimiser (its trainer's)."""
        return self.trainer.optimizer

    def _check_sizes(self, pool_size: int, pool_min: int, updates_per_iteration: int,
                     batch_size: int) -> None:
        self.pool_size = check_positive_int("pool_size", pool_size)
        self.pool_min = check_positive_int("pool_min", pool_min)
        self.updates_per_iteration = check_positive_int("updates_per_iteration",
                                                        updates_per_iteration)
        self.batch_size = check_positive_int("batch_size", batch_size)
        if self.pool_min > self.pool_size:
            raise ValueError(f"pool_min ({pool_min}) exceeds pool_size ({pool_size}): the "
                             "model would never be trained.")
        if self.batch_size > self.pool_min:
            raise ValueError(f"batch_size ({batch_size}) exceeds pool_min ({pool_min}).")

    def __repr__(self) -> str:
        # a summary: torchrl's loss modules' own reprs need in_keys that RNDLoss lacks
        return (
            f"{type(self).__name__}(bonus={type(self.bonus).__name__}, "
            f"loss={type(self.loss).__name__}, optimizer={type(self.optimizer).__name__}, "
            f"pool={len(self.pool)}/{self.pool_size}, pool_min={self.pool_min}, "
            f"updates_per_iteration={self.updates_per_iteration}, batch_size={self.batch_size})")

    # -- Algorithm 1
    def reward(self, batch: TensorDictBase) -> dict[str, float]:
        """``r = r_e + η·U`` written into ``batch`` in place; ``bonus/mean``, ``bonus/std`` and
        the confidence term's metrics (call it before ``fit`` adds the batch to the pool)."""
        active = self._write_bonus(batch)
        bonus = batch.get(("next", self.bonus.intrinsic_reward_key))
        metrics = {"bonus/mean": bonus.mean().item(),
                   "bonus/std": bonus.std().item() if bonus.numel() > 1 else math.nan}
        return metrics | self._confidence_metrics(metrics["bonus/mean"] if active else None)

    def fit(self, batch: TensorDictBase) -> dict[str, float]:
        """The batch's transitions into the pool (a learner's buffer: already there); once it
        holds ``pool_min``, the statistics refreshed over the whole pool and the model's
        ``updates_per_iteration`` steps; the loss's mean outputs (nothing before)."""
        with self._own_random():
            with phase("pool"):
                sample = self._add_to_pool(batch)
            if sample is None:
                return {}
            with phase("model"):
                metrics = self.trainer(sample)
        bad = [key for key, value in metrics.items() if not math.isfinite(value)]
        if bad:
            raise FloatingPointError(
                f"training the bonus's model gave non-finite {', '.join(bad)} (with "
                f"{self.bonus.settings()}): a setting that makes the loss overflow (a tiny "
                "sigma_c, a large learning rate) or non-finite transitions in the pool.")
        self.model_updates += self.updates_per_iteration
        return {self.bonus.metric_prefix + key: value for key, value in metrics.items()}

    def _own_random(self) -> contextlib.AbstractContextManager[None]:
        """A block whose draws from torch's default generators come from ``random_stream`` (the
        model's device's too, on a GPU), leaving them as they were."""
        return self.random_stream.active(module_device(self.bonus))

    def _confidence_metrics(self, bonus_mean: float | None) -> dict[str, float]:
        """VASE's ``δ·H(q)`` (``bonus/confidence``) and its share of the surprise it is taken
        from, ``δ·H / (mean U + δ·H)``, where the bonus has such a term; nothing otherwise."""
        term = self.bonus.confidence_term()
        if term is None:
            return {}
        if bonus_mean is None:
            return {"bonus/confidence": math.nan, "bonus/confidence_share": math.nan}
        return {"bonus/confidence": term, "bonus/confidence_share": term / (bonus_mean + term)}

    def _write_bonus(self, batch: TensorDictBase) -> bool:
        """The bonus into ``batch`` in place (permuted across it for ``shuffle_bonus``);
        ``False`` if it was 0 (the model untrained)."""
        with self._own_random(), phase("bonus"):
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

    # -- State
    def journal_pool(self, directory: str | os.PathLike) -> None:
        """Checkpoint the pool by appending to ``directory`` (a ``ReplayJournal``): each
        ``state_dict`` writes there the transitions added since the previous one and holds only
        their count. Call it before the first save or load (the recipe: ``pool/`` beside the
        checkpoint).

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
            >>> _ = exploration.fit(batch)
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
        """The pool: with ``journal_pool`` the journal's count, else its filled part as plain
        tensors sharing the pool's memory (``saveable_prefix``): save it before the pool changes."""
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
        return {"transitions": transitions, "cursor": int(writer["_cursor"]),
                "write_count": int(writer["_write_count"])}

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
                    f"({self.pool_size}).")
            # slot i of the saved storage goes back to slot i; the cursor says where the next
            # write lands (after a wrap-around, not at the end)
            self.pool.extend(transitions)
            cursor = pool["cursor"] if len(transitions) == self.pool_size else len(transitions)
            self.pool.writer.load_state_dict(
                {"_cursor": cursor, "_write_count": pool["write_count"]})
        if self._pool_journal.directory is not None:  # the journal starts again from here
            self._pool_journal.reset()


class ReplayBonus:
    """The bonus on an off-policy learner's samples: a replay buffer's transform writing ``r = r_e +
    η·U`` into every sample under the model as it is then (the stored reward untouched; 0 before the
    model's first update). The bonus's scaling statistics are read, not updated.

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
        >>> _ = exploration.fit(batch)  # the model's first steps, on the buffer
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
                self.exploration._write_bonus(tensordict)  # shuffled there, for a placebo
        finally:
            bonus.train(training)
        return tensordict

    def __repr__(self) -> str:
        shuffled = ", shuffle_bonus=True" if self.exploration.shuffle_bonus else ""
        return f"{type(self).__name__}({type(self.exploration.bonus).__name__}{shuffled})"

