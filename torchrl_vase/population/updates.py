"""TRPO's policy step and the critic fit for all members of a population at once.

Each member's parameters are stacked ``[K, ...]`` (``StackedModules``), its network called
through ``torch.vmap``, the members' losses summed (member k's parameters reach member k's
loss only, so one backward gives every member its own gradient), and the results written
back into the members' modules. Per member the arithmetic is the single run's: the tests
compare each member with ``TRPOLoss.natural_gradient_step`` and ``fit_critic`` on its own data.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from torch import Tensor, nn
from torch.distributions import kl_divergence
from torch.func import functional_call, stack_module_state
from torchrl.modules import IndependentNormal

from torchrl_vase._adam import StackedAdam, supports_adam_steps
from torchrl_vase.objectives.trpo import (
    TRPOLoss,
    _critics,
    _module_of,
    _plain_squared_error,
    _refit_standardization,
    explained_variance,
    loggable_fit,
)

__all__ = ["StackedModules", "batched_conjugate_gradient", "population_critic_fit",
           "population_trpo_step"]


class StackedModules:
    """K modules of one architecture as one function of stacked parameters: ``gather()``
    gives ``[K, ...]`` copies (leaves that require grad), ``__call__(params, buffers,
    *inputs)`` runs member k's module on ``inputs[k]`` for every k (``torch.vmap`` of
    ``functional_call``), ``write_back(params)`` copies them into the modules."""

    def __init__(self, modules: Sequence[nn.Module]) -> None:
        self.modules = list(modules)
        template = copy.deepcopy(self.modules[0]).to("meta")
        self._call = torch.vmap(lambda params, buffers, *inputs: functional_call(
            template, (params, buffers), inputs))

    def gather(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        return stack_module_state(self.modules)

    def __call__(self, params, buffers, *inputs: Tensor):
        return self._call(params, buffers, *inputs)

    @torch.no_grad()
    def write_back(self, params: dict[str, Tensor]) -> None:
        for k, module in enumerate(self.modules):
            own = dict(module.named_parameters())
            for name, value in params.items():
                own[name].copy_(value[k])


def _flat(tensors: Sequence[Tensor], members: int) -> Tensor:
    return torch.cat([t.reshape(members, -1) for t in tensors], dim=1)


def batched_conjugate_gradient(matvec: Callable[[Tensor], Tensor], b: Tensor, *,
                               iters: int = 10, tol: float = 1e-10) -> tuple[Tensor, Tensor]:
    """``conjugate_gradient`` for K systems at once: ``b`` ``[K, D]``, ``matvec`` maps
    ``[K, D]`` to ``[K, D]`` row by row. A row whose squared residual is below ``tol`` stops
    changing, as the single solver stops there; returns ``(x, ‖b − A x‖)`` per row.

    Examples:
        >>> a = torch.tensor([[[4.0, 1.0], [1.0, 3.0]], [[2.0, 0.0], [0.0, 5.0]]])
        >>> b = torch.tensor([[1.0, 2.0], [2.0, 5.0]])
        >>> x, residual = batched_conjugate_gradient(lambda v: (a @ v[..., None])[..., 0], b)
        >>> torch.allclose((a @ x[..., None])[..., 0], b), bool((residual < 1e-4).all())
        (True, True)
    """
    x, r, p = torch.zeros_like(b), b.clone(), b.clone()
    rr = (r * r).sum(-1)
    for _ in range(iters):
        active = rr > tol
        if not active.any():
            break
        ap = matvec(p)
        alpha = torch.where(active, rr / (p * ap).sum(-1), 0.0).unsqueeze(-1)
        x = x + alpha * p
        r = r - alpha * ap
        new_rr = (r * r).sum(-1)
        p = torch.where(active.unsqueeze(-1), r + (new_rr / rr).unsqueeze(-1) * p, p)
        rr = torch.where(active, new_rr, rr)
    return x, rr.sqrt()


def _check_alike(losses: Sequence[TRPOLoss]) -> None:
    settings = {(loss.max_kl, loss.cg_iters, loss.cg_damping, loss.line_search_backtracks,
                 loss.line_search_shrink, loss.standardize_advantage) for loss in losses}
    if len(settings) > 1:
        raise ValueError("the members' TRPO losses have different settings.")


def population_trpo_step(losses: Sequence[TRPOLoss],
                         batches: Sequence[TensorDictBase]) -> list[dict[str, float]]:
    """``TRPOLoss.natural_gradient_step`` of every member on its batch (advantages computed),
    with one forward and backward for all: stacked gradients, Fisher-vector products of the
    summed KLs (block-diagonal over members), the conjugate gradient per member
    (``batched_conjugate_gradient``), and the backtracking line search evaluating every
    member's step size together and keeping each member's first acceptable one. The actors are
    ``gaussian_policy``'s (an ``IndependentNormal`` from ``loc`` and ``scale``). Returns each
    member's ``trpo/*`` metrics, as ``TRPOUpdate``."""
    _check_alike(losses)
    loss, members = losses[0], len(losses)
    heads = StackedModules([member.actor_network.module[0].module for member in losses])
    params, buffers = heads.gather()
    leaves = list(params.values())
    flat = [batch.reshape(-1) for batch in batches]
    advantage = torch.stack([member._advantage(b) for member, b in zip(losses, flat, strict=True)])
    old_log_prob = torch.stack([member._old_log_prob(b, advantage.shape[1:])
                                for member, b in zip(losses, flat, strict=True)])
    keys = loss.tensor_keys
    data = torch.stack(flat).detach()
    observation, action = data.get("observation"), data.get(keys.action)
    old = IndependentNormal(data.get("loc"), data.get("scale"))

    def policy(parameters) -> IndependentNormal:
        return IndependentNormal(*heads(parameters, buffers, observation))

    def surrogate(parameters) -> Tensor:
        log_prob = policy(parameters).log_prob(action).reshape(advantage.shape)
        return ((log_prob - old_log_prob).exp() * advantage).mean(-1)

    def mean_kl(parameters) -> Tensor:
        return kl_divergence(old, policy(parameters)).mean(-1)

    before = surrogate(params)
    gradient = _flat(torch.autograd.grad(before.sum(), leaves), members)
    before = before.detach()
    kl_gradient = _flat(torch.autograd.grad(mean_kl(params).sum(), leaves, create_graph=True),
                        members)

    def fisher_product(vector: Tensor) -> Tensor:
        product = torch.autograd.grad((kl_gradient * vector).sum(), leaves, retain_graph=True)
        return _flat(product, members) + loss.cg_damping * vector

    direction, _ = batched_conjugate_gradient(fisher_product, gradient, iters=loss.cg_iters)
    curvature = (direction * fisher_product(direction).detach()).sum(-1)
    direction = direction.detach()
    valid = torch.isfinite(curvature) & (curvature > 0)
    full_step = torch.where(valid.unsqueeze(-1), direction * torch.sqrt(
        2 * loss.max_kl / curvature).unsqueeze(-1), 0.0)
    start = _flat([p.detach() for p in leaves], members)
    sizes = [p[0].numel() for p in leaves]

    def unflat(vector: Tensor) -> dict[str, Tensor]:
        return {name: part.reshape(value.shape) for (name, value), part in
                zip(params.items(), vector.split(sizes, dim=1), strict=True)}

    with torch.no_grad():
        accepted, backtracks, fraction, kl_after, surrogate_after = _line_search(
            loss, lambda vector: (mean_kl(unflat(vector)), surrogate(unflat(vector))),
            start, full_step, valid, before)
        end = torch.where(accepted.unsqueeze(-1), start + fraction.unsqueeze(-1) * full_step,
                          start)
        heads.write_back(unflat(end))
    return [{"trpo/kl": float(kl_after[k]), "trpo/surrogate_before": float(before[k]),
             "trpo/surrogate_after": float(surrogate_after[k]),
             "trpo/step_accepted": float(accepted[k]), "trpo/backtracks": float(backtracks[k])}
            for k in range(members)]


def _line_search(loss: TRPOLoss, evaluate: Callable[[Tensor], tuple[Tensor, Tensor]],
                 start: Tensor, full_step: Tensor, valid: Tensor, before: Tensor):
    """TRPO's backtracking line search for every member at once: the step sizes ``1, s, s², …``
    tried for all members still searching, each member keeping its first size whose KL is
    within ``max_kl`` and whose surrogate improved. ``evaluate(parameters) -> (kl, surrogate)``
    per member. Returns per member: accepted, backtracks, the step fraction, KL and surrogate."""
    members = start.shape[0]
    accepted = torch.zeros(members, dtype=torch.bool)
    backtracks = torch.full((members,), loss.line_search_backtracks)
    fraction = torch.zeros(members, dtype=start.dtype)
    kl_after, surrogate_after = torch.zeros_like(before), before.clone()
    for k in range(loss.line_search_backtracks):
        pending = valid & ~accepted
        if not pending.any():
            break
        step_fraction = loss.line_search_shrink**k
        kl, new_surrogate = evaluate(start + step_fraction * full_step)
        new = pending & (kl <= loss.max_kl) & (new_surrogate > before)
        accepted |= new
        backtracks = torch.where(new, k, backtracks)
        fraction = torch.where(new, step_fraction, fraction)
        kl_after = torch.where(new, kl, kl_after)
        surrogate_after = torch.where(new, new_surrogate, surrogate_after)
    return accepted, backtracks, fraction, kl_after, surrogate_after


def batched_critic_fit_applies(fits: Sequence) -> bool:
    """Whether ``population_critic_fit`` applies: one plain-MSE critic module per member
    (not the dual structure's two), plain Adam optimisers."""
    return all(
        len(_critics(fit.loss)) == 1 and _plain_squared_error(fit.loss)
        and _module_of(fit.loss.critic_network) is not None
        and supports_adam_steps(fit.optimizer) for fit in fits)


def population_critic_fit(fits: Sequence, batches: Sequence[TensorDictBase],
                          generators: Sequence[torch.Generator]) -> list[dict[str, float]]:
    """``CriticFit`` of every member on its batch at once: each member's standardisation
    refitted on its data, the shuffles drawn from its generator (``torch.randperm``, as
    ``fit_critic`` draws them), the members' minibatch losses summed for one backward, Adam
    on the stacked parameters (``StackedAdam``). Returns each member's metrics."""
    first = fits[0]
    if len({(f.epochs, f.minibatch_size, f.prefix) for f in fits}) > 1:
        raise ValueError("the members' critic fits have different settings.")
    critics = [_critics(f.loss)[0] for f in fits]
    target_key = critics[0][1]
    data = [batch.reshape(-1) for batch in batches]
    for (critic, key), member in zip(critics, data, strict=True):
        _refit_standardization(critic, member, key)
    modules = StackedModules([_module_of(critic) for critic, _ in critics])
    params, buffers = modules.gather()
    adam = StackedAdam([f.optimizer for f in fits],
                       [list(m.parameters()) for m in modules.modules], stack=True)
    leaves = adam.parameters
    params = dict(zip(params, leaves, strict=True))
    stacked = torch.stack(data)
    inputs = [stacked.get(key) for key in critics[0][0].in_keys]
    target = stacked.get(target_key)
    size = stacked.shape[1]
    last: list[Tensor] = []
    for _ in range(first.epochs):
        last = []
        order = torch.stack([torch.randperm(size, generator=g) for g in generators])
        for index in order.split(first.minibatch_size, dim=1):
            rows = index.unsqueeze(-1)
            prediction = modules(params, buffers, *(x.take_along_dim(rows, 1) for x in inputs))
            member_loss = (prediction - target.take_along_dim(rows, 1)).square().mean((1, 2))
            grads = torch.autograd.grad(member_loss.sum(), leaves)
            for leaf, grad in zip(leaves, grads, strict=True):
                leaf.grad = grad
            adam.step()
            last.append(member_loss.detach())
    adam.clear_gradients()
    with torch.no_grad():
        prediction = modules(params, buffers, *inputs)
    mean_loss = torch.stack(last).mean(0)
    return [loggable_fit({f"{first.prefix}critic_loss": float(mean_loss[k]),
                          f"{first.prefix}explained_variance": float(
                              explained_variance(prediction[k], target[k]))})
            for k in range(len(fits))]
