"""``ModelTrainer``'s compiled kernel (``torchrl_vase/kernels.py``) against its autograd backend
(``VariationalELBOLoss.terms_from_noise``, ``backward`` and torch's Adam): the same steps on the
same minibatches and noise."""

from __future__ import annotations

import copy
import math
import re

import numba
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torch import nn

from torchrl_vase import DynamicsModel, Exploration, VariationalELBOLoss, VASERewardTransform
from torchrl_vase import kernels as elbo_kernel
from torchrl_vase.objectives.trainer import ModelTrainer, kernel_unavailable

SAMPLINGS = ("weights", "local", "local_shared")
#: numba's kernels run as Python (NUMBA_DISABLE_JIT: mutation testing, recipes/benchmarks/
#: mutation.py): what only the compiled code does (its cache, its inlining, float32's rounding
#: of each operation) is not there to test
UNCOMPILED = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="numba's kernels run as Python")


def _loss(sampling: str, activation: type[nn.Module], cells: list[int], dtype: torch.dtype,
          *, seed: int = 0, kl_weight: float = 0.2, rho_shift: float = 0.0
          ) -> VariationalELBOLoss:
    torch.manual_seed(seed)
    model = DynamicsModel.build(3, 2, cells, activation, sigma_c=0.5, sampling=sampling,
                                standardize=False).to(dtype)
    with torch.no_grad():
        # σ off the prior's: at σ = σ_m the KL's ∂/∂σ is 0 up to rounding, and Adam would turn
        # two roundings of 0 into steps of ±lr
        model.network.rho.add_(torch.linspace(-0.6, -0.2, model.network.rho.numel(),
                                              dtype=dtype) + rho_shift)
    return VariationalELBOLoss(model, num_samples=4, kl_weight=kl_weight)


def _data(steps: int, dtype: torch.dtype, *, rows: int = 6, seed: int = 1):
    """Minibatches of a smooth map, ``[steps, rows, ·]``."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, rows, 5, dtype=dtype, generator=generator)
    weight = torch.randn(5, 3, dtype=dtype, generator=generator) / math.sqrt(5)
    return x, torch.tanh(x @ weight)


def _noise_stream(noise: torch.Tensor):
    taken = 0

    def draw(steps: int) -> torch.Tensor:
        nonlocal taken
        taken += steps
        return noise[taken - steps:taken]

    return draw


def _both(loss: VariationalELBOLoss, steps: int, x, y, noise):
    """The compiled and the autograd steps from the same start: (terms, network, optimizer)
    each."""
    out = []
    for backend in ("numba", "autograd"):
        twin = copy.deepcopy(loss)
        network = twin.model.network
        optimizer = torch.optim.Adam(network.parameters(), lr=1e-3, fused=True)
        trainer = ModelTrainer(twin, optimizer, batch_size=x.shape[1], backend=backend)
        assert trainer.backend == backend
        terms = trainer.steps(x, y, _noise_stream(noise))
        out.append((terms, network, optimizer))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cells", [[8], [8, 6]])
@pytest.mark.parametrize("activation", [nn.ReLU, nn.Tanh])
@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_one_compiled_step_is_the_autograd_step(sampling, activation, cells, dtype):
    loss = _loss(sampling, activation, cells, dtype)
    x, y = _data(1, dtype)
    noise = loss.step_noise(6, steps=1)
    (terms, network, optimizer), (ref_terms, ref_network, ref_optimizer) = _both(
        loss, 1, x, y, noise)
    if dtype == torch.float32 and numba.config.DISABLE_JIT:
        pytest.skip("as Python, the kernel's float32 steps round in float64")
    tolerance = ({"rtol": 1e-10, "atol": 1e-12} if dtype == torch.float64
                 else {"rtol": 2e-5, "atol": 1e-7})
    torch.testing.assert_close(terms, ref_terms, **tolerance)
    for ours, theirs in ((network.mu, ref_network.mu), (network.rho, ref_network.rho)):
        assert ours.dtype == dtype
        assert not torch.equal(ours, loss.model.network.mu)  # it stepped
        torch.testing.assert_close(ours, theirs, **tolerance)
        state, ref_state = optimizer.state[ours], ref_optimizer.state[theirs]
        assert float(state["step"]) == float(ref_state["step"]) == 1
        for key in ("exp_avg", "exp_avg_sq"):
            scale = ref_state[key].abs().max()
            torch.testing.assert_close(state[key] / scale, ref_state[key] / scale, **tolerance)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_500_compiled_steps_track_500_autograd_steps(sampling):
    """tanh in float32 (a ReLU's kink turns a rounding into a different gradient when a
    pre-activation sits at 0, so two ReLU trajectories part by more than rounding: float64)."""
    for activation, dtype, bound in ((nn.Tanh, torch.float32, 1e-4),
                                     (nn.ReLU, torch.float64, 1e-9)):
        loss = _loss(sampling, activation, [8, 6], dtype)
        x, y = _data(500, dtype)
        noise = loss.step_noise(6, steps=500)
        (terms, network, _), (ref_terms, ref_network, _) = _both(loss, 500, x, y, noise)
        for ours, theirs in ((network.mu, ref_network.mu), (network.rho, ref_network.rho)):
            error = ((ours - theirs).abs().max() / theirs.abs().max()).item()
            assert error <= bound, (activation, error)
        assert (network.mu - loss.model.network.mu).abs().max() > 0.1  # it went somewhere
        torch.testing.assert_close(terms[-1], ref_terms[-1], rtol=1e-3, atol=0)


def test_the_elbo_falls_as_fast_on_both_paths():
    loss = _loss("local_shared", nn.ReLU, [16, 16], torch.float32, kl_weight=1e-3)
    x, y = _data(500, torch.float32, rows=10)
    noise = loss.step_noise(10, steps=500)
    (terms, *_), (ref_terms, *_) = _both(loss, 500, x, y, noise)
    first, last = ref_terms[:25, 0].mean(), ref_terms[-25:, 0].mean()
    assert last < 0.7 * first  # the model learns the map
    assert terms[-25:, 0].mean().item() == pytest.approx(last.item(), rel=0.02)


def test_weight_sampling_draws_its_noise_in_blocks():
    """Weight sampling's N × |Θ| a step is drawn a block of steps at a time (a stream asked for
    every step at once would allocate 144 MB an iteration for the locomotion model)."""
    loss = _loss("weights", nn.ReLU, [64, 64], torch.float64)
    per_step = math.prod(loss.step_noise_shape(6))
    asked = []
    x, y = _data(500, torch.float64)
    noise = loss.step_noise(6, steps=500)
    for backend in ("numba", "autograd"):  # both ask for the same blocks: the same stream
        asked.clear()
        stream = _noise_stream(noise)
        ModelTrainer(copy.deepcopy(loss), batch_size=6, backend=backend).steps(
            x, y, lambda n, stream=stream: asked.append(n) or stream(n))
        assert sum(asked) == 500 and len(asked) > 1
        assert max(asked) * per_step <= 2**22


def test_the_vector_math_is_accurate_to_a_few_ulp():
    @numba.njit
    def evaluate(x, t, positive, exp, log1p, log, tanh, work):
        for i in range(x.shape[0]):
            exp[i] = elbo_kernel.exp_non_positive(-abs(x[i]), elbo_kernel.POW2)
            log1p[i] = elbo_kernel.log1p_unit(t[i])
            tanh[i] = elbo_kernel.fast_tanh(x[i])
        elbo_kernel.log_parts(positive, work[0], work[1])
        for i in range(x.shape[0]):
            log[i] = elbo_kernel.log_from_parts(work[0, i], work[1, i])

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(50_000) * 8).astype(np.float32)
    t = rng.random(50_000).astype(np.float32) ** 4
    positive = np.exp(rng.standard_normal(50_000) * 10).astype(np.float32)
    outs = [np.empty_like(x) for _ in range(4)]
    evaluate(x, t, positive, *outs, np.empty((2, x.size), np.float32))
    exp, log1p, log, tanh = (out.astype(np.float64) for out in outs)
    ulp = float(np.finfo(np.float32).eps)
    wide = x.astype(np.float64)

    def relative(ours, exact):
        return np.max(np.abs(ours - exact) / np.abs(exact)) / ulp

    assert relative(exp, np.exp(np.maximum(-np.abs(wide), -87.3))) < 3
    assert relative(log1p, np.log1p(t.astype(np.float64))) < 4
    exact_log = np.log(positive.astype(np.float64))
    assert np.max(np.abs(log - exact_log) / np.maximum(np.abs(exact_log), 1)) / ulp < 3
    assert relative(tanh[wide != 0], np.tanh(wide[wide != 0])) < 3
    assert np.abs(tanh).max() <= 1
    nan = np.full(1, np.nan, np.float32)
    evaluate(nan, nan, nan, *(np.empty(1, np.float32) for _ in range(4)),
             np.empty((2, 1), np.float32))  # a diverged model reads the table in bounds


def test_where_the_kernel_cannot_run_it_says_why():
    loss = _loss("weights", nn.ReLU, [8], torch.float32)
    network = loss.model.network
    assert kernel_unavailable(loss, torch.optim.Adam(network.parameters())) is None
    sgd = torch.optim.SGD(network.parameters(), lr=0.1)
    assert "Adam" in kernel_unavailable(loss, sgd)
    decayed = torch.optim.Adam(network.parameters(), weight_decay=0.1)
    assert "weight decay" in kernel_unavailable(loss, decayed)
    monte_carlo = VariationalELBOLoss(loss.model, kl_estimator="monte_carlo")
    assert "analytic" in kernel_unavailable(monte_carlo, torch.optim.Adam(network.parameters()))
    half = VariationalELBOLoss(copy.deepcopy(loss.model).to(torch.bfloat16))
    assert "float32 and float64" in kernel_unavailable(
        half, torch.optim.Adam(half.model.network.parameters()))
    sigmoid = VariationalELBOLoss(DynamicsModel.build(3, 2, [8], nn.Sigmoid))
    assert "ReLU or tanh" in kernel_unavailable(
        sigmoid, torch.optim.Adam(sigmoid.model.network.parameters()))


def test_an_exploration_picks_the_kernel_or_refuses_it_at_construction():
    bonus = VASERewardTransform(DynamicsModel.build(2, 1, sigma_c=0.5), eta=0.1)
    assert Exploration(bonus).trainer.backend == "numba"  # auto
    assert Exploration(bonus, backend="autograd").trainer.backend == "autograd"
    loss = bonus.make_loss()
    sgd = torch.optim.SGD(loss.parameters(), lr=0.1)
    assert Exploration(bonus, loss, optimizer=sgd).trainer.backend == "autograd"  # auto falls back
    with pytest.raises(ValueError, match=r"backend='numba' cannot train this model: it "
                                         r"implements plain torch\.optim\.Adam"):
        Exploration(bonus, loss, optimizer=sgd, backend="numba")
    with pytest.raises(ValueError, match="backend must be one of"):
        Exploration(bonus, backend="fast")


#: Run in a process of its own: the kernel's module imported from its folder (no torch), the
#: weight-sampling steps on fixed float32 arrays (a MountainCar-sized model, 50 steps), their
#: outputs' digest printed
_KERNEL_RUN = """
import hashlib, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import kernels as ek
sizes = np.array([[3, 32], [32, 2]], dtype=np.int64)
size = int((sizes[:, 0] + 1) @ sizes[:, 1])
f = np.float32
consts = ek.make_consts(np.dtype(f), kl_weight=0.2, prior_std=0.5, sigma_c=0.5, per_row=1.0,
                        lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, nll_normaliser=0.45,
                        half_log_2pi_e=1.42)
rng = np.random.default_rng(0)
state = [rng.normal(size=size).astype(f), np.full(size, -3.0, f)]
state += [np.zeros(size, f) for _ in range(4)]
terms = np.empty((50, 3), f)
ek.weight_steps(*state, 0, rng.normal(size=(50, 10, 3)).astype(f),
                rng.normal(size=(50, 10, 2)).astype(f),
                rng.normal(size=(50, 10, size)).astype(f), terms, sizes, False, consts)
print("digest", hashlib.sha1(b"".join(array.tobytes() for array in (terms, *state))).hexdigest())
"""


@UNCOMPILED
def test_a_process_that_compiles_the_kernel_computes_what_one_that_loads_it_computes(tmp_path):
    """The first process compiles the weight-sampling steps into an empty cache, the second
    loads them from there: the same steps give the same bits (each step's NLL, KL and entropy,
    μ, ρ and Adam's moments). With the helpers compiled as functions of their own, the two
    logged KLs a float32 step apart (docs/benchmarks.md). One entry point only: its compilation
    is 20 s of a core; the next test keeps the other's helpers inlined the same way."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_DEBUG_CACHE": "1"}
    runs = []
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", _KERNEL_RUN,
                              os.path.dirname(elbo_kernel.__file__)], env=env,
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]
        runs.append(run.stdout)
    compiled, loaded = ([line for line in out.splitlines() if line.startswith("digest")]
                        for out in runs)
    assert "data saved" in runs[0] and "data loaded" not in runs[0]
    assert "data loaded" in runs[1] and "data saved" not in runs[1]
    assert compiled == loaded and len(compiled) == 1


@UNCOMPILED
def test_every_helper_that_reassociates_is_inlined_into_the_entry_points():
    """A helper compiled with the entry points' flags but as a function of its own is what
    made a compiling process and a loading one round differently; the scalar math helpers (no
    reassociation, LLVM inlines them) and the entry points (the ELBO's steps, the bonus's layer
    passes) are the only functions left."""
    dispatchers = {name: f for name, f in vars(elbo_kernel).items()
                   if isinstance(f, numba.core.registry.CPUDispatcher)}
    reassociating = {name for name, f in dispatchers.items()
                     if "reassoc" in (f.targetoptions.get("fastmath") or set())}
    assert {"local_steps", "weight_steps", "_posterior", "_local_forward"} <= reassociating
    not_inlined = {name for name in reassociating
                   if dispatchers[name].targetoptions.get("inline") != "always"}
    assert not_inlined == {"local_steps", "weight_steps", "local_hidden_layer",
                           "local_output_errors"}


# -- What mutation testing found unasserted (issue 100)

def _sample(rows: int, seed: int = 2):
    generator = torch.Generator().manual_seed(seed)
    return TensorDict({"observation": torch.randn(rows, 3, generator=generator),
                       "action": torch.randn(rows, 2, generator=generator),
                       ("next", "observation"): torch.randn(rows, 3, generator=generator)},
                      [rows])


def test_the_trainer_s_defaults_are_the_authors():
    # 10 transitions a minibatch and Adam at 1e-3 (the authors' script); the kernel where it runs
    trainer = ModelTrainer(_loss("weights", nn.ReLU, [8], torch.float32))
    assert (trainer.batch_size, trainer.optimizer.param_groups[0]["lr"], trainer.backend) == (
        10, 1e-3, "numba")


@pytest.mark.parametrize("backend", ["numba", "autograd"])
def test_each_backend_runs_its_own_steps(backend, monkeypatch):
    trainer = ModelTrainer(_loss("weights", nn.ReLU, [8], torch.float32), backend=backend)
    other = "_autograd_steps" if backend == "numba" else "_kernel_steps"

    def refuse(*args):
        raise AssertionError(f"backend={backend} ran {other}")

    monkeypatch.setattr(trainer, other, refuse)
    assert math.isfinite(trainer(_sample(20))["elbo"])


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_a_sample_of_one_minibatch_or_more_trains_and_none_is_refused(sampling):
    trainer = ModelTrainer(_loss(sampling, nn.Tanh, [8], torch.float32), batch_size=10)
    for rows in (10, 30):
        assert math.isfinite(trainer(_sample(rows))["elbo"])
    for rows in (0, 15):
        message = (f"the sample holds {rows} transitions, not a positive multiple of "
                   "batch_size (10).")
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            trainer(_sample(rows))


def test_the_trainer_s_refusals_say_the_whole_reason():
    loss = _loss("weights", nn.ReLU, [8], torch.float32)
    network = loss.model.network
    mixed = _loss("weights", nn.ReLU, [8, 8], torch.float32)
    mixed.model.network.activations[0] = nn.Tanh()
    cases = [
        (lambda: ModelTrainer(loss, batch_size=0), ValueError,
         "batch_size must be an int >= 1, got 0."),
        (lambda: ModelTrainer(VariationalELBOLoss(copy.deepcopy(loss.model).requires_grad_(
            False))), ValueError, "the loss has no trainable parameters."),
        (lambda: ModelTrainer(loss, optimizer="adam"), TypeError,
         "optimizer must be a torch.optim.Optimizer over the loss's parameters, e.g. "
         "torch.optim.Adam(loss.parameters(), lr=1e-3), got 'adam'; or leave it out for Adam "
         "with lr."),
        (lambda: ModelTrainer(loss, torch.optim.Adam([network.mu])), ValueError,
         "optimizer does not step 1 of the loss's 2 trainable parameters, so the bonus's model "
         "would not (fully) train: build it over loss.parameters()."),
        (lambda: ModelTrainer(mixed, backend="numba"), ValueError,
         "backend='numba' cannot train this model: its layers share one activation. Use "
         "backend='auto' (autograd where the kernel cannot run)."),
        (lambda: ModelTrainer(VariationalELBOLoss(loss.model, kl_estimator="monte_carlo"),
                              backend="numba"), ValueError,
         "backend='numba' cannot train this model: it computes the analytic KL "
         "(kl_estimator='analytic'). Use backend='auto' (autograd where the kernel cannot "
         "run)."),
        (lambda: ModelTrainer(loss, torch.optim.SGD(network.parameters(), lr=0.1),
                              backend="numba"), ValueError,
         "backend='numba' cannot train this model: it implements plain torch.optim.Adam (one "
         "parameter group, no weight decay, AMSGrad or maximisation). Use backend='auto' "
         "(autograd where the kernel cannot run)."),
    ]
    for make, error, message in cases:
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            make()
    sigmoid = VariationalELBOLoss(DynamicsModel.build(3, 2, [8], nn.Sigmoid))
    assert kernel_unavailable(sigmoid, torch.optim.Adam(sigmoid.parameters())) == (
        "its layers are ReLU or tanh")
    assert ModelTrainer(mixed).backend == "autograd"


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_a_step_where_every_sigma_exceeds_log_2_is_the_autograd_step(sampling):
    """ρ > 0 (σ = softplus(ρ) > log 2): the other branch of the stable softplus."""
    loss = _loss(sampling, nn.Tanh, [8, 6], torch.float64, rho_shift=1.5)
    assert (loss.model.network.rho > 0).all()
    x, y = _data(1, torch.float64)
    (terms, network, _), (ref_terms, ref_network, _) = _both(
        loss, 1, x, y, loss.step_noise(6, steps=1))
    torch.testing.assert_close(terms, ref_terms, rtol=1e-10, atol=1e-12)
    for ours, theirs in ((network.mu, ref_network.mu), (network.rho, ref_network.rho)):
        torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)


def test_the_warm_up_reaches_every_kernel_with_each_dtype_and_kind_of_call(monkeypatch):
    """What ``make venv`` compiles ahead (``warm_up``): each kernel a run calls, in float32 and
    float64, both activations, noise shared by the rows and per row."""
    calls = []

    def recorded(name, kernel):
        def call(*args):
            arrays = [a for a in args if isinstance(a, np.ndarray)]
            relu = next((a for a in args if isinstance(a, bool)), None)
            calls.append((name, arrays[0].dtype, relu))
            return kernel(*args)
        return call

    names = ("local_steps", "weight_steps", "local_hidden_layer", "local_output_errors",
             "gae_recursion")
    for name in names:
        monkeypatch.setattr(elbo_kernel, name, recorded(name, getattr(elbo_kernel, name)))
    elbo_kernel.warm_up()
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        for name in names:
            assert (name, dtype) in {(n, d) for n, d, _ in calls}, (name, dtype)
        assert {relu for n, d, relu in calls if n == "local_hidden_layer" and d == dtype} == {
            True, False}
    hidden = [c for c in calls if c[0] == "local_hidden_layer"]
    assert len(hidden) == 8  # 2 dtypes x noise shared or per row x 2 activations
