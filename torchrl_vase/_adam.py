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
    states = []
    for param in params:
        state = optimizer.state[param]
        if not state:  # as torch.optim.Adam initialises it
            state["step"] = (
                torch.zeros((), dtype=torch.float32, device=param.device)
                if fused
                else torch.tensor(0.0, dtype=torch.float32)
            )
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        states.append(state)
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
    """Adam steps for K members' parameters at once: their tensors stacked ``[K, ...]`` and
    their optimisers' states with them, then written back.

    ``parameters`` are what the steps update (set their ``.grad``, call ``step``); after the
    steps ``write_back`` copies them and the optimiser states into the members' own. Adam is
    elementwise and the members took the same number of steps, so member k's numbers are those
    of its own optimiser's steps. One member (K = 1) uses its tensors and optimiser directly,
    with nothing stacked (and any optimiser) unless ``stack=True`` (a population of one);
    stacked optimisers must each pass ``supports_adam_steps``.

    Examples:
        >>> import torch
        >>> weights = [torch.nn.Parameter(torch.ones(3)) for _ in range(2)]
        >>> optimizers = [torch.optim.Adam([w], lr=0.1) for w in weights]
        >>> stacked = StackedAdam(optimizers, [[w] for w in weights])
        >>> (stack,) = stacked.parameters
        >>> stack.grad = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
        >>> stacked.step(); stacked.write_back()
        >>> [round(w[0].item(), 4) for w in weights]  # Adam's first step: lr times the sign
        [0.9, 1.1]
    """

    def __init__(self, optimizers: list[torch.optim.Optimizer],
                 member_parameters: list[list[torch.Tensor]], *, stack: bool | None = None
                 ) -> None:
        self._fast = all(supports_adam_steps(optimizer) for optimizer in optimizers)
        if (len(optimizers) > 1 or stack) and not self._fast:
            raise TypeError("StackedAdam takes plain torch.optim.Adam optimisers (one group, "
                            "no weight decay, AMSGrad or maximisation).")
        self.optimizers, self.member_parameters = optimizers, member_parameters
        self.stacked = len(optimizers) > 1 if stack is None else stack
        if not self.stacked:
            if len(optimizers) > 1:
                raise ValueError("several members' parameters are stacked (stack=True).")
            self.optimizer, self.parameters = optimizers[0], list(member_parameters[0])
            return
        self.parameters = [torch.stack([p.detach() for p in same]).requires_grad_()
                           for same in zip(*member_parameters, strict=True)]
        group = optimizers[0].param_groups[0]
        self.optimizer = torch.optim.Adam(self.parameters, lr=group["lr"], betas=group["betas"],
                                          eps=group["eps"], fused=bool(group["fused"]))
        for i, stack in enumerate(self.parameters):
            states = [opt.state.get(params[i]) for opt, params in
                      zip(optimizers, member_parameters, strict=True)]
            if all(states):
                self.optimizer.state[stack] = {
                    "step": states[0]["step"].clone(),
                    "exp_avg": torch.stack([s["exp_avg"] for s in states]),
                    "exp_avg_sq": torch.stack([s["exp_avg_sq"] for s in states]),
                }
            elif any(states):
                raise ValueError("the members' optimisers took different numbers of steps.")

    def step(self) -> None:
        if self._fast:
            adam_step(self.optimizer)
        else:  # one member with an optimiser of its own kind
            self.optimizer.step()

    @torch.no_grad()
    def write_back(self) -> None:
        """The stacked parameters and states into the members' (gradients cleared)."""
        for stack in self.parameters:
            stack.grad = None
        if not self.stacked:
            return
        for i, stack in enumerate(self.parameters):
            state = self.optimizer.state[stack]
            for k, (opt, params) in enumerate(zip(self.optimizers, self.member_parameters,
                                                  strict=True)):
                params[i].copy_(stack[k])
                opt.state[params[i]] = {"step": state["step"].clone(),
                                        "exp_avg": state["exp_avg"][k].clone(),
                                        "exp_avg_sq": state["exp_avg_sq"][k].clone()}
