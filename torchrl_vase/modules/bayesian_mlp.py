"""Mean-field Gaussian Bayesian MLP: the dynamics model ``f_m(s, a; θ)`` of the paper.

Every weight and bias θ_i has its own Gaussian posterior ``q(θ_i) = N(μ_i, σ_i²)`` with
``σ_i = softplus(ρ_i)`` (paper, Eq. 9), and the prior is ``P(θ_i) = N(0, σ_m²)`` (Eq. 13)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchrl_vase import gaussian
from torchrl_vase._validation import check_num_samples, check_positive, check_positive_int

#: Per layer, a ``(weight, bias)`` pair. Weights are ``[out, in]`` and biases ``[out]`` for one
#: weight set, or ``[N, out, in]`` and ``[N, out]`` for N sampled weight sets.
LayerWeights = list[tuple[Tensor, Tensor]]

INIT_MEANS = ("uniform", "normal")
#: How ``sample_outputs`` draws a batch's N predictions (``BayesianMLP``'s ``sampling``).
SAMPLINGS = ("weights", "local", "local_shared")
# Floats per block of hidden activations in an N-sample forward (2 MiB): cache-sized.
_BLOCK_FLOATS = 2**19
# the compiled layer passes keep four such arrays a layer in the cache: 512 KiB each (measured)
_PASS_BLOCK_FLOATS = 2**17
# the hidden activations that a forward without gradients applies in place (one buffer less a
# layer); any other activation module is called as it is
_IN_PLACE = {nn.Tanh: Tensor.tanh_, nn.ReLU: Tensor.relu_}


def _inverse_softplus(value: float) -> float:
    return math.log(math.expm1(value))


class BayesianMLP(nn.Module):
    """A multi-layer perceptron with a fully factorised Gaussian posterior over all parameters.

    ``q(θ; φ) = Π_i N(θ_i; μ_i, σ_i²)`` over every weight and bias, ``σ_i = softplus(ρ_i)`` (paper,
    Eq. 9), prior ``P(θ) = Π_i N(θ_i; 0, σ_m²)`` (Eq. 13); the output layer is linear.

    ``forward(x)`` draws one weight set, ``forward(x, num_samples=N)`` N of them in one batched
    computation (``[N, *batch, out_features]``), ``forward(x, weights=...)`` evaluates given weights
    and ``forward(x, use_mean=True)`` the means. Like ``torchrl.modules.MLP`` several inputs are
    concatenated along the last dim, so it drops into a ``TensorDictModule`` with one in_key per
    input, each call drawing one weight sample.

    Args:
        in_features: input size (for a dynamics model, ``obs_dim + action_dim``).
        out_features: output size (``obs_dim``).
        num_cells: widths of the hidden layers (paper: ``[32]`` classic, ``[64, 64]`` locomotion;
            ``[]``: a Bayesian linear model).
        activation_class: activation after every hidden layer.
        activation_kwargs: keyword arguments for ``activation_class``.

    Keyword Args:
        prior_std: σ_m, the prior std of every parameter (paper: 0.5).
        init_posterior_std: the initial σ of every parameter (default ``prior_std``, VIME's).
        init_mean: ``"uniform"`` (``torch.nn.Linear``'s ``U(±1/√fan_in)``) or ``"normal"`` (the
            authors': every μ from ``N(0, 1)``).
        sampling: how ``sample_outputs`` (the bonus, the ELBO) draws a batch's N predictions:
            ``"weights"``, N weight sets ``θ_n ~ q`` shared by the rows (VIME's, needed by its
            information gain); ``"local"``, the local reparameterisation (Kingma, Salimans &
            Welling, 2015) ``z = h M + b_μ + sqrt(h² S + b_σ²) ⊙ ξ`` with ``ξ`` per row, unit and
            draw; ``"local_shared"``, the same with one ``ξ`` per unit and draw shared by the rows
            (the VASE authors' layer). Each row's prediction has the same distribution all ways.
        device: where the parameters are allocated.
        dtype: the parameters' dtype.

    Examples:
        >>> import torch
        >>> bnn = BayesianMLP(in_features=3, out_features=2, num_cells=[32])
        >>> x = torch.randn(5, 3)
        >>> bnn(x).shape
        torch.Size([5, 2])
        >>> bnn(x, num_samples=10).shape
        torch.Size([10, 5, 2])
        >>> weights = bnn.sample_weights(10)
        >>> third = [(w[3], b[3]) for w, b in weights]
        >>> torch.allclose(bnn(x, weights=weights)[3], bnn(x, weights=third), atol=1e-6)
        True
        >>> bnn.entropy().shape, bnn.kl_divergence().shape
        (torch.Size([]), torch.Size([]))
    """

    def __init__(self, in_features: int, out_features: int, num_cells: Sequence[int] = (32,),
                 activation_class: type[nn.Module] = nn.ReLU, activation_kwargs: dict | None = None,
                 *, prior_std: float = 0.5, init_posterior_std: float | None = None,
                 init_mean: str = "uniform", sampling: str = "weights",
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        check_positive_int("in_features", in_features)
        check_positive_int("out_features", out_features)
        if isinstance(num_cells, int) or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in num_cells):
            raise ValueError(
                f"num_cells must be a sequence of positive ints (e.g. [32]), got {num_cells!r}.")
        self.prior_std = check_positive("prior_std", prior_std)
        init_std = self.prior_std if init_posterior_std is None else init_posterior_std
        init_std = check_positive("init_posterior_std", init_std)
        if init_mean not in INIT_MEANS:
            raise ValueError(f"init_mean must be one of {INIT_MEANS}, got {init_mean!r}.")
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}.")
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating point dtype, got {dtype}.")
        self.in_features = in_features
        self.out_features = out_features
        self.num_cells = list(num_cells)
        self.init_posterior_std = init_std
        self.init_mean = init_mean
        #: how N-sample outputs are drawn (``sample_outputs``): one of ``SAMPLINGS``
        self.sampling = sampling
        #: Per layer, the (input, output) widths.
        self.layer_sizes = list(itertools.pairwise([in_features, *self.num_cells, out_features]))
        # All means and all ρ live in two flat parameters (weights then bias, layer by layer):
        # sampling, the KL and the entropy are then one vector op each, which keeps the
        # autograd graph of an ELBO step small.
        size = sum(n_out * (n_in + 1) for n_in, n_out in self.layer_sizes)
        factory = {"device": device, "dtype": dtype}
        self.mu = nn.Parameter(torch.empty(size, **factory))
        self.rho = nn.Parameter(torch.empty(size, **factory))
        activation_kwargs = activation_kwargs or {}
        self.activations = nn.ModuleList(
            activation_class(**activation_kwargs) for _ in self.num_cells)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Means by ``init_mean`` (``"uniform"``: per layer ``U(±1/√fan_in)``); every σ at its
        initial value."""
        with torch.no_grad():
            if self.init_mean == "normal":
                self.mu.normal_(0.0, 1.0)
            else:
                for (n_in, _), (weight, bias) in zip(
                    self.layer_sizes, self.unflatten(self.mu), strict=True):
                    bound = 1 / math.sqrt(n_in)
                    weight.uniform_(-bound, bound)
                    bias.uniform_(-bound, bound)
            self.rho.fill_(_inverse_softplus(self.init_posterior_std))

    def unflatten(self, theta: Tensor) -> LayerWeights:
        """Split flat parameters ``[..., |Θ|]`` into per-layer ``(weight, bias)`` views, leading
        dims kept (``[N, |Θ|]`` gives ``[N, out, in]`` weights)."""
        lead = theta.shape[:-1]
        weights, offset = [], 0
        for n_in, n_out in self.layer_sizes:
            weight = theta[..., offset : offset + n_out * n_in].view(*lead, n_out, n_in)
            offset += n_out * n_in
            bias = theta[..., offset : offset + n_out]
            offset += n_out
            weights.append((weight, bias))
        return weights

    # -- The posterior q(θ; φ)
    @property
    def local_reparameterization(self) -> bool:
        """Whether ``sample_outputs`` draws pre-activations (``sampling`` ``"local"`` or
        ``"local_shared"``) rather than weight sets."""
        return self.sampling != "weights"

    @property
    def num_parameters(self) -> int:
        """|Θ|, the number of stochastic parameters (weights and biases)."""
        return self.mu.numel()

    def posterior_std(self) -> Tensor:
        """All σ_i = softplus(ρ_i) as one flat vector (weights then bias, layer by layer)."""
        return F.softplus(self.rho)

    def entropy(self) -> Tensor:
        """``H(q) = ½ Σ_i log(2πe σ_i²)``: VASE's confidence term (paper, Eq. 10), differentiable
        in ρ."""
        return gaussian.entropy(self.posterior_std())

    def kl_divergence(self) -> Tensor:
        """``KL(q ‖ P) = Σ_i log(σ_m / σ_i) + (σ_i² + μ_i²) / (2σ_m²) − ½``, summed: the ELBO's
        regulariser (paper, Eq. 12) for the prior of Eq. 13. Differentiable in μ and ρ."""
        return gaussian.kl_to_prior(self.mu, self.posterior_std(), self.prior_std)

    def log_density_ratio(self, theta: Tensor) -> Tensor:
        """``log q(θ) − log P(θ)`` for flat samples ``[..., |Θ|]``: its mean over ``θ ~ q``
        estimates ``kl_divergence``."""
        self._check_flat(theta)
        sigma = self.posterior_std()
        log_q = -sigma.log() - 0.5 * ((theta - self.mu) / sigma).square()
        log_p = -math.log(self.prior_std) - 0.5 * (theta / self.prior_std).square()
        return (log_q - log_p).sum(-1)

    # -- Weights
    def sample_noise(
        self, num_samples: int | None = None, *, generator: torch.Generator | None = None
    ) -> Tensor:
        """Standard normal ε of shape ``[|Θ|]`` or ``[N, |Θ|]``, for ``θ = μ + σ ⊙ ε``; drawn
        where ``generator`` lives (a CPU generator gives a model on a GPU the CPU's numbers)."""
        shape = self.mu.shape
        if num_samples is not None:
            shape = (check_num_samples(num_samples), *shape)
        return self.standard_normal(shape, generator)

    def standard_normal(self, shape: tuple[int, ...], generator: torch.Generator | None = None
                        ) -> Tensor:
        """Standard normal draws of the model's dtype, made where ``generator`` lives and
        moved to the model's device (a CPU generator gives a model on a GPU the CPU's numbers)."""
        device = self.mu.device if generator is None else generator.device
        noise = torch.randn(shape, device=device, dtype=self.mu.dtype, generator=generator)
        return noise.to(self.mu.device)

    def sample_parameters(
        self, num_samples: int | None = None, *, generator: torch.Generator | None = None
    ) -> Tensor:
        """Flat parameters ``θ ~ q`` by reparameterisation, ``[|Θ|]`` or ``[N, |Θ|]``
        (differentiable in μ and ρ)."""
        return self.parameters_from_noise(self.sample_noise(num_samples, generator=generator))

    def parameters_from_noise(self, noise: Tensor) -> Tensor:
        """``θ = μ + σ ⊙ ε`` for standard normal ``noise`` ε of shape ``[..., |Θ|]``."""
        return self.mu + self.posterior_std() * noise

    def sample_weights(
        self, num_samples: int | None = None, *, generator: torch.Generator | None = None
    ) -> LayerWeights:
        """Weight sets ``θ ~ q`` split per layer: one set, or N with a leading sample dim."""
        return self.unflatten(self.sample_parameters(num_samples, generator=generator))

    def sample_outputs(self, x: Tensor, num_samples: int, *,
                       generator: torch.Generator | None = None) -> Tensor:
        """N draws of the output for every row of ``x`` ``[*batch, in]``: ``[N, *batch, out]``,
        differentiable in μ and ρ. ``sampling="weights"``: draw n uses weight set θ_n for all rows;
        the local samplings draw each layer's pre-activations (``outputs_from_noise``)."""
        rows = x.reshape(-1, x.shape[-1])
        draws, evaluate = self._draws(rows, num_samples, generator)
        out = self._by_blocks(rows, draws, lambda block, d: evaluate(rows[block], d), dim=-2)
        return out.reshape(num_samples, *x.shape[:-1], self.out_features)

    def _draws(self, rows: Tensor, num_samples: int, generator: torch.Generator | None):
        """The N draws of an evaluation of ``rows`` (weight sets, packed, or the local noise)
        and the function ``(block of rows, its draws) -> [N, block, out]`` that evaluates a
        block with them."""
        if not self.local_reparameterization:
            return self._packed(self.sample_weights(num_samples, generator=generator)), \
                self._apply_flat
        layers = self._local_layers()

        def evaluate(block: Tensor, noise: Tensor) -> Tensor:
            return self._outputs_from_noise(block, noise, layers)

        return self.sample_output_noise(num_samples, rows.shape[0], generator=generator), \
            evaluate

    def sample_squared_errors(self, x: Tensor, y: Tensor, num_samples: int, *,
                              generator: torch.Generator | None = None) -> Tensor:
        """``‖y − f(x; θ_n)‖²`` for N draws: ``[N, *batch]``. The draws of ``sample_outputs`` (the
        same random numbers, the same values), each cache block of rows reduced as soon as it is
        computed, in place without gradients; a local sampling without gradients on the CPU runs the
        elementwise work between the products compiled (``kernels``).

        Examples:
            >>> import torch
            >>> bnn = BayesianMLP(3, 2, [16], sampling="local_shared")
            >>> x, y = torch.randn(100, 3), torch.randn(100, 2)
            >>> same = lambda: torch.Generator().manual_seed(0)
            >>> errors = bnn.sample_squared_errors(x, y, 10, generator=same())
            >>> outputs = bnn.sample_outputs(x, 10, generator=same())
            >>> errors.shape, torch.allclose(errors, (y - outputs).square().sum(-1))
            (torch.Size([10, 100]), True)
        """
        rows, targets = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
        if self.local_reparameterization and self._compiled_passes_apply(rows):
            noise = self.sample_output_noise(num_samples, rows.shape[0], generator=generator)
            errors = self._compiled_squared_errors(rows, targets, noise)
            return errors.reshape(num_samples, *x.shape[:-1])
        draws, evaluate = self._draws(rows, num_samples, generator)
        in_place = not torch.is_grad_enabled()

        def squared_errors(block: slice, block_draws) -> Tensor:
            out, target = evaluate(rows[block], block_draws), targets[block]
            return (out.sub_(target).square_() if in_place else (target - out).square()).sum(-1)

        errors = self._by_blocks(rows, draws, squared_errors, dim=-1)
        return errors.reshape(num_samples, *x.shape[:-1])

    def _compiled_passes_apply(self, rows: Tensor) -> bool:
        """Whether the layer passes compiled by numba compute this evaluation: no gradients,
        CPU tensors of float32 or float64, ReLU or tanh layers (else torch's calls do)."""
        return (not torch.is_grad_enabled() and rows.device.type == "cpu"
                and rows.dtype in (torch.float32, torch.float64)
                and all(type(a) in _IN_PLACE for a in self.activations))

    def _compiled_squared_errors(self, rows: Tensor, targets: Tensor, noise: Tensor) -> Tensor:
        """``sample_squared_errors`` of a local sampling without gradients: per block, each layer's
        two products by torch's BLAS, the elementwise work between them in one compiled pass."""
        from torchrl_vase import kernels  # numba: on first use

        layers = [(mean_w.mT, mean_b.numpy(), var_w.mT, var_b.numpy())
                  for (mean_w, mean_b), (var_w, var_b) in self._local_layers()]
        relu = [isinstance(a, nn.ReLU) for a in self.activations]
        consts = kernels.layer_consts(rows.numpy().dtype)
        num_samples, count = noise.shape[0], rows.shape[0]
        errors = rows.new_empty(num_samples, count)
        blocks = self._blocks(rows, noise, _PASS_BLOCK_FLOATS)
        most = max(block.stop - block.start for block, _ in blocks) * num_samples
        # one set of buffers for every block: fresh tensors of this size would each cost
        # page faults (measured: more than the arithmetic they hold)
        products = [rows.new_empty(most * max([*self.num_cells, self.out_features]))
                    for _ in range(2)]
        activations = [rows.new_empty(most * max(self.num_cells, default=0)) for _ in range(2)]
        targets = targets.numpy()
        for block, draws in blocks:
            h = rows[block]
            h_square = h.square()
            draws = np.ascontiguousarray(draws.numpy())
            offset = 0
            for i, (mean_w, mean_b, var_w, var_b) in enumerate(layers):
                width, size = mean_b.shape[0], h.shape[0] * mean_b.shape[0]
                mean = torch.mm(h, mean_w, out=products[0][:size].view(h.shape[0], width))
                var = torch.mm(h_square, var_w, out=products[1][:size].view(h.shape[0], width))
                if i == len(layers) - 1:
                    kernels.local_output_errors(mean.numpy(), var.numpy(), mean_b, var_b,
                                                    draws, offset, targets[block],
                                                    errors.numpy(), block.start)
                    break
                outputs = (block.stop - block.start) * num_samples
                h, h_square = (buffer[: outputs * width].view(outputs, width)
                               for buffer in activations)
                kernels.local_hidden_layer(mean.numpy(), var.numpy(), mean_b, var_b, draws,
                                               offset, relu[i], h.numpy(), h_square.numpy(),
                                               consts)
                offset += width
        return errors

    def _blocks(self, rows: Tensor, draws: Tensor | LayerWeights,
                block_floats: int = _BLOCK_FLOATS) -> list[tuple[slice, Tensor | LayerWeights]]:
        """The rows in equal blocks whose hidden activations (N × rows × widest layer) stay
        cache-sized (unblocked, the elementwise work on a large batch is memory-bound), each with
        its draws."""
        num_samples = draws[0][0].shape[0] if isinstance(draws, list) else draws.shape[0]
        widest = max(self.num_cells, default=self.out_features)
        count = rows.shape[0]
        num_blocks = max(1, -(-num_samples * count * widest // block_floats))
        size, extra = divmod(count, num_blocks)
        per_row = isinstance(draws, Tensor) and draws.shape[1] != 1
        blocks, start = [], 0
        for index in range(num_blocks):
            stop = start + size + (index < extra)
            block = slice(start, stop)
            blocks.append((block, draws[:, block] if per_row else draws))
            start = stop
        return blocks

    def _by_blocks(self, rows: Tensor, draws: Tensor | LayerWeights, evaluate, *,
                   dim: int) -> Tensor:
        """``evaluate(block, its draws)`` on each cache block of ``rows`` (``_blocks``), the
        results concatenated along ``dim`` (the rows' dim of what it returns)."""
        parts = [evaluate(block, block_draws) for block, block_draws in self._blocks(rows, draws)]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)

    def _local_layers(self) -> list[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]]:
        """Per layer, the weights' and biases' means and variances (once per evaluation)."""
        return list(zip(self.unflatten(self.mu), self.unflatten(self.posterior_std().square()),
                        strict=True))

    def sample_output_noise(self, num_samples: int, rows: int, *,
                            generator: torch.Generator | None = None) -> Tensor:
        """Standard normal ξ for ``outputs_from_noise``: ``[N, rows, Σ layer widths]``, or
        ``[N, 1, Σ layer widths]`` with ``sampling="local_shared"`` (one draw for all rows)."""
        width = sum(n_out for _, n_out in self.layer_sizes)
        rows = 1 if self.sampling == "local_shared" else rows
        return self.standard_normal((check_num_samples(num_samples), rows, width), generator)

    def outputs_from_noise(self, rows: Tensor, noise: Tensor) -> Tensor:
        """Local reparameterisation: per layer ``z = h M + b_μ + sqrt(h² S + b_σ²) ⊙ ξ``, with
        ``M``, ``S`` the weights' means and variances and ``ξ`` the layer's slice of ``noise``
        ``[N, rows, Σ widths]`` (or ``[N, 1, Σ widths]``, one draw for all rows); ``rows`` is
        ``[rows, in_features]``. Returns ``[N, rows, out_features]``."""
        layers = self._local_layers()
        return self._by_blocks(
            rows, noise, lambda block, d: self._outputs_from_noise(rows[block], d, layers), dim=1)

    def _outputs_from_noise(self, rows: Tensor, noise: Tensor, layers: list) -> Tensor:
        # without gradients, each layer's products write their outputs and the rest works in
        # place on them
        in_place = not torch.is_grad_enabled()
        num_samples = noise.shape[0]
        # the first layer's input is every draw's: its mean and std once for the N draws
        h, offset, last = rows, 0, len(self.layer_sizes) - 1
        for i, ((mean_w, mean_b), (var_w, var_b)) in enumerate(layers):
            width = mean_b.shape[-1]
            flat = h.reshape(-1, h.shape[-1])
            mean = torch.addmm(mean_b, flat, mean_w.mT)
            std = torch.addmm(var_b, flat.square(), var_w.mT)
            std = std.sqrt_() if in_place else std.sqrt()
            draw = noise[..., offset : offset + width]
            if i == 0:
                h = torch.addcmul(mean, std, draw)  # [rows, W] with ξ [N, 1 or rows, W]
            else:
                mean, std = (t.view(num_samples, -1, width) for t in (mean, std))
                h = mean.addcmul_(std, draw) if in_place else torch.addcmul(mean, std, draw)
            offset += width
            if i < last:
                h = self._activate(i, h, in_place)
        return h

    def _activate(self, layer: int, h: Tensor, in_place: bool) -> Tensor:
        activation = self.activations[layer]
        apply = _IN_PLACE.get(type(activation)) if in_place else None
        return activation(h) if apply is None else apply(h)

    def mean_weights(self) -> LayerWeights:
        """The posterior means as a weight set (the model's most likely network)."""
        return self.unflatten(self.mu)

    def _check_flat(self, theta: Tensor) -> None:
        if theta.dim() not in (1, 2) or theta.shape[-1] != self.num_parameters:
            raise ValueError(
                f"flat parameters must have shape [{self.num_parameters}] or "
                f"[N, {self.num_parameters}], got {tuple(theta.shape)}.")

    def _check_weights(self, weights: LayerWeights) -> None:
        if len(weights) != len(self.layer_sizes):
            raise ValueError(
                f"weights must hold one (weight, bias) pair per layer: expected "
                f"{len(self.layer_sizes)}, got {len(weights)}.")
        lead = None
        for i, ((weight, bias), (n_in, n_out)) in enumerate(
            zip(weights, self.layer_sizes, strict=True)):
            w_lead, b_lead = weight.shape[:-2], bias.shape[:-1]
            if (
                weight.shape[-2:] != (n_out, n_in)
                or bias.shape[-1:] != (n_out,)
                or w_lead != b_lead
                or len(w_lead) > 1
                or (lead is not None and w_lead != lead)):
                raise ValueError(
                    f"weights[{i}] has shapes {tuple(weight.shape)} and {tuple(bias.shape)}; "
                    f"expected ([N,] {(n_out, n_in)}) and ([N,] {(n_out,)}) "
                    "with the same N for every layer.")
            lead = w_lead

    # -- Forward
    def forward(self, *inputs: Tensor, num_samples: int | None = None,
                weights: LayerWeights | None = None, use_mean: bool = False) -> Tensor:
        """Predict with one sampled weight set, N sampled sets (``num_samples``: ``[N, *batch,
        out]``), given ``weights`` or the means (``use_mean``): at most one of the three. ``inputs``
        are ``[*batch, d_k]`` tensors concatenated along the last dim."""
        x = self.check_inputs(inputs)
        if sum((num_samples is not None, weights is not None, bool(use_mean))) > 1:
            raise ValueError("Pass at most one of num_samples, weights and use_mean.")
        if weights is not None:
            self._check_weights(weights)
        elif use_mean:
            weights = self.mean_weights()
        else:
            weights = self.sample_weights(num_samples)
        return self.apply_weights(x, weights)

    def apply_weights(self, x: Tensor, weights: LayerWeights) -> Tensor:
        """The network with the given weights, unchecked (``forward``'s core;
        ``torch.func``-friendly): ``[N, *batch, out]`` for N-batched weights, else ``[*batch,
        out]``."""
        batch_shape = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        if weights[0][0].dim() == 2:
            out = self._apply_flat(flat, weights)
        else:
            weights = self._packed(weights)
            out = self._by_blocks(flat, weights, lambda block, w: self._apply_flat(flat[block], w),
                                  dim=-2)
        return out.reshape(*out.shape[:-2], *batch_shape, out.shape[-1])

    @staticmethod
    def _packed(weights: LayerWeights) -> LayerWeights:
        """Views into a flat ``[N, |Θ|]`` sample stride N by |Θ|; batched GEMMs want them
        packed."""
        return [(weight.contiguous(), bias.contiguous()) for weight, bias in weights]

    def _apply_flat(self, h: Tensor, weights: LayerWeights) -> Tensor:
        in_place = not torch.is_grad_enabled()
        last = len(weights) - 1
        for i, (weight, bias) in enumerate(weights):
            if weight.dim() == 2:
                h = F.linear(h, weight, bias)
            else:
                # A 2-d input is shared by every weight sample: expand it without a copy.
                h = h.expand(weight.shape[0], *h.shape[-2:])
                h = torch.baddbmm(bias.unsqueeze(-2), h, weight.mT)
            if i < last:
                h = self._activate(i, h, in_place)
        return h

    def check_inputs(self, inputs: tuple[Tensor, ...]) -> Tensor:
        """Validate and concatenate forward inputs (dtype, width, finiteness); return ``x``."""
        if not inputs:
            raise TypeError("BayesianMLP.forward needs at least one input tensor.")
        param = self.mu
        for k, tensor in enumerate(inputs):
            if not isinstance(tensor, Tensor):
                raise TypeError(f"input {k} must be a torch.Tensor, got {type(tensor).__name__}.")
            if not tensor.dtype.is_floating_point:
                raise TypeError(
                    f"input {k} has dtype {tensor.dtype}; BayesianMLP takes floating point "
                    "inputs (one-hot encode discrete actions first).")
            if tensor.dtype != param.dtype:
                raise TypeError(
                    f"input {k} has dtype {tensor.dtype} but the model's parameters are "
                    f"{param.dtype}; cast one of them.")
            if tensor.dim() == 0:
                raise ValueError(f"input {k} is a scalar; expected shape [*batch, features].")
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, dim=-1)
        if x.shape[-1] != self.in_features:
            shapes = ", ".join(str(tuple(t.shape)) for t in inputs)
            raise ValueError(
                f"inputs of shape {shapes} give {x.shape[-1]} features along the last dim; "
                f"the model has in_features={self.in_features}.")
        if not torch.isfinite(x).all():
            raise ValueError("inputs contain non-finite values (nan or inf).")
        return x

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"num_cells={self.num_cells}, prior_std={self.prior_std}"
            + (f", sampling={self.sampling!r}" if self.local_reparameterization else ""))
