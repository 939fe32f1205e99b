"""Advantage structures for a reward with an exploration bonus: which critic learns what.

With one critic on ``r_e + η·U`` (``"combined"``) the critic's error can dwarf the bonus's effect
on the advantage; the VASE authors (rllab's TRPO) fit the baseline to the extrinsic return only
(``"extrinsic"``). ``ExplorationGAE`` computes both as a torchrl value estimator:
``loss.make_value_estimator(ExplorationGAE(...))``. (RND's two value heads, ``"dual"``, were
retired after the advantage-structure study: docs/results_history.md.)"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import Tensor
from torchrl.objectives.value import GAE, ValueEstimatorBase
from torchrl.objectives.value.functional import (
    generalized_advantage_estimate,
    vec_generalized_advantage_estimate,
)

from torchrl_vase._validation import check_non_negative

STRUCTURES = ("extrinsic", "combined")
VALUE_TARGETS = ("monte_carlo", "td_lambda")
# scratch entries written and removed inside one forward call
_EXTRINSIC_ADVANTAGE = "_extrinsic_advantage"
_COMBINED_REWARD = "_combined_reward"
_PATH_END = "_path_end"


def discounted_sum(values: Tensor, done: Tensor, factor: float, *, time_dim: int = -2) -> Tensor:
    """``Σ_k factor^k · x_{t+k}`` within each trajectory (GAE with ``V ≡ 0``), one call for all.

    ``values`` and ``done`` are ``[*B, T, 1]`` (time along ``time_dim``); the sum stops after a
    ``done`` step and at the end of the time dim.

    Examples:
        >>> import torch
        >>> x = torch.ones(1, 4, 1)
        >>> done = torch.tensor([False, True, False, False]).view(1, 4, 1)
        >>> discounted_sum(x, done, 0.5).flatten().tolist()
        [1.5, 1.0, 1.5, 1.0]
    """
    zeros = torch.zeros_like(values)
    advantage, _ = vec_generalized_advantage_estimate(
        factor, 1.0, zeros, zeros, values, done=done, terminated=done, time_dim=time_dim)
    return advantage


def generalized_advantage(gamma: Tensor, lmbda: Tensor, value: Tensor, next_value: Tensor,
                          reward: Tensor, done: Tensor, terminated: Tensor, *, time_dim: int = -2
                          ) -> tuple[Tensor, Tensor]:
    """``(advantage, value_target)``: torchrl's ``generalized_advantage_estimate`` bit for bit
    (its ops in its order, γ and λ as its ``GAE`` holds them), the recursion over time one
    compiled call on a CPU instead of a Python step a time step; torchrl's own elsewhere.

    Examples:
        >>> import torch
        >>> gamma, lmbda = torch.tensor(0.99), torch.tensor(0.95)
        >>> value, next_value, reward = torch.randn(3, 2, 50, 1).unbind(0)
        >>> done = torch.rand(2, 50, 1) < 0.1
        >>> ours = generalized_advantage(gamma, lmbda, value, next_value, reward, done, done)
        >>> torchs = generalized_advantage_estimate(gamma, lmbda, value, next_value, reward,
        ...                                         done, done)
        >>> all(torch.equal(a, b) for a, b in zip(ours, torchs))
        True
    """
    if value.device.type != "cpu" or (torch.is_grad_enabled() and value.requires_grad):
        return generalized_advantage_estimate(gamma, lmbda, value, next_value, reward, done,
                                              terminated, time_dim=time_dim)
    from torchrl_vase import kernels  # numba: on first use

    value, next_value, reward, done, terminated = (
        t.transpose(time_dim, -2) for t in (value, next_value, reward, done, terminated))
    delta = reward + (gamma * (~terminated).int() * next_value) - value
    discount = lmbda * gamma * (~done).int()
    steps, features = delta.shape[-2:]
    delta, discount = (t.reshape(-1, steps, features).contiguous() for t in (delta, discount))
    advantage = torch.empty_like(delta)
    kernels.gae_recursion(delta.numpy(), discount.numpy(), advantage.numpy())
    advantage = advantage.reshape(value.shape)
    return advantage.transpose(time_dim, -2), (advantage + value).transpose(time_dim, -2)


class ExplorationGAE(ValueEstimatorBase):
    """GAE for a reward with an exploration bonus, under one of two advantage structures.

    With ``r = r_e + η·U`` in ``("next", "reward")``, r_e in ``("next", "extrinsic_reward")`` and U
    in ``("next", "intrinsic_reward")`` (as the bonus transforms write them):

    * ``"extrinsic"`` (the VASE authors'): the critic V_e learns the extrinsic return only; the
      advantage is GAE of ``r_e + η·U`` against it, ``GAE(r_e; V_e) + Σ_k (γλ)^k η·U_{t+k}``.
    * ``"combined"``: one critic on ``r_e + η·U`` (plain GAE on the reward).

    Both structures also writes ``bonus_advantage``, the discounted sum (γλ) of the bonus term as it
    enters the advantage (``advantage_alignment``'s reference). Centring and scaling the advantage
    are the loss's.

    Args:
        structure: ``"extrinsic"`` or ``"combined"``.

    Keyword Args:
        gamma: γ of the return.
        lmbda: GAE's λ.
        value_network: the critic (the loss's, writing ``state_value``).
        value_target: the critic's target: ``"monte_carlo"`` (rllab's discounted return,
            bootstrapped where a time limit or the batch cuts a path unless
            ``terminal_path_ends``) or ``"td_lambda"`` (``advantage + V``). Default: the former for
            ``"extrinsic"`` (the authors'), the latter for ``"combined"`` (torchrl's).
        center_bonus: subtract the batch mean of ``r − r_e`` first: a constant in U (VASE's
            ``−δ·H(q)``) otherwise reaches the policy only through path ends. The authors' code
            does not centre.
        terminal_path_ends: every path's end is terminal, as rllab's; ``False``: only
            ``terminated`` ends the return.
        **kwargs: passed to torchrl's ``GAE`` (e.g. ``vectorized``, ``device``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import ValueOperator
        >>> critic = ValueOperator(torch.nn.Linear(2, 1), in_keys=["observation"])
        >>> gae = ExplorationGAE("extrinsic", gamma=0.99, lmbda=0.95, value_network=critic)
        >>> batch = TensorDict({
        ...     "observation": torch.randn(4, 10, 2),
        ...     "next": {"observation": torch.randn(4, 10, 2),
        ...              "reward": torch.full((4, 10, 1), 1e-3),
        ...              "extrinsic_reward": torch.zeros(4, 10, 1),
        ...              "intrinsic_reward": torch.full((4, 10, 1), 10.0),
        ...              "done": torch.zeros(4, 10, 1, dtype=torch.bool),
        ...              "terminated": torch.zeros(4, 10, 1, dtype=torch.bool)},
        ... }, [4, 10])
        >>> out = gae(batch)
        >>> sorted(k for k in ("advantage", "value_target", "bonus_advantage") if k in out.keys())
        ['advantage', 'bonus_advantage', 'value_target']
    """

    @dataclass
    class _AcceptedKeys(ValueEstimatorBase._AcceptedKeys):
        """Configurable tensordict keys: torchrl GAE's, and ``extrinsic_reward``,
        ``intrinsic_reward`` (under ``"next"``) and ``bonus_advantage``."""

        extrinsic_reward: NestedKey = "extrinsic_reward"
        intrinsic_reward: NestedKey = "intrinsic_reward"
        bonus_advantage: NestedKey = "bonus_advantage"

    # torchrl's set_keys looks a key up in the class's own __dict__, not its bases': the keys
    # inherited are set on it too (torchrl's defaults), or set_keys(advantage=...) is refused
    for _key in dataclasses.fields(ValueEstimatorBase._AcceptedKeys):
        setattr(_AcceptedKeys, _key.name, _key.default)
    del _key

    default_keys = _AcceptedKeys

    def __init__(self, structure: str, *, gamma: float, lmbda: float,
                 value_network: TensorDictModule, value_target: str | None = None,
                 center_bonus: bool = True, terminal_path_ends: bool = False,
                 **kwargs: Any) -> None:
        if structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}.")
        if value_target is None:
            value_target = "monte_carlo" if structure == "extrinsic" else "td_lambda"
        if value_target not in VALUE_TARGETS:
            raise ValueError(f"value_target must be one of {VALUE_TARGETS}, got {value_target!r}.")
        if value_network is None:
            raise ValueError("value_network (the critic) is required.")
        for name, value in (("gamma", gamma), ("lmbda", lmbda)):
            value = check_non_negative(name, value)
            if value > 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}.")
        super().__init__(value_network=value_network)
        self.structure = structure
        self.gamma = float(gamma)
        self.lmbda = float(lmbda)
        self.value_target = value_target
        self.center_bonus = bool(center_bonus)
        self.terminal_path_ends = bool(terminal_path_ends)
        self.critic_gae = GAE(gamma=gamma, lmbda=lmbda, value_network=value_network, **kwargs)
        # torchrl's loop over time gives the advantage (its vectorised form rounds otherwise),
        # compiled on a CPU (``generalized_advantage``) unless torchrl's own form was asked for
        self._vectorized = bool(kwargs.get("vectorized"))
        self._compiled = not (self._vectorized or kwargs.get("differentiable"))
        self.set_keys()

    def set_keys(self, **kwargs) -> None:
        super().set_keys(**kwargs)
        keys = self._tensor_keys
        done = _PATH_END if self.terminal_path_ends else keys.done
        terminated = _PATH_END if self.terminal_path_ends else keys.terminated
        combined = self.structure == "combined"
        self.critic_gae.set_keys(
            reward=_COMBINED_REWARD if combined else keys.extrinsic_reward, value=keys.value,
            value_target=keys.value_target,
            advantage=keys.advantage if combined else _EXTRINSIC_ADVANTAGE,
            terminated=terminated, done=done, sample_log_prob=keys.sample_log_prob)

    @property
    def out_keys(self) -> list[NestedKey]:
        keys = self.tensor_keys
        return [keys.advantage, keys.value_target, keys.bonus_advantage]

    def _next(self, tensordict: TensorDictBase, key: NestedKey, what: str) -> Tensor:
        next_td = tensordict.get("next", None)
        if next_td is None:
            raise KeyError(
                "ExplorationGAE needs transitions with a 'next' entry (as collectors write them); "
                f"got keys {list(tensordict.keys())}.")
        value = next_td.get(key, None)
        if value is None:
            keys = self.tensor_keys
            hint = (
                " A bonus transform (SurpriseRewardTransform, RNDRewardTransform) writes it."
                if key in (keys.extrinsic_reward, keys.intrinsic_reward)
                else "")
            raise KeyError(
                f"the {self.structure!r} advantage needs {what} at ('next', {key!r}).{hint} Keys "
                f"present under 'next': {list(next_td.keys(True, True))}.")
        return value

    def forward(self, tensordict: TensorDictBase, *, params: TensorDictBase | None = None,
                target_params: TensorDictBase | None = None,
                time_dim: int | None = None) -> TensorDictBase:
        """Write ``advantage``, the value targets and ``bonus_advantage`` into ``tensordict`` ``[*B,
        T]`` (time along ``time_dim``, default the dim named ``"time"``, else the last)."""
        if tensordict.batch_dims < 1:
            raise RuntimeError("ExplorationGAE needs a batch with a time dimension, [*B, T].")
        keys = self.tensor_keys
        time_dim = self._time_dim(tensordict, time_dim)
        done = self._next(tensordict, keys.done, "the done flag")
        if not self.terminal_path_ends:
            return self._estimate(tensordict, done, time_dim, params, target_params)
        # every path's end is terminal: episode ends and the batch's last step alike
        done = done.clone()
        done.select(time_dim, -1).fill_(True)
        next_td = tensordict.get("next")
        next_td.set(_PATH_END, done)
        try:
            return self._estimate(tensordict, done, time_dim, params, target_params)
        finally:
            next_td.del_(_PATH_END)

    def _estimate(self, tensordict, done, time_dim, params, target_params) -> TensorDictBase:
        keys = self.tensor_keys
        reward = self._next(tensordict, keys.reward, "the reward")
        critic_kwargs = {"params": params, "target_params": target_params, "time_dim": time_dim}
        extrinsic = tensordict.get(("next", keys.extrinsic_reward), None)
        if extrinsic is None:
            if self.structure == "extrinsic":
                self._next(tensordict, keys.extrinsic_reward, "the extrinsic reward")
            extrinsic = reward  # combined GAE on a reward without a bonus
        bonus_term = reward - extrinsic  # η·U
        if self.center_bonus:
            bonus_term = bonus_term - bonus_term.mean()
        bonus = discounted_sum(bonus_term, done, self.gamma * self.lmbda, time_dim=time_dim)
        if self.structure == "combined":
            next_td = tensordict.get("next")
            next_td.set(_COMBINED_REWARD, extrinsic + bonus_term)
            try:
                self._critic_advantage(tensordict, critic_kwargs)
                self._return_target(tensordict, _COMBINED_REWARD, done, time_dim)
            finally:
                next_td.del_(_COMBINED_REWARD)
        else:
            self._critic_advantage(tensordict, critic_kwargs)
            self._return_target(tensordict, keys.extrinsic_reward, done, time_dim)
            tensordict.set(keys.advantage, tensordict.pop(_EXTRINSIC_ADVANTAGE) + bonus)
        tensordict.set(keys.bonus_advantage, bonus)
        return tensordict

    def _critic_advantage(self, tensordict: TensorDictBase, critic_kwargs: dict) -> None:
        """torchrl's ``GAE`` with the critic: its values, and the advantage and value target of
        its loop over time, that loop compiled on a CPU (bit for bit, ``generalized_advantage``)."""
        gae = self.critic_gae
        next_td = tensordict.get("next")
        compiled = self._compiled and next_td.get(gae.tensor_keys.reward).device.type == "cpu"
        # its fast form when its advantage is replaced below, or when asked for
        gae.vectorized = compiled or self._vectorized
        gae(tensordict, **critic_kwargs)
        if not compiled:
            return
        keys = gae.tensor_keys
        done = next_td.get(keys.done)
        advantage, target = generalized_advantage(
            gae.gamma, gae.lmbda, tensordict.get(keys.value), next_td.get(keys.value),
            next_td.get(keys.reward), done, next_td.get(keys.terminated, done),
            time_dim=critic_kwargs["time_dim"])
        tensordict.set(keys.advantage, advantage)
        tensordict.set(keys.value_target, target)

    def _return_target(self, tensordict: TensorDictBase, reward_key: NestedKey, done: Tensor,
                       time_dim: int) -> None:
        """``value_target="monte_carlo"``: the discounted return, cut where a path ends for good,
        bootstrapped where it is only interrupted (a time limit, the batch's end)."""
        if self.value_target != "monte_carlo":
            return
        keys = self.tensor_keys
        terminated = (done if self.terminal_path_ends
                      else tensordict.get(("next", keys.terminated), done))
        _, target = vec_generalized_advantage_estimate(
            self.gamma, 1.0, tensordict.get(keys.value), tensordict.get(("next", keys.value)),
            tensordict.get(("next", reward_key)), done=done, terminated=terminated,
            time_dim=time_dim)
        tensordict.set(keys.value_target, target)

    @staticmethod
    def _time_dim(tensordict: TensorDictBase, time_dim: int | None) -> int:
        """The time dim as a non-negative index (valid for the batch and its [*B, T, 1] leaves)."""
        if time_dim is None:
            names = tensordict.names if tensordict._has_names() else None
            if names is not None and "time" in names:
                return names.index("time")
            return tensordict.ndim - 1
        if not -tensordict.ndim <= time_dim < tensordict.ndim:
            raise ValueError(f"time_dim {time_dim} is out of range for batch {tensordict.shape}.")
        return time_dim % tensordict.ndim

    def value_estimate(self, tensordict: TensorDictBase, **kwargs) -> Tensor:
        """The critic's regression target (``value_target``) for this batch."""
        return self.forward(tensordict.clone(False)).get(self.tensor_keys.value_target)
