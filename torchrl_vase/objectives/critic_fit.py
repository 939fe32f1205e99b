"""The critic fit that TRPO and PPO share (rllab's baselines' regression): the critic regressed
on the batch's value targets after each policy update, its explained variance, and what of it is
worth logging."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import Tensor

from torchrl_vase._adam import adam_step, supports_adam_steps
from torchrl_vase.modules.networks import StandardizedRegressor
from torchrl_vase.objectives.trpo import TRPOLoss

__all__ = ["CriticFit", "explained_variance", "fit_critic", "loggable_fit"]


def _refit_standardization(critic: TensorDictModule, data: TensorDictBase, target_key) -> None:
    module = getattr(critic, "module", None)
    if isinstance(module, StandardizedRegressor):
        inputs = torch.cat([data.get(key) for key in critic.in_keys], dim=-1)
        module.fit_statistics(inputs, data.get(target_key))


def fit_critic(loss: TRPOLoss, tensordict: TensorDictBase, optimizer: torch.optim.Optimizer, *,
               epochs: int = 5, minibatch_size: int = 256) -> TensorDict:
    """Regress the critic on the batch's value targets: ``epochs`` passes of shuffled minibatches.

    The targets must be in the batch (``loss.value_estimator(batch)``); a
    ``StandardizedRegressor`` critic first takes this batch's statistics. Returns the last epoch's
    mean loss and the explained variance after fitting.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import IndependentNormal, ProbabilisticActor, ValueOperator
        >>> from tensordict.nn import AddStateIndependentNormalScale
        >>> head = torch.nn.Sequential(torch.nn.Linear(3, 1), AddStateIndependentNormalScale(1))
        >>> actor = ProbabilisticActor(
        ...     TensorDictModule(head, ["observation"], ["loc", "scale"]),
        ...     in_keys=["loc", "scale"], distribution_class=IndependentNormal)
        >>> critic = ValueOperator(torch.nn.Linear(3, 1), in_keys=["observation"])
        >>> loss = TRPOLoss(actor, critic)
        >>> batch = TensorDict({"observation": torch.randn(64, 3),
        ...                     "value_target": torch.randn(64, 1)}, [64])
        >>> optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
        >>> sorted(fit_critic(loss, batch, optimizer, epochs=2, minibatch_size=16).keys())
        ['explained_variance', 'loss_critic']
    """
    critic, target_key = loss.critic_network, loss.tensor_keys.value_target
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if any(id(p) not in optimized for p in critic.parameters() if p.requires_grad):
        raise ValueError(f"the optimizer does not hold every parameter of the critic writing "
                         f"{critic.out_keys}; build it over the critic's parameters.")
    data = tensordict.reshape(-1)
    _refit_standardization(critic, data, target_key)
    plain = _plain_squared_error(loss) and _module_of(critic)
    if not plain and loss.critic_coeff is None:
        raise ValueError("a loss without a critic term (critic_coeff 0) is fitted by the plain "
                         "squared error of a one-module critic (ValueOperator); give it "
                         "loss_critic_type='l2' and such a critic.")
    objective = (_tensor_objective(critic, target_key, data) if plain
                 else _tensordict_objective(loss, data))
    last = _minibatch_epochs(objective, data.shape[0], optimizer, epochs, minibatch_size,
                             plain and supports_adam_steps(optimizer))
    with torch.no_grad():
        prediction = critic(data.select(*critic.in_keys)).get(critic.out_keys[0])
    return TensorDict({"loss_critic": torch.stack(last).mean(),
                       "explained_variance": explained_variance(prediction, data.get(target_key))},
                      batch_size=[])


def _plain_squared_error(loss: TRPOLoss) -> bool:
    """Whether ``loss.loss_critic`` is the plain mean squared error of the critic's output (a
    loss without a critic term, built with ``critic_coeff=0``, leaves the critic to this fit)."""
    return (loss.loss_critic_type == "l2" and not loss.clip_value and not loss.functional
            and (loss.critic_coeff is None or float(loss.critic_coeff) == 1.0))


def _module_of(critic) -> torch.nn.Module | None:
    """The plain module of a one-module critic (a ``ValueOperator``), else ``None``."""
    module = getattr(critic, "module", None)
    return module if isinstance(module, torch.nn.Module) and len(critic.out_keys) == 1 else None


def _tensordict_objective(loss, data):
    """A minibatch's critic loss through ``loss.loss_critic`` (any critic loss)."""
    return lambda index: loss.loss_critic(data[index])[0].mean()


def _tensor_objective(critic, target_key, data):
    """The same loss as ``loss.loss_critic`` (l2, coefficient 1) on plain tensors: the inputs
    and target gathered once, the critic's module called directly (a fraction of the cost)."""
    module, target = _module_of(critic), data.get(target_key)
    inputs = [data.get(key) for key in critic.in_keys]
    return lambda index: (module(*(x[index] for x in inputs)) - target[index]).square().mean()


def _minibatch_epochs(objective, rows: int, optimizer, epochs: int, minibatch_size: int,
                      fast_adam: bool) -> list[Tensor]:
    """``epochs`` passes over ``rows`` rows in shuffled minibatches, an optimiser step on
    ``objective(index)`` each (``fast_adam``: ``adam_step``); the last epoch's losses."""
    last = []
    for _ in range(epochs):
        last = []
        for index in torch.randperm(rows).split(minibatch_size):
            loss_value = objective(index)
            optimizer.zero_grad()
            loss_value.backward()
            if fast_adam:
                adam_step(optimizer)
            else:
                optimizer.step()
            last.append(loss_value.detach())
    return last


def loggable_fit(metrics: dict[str, float]) -> dict[str, float]:
    """A critic fit's metrics less a critic's with nothing to fit (``explained_variance`` NaN: every
    target 0), whose loss is float noise.

    Examples:
        >>> loggable_fit({"trpo/critic_loss": 1e-11, "trpo/explained_variance": float("nan"),
        ...               "trpo/kl": 0.01})
        {'trpo/kl': 0.01}
    """
    dropped = set()
    for key, value in metrics.items():
        if key.endswith("explained_variance") and math.isnan(value):
            prefix = key.removesuffix("explained_variance")
            dropped |= {key, f"{prefix}critic_loss", f"{prefix}loss_critic"}
    return {key: value for key, value in metrics.items() if key not in dropped}


def explained_variance(prediction: Tensor, target: Tensor, relative_floor: float = 1e-4,
                       absolute_floor: float = 1e-12) -> Tensor:
    """``1 − Var(target − prediction) / max(Var(target), relative_floor · mean(target²))``.

    The floor (targets varying by less than 1 % of their root mean square count as varying that
    much) keeps nearly alike targets from dividing by float noise; NaN when the targets do not vary
    beyond ``absolute_floor`` (plain TRPO before any reward).

    Examples:
        >>> import torch
        >>> explained_variance(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 4.0]))
        tensor(0.8571)
        >>> nearly_alike = torch.tensor([1.0, 1.0 + 1e-6, 1.0 - 1e-6])
        >>> prediction = torch.tensor([1.0, 1.01, 0.99])
        >>> explained_variance(prediction, nearly_alike)  # without the floor: -1.0e8
        tensor(0.3335)
        >>> explained_variance(prediction, torch.tensor([1e-9, -2e-9, 0.0]))  # no returns yet
        tensor(nan)
    """
    floor = relative_floor * target.square().mean()
    variance = torch.maximum(target.var(unbiased=False), floor)
    if variance <= absolute_floor:
        return torch.tensor(float("nan"))
    return 1 - (target - prediction).var(unbiased=False) / variance


class CriticFit:
    """``fit_critic`` as a step's part: ``<prefix>critic_loss`` and ``<prefix>explained_variance``
    (``loggable_fit``'s); its ``state_dict`` is the optimiser's."""

    def __init__(self, loss, optimizer: torch.optim.Optimizer, *, epochs: int = 5,
                 minibatch_size: int = 500, prefix: str = "trpo/") -> None:
        self.loss, self.optimizer = loss, optimizer
        self.epochs, self.minibatch_size, self.prefix = epochs, minibatch_size, prefix

    def __call__(self, batch: TensorDictBase) -> dict[str, float]:
        fit = fit_critic(self.loss, batch, self.optimizer, epochs=self.epochs,
                         minibatch_size=self.minibatch_size)
        return loggable_fit({self.prefix + ("critic_loss" if key == "loss_critic" else key):
                             float(value) for key, value in fit.items()})

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: Mapping) -> None:
        self.optimizer.load_state_dict(state)
