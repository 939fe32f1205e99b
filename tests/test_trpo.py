import copy
import math
import re

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn
from torch.nn.utils import parameters_to_vector
from torchrl.collectors import Collector
from torchrl.envs import Compose, DoubleToFloat, GymWrapper, RewardSum, TransformedEnv
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import (
    MLP,
    IndependentNormal,
    OneHotCategorical,
    ProbabilisticActor,
    TanhNormal,
    ValueOperator,
)
from torchrl.modules.distributions import NormalParamExtractor
from torchrl.objectives import ValueEstimators

from torchrl_vase import (
    FiniteLogProbNormal,
    TRPOLoss,
    conjugate_gradient,
    fit_critic,
    gaussian_policy,
)
from torchrl_vase.envs import sync_vector_env

OBS, ACT = 3, 2


def _gaussian_actor(obs_dim=OBS, action_dim=ACT, cells=(8,)):
    head = nn.Sequential(
        MLP(obs_dim, action_dim, num_cells=list(cells), activation_class=nn.Tanh),
        AddStateIndependentNormalScale(action_dim, scale_lb=0.0),
    )
    return ProbabilisticActor(
        TensorDictModule(head, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=IndependentNormal,
        return_log_prob=True,
    )


def _tanh_actor():
    net = nn.Sequential(MLP(OBS, 2 * ACT, num_cells=[8]), NormalParamExtractor())
    return ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
    )


def _categorical_actor():
    return ProbabilisticActor(
        TensorDictModule(MLP(OBS, 4, num_cells=[8]), ["observation"], ["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    )


def _critic():
    return ValueOperator(MLP(OBS, 1, num_cells=[8]), in_keys=["observation"])


def _batch(actor, n=256, seed=0):
    """Actions sampled by the actor (with their log-probs) and advantages correlated with them."""
    torch.manual_seed(seed)
    td = TensorDict({"observation": torch.randn(n, OBS)}, [n])
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        actor(td)
    action = td["action"].float()
    td["advantage"] = (action[:, :1] - action[:, 1:2]) + 0.1 * torch.randn(n, 1)
    td["value_target"] = torch.randn(n, 1)
    return td


def test_conjugate_gradient_solves_a_known_spd_system():
    gen = torch.Generator().manual_seed(0)
    m = torch.randn(8, 8, generator=gen, dtype=torch.float64)
    a = m @ m.T + 8 * torch.eye(8, dtype=torch.float64)
    b = torch.randn(8, generator=gen, dtype=torch.float64)
    x, residual = conjugate_gradient(lambda v: a @ v, b, iters=8)
    torch.testing.assert_close(x, torch.linalg.solve(a, b))
    assert residual < 1e-8
    # fewer iterations: a worse solution, and the residual says so
    x2, residual2 = conjugate_gradient(lambda v: a @ v, b, iters=2)
    assert residual2 > 1e-4 and torch.allclose(residual2, (b - a @ x2).norm())


@pytest.mark.parametrize("make_actor", [_gaussian_actor, _categorical_actor, _tanh_actor])
def test_fisher_vector_product_equals_the_explicit_kl_hessian(make_actor):
    torch.manual_seed(0)
    actor = make_actor()
    loss = TRPOLoss(actor, _critic(), cg_damping=0.1, samples_mc_kl=4)
    td = _batch(actor, n=32)
    old_dist = loss._old_distribution(td)
    mean_kl = loss._kl_function(td, old_dist)
    fvp = loss.fisher_vector_product(mean_kl)
    params = loss._policy_parameters()
    flat = parameters_to_vector(params).detach()

    names = [name for name, p in actor.named_parameters() if p.requires_grad]
    shapes = [p.shape for p in params]

    def kl_of(vector):
        """The same mean KL, as a function of the flat policy parameters."""
        pieces = vector.split([p.numel() for p in params])
        replaced = {n: v.view(shape) for n, v, shape in zip(names, pieces, shapes, strict=True)}
        with torch.nn.utils.stateless._reparametrize_module(actor, replaced):
            return mean_kl()

    hessian = torch.autograd.functional.hessian(kl_of, flat)
    v = torch.randn_like(flat)
    torch.testing.assert_close(fvp(v), hessian @ v + 0.1 * v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make_actor", [_gaussian_actor, _categorical_actor, _tanh_actor])
def test_accepted_step_respects_the_trust_region_and_improves_the_surrogate(make_actor):
    actor = make_actor()
    loss = TRPOLoss(actor, _critic(), max_kl=0.01)
    td = _batch(actor)
    before = parameters_to_vector(loss._policy_parameters()).detach().clone()
    info = loss.natural_gradient_step(td)
    assert bool(info["step_accepted"])
    assert info["kl"] <= 0.01
    assert info["surrogate_after"] > info["surrogate_before"]
    # the KL reported is the KL of the parameters now in the actor
    after = loss(td)
    torch.testing.assert_close(after["kl"], info["kl"], rtol=0.05, atol=1e-6)
    assert not torch.equal(parameters_to_vector(loss._policy_parameters()), before)
    # its entropy too: the closed form of the updated policy's; none for tanh (no closed form)
    if make_actor is _gaussian_actor:
        log_std = next(m for m in actor.modules()
                       if isinstance(m, AddStateIndependentNormalScale)).state_independent_scale
        closed_form = (0.5 + 0.5 * math.log(2 * math.pi) + log_std).sum()
        torch.testing.assert_close(info["entropy"], closed_form.detach(), rtol=1e-5, atol=1e-5)
    elif make_actor is _tanh_actor:
        assert torch.isnan(info["entropy"])
    else:
        torch.testing.assert_close(info["entropy"], after["entropy"])


def test_rejected_step_restores_every_parameter_bit_for_bit():
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic(), line_search_backtracks=3)
    td = _batch(actor)
    real_kl_function = loss._kl_function

    def kl_that_always_exceeds_the_radius(tensordict, old_dist):
        real = real_kl_function(tensordict, old_dist)
        calls = []

        def mean_kl():
            calls.append(1)
            return real() if len(calls) == 1 else real() + 1.0  # line search: all rejected

        return mean_kl

    loss._kl_function = kl_that_always_exceeds_the_radius
    before = {k: v.clone() for k, v in actor.state_dict().items()}
    info = loss.natural_gradient_step(td)
    assert not bool(info["step_accepted"]) and int(info["backtracks"]) == 3
    for key, value in actor.state_dict().items():
        assert torch.equal(value, before[key]), key


def _narrowing_batch(actor, n=256, seed=0):
    """Advantages that favour actions near the mean: the surrogate asks for a smaller std, where
    the KL grows faster than its quadratic model (log σ enters it as e^{-2 log σ})."""
    torch.manual_seed(seed)
    td = TensorDict({"observation": torch.randn(n, OBS)}, [n])
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        actor(td)
    td["advantage"] = -(td["action"] - td["loc"]).square().sum(-1, keepdim=True)
    td["value_target"] = torch.randn(n, 1)
    return td


def test_a_full_step_outside_the_trust_region_is_shrunk_back_inside_it():
    actor = _gaussian_actor()
    before = copy.deepcopy(actor)
    loss = TRPOLoss(actor, _critic(), max_kl=0.5, line_search_backtracks=15)
    td = _narrowing_batch(actor)
    info = loss.natural_gradient_step(td.clone())
    # the quadratic model underestimated the full step's KL: the search had to shrink it
    assert bool(info["step_accepted"]) and int(info["backtracks"]) >= 1
    with torch.no_grad():  # the KL of the policy now in the actor, computed apart from the loss
        kl = torch.distributions.kl_divergence(before.get_dist(td.clone()),
                                               actor.get_dist(td.clone())).mean()
    assert kl <= 0.5
    torch.testing.assert_close(info["kl"], kl)


def test_a_search_whose_every_step_worsens_the_surrogate_leaves_the_policy_as_it_was():
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic(), max_kl=0.01, line_search_backtracks=10)
    td = _batch(actor)
    params = loss._policy_parameters()
    start = parameters_to_vector(params).detach().clone()
    real_surrogate = loss._surrogate

    def surrogate_with_its_maximum_at_the_start(*args):
        # the same gradient at the start; every step away from it, however short, is worse
        return real_surrogate(*args) - 1e9 * (parameters_to_vector(params) - start).square().sum()

    loss._surrogate = surrogate_with_its_maximum_at_the_start
    state = {key: value.clone() for key, value in actor.state_dict().items()}
    info = loss.natural_gradient_step(td)
    assert not bool(info["step_accepted"]) and float(info["kl"]) == 0.0
    for key, value in actor.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_forward_returns_loggable_terms_and_a_differentiable_critic_loss():
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic())
    out = loss(_batch(actor))
    assert set(out.keys()) == {"loss_critic", "surrogate", "kl", "entropy", "explained_variance"}
    assert out["loss_critic"].requires_grad and not out["surrogate"].requires_grad
    assert out["kl"].abs() < 1e-6  # the data's policy is the current one
    assert out["entropy"] > 0


def test_set_keys_and_gae_as_default_value_estimator():
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic())
    loss.set_keys(advantage="adv", sample_log_prob="old_log_prob")
    td = _batch(actor)
    td.rename_key_("advantage", "adv")
    td.rename_key_("action_log_prob", "old_log_prob")
    assert bool(loss.natural_gradient_step(td)["step_accepted"])
    from torchrl.objectives.value import GAE

    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.9, lmbda=0.8)
    assert isinstance(loss.value_estimator, GAE)
    assert loss.value_estimator.tensor_keys.advantage == "adv"


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"max_kl": 0.0}, ValueError, "max_kl"),
        ({"max_kl": -0.01}, ValueError, "max_kl"),
        ({"cg_iters": 0}, ValueError, "cg_iters"),
        ({"line_search_shrink": 1.0}, ValueError, "line_search_shrink"),
        ({"cg_damping": -1.0}, ValueError, "cg_damping"),
    ],
)
def test_bad_construction_raises(kwargs, error, match):
    with pytest.raises(error, match=match):
        TRPOLoss(_gaussian_actor(), _critic(), **kwargs)


def test_actor_without_a_distribution_raises():
    deterministic = TensorDictModule(nn.Linear(OBS, ACT), ["observation"], ["action"])
    with pytest.raises(TypeError, match="no get_dist"):
        TRPOLoss(deterministic, _critic())


def test_non_finite_advantages_or_log_probs_raise():
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic())
    td = _batch(actor)
    bad = td.clone()
    bad["advantage"][3] = float("nan")
    with pytest.raises(ValueError, match="advantages"):
        loss.natural_gradient_step(bad)
    bad = td.clone()
    key = loss.tensor_keys.sample_log_prob
    bad[key] = bad[key].clone()
    bad[key][0] = -float("inf")
    with pytest.raises(ValueError, match=r"log-probs .*FiniteLogProbNormal"):
        loss.natural_gradient_step(bad)


def test_trpo_with_gae_improves_the_return_on_inverted_pendulum():
    torch.manual_seed(0)
    # four copies stepped by one call (gymnasium's SyncVectorEnv under torchrl's GymWrapper)
    env = TransformedEnv(GymWrapper(sync_vector_env("InvertedPendulum-v5", 4)),
                         Compose(DoubleToFloat(), RewardSum()))
    env.set_seed(0)
    actor = _gaussian_actor(obs_dim=4, action_dim=1, cells=(32,))
    critic = ValueOperator(MLP(4, 1, num_cells=[32]), in_keys=["observation"])
    loss = TRPOLoss(actor, critic, max_kl=0.01)
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.995, lmbda=0.95)
    optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    collector = Collector(env, actor, frames_per_batch=2000, total_frames=16000,
                          auto_register_policy_transforms=False)
    returns = []
    for batch in collector:
        with torch.no_grad():
            loss.value_estimator(batch)
        loss.natural_gradient_step(batch)
        fit_critic(loss, batch, optimizer, epochs=5, minibatch_size=250)
        collector.update_policy_weights_()
        done = batch["next", "done"].squeeze(-1)
        returns.append(batch["next", "episode_reward"].squeeze(-1)[done].mean().item())
    collector.shutdown()
    assert returns[-1] > 3 * returns[0], returns


def test_the_lean_critic_fit_takes_the_same_steps_as_loss_critic(monkeypatch):
    from torchrl_vase.objectives import critic_fit as trpo_module

    def fit(lean: bool):
        torch.manual_seed(0)
        critic = ValueOperator(MLP(3, 1, num_cells=[16]), in_keys=["observation"])
        actor = ProbabilisticActor(
            TensorDictModule(nn.Sequential(nn.Linear(3, 1), AddStateIndependentNormalScale(1)),
                             ["observation"],
                             ["loc", "scale"]),
            in_keys=["loc", "scale"], distribution_class=IndependentNormal)
        loss = TRPOLoss(actor, critic)
        optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
        # lean=False: the tensordict path, loss.loss_critic on every minibatch
        monkeypatch.setattr(trpo_module, "_plain_squared_error", lambda loss: lean)
        torch.manual_seed(1)
        out = fit_critic(loss, batch, optimizer, epochs=3, minibatch_size=32)
        return parameters_to_vector(critic.parameters()).detach(), out["loss_critic"]

    batch = TensorDict({"observation": torch.randn(200, 3),
                        "value_target": torch.randn(200, 1)}, [200])
    (lean_params, lean_loss), (plain_params, plain_loss) = fit(True), fit(False)
    torch.testing.assert_close(lean_params, plain_params, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lean_loss, plain_loss)


def test_a_per_dimension_kl_bound_is_ours_scaled_by_the_action_dimension():
    """sb3-contrib's TRPO bounds the KL averaged over the action's dimensions: its (δ, λ) must equal
    our (d·δ, d·λ). Reference: the step solved exactly with the explicit Hessian of that KL."""
    torch.manual_seed(0)
    actor = _gaussian_actor(cells=())  # linear mean: 8 weights and biases, 2 log-stds
    delta, damping = 0.01, 0.1
    loss = TRPOLoss(actor, _critic(), max_kl=ACT * delta, cg_damping=ACT * damping, cg_iters=10)
    td = _batch(actor)
    params = loss._policy_parameters()
    names = [name for name, p in actor.named_parameters() if p.requires_grad]
    start = parameters_to_vector(params).detach().clone()
    advantage = loss._advantage(td.clone(False))
    old = actor.get_dist(td.clone(False))
    old_loc, old_scale = old.base_dist.loc.detach(), old.base_dist.scale.detach()
    old_log_prob = old.log_prob(td["action"]).detach()

    def at(vector):
        pieces = vector.split([p.numel() for p in params])
        replaced = {n: v.view(p.shape) for n, v, p in zip(names, pieces, params, strict=True)}
        with torch.nn.utils.stateless._reparametrize_module(actor, replaced):
            dist = actor.get_dist(td.clone(False))
        return dist.base_dist.loc, dist.base_dist.scale, dist.log_prob(td["action"])

    def kl_per_dimension(vector):  # torch's KL of per-dimension Normals, then .mean(), as sb3
        loc, scale, _ = at(vector)
        return torch.distributions.kl_divergence(
            torch.distributions.Normal(loc, scale), torch.distributions.Normal(old_loc, old_scale)
        ).mean()

    def surrogate(vector):
        return ((at(vector)[2] - old_log_prob).exp() * advantage).mean()

    hessian = torch.autograd.functional.hessian(kl_per_dimension, start) + damping * torch.eye(10)
    gradient = torch.autograd.grad(surrogate(start.requires_grad_()), start)[0]
    start = start.detach()
    direction = torch.linalg.solve(hessian, gradient)
    step = direction * torch.sqrt(2 * delta / (direction @ hessian @ direction))
    assert kl_per_dimension(start + step) < delta and surrogate(start + step) > surrogate(start)

    info = loss.natural_gradient_step(td)
    assert bool(info["step_accepted"]) and int(info["backtracks"]) == 0
    torch.testing.assert_close(parameters_to_vector(params).detach() - start, step,
                               rtol=1e-3, atol=1e-6)


def test_explained_variance_is_nan_when_the_targets_do_not_vary_beyond_float_noise():
    from torchrl_vase import explained_variance

    prediction = torch.tensor([0.1, -0.2, 0.05, 0.0])
    # plain TRPO before any reward: returns zero but for float noise; the ratio would read -1e12
    noise = torch.tensor([1e-9, -2e-9, 0.0, 3e-10])
    assert torch.isnan(explained_variance(prediction, noise))
    assert torch.isnan(explained_variance(prediction, torch.zeros(4)))
    target = torch.tensor([1.0, 2.0, 4.0, 3.0])  # varying targets: the plain formula
    expected = 1 - (target - prediction).var(unbiased=False) / target.var(unbiased=False)
    torch.testing.assert_close(explained_variance(prediction, target), expected)


def test_finite_log_prob_normal_is_torchs_bit_for_bit_at_ordinary_scales():
    gen = torch.Generator().manual_seed(0)
    loc = torch.randn(64, 3, generator=gen).requires_grad_()
    log_scale = (3 * torch.randn(3, generator=gen)).requires_grad_()
    action = loc.detach() + log_scale.detach().exp() * torch.randn(64, 3, generator=gen)
    values, grads = [], []
    for distribution in (IndependentNormal, FiniteLogProbNormal):
        log_prob = distribution(loc, log_scale.exp()).log_prob(action)
        values.append(log_prob)
        grads.append(torch.autograd.grad(log_prob.square().sum(), (loc, log_scale)))
    assert torch.equal(values[0], values[1])
    for torch_grad, ours in zip(*grads, strict=True):
        assert torch.equal(torch_grad, ours)


def test_finite_log_prob_normal_takes_rllabs_standardised_form_where_torchs_overflows():
    # Row 0 is ordinary. In rows 1-2 the second dimension's std exp(45) has a variance beyond
    # float32: torch's (a - mu)^2 / (2 sigma^2) is inf / inf in row 1 and, silently, 0 in row 2.
    # In row 3 the variance is finite but (a - mu)^2 is not; in row 4 the variance is subnormal.
    loc = torch.tensor([[0.1, -0.2], [0.3, 1e3], [-0.5, 0.0], [0.0, 2.0], [1.0, 0.0]],
                       requires_grad=True)
    log_scale = torch.tensor([[0.0, 0.5], [-1.0, 45.0], [0.2, 45.0], [0.0, 44.0], [0.1, -45.0]],
                             requires_grad=True)
    noise = torch.tensor([[0.7, -1.1], [0.4, 2.0], [-1.5, -0.3], [0.2, 3.0], [-0.6, 1.3]])
    action = (loc + log_scale.exp() * noise).detach()
    torchs = IndependentNormal(loc, log_scale.exp()).log_prob(action)
    assert torch.isnan(torchs[1]) and torch.isinf(torchs[3])
    # row 2: torch's drops the wide dimension's quadratic term, -0.3^2 / 2
    without_it = -0.5 * 1.5**2 - 0.2 - 45.0 - math.log(2 * math.pi)
    assert torchs[2].item() == pytest.approx(without_it, abs=1e-4)

    log_prob = FiniteLogProbNormal(loc, log_scale.exp()).log_prob(action)
    loc64, log_scale64 = loc.detach().double().requires_grad_(), log_scale.detach().double()
    log_scale64.requires_grad_()
    rllab = (-0.5 * ((action.double() - loc64) / log_scale64.exp()) ** 2 - log_scale64
             - 0.5 * math.log(2 * math.pi)).sum(-1)
    torch.testing.assert_close(log_prob.double(), rllab, rtol=1e-6, atol=1e-5)
    torch_row = IndependentNormal(loc[0], log_scale[0].exp()).log_prob(action[0])
    assert torch.equal(log_prob[0], torch_row)

    grads = torch.autograd.grad(log_prob.sum(), (loc, log_scale))
    expected = torch.autograd.grad(rllab.sum(), (loc64, log_scale64))
    for ours, closed_form in zip(grads, expected, strict=True):
        assert torch.isfinite(ours).all()
        torch.testing.assert_close(ours.double(), closed_form, rtol=1e-5, atol=1e-5)


def test_a_policy_whose_std_passed_float32s_variance_still_takes_a_trpo_step():
    # VIME on HalfCheetah drove a log-std past 44.4 after ~500 iterations: the collector's
    # log-probs turned nan and the run failed.
    actor = gaussian_policy(OBS, ACT, [8])
    scale = next(m for m in actor.modules() if isinstance(m, AddStateIndependentNormalScale))
    with torch.no_grad():
        scale.state_independent_scale.copy_(torch.tensor([0.0, 46.0]))
    loss = TRPOLoss(actor, _critic(), max_kl=0.01)
    td = _batch(actor)
    assert torch.isfinite(td[loss.tensor_keys.sample_log_prob]).all()
    info = loss.natural_gradient_step(td)
    assert bool(info["step_accepted"]) and info["kl"] <= 0.01
    assert torch.isfinite(parameters_to_vector(loss._policy_parameters())).all()


def test_the_trpo_update_logs_the_policys_entropy_after_its_step():
    from torchrl_vase import TRPOUpdate

    actor = _gaussian_actor()
    update = TRPOUpdate(TRPOLoss(actor, _critic(), max_kl=0.01))
    metrics = update(_batch(actor))
    assert set(metrics) == {f"trpo/{key}" for key in ("kl", "surrogate_before", "surrogate_after",
                                                       "step_accepted", "backtracks", "entropy")}
    log_std = next(m for m in actor.modules()
                   if isinstance(m, AddStateIndependentNormalScale)).state_independent_scale
    assert metrics["trpo/entropy"] == pytest.approx(
        float((0.5 + 0.5 * math.log(2 * math.pi) + log_std.detach()).sum()), rel=1e-5)


# -- What mutation testing found unasserted (issue 100): each test below fails on the mutant of
# torchrl_vase/objectives/trpo.py named in its comment

STEP_KEYS = {"step_accepted", "kl", "surrogate_before", "surrogate_after", "expected_improvement",
             "backtracks", "step_fraction", "cg_residual", "step_norm", "entropy"}


def _step(loss, td):
    before = parameters_to_vector(loss._policy_parameters()).detach().clone()
    info = loss.natural_gradient_step(td)
    return info, parameters_to_vector(loss._policy_parameters()).detach() - before


def test_the_defaults_are_the_papers_and_rllabs():
    # max_kl 0.01 (the paper's classic tasks), 10 CG iterations, damping 0.1, 10 backtracks by
    # 0.8 (rllab's), advantages standardised (rllab's), 16 samples for a Monte-Carlo KL
    loss = TRPOLoss(_gaussian_actor(), _critic())
    assert (loss.max_kl, loss.cg_iters, loss.cg_damping, loss.line_search_backtracks,
            loss.line_search_shrink, loss.standardize_advantage, loss.samples_mc_kl) == (
        0.01, 10, 0.1, 10, 0.8, True, 16)
    gen = torch.Generator().manual_seed(0)
    m = torch.randn(16, 16, generator=gen, dtype=torch.float64)
    a, b = m @ m.T + 0.1 * torch.eye(16, dtype=torch.float64), torch.ones(16, dtype=torch.float64)
    x_default, _ = conjugate_gradient(lambda v: a @ v, b)  # not converged in 10: 11 would differ
    x_ten, _ = conjugate_gradient(lambda v: a @ v, b, iters=10)
    x_eleven, _ = conjugate_gradient(lambda v: a @ v, b, iters=11)
    assert torch.equal(x_default, x_ten) and not torch.equal(x_ten, x_eleven)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"max_kl": 0.0}, ValueError, "max_kl must be a finite number > 0, got 0.0."),
        ({"cg_iters": 0}, ValueError, "cg_iters must be an int >= 1, got 0."),
        ({"line_search_backtracks": 0}, ValueError,
         "line_search_backtracks must be an int >= 1, got 0."),
        ({"samples_mc_kl": 0}, ValueError, "samples_mc_kl must be an int >= 1, got 0."),
        ({"cg_damping": -1.0}, ValueError, "cg_damping must be a finite number >= 0, got -1.0."),
        ({"line_search_shrink": 0.0}, ValueError, "line_search_shrink must be in (0, 1), got 0.0."),
        ({"line_search_shrink": 1.0}, ValueError, "line_search_shrink must be in (0, 1), got 1.0."),
    ],
)
def test_bad_construction_is_refused_with_the_whole_message(kwargs, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        TRPOLoss(_gaussian_actor(), _critic(), **kwargs)


def test_an_actor_without_a_distribution_is_refused_with_the_whole_message():
    message = ("actor_network (TensorDictModule) has no get_dist: TRPO needs a probabilistic "
               "actor (torchrl.modules.ProbabilisticActor) to compute log-probs and KL "
               "divergences.")
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        TRPOLoss(TensorDictModule(nn.Linear(OBS, ACT), ["observation"], ["action"]), _critic())


def test_bad_batches_are_refused_with_the_whole_message():
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic())
    td = _batch(actor)
    bad = td.exclude("action_log_prob")
    message = ("the log-prob key 'action_log_prob' is missing: collect with "
               "ProbabilisticActor(..., return_log_prob=True).")
    with pytest.raises(KeyError, match=re.escape(message)):
        loss.natural_gradient_step(bad)
    bad = td.clone()
    bad["action_log_prob"][0] = -float("inf")
    message = ("log-probs (key 'action_log_prob') contain non-finite values. A Gaussian policy "
               "whose log-std passed ~43 overflows torch's Normal.log_prob in float32: "
               "torchrl_vase.FiniteLogProbNormal (gaussian_policy's distribution) computes it "
               "in rllab's standardised form.")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        loss.natural_gradient_step(bad)


def _independent_surrogate(actor, td, standardize):
    """``mean(π_θ(a|s) / π_old(a|s) · Â)`` with the actor's parameters now, computed apart."""
    advantage = td["advantage"].squeeze(-1)
    if standardize and advantage.numel() > 1:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    with torch.no_grad():
        log_prob = actor.get_dist(td.clone()).log_prob(td["action"])
    return ((log_prob - td["action_log_prob"]).exp() * advantage).mean()


@pytest.mark.parametrize("rows", [1, 2, 64])
@pytest.mark.parametrize("standardize", [True, False])
def test_the_surrogate_is_the_mean_ratio_times_the_advantage_standardised_as_asked(rows,
                                                                                   standardize):
    # the advantage standardised (mean removed, over its std + 1e-8) only when asked and when the
    # batch has more than one row: mutants of the `and`, the `> 1`, the `- mean`, the `+ 1e-8`
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic(), normalize_advantage=standardize)
    td = _batch(actor, n=rows, seed=3)
    td["advantage"] = td["advantage"] + 2.0  # not centred: centring shows
    info = loss.natural_gradient_step(td.clone())
    assert torch.isfinite(info["surrogate_after"])
    torch.testing.assert_close(info["surrogate_after"],
                               _independent_surrogate(actor, td, standardize))


def test_a_constant_added_to_every_advantage_does_not_change_the_step():
    steps = []
    for shift in (0.0, 5.0):
        actor = _gaussian_actor()
        torch.manual_seed(1)
        actor.load_state_dict(_gaussian_actor().state_dict())
        td = _batch(actor)
        td["advantage"] = td["advantage"] + shift
        steps.append(_step(TRPOLoss(actor, _critic()), td)[1])
    torch.testing.assert_close(steps[0], steps[1], rtol=1e-4, atol=1e-6)


def test_a_batch_of_paths_takes_the_step_of_its_flattened_transitions():
    # [paths, steps] and [paths · steps] batches: the advantage's trailing 1 squeezed, no other dim
    steps = []
    for shape in ((4, 16), (64,)):
        torch.manual_seed(2)
        actor = _gaussian_actor()
        td = _batch(actor, n=64).reshape(*shape)
        steps.append(_step(TRPOLoss(actor, _critic()), td)[1])
    torch.testing.assert_close(steps[0], steps[1], rtol=1e-4, atol=1e-6)


def test_without_an_advantage_the_value_estimator_computes_it():
    def rollout(actor, critic):
        torch.manual_seed(4)
        td = _batch(actor, n=32)
        del td["advantage"]
        td["next"] = TensorDict({"observation": torch.randn(32, OBS), "reward": torch.randn(32, 1),
                                 "done": torch.zeros(32, 1, dtype=torch.bool),
                                 "terminated": torch.zeros(32, 1, dtype=torch.bool)}, [32])
        td["next", "done"][-1] = True
        return td

    steps = []
    for precompute in (True, False):
        torch.manual_seed(5)
        actor, critic = _gaussian_actor(), _critic()
        loss = TRPOLoss(actor, critic)
        loss.make_value_estimator(ValueEstimators.GAE, gamma=0.99, lmbda=0.95)
        td = rollout(actor, critic)
        if precompute:
            with torch.no_grad():
                loss.value_estimator(td)
        steps.append(_step(loss, td)[1])
    torch.testing.assert_close(steps[0], steps[1], rtol=0, atol=0)


def test_without_the_distribution_s_parameters_the_data_s_policy_is_the_current_one():
    steps = []
    for keep in (True, False):
        torch.manual_seed(6)
        actor = _gaussian_actor()
        td = _batch(actor)
        td = td if keep else td.exclude("loc", "scale")
        steps.append(_step(TRPOLoss(actor, _critic()), td)[1])
    torch.testing.assert_close(steps[0], steps[1], rtol=1e-5, atol=1e-7)


class _StudentT(torch.distributions.Independent):
    """A policy distribution with no closed-form KL in torch: TRPO's Monte-Carlo fallback."""

    def __init__(self, loc, scale):
        super().__init__(torch.distributions.StudentT(3.0, loc, scale), 1)


def test_without_a_closed_form_the_kl_is_a_monte_carlo_estimate_of_it():
    torch.manual_seed(7)
    net = nn.Sequential(MLP(OBS, 2 * ACT, num_cells=[8]), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(net, ["observation"], ["loc", "scale"]),
                               in_keys=["loc", "scale"], distribution_class=_StudentT,
                               return_log_prob=True)
    before = copy.deepcopy(actor)
    loss = TRPOLoss(actor, _critic(), max_kl=0.05, samples_mc_kl=2000)
    td = _batch(actor, n=64)
    info = loss.natural_gradient_step(td.clone())
    assert bool(info["step_accepted"])
    with torch.no_grad():  # the KL of the policy now in the actor, by 100,000 draws of its own
        old, new = before.get_dist(td.clone()), actor.get_dist(td.clone())
        draws = old.sample((100_000,))
        kl = (old.log_prob(draws) - new.log_prob(draws)).mean()
    torch.testing.assert_close(info["kl"], kl, rtol=0.15, atol=2e-3)
    assert kl <= 0.05 * 1.2


def test_cg_iters_reaches_the_solver():
    steps = []
    for iters in (1, 10):
        torch.manual_seed(8)
        actor = _gaussian_actor()
        steps.append(_step(TRPOLoss(actor, _critic(), cg_iters=iters), _batch(actor))[1])
    assert not torch.allclose(steps[0], steps[1])


def test_the_step_s_report_says_what_was_done():
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic())
    info, moved = _step(loss, _batch(actor))
    assert set(info.keys()) == STEP_KEYS
    assert bool(info["step_accepted"])
    torch.testing.assert_close(info["step_norm"], moved.norm(), rtol=1e-4, atol=1e-7)
    assert float(info["step_fraction"]) == 0.8 ** int(info["backtracks"])
    # rejected: the fraction taken is 0, and so is the step
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic(), line_search_backtracks=2)
    real_surrogate = loss._surrogate
    calls = []

    def worse_after_the_first_call(*args):
        calls.append(1)
        return real_surrogate(*args) - (0.0 if len(calls) == 1 else 1e6)

    loss._surrogate = worse_after_the_first_call
    info, moved = _step(loss, _batch(actor))
    assert not bool(info["step_accepted"])
    assert float(info["step_fraction"]) == 0.0 and float(info["step_norm"]) == 0.0
    assert float(moved.abs().max()) == 0.0


def test_a_batch_with_no_gradient_leaves_the_policy_as_it_was():
    # equal advantages: once centred, nothing to climb; no step, nothing non-finite
    actor = _gaussian_actor()
    loss = TRPOLoss(actor, _critic())
    td = _batch(actor)
    td["advantage"] = torch.ones_like(td["advantage"])
    info, moved = _step(loss, td)
    assert not bool(info["step_accepted"]) and float(moved.abs().max()) == 0.0
    for key in STEP_KEYS - {"entropy"}:
        assert bool(torch.isfinite(info[key].float()).all()), key
    assert float(info["expected_improvement"]) == 0.0


def test_forward_s_explained_variance_is_one_minus_the_residual_s_share():
    actor, critic = _gaussian_actor(), _critic()
    loss = TRPOLoss(actor, critic)
    td = _batch(actor)
    out = loss(td.clone())
    with torch.no_grad():
        value = critic(td.clone())["state_value"]
    target = td["value_target"]
    expected = 1 - (target - value).var(correction=0) / target.var(correction=0)
    torch.testing.assert_close(out["explained_variance"], expected, rtol=1e-4, atol=1e-6)


def test_extra_keyword_arguments_reach_torchrl_s_ppo_loss():
    actor, critic = _gaussian_actor(), _critic()
    td = _batch(actor)
    mean = TRPOLoss(actor, critic)(td.clone())["loss_critic"]
    summed = TRPOLoss(actor, critic, reduction="sum")(td.clone())["loss_critic"]
    torch.testing.assert_close(summed, mean * td.numel())
