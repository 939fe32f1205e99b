"""``torch.optim.Adam``'s update, applied without ``Optimizer.step``'s per-call bookkeeping."""

from __future__ import annotations

import math

import torch


def supports_adam_steps(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``adam_step`` reproduces ``optimizer.step()``: a plain Adam (one group; no weight
    decay, AMSGrad, maximisation, capturable or differentiable state), fused or not."""
    if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
        return False
    group = optimizer.param_groups[0]
    return (
        group["weight_decay"] == 0
        and not group["amsgrad"]
        and not group["maximize"]
        and not group["capturable"]
        and not group["differentiable"]
        and not isinstance(group["lr"], torch.Tensor))


def adam_state(optimizer: torch.optim.Adam, param: torch.Tensor) -> dict:
    """``optimizer``'s state of ``param``, created as ``torch.optim.Adam`` creates it at its
    first step (a float32 step count, on the parameter's device when fused; zero moments)."""
    state = optimizer.state[param]
    if not state:
        state["step"] = (
            torch.zeros((), dtype=torch.float32, device=param.device)
            if optimizer.param_groups[0]["fused"]
            else torch.tensor(0.0, dtype=torch.float32))
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
    return state


@torch.no_grad()
def adam_step(optimizer: torch.optim.Adam) -> None:
    """One ``torch.optim.Adam`` step on ``.grad`` with the optimizer's own state, bit for bit (its
    fused kernel if built ``fused=True``), without ``Optimizer.step``'s bookkeeping, which costs
    more than a small model's update (500 of them an iteration). Check ``supports_adam_steps``."""
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
