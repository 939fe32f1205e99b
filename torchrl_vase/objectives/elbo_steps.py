"""The model's ELBO steps of an iteration, compiled or eager, for one model or a population's.

``Exploration`` trains the bonus's model with ``updates_per_iteration`` Adam steps on minibatches
from its pool (the authors: 500 of 10) and a population trains its members' models together.
``CompiledELBOSteps`` runs all of them in one compiled call (``elbo_kernel``); the eager loop of
``VariationalELBOLoss.gradient_terms_of`` steps stays the reference and the fallback.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import torch
from torch import Tensor, nn

from torchrl_vase._adam import StackedAdam, adam_state, supports_adam_steps
from torchrl_vase.objectives.elbo import VariationalELBOLoss

__all__ = ["BACKENDS", "CompiledELBOSteps", "compiled_steps_unavailable", "eager_elbo_steps",
           "run_elbo_steps", "steps_per_draw"]

#: How the ELBO's steps run: ``"auto"`` the compiled kernel where it applies (else eager),
#: ``"numba"`` the kernel or an error, ``"eager"`` one torch call per step (the reference),
#: ``"inductor"`` each step's gradients through ``torch.compile``.
BACKENDS = ("auto", "numba", "eager", "inductor")
# floats of noise drawn at once per model: local sampling draws 500 steps' in one call; weight
# sampling (N × |Θ| a step, 144 MB an iteration for the locomotion model) in blocks
_NOISE_BLOCK_FLOATS = 2**22


def steps_per_draw(loss: VariationalELBOLoss, rows: int, steps: int) -> int:
    """How many steps' noise the ELBO's steps draw at once (``VariationalELBOLoss.step_noise``
    with ``steps``): all of an iteration's for local sampling, blocks of 16 MB (float32) for
    weight sampling. Both paths draw alike, so a run consumes its random stream the same way
    whichever runs its steps."""
    per_step = math.prod(loss.step_noise_shape(rows))
    return max(1, min(steps, _NOISE_BLOCK_FLOATS // per_step))


def compiled_steps_unavailable(loss: VariationalELBOLoss,
                               optimizer: torch.optim.Optimizer) -> str | None:
    """Why ``CompiledELBOSteps`` cannot train ``loss``'s model with ``optimizer`` (``None``:
    it can): the kernel runs the analytic KL with ReLU or tanh layers, a float32 or float64
    model on the CPU, and a plain ``torch.optim.Adam`` (one group, no weight decay, AMSGrad,
    maximisation, capturable or differentiable state)."""
    network = loss.model.network
    if not loss.has_analytic_gradients():
        return "it needs kl_estimator='analytic' and ReLU or tanh activations"
    kinds = {type(a) for a in network.activations}
    if len(kinds) > 1:
        return "its layers mix activations"
    if network.mu.device.type != "cpu":
        return f"it runs on the CPU (the model is on {network.mu.device})"
    if network.mu.dtype not in (torch.float32, torch.float64):
        return f"it runs float32 and float64 models (this one is {network.mu.dtype})"
    if not supports_adam_steps(optimizer):
        return ("it implements plain torch.optim.Adam (one parameter group, no weight decay, "
                "AMSGrad or maximisation)")
    return None


class CompiledELBOSteps:
    """All of an iteration's ELBO steps of K models of one architecture and settings in one
    compiled call, each model's numbers its own (the same code runs member after member).

    ``__call__(networks, optimizers, x, y, noise)`` takes the models' ``BayesianMLP``s and
    their Adam optimisers, the minibatches ``x`` ``[K, steps, B, in]`` and ``y``
    ``[K, steps, B, out]`` (prepared by ``VariationalELBOLoss.model_inputs``) and ``noise(n)``,
    the next ``n`` steps' standard normal draws ``[K, n, *step_noise(B).shape]`` from each
    model's stream (asked for ``steps_per_draw`` steps at a time). It updates μ, ρ and the
    optimisers' states in place (``state_dict`` keeps its layout, so a checkpoint written after
    these steps resumes on either path) and returns each step's ``(loss_nll, KL, entropy)``
    ``[K, steps, 3]``, taken before its update, as the eager ``gradient_terms_of`` gives them.

    The eager and compiled steps agree to float rounding (tested: one step to float32 rounding,
    500 steps within 1e-4); they are not bit-equal, so a run's numbers depend on which ran.

    Examples:
        >>> import torch
        >>> from torchrl_vase import DynamicsModel
        >>> loss = VariationalELBOLoss(DynamicsModel.build(3, 1, sampling="local_shared",
        ...                                                standardize=False), kl_weight=0.2)
        >>> network = loss.model.network
        >>> optimizer = torch.optim.Adam(network.parameters(), lr=1e-3)
        >>> x, y = torch.randn(1, 50, 10, 4), torch.randn(1, 50, 10, 3)
        >>> noise = lambda n: loss.step_noise(10, steps=n)[None]
        >>> terms = CompiledELBOSteps(loss)([network], [optimizer], x, y, noise)
        >>> terms.shape, int(optimizer.state[network.mu]["step"])
        (torch.Size([1, 50, 3]), 50)
    """

    def __init__(self, loss: VariationalELBOLoss) -> None:
        elbo_kernel = _kernel()
        network = loss.model.network
        self.loss = loss
        self.kernel = (elbo_kernel.local_steps if network.local_reparameterization
                       else elbo_kernel.weight_steps)
        self.sizes = np.array(network.layer_sizes, dtype=np.int64).reshape(-1, 2)
        self.relu = all(isinstance(a, nn.ReLU) for a in network.activations)

    @torch.no_grad()
    def __call__(self, networks: Sequence[nn.Module], optimizers: Sequence[torch.optim.Adam],
                 x: Tensor, y: Tensor, noise: Callable[[int], Tensor]) -> Tensor:
        members, steps, rows = x.shape[:3]
        params = [(network.mu, network.rho) for network in networks]
        states = [[adam_state(optimizer, p) for p in pair]
                  for optimizer, pair in zip(optimizers, params, strict=True)]
        step0 = np.array([int(pair[0]["step"]) for pair in states], dtype=np.int64)
        arrays = [np.stack([tensor.detach().numpy() for tensor in column]) for column in (
            [mu for mu, _ in params], [rho for _, rho in params],
            [s[0]["exp_avg"] for s in states], [s[0]["exp_avg_sq"] for s in states],
            [s[1]["exp_avg"] for s in states], [s[1]["exp_avg_sq"] for s in states])]
        group = optimizers[0].param_groups[0]
        network, model = networks[0], self.loss.model
        consts = _kernel().make_consts(
            arrays[0].dtype, kl_weight=self.loss.kl_weight, prior_std=float(network.prior_std),
            sigma_c=float(model.sigma_c),
            per_row=1.0 if self.loss.reduction == "sum" else 1.0 / rows,
            lr=float(group["lr"]), beta1=group["betas"][0], beta2=group["betas"][1],
            eps=group["eps"], out_features=network.out_features)
        x_all, y_all = x.detach().numpy(), y.detach().numpy()
        terms = np.empty((members, steps, 3), dtype=arrays[0].dtype)
        block = steps_per_draw(self.loss, rows, steps)
        # the products are small: BLAS threads would only contend with the caller's
        with _blas_threads().limit(limits=torch.get_num_threads(), user_api="blas"):
            for start in range(0, steps, block):
                stop = min(steps, start + block)
                draws = noise(stop - start).numpy()
                part = np.empty((members, stop - start, 3), dtype=terms.dtype)
                self.kernel(*arrays, step0 + start, np.ascontiguousarray(x_all[:, start:stop]),
                            np.ascontiguousarray(y_all[:, start:stop]), draws, part, self.sizes,
                            self.relu, consts)
                terms[:, start:stop] = part
        for k, ((mu, rho), (mu_state, rho_state)) in enumerate(zip(params, states, strict=True)):
            for tensor, array in ((mu, arrays[0]), (rho, arrays[1]),
                                  (mu_state["exp_avg"], arrays[2]),
                                  (mu_state["exp_avg_sq"], arrays[3]),
                                  (rho_state["exp_avg"], arrays[4]),
                                  (rho_state["exp_avg_sq"], arrays[5])):
                tensor.detach().copy_(torch.from_numpy(array[k]))
            mu_state["step"] += steps
            rho_state["step"] += steps
        return torch.from_numpy(terms)


@torch.no_grad()
def eager_elbo_steps(loss: VariationalELBOLoss, networks: Sequence[nn.Module],
                     optimizers: Sequence[torch.optim.Optimizer], x: Tensor, y: Tensor,
                     noise: Callable[[int], Tensor], *, stack: bool = True,
                     compile: bool = False) -> Tensor:
    """``CompiledELBOSteps`` one torch call at a time: the reference, and the path for what the
    kernel does not run (a model on a GPU, another optimiser, …). Same arguments and result;
    ``noise`` is asked for ``steps_per_draw`` steps at a time, as the compiled path asks.

    With ``stack`` the K models' μ and ρ are stacked for the gradients
    (``VariationalELBOLoss.population_gradient_terms``: the K·N sampled networks, or the K
    models' local draws, as one batch) and Adam steps each member's own tensors and state
    (``StackedAdam``), so each member's numbers are those of its own steps; without it there is
    one model (K = 1) and any optimiser, its gradients through ``gradient_terms_of``
    (``compile``: through ``torch.compile``)."""
    members, steps, rows = x.shape[:3]
    if not stack and members != 1:
        raise ValueError(f"{members} models need stack=True.")
    stacked = StackedAdam(list(optimizers), [[n.mu, n.rho] for n in networks], stack=stack)
    mu, rho = stacked.parameters
    if stack:
        step = loss.population_gradient_terms
    else:
        x, y = x[0], y[0]
        step = partial(loss.gradient_terms_of, compile=compile)
    terms = x.new_empty(members, steps, 3)
    block = steps_per_draw(loss, rows, steps)
    for start in range(0, steps, block):
        draws = noise(min(block, steps - start))
        for i in range(draws.shape[1]):
            if stack:
                out, mu.grad, rho.grad = step(mu, rho, x[:, start + i], y[:, start + i],
                                              draws[:, i])
            else:
                out, mu.grad, rho.grad = step(mu, rho, x[start + i], y[start + i], draws[0, i])
            terms[:, start + i] = out
            stacked.step()
    stacked.clear_gradients()
    return terms


def run_elbo_steps(loss: VariationalELBOLoss, networks: Sequence[nn.Module],
                   optimizers: Sequence[torch.optim.Optimizer], x: Tensor, y: Tensor,
                   noise: Callable[[int], Tensor], *, batch_size: int,
                   backend: str) -> list[dict[str, float]]:
    """An iteration's ELBO steps of K models of one architecture and settings (K = 1: one run's
    model), on the backend ``Exploration`` chose (``"numba"``: ``CompiledELBOSteps``; else
    ``eager_elbo_steps``, ``"inductor"`` through ``torch.compile``); each model's mean losses.

    ``x``, ``y`` ``[K, steps·B, ·]`` as ``VariationalELBOLoss.model_inputs`` gives them (stacked
    over models), ``noise(n)`` the next ``n`` steps' draws ``[K, n, *step_noise(B).shape]``, each
    model's from its own stream. Each model's numbers are those of its own steps, whatever K
    (tested): ``Exploration`` calls this with its one model, ``PopulationStep`` with all the
    members' models.
    """
    members, rows = x.shape[0], x.shape[1]
    steps = rows // batch_size
    x = x.view(members, steps, batch_size, x.shape[-1])
    y = y.view(members, steps, batch_size, y.shape[-1])
    if backend == "numba":
        terms = CompiledELBOSteps(loss)(networks, optimizers, x, y, noise)
    else:
        terms = eager_elbo_steps(loss, networks, optimizers, x, y, noise, stack=members > 1,
                                 compile=backend == "inductor")
    return [{"loss_nll": nll, "loss_kl": loss.kl_weight * kl,
             "elbo": -(nll + loss.kl_weight * kl), "kl": kl, "entropy": entropy}
            for nll, kl, entropy in terms.mean(1).tolist()]


@functools.cache
def _kernel():
    """``elbo_kernel``, imported at the first compiled steps: numba and the kernel's cache load
    (about a second) only in processes that train a model with it."""
    from torchrl_vase.objectives import elbo_kernel

    return elbo_kernel


@functools.cache
def _blas_threads():
    """The BLAS libraries loaded (SciPy's, which numba's ``np.dot`` calls), to cap their threads."""
    import scipy.linalg.cython_blas  # noqa: F401  (loaded before the controller looks)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
