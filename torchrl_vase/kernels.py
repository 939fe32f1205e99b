"""The library's compiled kernels (numba and numpy, no torch): an iteration's ELBO steps in one
compiled call (``ModelTrainer``'s ``"numba"`` backend), the elementwise passes of a batch's
bonus between its matrix products (``BayesianMLP.sample_squared_errors``) and GAE's recursion
over time (``ExplorationGAE``).

The VASE model takes 500 Adam steps on minibatches of 10 per iteration (the authors'); as a few
dozen torch calls a step is mostly dispatch. Here the whole sequence runs in one numba function:
for every step σ = softplus(ρ) and the closed-form KL and entropy (paper, Eq. 12-13), the
forward pass of the N sampled networks (or the local reparameterisation's), the hand-derived
backward pass (checked against autograd's gradients of ``VariationalELBOLoss.terms_from_noise``),
the prior's gradients and ``torch.optim.Adam``'s update. Why numba rather than
``torch.compile``, measured: docs/benchmarks.md. The arrays are float32 or float64 throughout
(the model's dtype) and scalar settings arrive as a ``consts`` array of that dtype, so float32
work stays float32. One file: numba's disk cache keys a function on its own file, so the
helpers the kernels share must live beside them."""

from __future__ import annotations

import math

import numba
import numpy as np

# float32 exp, log and tanh that LLVM vectorises (numba lowers math.exp, log, log1p to scalar
# libm calls, which held the per-parameter pass at 40 ns a parameter): Cephes' single-precision
# polynomials (about 1 ulp), branch-free so a loop runs 8 lanes at a time; log of any positive
# float from integer views of the array (``log_parts``) in a pass of its own.
_F = np.float32
_LOG2E = _F(1.44269504088896341)
_LN2_HI, _LN2_LO = _F(0.693359375), _F(-2.12194440e-4)
_SQRT_HALF = _F(0.707106781186547524)
_EXP_MIN = _F(-87.3)
_HALF, _ONE, _TWO = _F(0.5), _F(1.0), _F(2.0)
#: 2**k for k in [-126, 0], indexed by k + 126 (the exponents ``exp_non_positive`` meets)
POW2 = np.array([math.ldexp(1.0, k) for k in range(-126, 1)], dtype=np.float32)
_EXP_P = tuple(_F(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                  4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))
_LOG_P = tuple(_F(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                                  -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                                  2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1))
# tanh's rational approximation x·P(x²)/Q(x²) (Eigen's float tanh): odd numerator, even
# denominator, x clamped where float32 tanh rounds to ±1, x itself below 4e-4
_TANH_P = tuple(_F(c) for c in (-2.76076847742355e-16, 2.00018790482477e-13,
                                   -8.60467152213735e-11, 5.12229709037114e-08,
                                   1.48572235717979e-05, 6.37261928875436e-04,
                                   4.89352455891786e-03))
_TANH_Q = tuple(_F(c) for c in (1.19825839466702e-06, 1.18534705686654e-04,
                                   2.26843463243900e-03, 4.89352518554385e-03))
_TANH_CLAMP, _TANH_TINY = _F(7.90531110763549805), _F(0.0004)

_INLINE = {"cache": True, "error_model": "numpy",
        "fastmath": {"contract", "nsz", "arcp"}}


@numba.njit(**_INLINE)
def exp_non_positive(x, pow2):
    """``exp(x)`` for float32 ``x ≤ 0`` (``x < -87.3`` gives ``exp(-87.3)``, not 0; NaN gives
    NaN)."""
    x = max(x, _EXP_MIN)
    n = np.floor(x * _LOG2E + _HALF)
    r = x - n * _LN2_HI - n * _LN2_LO
    p = _EXP_P[0]
    p = p * r + _EXP_P[1]
    p = p * r + _EXP_P[2]
    p = p * r + _EXP_P[3]
    p = p * r + _EXP_P[4]
    p = p * r + _EXP_P[5]
    # the index clamped as an integer: a NaN x (a diverged model) must read the table in bounds
    index = min(max(np.int32(n) + 126, 0), 126)
    return (p * r * r + r + _ONE) * pow2[index]


@numba.njit(**_INLINE)
def _log_poly(f, e):
    """``log((1 + f) · 2ᵉ)`` for ``1 + f`` in [√½, √2) (Cephes' ``logf`` after reduction)."""
    z = f * f
    y = _LOG_P[0]
    for c in _LOG_P[1:]:
        y = y * f + c
    y = y * f * z + e * _LN2_LO - _HALF * z
    return f + y + e * _LN2_HI


@numba.njit(**_INLINE)
def log_from_parts(mantissa, exponent):
    """``log(m · 2ᵉ)`` from a mantissa m in [1, 2] (``log_parts``') and an exponent e."""
    low = mantissa < _SQRT_HALF * _TWO
    f = (mantissa if low else mantissa * _HALF) - _ONE
    return _log_poly(f, exponent if low else exponent + _ONE)


@numba.njit(**_INLINE)
def log1p_unit(t):
    """``log(1 + t)`` for float32 ``t`` in [0, 1], to full relative precision for small
    ``t`` (``log(u) · t / (u − 1)`` with ``u = 1 + t`` rounded, in [1, 2]: its own mantissa)."""
    u = _ONE + t
    d = u - _ONE
    return t if d == 0 else log_from_parts(u, _F(0.0)) * (t / d)


@numba.njit(cache=True, error_model="numpy")
def log_parts(values, mantissa, exponent):
    """Split positive normal float32 ``values`` into mantissas in [1, 2) and exponents
    (float32), through integer views of the arrays (a pass that vectorises)."""
    bits = values.view(np.int32)
    mantissa_bits = mantissa.view(np.int32)
    for i in range(values.shape[0]):
        b = bits[i]
        exponent[i] = _F(((b >> 23) & 0xFF) - 127)
        mantissa_bits[i] = (b & 0x007FFFFF) | 0x3F800000


@numba.njit(**_INLINE)
def fast_tanh(x):
    """float32 ``tanh(x)`` as a rational function of x (within 3 float32 epsilons; branch-free, so a
    loop vectorises)."""
    c = min(max(x, -_TANH_CLAMP), _TANH_CLAMP)
    z = c * c
    p = _TANH_P[0]
    for coefficient in _TANH_P[1:]:
        p = p * z + coefficient
    q = _TANH_Q[0]
    for coefficient in _TANH_Q[1:]:
        q = q * z + coefficient
    return c * p / q if abs(x) >= _TANH_TINY else x  # NaN: x, so a diverged model shows


# -- The kernel
# reassociation lets the reductions vectorise; NaN and inf keep their meaning (no "nnan"/"ninf"),
# so a diverging model still shows as a non-finite loss; numpy's error model (a division by 0
# gives inf, not an exception) lets the loops with divisions vectorise
_JIT = {"cache": True, "error_model": "numpy",
        "fastmath": {"contract", "reassoc", "nsz", "arcp"}}
# The helpers of the two entry points are inlined by numba, before LLVM sees them (they share
# the entry points' flags): a helper left a function of its own was compiled twice, alone and
# inside the entry point, and a process that compiled the kernel ran the one while a process
# that loaded it from numba's cache ran the other, which rounded differently (measured: VIME's
# logged KL a float32 step apart at some iterations; docs/benchmarks.md). The small scalar
# helpers above (their own flags, no reassociation) LLVM inlines both ways.
_HELPER = {**_JIT, "inline": "always"}

#: Indices into ``consts``.
(KL_WEIGHT, PRIOR_VAR, SIGMA_C_SQ, PER_ROW, LR, BETA1, BETA2, EPS, LOG_PRIOR_STD,
 HALF_LOG_2PI_E, NLL_NORMALISER, ZERO, ONE, TWO, VECTOR_MATH, NUM_CONSTS) = range(16)


def make_consts(dtype: np.dtype, *, kl_weight: float, prior_std: float, sigma_c: float,
                per_row: float, lr: float, beta1: float, beta2: float, eps: float,
                nll_normaliser: float, half_log_2pi_e: float) -> np.ndarray:
    """The kernel's scalar settings as one array of the model's dtype (the Gaussian's constants
    passed in from ``torchrl_vase.gaussian``: this module needs no torch)."""
    consts = np.empty(NUM_CONSTS, dtype=dtype)
    consts[KL_WEIGHT] = kl_weight
    consts[PRIOR_VAR] = prior_std**2
    consts[SIGMA_C_SQ] = sigma_c**2
    consts[PER_ROW] = per_row
    consts[LR], consts[BETA1], consts[BETA2], consts[EPS] = lr, beta1, beta2, eps
    consts[LOG_PRIOR_STD] = math.log(prior_std)
    consts[HALF_LOG_2PI_E] = half_log_2pi_e
    consts[NLL_NORMALISER] = nll_normaliser
    consts[ZERO], consts[ONE], consts[TWO] = 0.0, 1.0, 2.0
    # float32 models: exp, log and tanh from _vector_math (float64: libm's)
    consts[VECTOR_MATH] = dtype == np.float32
    return consts


@numba.njit(cache=True)
def _as(value, like):
    """``value`` in the dtype of the array ``like`` (a float64 scalar rounded, as torch rounds
    its double-precision step size to the parameters' dtype)."""
    out = np.empty(1, like.dtype)
    out[0] = value
    return out[0]


@numba.njit(**_HELPER)
def _posterior(mu, rho, sigma, variance, dsigma, consts, work):
    """σ = softplus(ρ), σ², dσ/dρ = sigmoid(ρ) into the buffers (float32: the vectorised functions,
    ``work`` two scratch arrays of |Θ|); returns ``(KL, H)``."""
    zero, one, two = consts[ZERO], consts[ONE], consts[TWO]
    log_sigma = zero
    squares = zero
    size = mu.shape[0]
    if consts[VECTOR_MATH] > zero:
        for i in range(size):
            r = rho[i]
            t = exp_non_positive(-abs(r), POW2)  # softplus(ρ) = max(ρ, 0) + log1p(e^−|ρ|)
            s = (r if r > zero else zero) + log1p_unit(t)
            sigma[i] = s
            variance[i] = s * s
            dsigma[i] = (one if r >= zero else t) / (one + t)
            squares += s * s + mu[i] * mu[i]
        log_parts(sigma, work[0], work[1])
        for i in range(size):
            log_sigma += log_from_parts(work[0, i], work[1, i])
    else:
        for i in range(size):
            r = rho[i]
            t = math.exp(-abs(r))
            s = (r if r > zero else zero) + math.log1p(t)
            sigma[i] = s
            variance[i] = s * s
            dsigma[i] = (one if r >= zero else t) / (one + t)
            log_sigma += math.log(s)
            squares += s * s + mu[i] * mu[i]
    count = _as(size, mu)
    kl = (count * (consts[LOG_PRIOR_STD] - one / two) - log_sigma
          + squares / (two * consts[PRIOR_VAR]))
    return kl, log_sigma + count * consts[HALF_LOG_2PI_E]


@numba.njit(**_HELPER)
def _prior_and_adam(mu, rho, grad_mean, grad_sigma, sigma, dsigma, m_mu, v_mu, m_rho, v_rho,
                    step, consts):
    """The prior's gradients added (KL weight · ∂KL/∂μ, ∂KL/∂σ), ∂/∂σ → ∂/∂ρ, then Adam's update
    of μ and ρ (``torch.optim.Adam``: lerp of the first moment, bias corrections at ``step``)."""
    one = consts[ONE]
    klw, prior_var = consts[KL_WEIGHT], consts[PRIOR_VAR]
    beta1, beta2, eps = consts[BETA1], consts[BETA2], consts[EPS]
    one_m_beta1, one_m_beta2 = one - beta1, one - beta2
    # the bias corrections in double, as torch computes them from the step count
    step_size = _as(float(consts[LR]) / (1.0 - float(beta1) ** step), mu)
    bias2_sqrt = _as(math.sqrt(1.0 - float(beta2) ** step), mu)
    for i in range(mu.shape[0]):
        g = grad_mean[i] + klw * mu[i] / prior_var
        m = m_mu[i] + one_m_beta1 * (g - m_mu[i])
        v = beta2 * v_mu[i] + one_m_beta2 * g * g
        m_mu[i], v_mu[i] = m, v
        mu[i] -= step_size * m / (math.sqrt(v) / bias2_sqrt + eps)
        s = sigma[i]
        g = (grad_sigma[i] + klw * (s / prior_var - one / s)) * dsigma[i]
        m = m_rho[i] + one_m_beta1 * (g - m_rho[i])
        v = beta2 * v_rho[i] + one_m_beta2 * g * g
        m_rho[i], v_rho[i] = m, v
        rho[i] -= step_size * m / (math.sqrt(v) / bias2_sqrt + eps)


@numba.njit(**_HELPER)
def _activate(h, relu, consts):
    """The hidden activation, in place on pre-activations ``h`` ``[rows, width]``."""
    zero = consts[ZERO]
    if relu:
        for r in range(h.shape[0]):
            row = h[r]
            for j in range(row.shape[0]):
                row[j] = row[j] if row[j] > zero else zero
    elif consts[VECTOR_MATH] > zero:
        for r in range(h.shape[0]):
            row = h[r]
            for j in range(row.shape[0]):
                row[j] = fast_tanh(row[j])
    else:
        h[:] = np.tanh(h)


@numba.njit(**_HELPER)
def _backward_hidden(grad_h, h, relu, consts):
    """``grad_h ⊙ act'`` in place, the derivative from the activation's output ``h``
    (ReLU: ``h > 0``, which is ``z > 0``; tanh: ``1 − h²``)."""
    one, zero = consts[ONE], consts[ZERO]
    for r in range(grad_h.shape[0]):
        g, out = grad_h[r], h[r]
        if relu:
            for j in range(g.shape[0]):
                g[j] = g[j] if out[j] > zero else zero
        else:
            for j in range(g.shape[0]):
                g[j] *= one - out[j] * out[j]


@numba.njit(**_HELPER)
def _nll_gradient(output, y, num_samples, batch, consts):
    """The data term on the N·B predictions ``output`` ``[N·B, D]`` against ``y`` ``[B, D]``
    (mean over draws, summed or averaged over rows) and its gradient (a new array)."""
    zero, two = consts[ZERO], consts[TWO]
    draws, rows = _as(num_samples, output), _as(batch, output)
    scale = consts[PER_ROW] / (consts[SIGMA_C_SQ] * draws)
    grad = np.empty_like(output)
    squares = zero
    for n in range(num_samples):
        for b in range(batch):
            row = n * batch + b
            for j in range(output.shape[1]):
                r = output[row, j] - y[b, j]
                squares += r * r
                grad[row, j] = r * scale
    loss = consts[PER_ROW] * (squares / (two * consts[SIGMA_C_SQ] * draws)
                              + rows * consts[NLL_NORMALISER])
    return loss, grad


@numba.njit(**_HELPER)
def _local_data_term(mu, variance, x, y, xi, sizes, relu, grad_mean, grad_var, consts):
    """Local reparameterisation's data term on one minibatch, its gradients in means and variances
    into ``grad_mean`` and ``grad_var``: per layer ``z = h M + b_μ + sqrt(h² S + b_σ²) ⊙ ξ``, the
    first layer's per-row mean and std computed once for all draws."""
    output, inputs, squares, stds = _local_forward(mu, variance, x, xi, sizes, relu, consts)
    loss, grad_z = _nll_gradient(output, y, xi.shape[0], x.shape[0], consts)
    _local_backward(mu, variance, xi, sizes, relu, grad_z, inputs, squares, stds, grad_mean,
                    grad_var, consts)
    return loss


@numba.njit(**_HELPER)
def _local_forward(mu, variance, x, xi, sizes, relu, consts):
    """The forward pass: the output ``[N·B, out]`` and each layer's input, its square and its
    pre-activations' std (the first layer's per row of ``x``, the others' per row and draw)."""
    num_samples, batch = xi.shape[0], x.shape[0]
    shared = xi.shape[1] == 1
    layers = sizes.shape[0]
    h = x.copy()  # C-contiguous, as every later layer's input
    inputs = [h]
    squares = [h]
    stds = [h]
    inputs.clear()
    squares.clear()
    stds.clear()
    offset, width_offset = 0, 0
    for i in range(layers):
        n_in, n_out = sizes[i, 0], sizes[i, 1]
        weights = n_out * n_in
        mean_w = mu[offset:offset + weights].reshape((n_out, n_in))
        var_w = variance[offset:offset + weights].reshape((n_out, n_in))
        mean_b = mu[offset + weights:offset + weights + n_out]
        var_b = variance[offset + weights:offset + weights + n_out]
        h_square = h * h
        mean = np.dot(h, mean_w.T)
        std = np.dot(h_square, var_w.T)
        for r in range(std.shape[0]):
            row = std[r]
            for j in range(n_out):
                row[j] = math.sqrt(row[j] + var_b[j])
        z = np.empty((num_samples * batch, n_out), dtype=x.dtype)
        for n in range(num_samples):
            for b in range(batch):
                source = b if i == 0 else n * batch + b
                mean_row, std_row, out = mean[source], std[source], z[n * batch + b]
                draw = xi[n, 0 if shared else b, width_offset:width_offset + n_out]
                for j in range(n_out):
                    out[j] = mean_row[j] + mean_b[j] + std_row[j] * draw[j]
        inputs.append(h)
        squares.append(h_square)
        stds.append(std)
        offset += weights + n_out
        width_offset += n_out
        if i < layers - 1:
            _activate(z, relu, consts)
        h = z
    return h, inputs, squares, stds


@numba.njit(**_HELPER)
def _local_backward(mu, variance, xi, sizes, relu, grad_z, inputs, squares, stds, grad_mean,
                    grad_var, consts):
    """The backward pass from ``grad_z``, ∂loss/∂output: ``∂z/∂M = h``, ``∂z/∂S = h² ξ /
    (2 std)``, ``∂z/∂h = M + h S ξ / std``, layer by layer, into the gradient buffers."""
    num_samples, batch = xi.shape[0], inputs[0].shape[0]
    shared = xi.shape[1] == 1
    layers = sizes.shape[0]
    two = consts[TWO]
    offset, width_offset = 0, 0
    for i in range(layers):
        offset += (sizes[i, 0] + 1) * sizes[i, 1]
        width_offset += sizes[i, 1]
    for i in range(layers - 1, -1, -1):
        n_in, n_out = sizes[i, 0], sizes[i, 1]
        weights = n_out * n_in
        offset -= weights + n_out
        width_offset -= n_out
        std = stds[i]
        grad_var_z = np.empty_like(grad_z)
        for n in range(num_samples):
            for b in range(batch):
                row = n * batch + b
                std_row = std[b if i == 0 else row]
                draw = xi[n, 0 if shared else b, width_offset:width_offset + n_out]
                g, out = grad_z[row], grad_var_z[row]
                for j in range(n_out):
                    out[j] = g[j] * draw[j] / (two * std_row[j])
        if i == 0:  # x's rows: the N draws' gradients summed first
            rows_z = grad_z[:batch].copy()
            rows_var = grad_var_z[:batch].copy()
            for n in range(1, num_samples):
                rows_z += grad_z[n * batch:(n + 1) * batch]
                rows_var += grad_var_z[n * batch:(n + 1) * batch]
        else:
            rows_z, rows_var = grad_z, grad_var_z
        np.dot(rows_z.T, inputs[i], grad_mean[offset:offset + weights].reshape((n_out, n_in)))
        np.dot(rows_var.T, squares[i], grad_var[offset:offset + weights].reshape((n_out, n_in)))
        bias_mean = grad_mean[offset + weights:offset + weights + n_out]
        bias_var = grad_var[offset + weights:offset + weights + n_out]
        bias_mean[:] = rows_z[0]
        bias_var[:] = rows_var[0]
        for r in range(1, rows_z.shape[0]):
            g, v = rows_z[r], rows_var[r]
            for j in range(n_out):
                bias_mean[j] += g[j]
                bias_var[j] += v[j]
        if i > 0:
            grad_h = np.dot(rows_z, mu[offset:offset + weights].reshape((n_out, n_in)))
            grad_h_var = np.dot(rows_var,
                                variance[offset:offset + weights].reshape((n_out, n_in)))
            h_in = inputs[i]
            for r in range(grad_h.shape[0]):
                g, v, hr = grad_h[r], grad_h_var[r], h_in[r]
                for j in range(n_in):
                    g[j] += two * hr[j] * v[j]
            _backward_hidden(grad_h, h_in, relu, consts)
            grad_z = grad_h


@numba.njit(**_JIT)
def local_steps(mu, rho, m_mu, v_mu, m_rho, v_rho, step0, x, y, noise, terms, sizes, relu,
                consts):
    """``steps`` ELBO steps of one model with local reparameterisation, in place: ``mu``, ``rho``,
    Adam's ``m_*``, ``v_*`` ``[|Θ|]``; ``step0`` the Adam steps before; ``x`` ``[steps, B, in]``,
    ``y`` ``[steps, B, out]``, ``noise`` ``[steps, N, B or 1, Σ widths]``; ``terms`` ``[steps, 3]``
    gets each step's (loss_nll, KL, entropy) before its update."""
    steps, size = x.shape[0], mu.shape[0]
    sigma, variance, dsigma = np.empty(size, mu.dtype), np.empty(size, mu.dtype), \
        np.empty(size, mu.dtype)
    grad_mean, grad_var = np.empty(size, mu.dtype), np.empty(size, mu.dtype)
    work = np.empty((2, size), mu.dtype)
    for s in range(steps):
        kl, entropy = _posterior(mu, rho, sigma, variance, dsigma, consts, work)
        loss = _local_data_term(mu, variance, x[s], y[s], noise[s], sizes, relu, grad_mean,
                                grad_var, consts)
        terms[s, 0], terms[s, 1], terms[s, 2] = loss, kl, entropy
        grad_var *= consts[TWO] * sigma  # ∂/∂σ = 2σ ∂/∂σ²
        _prior_and_adam(mu, rho, grad_mean, grad_var, sigma, dsigma, m_mu, v_mu, m_rho, v_rho,
                        step0 + s + 1, consts)


@numba.njit(**_HELPER)
def _weight_data_term(mu, sigma, x, y, eps, sizes, relu, theta, grad_mean, grad_sigma, consts):
    """Weight sampling's data term on one minibatch: the N networks ``μ + σ ⊙ ε_n`` forward and back
    by hand, ``Σ_n ∂/∂θ_n`` and ``Σ_n ε_n ⊙ ∂/∂θ_n`` into the gradient buffers."""
    num_samples, batch = eps.shape[0], x.shape[0]
    layers = sizes.shape[0]
    grad_mean[:] = consts[ZERO]
    grad_sigma[:] = consts[ZERO]
    draws = _as(num_samples, mu)
    loss = consts[ZERO]
    for n in range(num_samples):
        for i in range(theta.shape[0]):
            theta[i] = mu[i] + sigma[i] * eps[n, i]
        h = x.copy()
        inputs = [h]
        inputs.clear()
        offset = 0
        for i in range(layers):
            n_in, n_out = sizes[i, 0], sizes[i, 1]
            weight = theta[offset:offset + n_out * n_in].reshape((n_out, n_in))
            bias = theta[offset + n_out * n_in:offset + n_out * (n_in + 1)]
            z = np.dot(h, weight.T) + bias
            inputs.append(h)
            offset += n_out * (n_in + 1)
            if i < layers - 1:
                _activate(z, relu, consts)
            h = z
        # one draw's share of the mean over the N draws: its loss and gradient as a 1-draw
        # data term scaled by 1/N (the same scale _nll_gradient gives N draws)
        part, grad_z = _nll_gradient(h, y, 1, batch, consts)
        loss += (part - consts[PER_ROW] * _as(batch, mu) * consts[NLL_NORMALISER]) / draws
        grad_z /= draws
        for i in range(layers - 1, -1, -1):
            n_in, n_out = sizes[i, 0], sizes[i, 1]
            offset -= n_out * (n_in + 1)
            weights = n_out * n_in
            grad_w = np.dot(grad_z.T, inputs[i]).ravel()
            grad_b = grad_z.sum(axis=0)
            for j in range(weights):
                grad_mean[offset + j] += grad_w[j]
                grad_sigma[offset + j] += grad_w[j] * eps[n, offset + j]
            for j in range(n_out):
                grad_mean[offset + weights + j] += grad_b[j]
                grad_sigma[offset + weights + j] += grad_b[j] * eps[n, offset + weights + j]
            if i > 0:
                weight = theta[offset:offset + weights].reshape((n_out, n_in))
                grad_h = np.dot(grad_z, weight)
                _backward_hidden(grad_h, inputs[i], relu, consts)
                grad_z = grad_h
    return loss + consts[PER_ROW] * _as(batch, mu) * consts[NLL_NORMALISER]


@numba.njit(**_JIT)
def weight_steps(mu, rho, m_mu, v_mu, m_rho, v_rho, step0, x, y, noise, terms, sizes, relu,
                 consts):
    """``local_steps`` with weight sampling: ``noise`` ε ``[steps, N, |Θ|]``."""
    steps, size = x.shape[0], mu.shape[0]
    sigma, variance, dsigma = np.empty(size, mu.dtype), np.empty(size, mu.dtype), \
        np.empty(size, mu.dtype)
    theta = np.empty(size, mu.dtype)
    grad_mean, grad_sigma = np.empty(size, mu.dtype), np.empty(size, mu.dtype)
    work = np.empty((2, size), mu.dtype)
    for s in range(steps):
        kl, entropy = _posterior(mu, rho, sigma, variance, dsigma, consts, work)
        loss = _weight_data_term(mu, sigma, x[s], y[s], noise[s], sizes, relu, theta,
                                 grad_mean, grad_sigma, consts)
        terms[s, 0], terms[s, 1], terms[s, 2] = loss, kl, entropy
        _prior_and_adam(mu, rho, grad_mean, grad_sigma, sigma, dsigma, m_mu, v_mu, m_rho,
                        v_rho, step0 + s + 1, consts)


# -- The bonus's layer passes (BayesianMLP.sample_squared_errors with a local sampling)
# A batch's bonus is two matrix products a layer (the pre-activations' means and variances,
# torch's BLAS) and elementwise work between them: bias, square root, noise, activation, and
# the next layer's squared input, or at the output the squared error. As torch calls that work
# is half a dozen passes over N × rows × width floats, each writing a tensor of its own; here
# it is one pass a layer, reading the products and writing what the next product reads.
@numba.njit(**_HELPER)
def _pre_activation(mean, var, bias_mean, bias_var, draw, source, j):
    """``z = h M + b_μ + sqrt(h² S + b_σ²) ⊙ ξ`` of unit j from the products' row ``source``."""
    return mean[source, j] + bias_mean[j] + math.sqrt(var[source, j] + bias_var[j]) * draw[j]


@numba.njit(**_HELPER)
def _centre_and_spread(mean, var, bias_mean, bias_var, source, centre, spread):
    """A row's pre-activation means ``h M + b_μ`` and standard deviations
    ``sqrt(h² S + b_σ²)`` from the products' row ``source``."""
    for j in range(centre.shape[0]):
        centre[j] = mean[source, j] + bias_mean[j]
        spread[j] = math.sqrt(var[source, j] + bias_var[j])


@numba.njit(**_HELPER)
def _activate_row(centre, spread, draw, relu, out, out_square, consts):
    """``act(centre + spread ⊙ draw)`` and its square into ``out`` and ``out_square``: one
    loop per activation, so that each vectorises without a branch inside."""
    zero = consts[ZERO]
    if relu:
        for j in range(out.shape[0]):
            z = centre[j] + spread[j] * draw[j]
            a = z if z > zero else zero
            out[j], out_square[j] = a, a * a
    elif consts[VECTOR_MATH] > zero:
        for j in range(out.shape[0]):
            a = fast_tanh(centre[j] + spread[j] * draw[j])
            out[j], out_square[j] = a, a * a
    else:
        for j in range(out.shape[0]):
            a = math.tanh(centre[j] + spread[j] * draw[j])
            out[j], out_square[j] = a, a * a


@numba.njit(**_JIT)
def local_hidden_layer(mean, var, bias_mean, bias_var, noise, offset, relu, h, h_square,
                       consts):
    """A hidden layer's activations from its products ``mean`` = h M and ``var`` = h² S (``[N·rows,
    W]``, or ``[rows, W]`` for the first layer) and ``noise`` ξ from ``offset``: ``act(z)`` and its
    square into ``h`` and ``h_square``."""
    draws, width = noise.shape[0], h.shape[1]
    rows = h.shape[0] // draws
    shared_input = mean.shape[0] != h.shape[0]
    per_row_noise = noise.shape[1] != 1
    if shared_input:
        # one input for all N draws (the first layer): its pre-activations' means and spreads
        # once, in place of the products (scratch), not N times (the square roots were a
        # third of the pass's work); then each draw's rows in order, as below
        for b in range(rows):
            _centre_and_spread(mean, var, bias_mean, bias_var, b, mean[b], var[b])
        for n in range(draws):
            for b in range(rows):
                draw = noise[n, b if per_row_noise else 0, offset:offset + width]
                row = n * rows + b
                _activate_row(mean[b], var[b], draw, relu, h[row], h_square[row], consts)
        return
    zero = consts[ZERO]
    for n in range(draws):
        for b in range(rows):
            row = n * rows + b
            draw = noise[n, b if per_row_noise else 0, offset:offset + width]
            out, out_square = h[row], h_square[row]
            for j in range(width):
                z = _pre_activation(mean, var, bias_mean, bias_var, draw, row, j)
                if relu:
                    a = z if z > zero else zero
                elif consts[VECTOR_MATH] > zero:
                    a = fast_tanh(z)
                else:
                    a = math.tanh(z)
                out[j] = a
                out_square[j] = a * a


@numba.njit(**_JIT)
def local_output_errors(mean, var, bias_mean, bias_var, noise, offset, y, errors, start):
    """The output layer's squared errors ``Σ_d (z − y)²`` of a block into ``errors[:, start:start +
    rows]``, the arguments as ``local_hidden_layer``'s."""
    draws, rows, width = noise.shape[0], y.shape[0], y.shape[1]
    shared_input = mean.shape[0] != draws * rows
    per_row_noise = noise.shape[1] != 1
    for n in range(draws):
        for b in range(rows):
            row = n * rows + b
            source = b if shared_input else row
            draw = noise[n, b if per_row_noise else 0, offset:offset + width]
            target = y[b]
            total = mean[source, 0] * 0
            for j in range(width):
                r = _pre_activation(mean, var, bias_mean, bias_var, draw, source, j) - target[j]
                total += r * r
            errors[n, start + b] = total


@numba.njit(cache=True, error_model="numpy")  # no fastmath: each product and sum rounds alone
def gae_recursion(delta, discount, advantage):
    """GAE's recursion over time as torchrl's ``generalized_advantage_estimate`` loops it, on
    ``[B, T, F]`` arrays: ``A_t = δ_t + A_{t+1} · discount_t`` from the last step (``δ + 0``),
    each product and sum rounded to the arrays' dtype, as torch's elementwise calls round."""
    batch, steps, features = delta.shape
    for b in range(batch):
        for f in range(features):
            advantage[b, steps - 1, f] = delta[b, steps - 1, f] + 0.0
            for t in range(steps - 2, -1, -1):
                advantage[b, t, f] = delta[b, t, f] + advantage[b, t + 1, f] * discount[b, t, f]


def layer_consts(dtype: np.dtype) -> np.ndarray:
    """``consts`` for the layer passes: 0 and whether tanh is the float32 polynomial."""
    consts = np.zeros(NUM_CONSTS, dtype=dtype)
    consts[ONE], consts[TWO] = 1.0, 2.0
    consts[VECTOR_MATH] = dtype == np.float32
    return consts


def warm_up() -> None:
    """Compile the kernel for every dtype and sampling ``ModelTrainer`` uses, or load it from
    numba's disk cache (a cold compilation takes about a minute; ``make venv`` runs it)."""
    sizes = np.array([[3, 4], [4, 2]], dtype=np.int64)
    size = int((sizes[:, 0] + 1) @ sizes[:, 1])
    for dtype in (np.float32, np.float64):
        consts = make_consts(dtype, kl_weight=0.2, prior_std=0.5, sigma_c=0.5, per_row=1.0,
                             lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                             nll_normaliser=2 * (math.log(0.5) + 0.5 * math.log(2 * math.pi)),
                             half_log_2pi_e=0.5 * math.log(2 * math.pi * math.e))
        for kernel, noise_shape in ((local_steps, (1, 2, 1, 6)), (weight_steps, (1, 2, size))):
            state = [np.zeros(size, dtype) for _ in range(6)]
            state[1][:] = -1.0  # ρ
            kernel(*state, 0, np.zeros((1, 2, 3), dtype), np.zeros((1, 2, 2), dtype),
                   np.zeros(noise_shape, dtype), np.zeros((1, 3), dtype), sizes, True, consts)
        # the bonus's layer passes, with noise shared by the rows and per row
        products, bias = np.ones((4, 3), dtype), np.zeros(3, dtype)
        for rows in (1, 2):
            noise = np.zeros((2, rows, 6), dtype)
            for relu in (True, False):
                local_hidden_layer(products, products, bias, bias, noise, 0, relu,
                                   np.empty((4, 3), dtype), np.empty((4, 3), dtype),
                                   layer_consts(dtype))
            local_output_errors(products, products, bias, bias, noise, 3,
                                np.zeros((2, 3), dtype), np.empty((2, 2), dtype), 0)
        steps = np.zeros((1, 2, 1), dtype)
        gae_recursion(steps, steps, np.empty_like(steps))

