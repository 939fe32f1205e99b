"""``torch.optim.Adam``'s update, applied without ``Optimizer.step``'s per-call bookkeeping."""

from __future__ import annotations

import math

import torch


def supports_adam_steps(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``adam_step`` reproduces ``optimizer.step()``: a plain Adam (one group, no weight
    decay, AMSGrad, maximisation, capturable or differentiable state, float learning rate),
    fused or not."""
    if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
        return False
    group = optimizer.param_groups[0]
    return (
        group["weight_decay"] == 0
        and not group["amsgrad"]
        and not group["maximize"]
        and not group["capturable"]
        and not group["differentiable"]
        and not isinstance(group["lr"], torch.Tensor)
    )


def adam_state(optimizer: torch.optim.Adam, param: torch.Tensor) -> dict:
    """``optimizer``'s state of ``param``, created as ``torch.optim.Adam`` creates it at its
    first step (a float32 step count, on the parameter's device when fused; zero moments)."""
    state = optimizer.state[param]
    if not state:
        state["step"] = (
            torch.zeros((), dtype=torch.float32, device=param.device)
            if optimizer.param_groups[0]["fused"]
            else torch.tensor(0.0, dtype=torch.float32)
        )
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
    return state


@torch.no_grad()
def adam_step(optimizer: torch.optim.Adam) -> None:
    """One step of ``torch.optim.Adam`` on the gradients in ``.grad``, with the optimizer's own
    state, so ``state_dict`` is unchanged: its fused kernel (one call for all parameters) if the
    optimizer was built with ``fused=True``, else its single-tensor update; the same arithmetic
    either way, bit for bit.

    ``Optimizer.step`` spends more on its bookkeeping than on the update for a model of a few
    thousand parameters; the VASE model takes 500 such steps per iteration. Check
    ``supports_adam_steps`` first.
    """
    group = optimizer.param_groups[0]
    beta1, beta2 = group["betas"]
    lr, eps = group["lr"], group["eps"]
    fused = bool(group["fused"])
    params = [param for param in group["params"] if param.grad is not None]
    states = [adam_state(optimizer, param) for param in params]
    if fused:
        steps = [state["step"] for state in states]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            params, [param.grad for param in params], [state["exp_avg"] for state in states],
            [state["exp_avg_sq"] for state in states], [], steps, amsgrad=False, lr=lr,
            beta1=beta1, beta2=beta2, weight_decay=0.0, eps=eps, maximize=False,
        )
        return
    for param, state in zip(params, states, strict=True):
        grad = param.grad
        state["step"] += 1
        step = state["step"].item()
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = math.sqrt(1 - beta2**step)
        denom = (state["exp_avg_sq"].sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(state["exp_avg"], denom, value=-lr / bias_correction1)


class StackedAdam:
    """Adam steps for K members' parameters at once, each member's numbers its own optimiser's.

    ``parameters`` are stacked ``[K, ...]`` copies of the members' tensors for a computation
    over all members: set their ``.grad`` (``[K, ...]``) and call ``step``. The step hands each
    member its slice of the gradient and runs one fused Adam call over the members' own tensors
    with their own optimisers' states (the same state objects), then refreshes the stacks. Adam
    on the stacked tensor itself would not do: its kernel treats an element by its place in the
    tensor (vectorised body or scalar tail), so a member placed after another would round
    differently from its own optimiser, and the difference grows over 500 steps. One member
    without ``stack`` uses its tensors and optimiser directly (any optimiser); stacked optimisers
    must each pass ``supports_adam_steps``.

    Examples:
        >>> import torch
        >>> weights = [torch.nn.Parameter(torch.ones(3)) for _ in range(2)]
        >>> optimizers = [torch.optim.Adam([w], lr=0.1) for w in weights]
        >>> stacked = StackedAdam(optimizers, [[w] for w in weights])
        >>> (stack,) = stacked.parameters
        >>> stack.grad = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
        >>> stacked.step(); stacked.clear_gradients()
        >>> [round(w[0].item(), 4) for w in weights]  # Adam's first step: lr times the sign
        [0.9, 1.1]
        >>> int(optimizers[1].state[weights[1]]["step"])  # the member's own state, stepped
        1
    """

    def __init__(self, optimizers: list[torch.optim.Optimizer],
                 member_parameters: list[list[torch.Tensor]], *, stack: bool | None = None
                 ) -> None:
        self._fast = all(supports_adam_steps(optimizer) for optimizer in optimizers)
        self.stacked = len(optimizers) > 1 if stack is None else stack
        if (len(optimizers) > 1 or self.stacked) and not self._fast:
            raise TypeError("StackedAdam takes plain torch.optim.Adam optimisers (one group, "
                            "no weight decay, AMSGrad or maximisation).")
        self.optimizers, self.member_parameters = optimizers, member_parameters
        if not self.stacked:
            if len(optimizers) > 1:
                raise ValueError("several members' parameters are stacked (stack=True).")
            self.optimizer, self.parameters = optimizers[0], list(member_parameters[0])
            return
        group = optimizers[0].param_groups[0]
        every = [p for params in member_parameters for p in params]
        self.optimizer = torch.optim.Adam(every, lr=group["lr"], betas=group["betas"],
                                          eps=group["eps"], fused=bool(group["fused"]))
        for optimizer, params in zip(optimizers, member_parameters, strict=True):
            for param in params:  # the member's state object itself: stepped in place
                self.optimizer.state[param] = optimizer.state[param]
        self.parameters = [torch.stack([p.detach() for p in same]).requires_grad_()
                           for same in zip(*member_parameters, strict=True)]

    def step(self) -> None:
        if not self.stacked:
            if self._fast:
                adam_step(self.optimizer)
            else:  # one member with an optimiser of its own kind
                self.optimizer.step()
            return
        for i, stack in enumerate(self.parameters):
            for k, params in enumerate(self.member_parameters):
                params[i].grad = stack.grad[k]
        adam_step(self.optimizer)
        with torch.no_grad():
            for i, stack in enumerate(self.parameters):
                torch.stack([params[i] for params in self.member_parameters], out=stack.data)

    def clear_gradients(self) -> None:
        """After the steps: every gradient set for them cleared (the members' parameters and
        states were stepped in place)."""
        for stack in self.parameters:
            stack.grad = None
        if self.stacked:
            for params in self.member_parameters:
                for param in params:
                    param.grad = None
