"""A bonus's model trained in one object, whatever its loss (``ModelTrainer``): any loss steps by
autograd on the sum of its ``loss_*`` outputs; the ELBO (paper, Eq. 12) by ``"numba"`` (an
iteration's steps in one compiled call, ``torchrl_vase.kernels``: CPU, float32/64, ReLU or tanh,
analytic KL, plain Adam) or ``"autograd"`` (any device, activation, KL or optimiser); ``"auto"``
takes the kernel where it applies. Both draw the same noise in the same order, so a checkpoint
resumes on either; they agree to float rounding, not bit for bit."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDictBase
from torch import Tensor, nn

from torchrl_vase._adam import adam_state, adam_step, supports_adam_steps
from torchrl_vase._validation import check_positive_int
from torchrl_vase.gaussian import HALF_LOG_2PI_E, log_normaliser
from torchrl_vase.objectives.elbo import VariationalELBOLoss

__all__ = ["BACKENDS", "ModelTrainer", "kernel_unavailable", "steps_per_draw"]

#: How the ELBO's steps run (``ModelTrainer``).
BACKENDS = ("auto", "numba", "autograd")
# floats of noise drawn at once: local sampling draws an iteration's steps in one call; weight
# sampling (N × |Θ| a step, 144 MB an iteration for the locomotion model) in blocks
_NOISE_BLOCK_FLOATS = 2**22


def steps_per_draw(loss: VariationalELBOLoss, rows: int, steps: int) -> int:
    """How many steps' noise are drawn at once: all of an iteration's (local sampling) or 16 MB
    blocks (weight sampling); both backends draw alike."""
    per_step = math.prod(loss.step_noise_shape(rows))
    return max(1, min(steps, _NOISE_BLOCK_FLOATS // per_step))


def kernel_unavailable(loss: VariationalELBOLoss, optimizer: torch.optim.Optimizer) -> str | None:
    """Why the compiled kernel cannot train ``loss``'s model with ``optimizer`` (``None``: it can):
    it needs the analytic KL, ReLU or tanh, a float32/64 CPU model and a plain Adam."""
    network = loss.model.network
    kinds = {type(a) for a in network.activations}
    if loss.kl_estimator != "analytic":
        return "it computes the analytic KL (kl_estimator='analytic')"
    if not kinds <= {nn.ReLU, nn.Tanh}:
        return "its layers are ReLU or tanh"
    if len(kinds) > 1:
        return "its layers share one activation"
    if network.mu.device.type != "cpu":
        return f"it runs on the CPU (the model is on {network.mu.device})"
    if network.mu.dtype not in (torch.float32, torch.float64):
        return f"it runs float32 and float64 models (this one is {network.mu.dtype})"
    if not supports_adam_steps(optimizer):
        return ("it implements plain torch.optim.Adam (one parameter group, no weight decay, "
                "AMSGrad or maximisation)")
    return None


def _check_optimizer(optimizer, parameters: list[nn.Parameter]) -> None:
    """An optimiser that steps every trainable parameter of the loss (the model's)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            "optimizer must be a torch.optim.Optimizer over the loss's parameters, e.g. "
            f"torch.optim.Adam(loss.parameters(), lr=1e-3), got {optimizer!r}; or leave it out "
            "for Adam with lr.")
    stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
    missing = sum(id(p) not in stepped for p in parameters)
    if missing:
        raise ValueError(
            f"optimizer does not step {missing} of the loss's {len(parameters)} trainable "
            "parameters, so the bonus's model would not (fully) train: build it over "
            "loss.parameters().")


class ModelTrainer:
    """An iteration's steps of a bonus's model: ``trainer(sample)`` → the steps' mean losses.

    ``sample`` holds ``steps × batch_size`` transitions drawn from the pool by its owner; each
    ``batch_size`` rows are one optimiser step. The ELBO's step minimises ``loss_nll + kl_weight ·
    KL`` (means of ``loss_nll``, ``loss_kl``, ``elbo``, ``kl``, ``entropy``, each before its
    update); any other loss's, the sum of its ``loss_*`` outputs by autograd (a loss with
    ``loss_of(obs, action, target)``, as Disagreement's and ICM's, has the whole sample
    prepared by its model once and steps on slices of it).

    Args:
        loss: the loss module of the model to train.
        optimizer: an optimiser over the loss's parameters; ``None`` for Adam with ``lr``.

    Keyword Args:
        lr: Adam's learning rate (paper: 1e-3), when no ``optimizer`` is given.
        batch_size: transitions per step (the authors: 10).
        backend: ``"auto"``, ``"numba"`` (a ``ValueError`` says why it cannot run) or
            ``"autograd"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl_vase import DynamicsModel
        >>> loss = VariationalELBOLoss(DynamicsModel.build(3, 1, standardize=False),
        ...                            kl_weight=0.2)
        >>> trainer = ModelTrainer(loss, batch_size=10)
        >>> sample = TensorDict({"observation": torch.randn(500, 3),
        ...                      "action": torch.randn(500, 1),
        ...                      ("next", "observation"): torch.randn(500, 3)}, [500])
        >>> metrics = trainer(sample)  # 50 steps of 10
        >>> mu = loss.model.network.mu
        >>> trainer.backend, sorted(metrics), int(trainer.optimizer.state[mu]["step"])
        ('numba', ['elbo', 'entropy', 'kl', 'loss_kl', 'loss_nll'], 50)
    """

    def __init__(self, loss: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                 *, lr: float = 1e-3, batch_size: int = 10, backend: str = "auto") -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
        self.loss = loss
        self.batch_size = check_positive_int("batch_size", batch_size)
        parameters = [p for p in loss.parameters() if p.requires_grad]
        if not parameters:
            raise ValueError("the loss has no trainable parameters.")
        if optimizer is None:
            # fused: one kernel for all parameters a step (the compiled steps read and write
            # its state)
            optimizer = torch.optim.Adam(parameters, lr=lr, fused=True)
        _check_optimizer(optimizer, parameters)
        self.optimizer = optimizer
        if isinstance(loss, VariationalELBOLoss):
            unavailable = kernel_unavailable(loss, optimizer)
        else:
            unavailable = "it trains the ELBO (VariationalELBOLoss) only"
        if backend == "numba" and unavailable:
            raise ValueError(f"backend='numba' cannot train this model: {unavailable}. Use "
                             "backend='auto' (autograd where the kernel cannot run).")
        #: ``"numba"`` or ``"autograd"``: how the steps run
        self.backend = "autograd" if backend == "autograd" or unavailable else "numba"

    def __call__(self, sample: TensorDictBase) -> dict[str, float]:
        if not isinstance(self.loss, VariationalELBOLoss):
            return self._loss_steps(sample)
        x, y = self.loss.model_inputs(sample)
        steps = x.shape[0] // self.batch_size
        if steps == 0 or steps * self.batch_size != x.shape[0]:
            raise ValueError(f"the sample holds {x.shape[0]} transitions, not a positive "
                             f"multiple of batch_size ({self.batch_size}).")
        x = x.view(steps, self.batch_size, x.shape[-1])
        y = y.view(steps, self.batch_size, y.shape[-1])
        terms = self.steps(x, y, lambda n: self.loss.step_noise(self.batch_size, steps=n))
        nll, kl, entropy = terms.mean(0).tolist()
        kl_weight = self.loss.kl_weight
        return {"loss_nll": nll, "loss_kl": kl_weight * kl, "elbo": -(nll + kl_weight * kl),
                "kl": kl, "entropy": entropy}

    def _loss_steps(self, sample: TensorDictBase) -> dict[str, float]:
        """Optimiser steps on the sum of the loss's ``loss_*`` outputs, by autograd."""
        step = self._adam_step()
        parameters = [p for group in self.optimizer.param_groups for p in group["params"]]
        keys, totals = None, None
        compute = getattr(self.loss, "loss_of", None)
        if callable(compute):
            # a loss of the prepared transition: the model's checks and standardisation once
            # for the sample (elementwise: the same values as a minibatch at a time)
            minibatches = list(zip(*(part.split(self.batch_size)
                                     for part in self.loss.prepared(sample)), strict=True))
        else:
            compute, minibatches = self.loss, [(m,) for m in sample.split(self.batch_size)]
        for minibatch in minibatches:
            out = compute(*minibatch)
            if keys is None:  # the scalars it reports: the same keys every step
                keys = [key for key, value in out.items() if value.numel() == 1]
            objective = sum(value for key, value in out.items() if key.startswith("loss_"))
            for parameter in parameters:  # zero_grad's work without its per-call wrapping
                parameter.grad = None
            objective.backward()
            step()
            # one sum of every scalar a step: each key's running total, added in the same order
            values = torch.stack([out[key].detach().reshape(()) for key in keys])
            totals = values if totals is None else totals + values
        means = (totals / len(minibatches)).tolist()
        return dict(zip(keys, means, strict=True))

    def _adam_step(self) -> Callable[[], None]:
        """torch's Adam without ``Optimizer.step``'s per-call bookkeeping, where it is plain."""
        return (functools.partial(adam_step, self.optimizer)
                if supports_adam_steps(self.optimizer) else self.optimizer.step)

    def steps(self, x: Tensor, y: Tensor, noise: Callable[[int], Tensor]) -> Tensor:
        """The steps on prepared minibatches ``x`` ``[steps, B, in]``, ``y`` ``[steps, B, out]``,
        ``noise(n)`` drawing the next ``n`` steps' noise; updates in place, returns ``[steps, 3]``
        of ``(loss_nll, KL, entropy)``."""
        if self.backend == "numba":
            return self._kernel_steps(x, y, noise)
        return self._autograd_steps(x, y, noise)

    def _autograd_steps(self, x: Tensor, y: Tensor, noise: Callable[[int], Tensor]) -> Tensor:
        steps, rows = x.shape[:2]
        terms = x.new_empty(steps, 3)
        block = steps_per_draw(self.loss, rows, steps)
        step = self._adam_step()
        for start in range(0, steps, block):
            draws = noise(min(block, steps - start))
            for i, draw in enumerate(draws, start):
                loss_nll, kl, entropy = self.loss.terms_from_noise(x[i], y[i], draw)
                self.optimizer.zero_grad()
                (loss_nll + self.loss.kl_weight * kl).backward()
                step()
                terms[i] = torch.stack((loss_nll, kl, entropy)).detach()
        self.optimizer.zero_grad()
        return terms

    @torch.no_grad()
    def _kernel_steps(self, x: Tensor, y: Tensor, noise: Callable[[int], Tensor]) -> Tensor:
        kernel = _kernel()
        network, model = self.loss.model.network, self.loss.model
        steps, rows = x.shape[:2]
        mu_state, rho_state = (adam_state(self.optimizer, p) for p in (network.mu, network.rho))
        # the parameters' and Adam's moments' own memory: the kernel updates them in place
        arrays = [tensor.detach().numpy() for tensor in (
            network.mu, network.rho, mu_state["exp_avg"], mu_state["exp_avg_sq"],
            rho_state["exp_avg"], rho_state["exp_avg_sq"])]
        step0 = int(mu_state["step"])
        group = self.optimizer.param_groups[0]
        consts = kernel.make_consts(
            arrays[0].dtype, kl_weight=self.loss.kl_weight, prior_std=float(network.prior_std),
            sigma_c=float(model.sigma_c),
            per_row=1.0 if self.loss.reduction == "sum" else 1.0 / rows,
            lr=float(group["lr"]), beta1=group["betas"][0], beta2=group["betas"][1],
            eps=group["eps"],
            nll_normaliser=log_normaliser(network.out_features, float(model.sigma_c)),
            half_log_2pi_e=HALF_LOG_2PI_E)
        step_kernel = (kernel.local_steps if network.local_reparameterization
                       else kernel.weight_steps)
        sizes = np.array(network.layer_sizes, dtype=np.int64).reshape(-1, 2)
        relu = all(isinstance(a, nn.ReLU) for a in network.activations)
        x_all, y_all = (np.ascontiguousarray(t.detach().numpy()) for t in (x, y))
        terms = np.empty((steps, 3), dtype=arrays[0].dtype)
        block = steps_per_draw(self.loss, rows, steps)
        # the products are small: BLAS threads would only contend with the caller's
        with _blas_threads().limit(limits=torch.get_num_threads(), user_api="blas"):
            for start in range(0, steps, block):
                stop = min(steps, start + block)
                step_kernel(*arrays, step0 + start, x_all[start:stop], y_all[start:stop],
                            noise(stop - start).numpy(), terms[start:stop], sizes, relu, consts)
        mu_state["step"] += steps
        rho_state["step"] += steps
        return torch.from_numpy(terms)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(backend={self.backend!r}, batch_size={self.batch_size}, "
                f"optimizer={type(self.optimizer).__name__})")


@functools.cache
def _kernel():
    """``torchrl_vase.kernels``, imported at the first compiled steps: numba and the kernel's
    cache load (about a second) only in processes that train a model with it."""
    from torchrl_vase import kernels

    return kernels


@functools.cache
def _blas_threads():
    """The BLAS libraries loaded (SciPy's, which numba's ``np.dot`` calls), to cap their threads."""
    import scipy.linalg.cython_blas  # noqa: F401  (loaded before the controller looks)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
