"""ExplorationGAE's three advantage structures against a direct computation, and fit_critic."""

import re

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import AddStateIndependentNormalScale, NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.modules import MLP, IndependentNormal, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE
from torchrl.objectives.value.functional import generalized_advantage_estimate

from torchrl_vase import (
    ExplorationGAE,
    StandardizedRegressor,
    TRPOLoss,
    discounted_sum,
    fit_critic,
)
from torchrl_vase.objectives import generalized_advantage

GAMMA, LMBDA, ETA = 0.9, 0.8, 0.05
ENVS, STEPS, OBS = 2, 7, 3


def _linear_critic(weight, bias, out_key="state_value") -> ValueOperator:
    net = nn.Linear(OBS, 1).double()
    with torch.no_grad():
        net.weight.copy_(torch.tensor([weight], dtype=torch.float64))
        net.bias.fill_(bias)
    return ValueOperator(net, in_keys=["observation"], out_keys=[out_key])


def _batch() -> TensorDict:
    """Two envs, seven steps; env 0's episode ends (terminated) at step 2, env 1's is truncated at
    step 4; both continue to the end of the batch, which is not an episode end."""
    gen = torch.Generator().manual_seed(0)
    shape = (ENVS, STEPS, 1)
    extrinsic = torch.zeros(shape, dtype=torch.float64)
    extrinsic[0, 2], extrinsic[1, 5] = 1.0, 1.0
    intrinsic = torch.rand(shape, generator=gen, dtype=torch.float64) * 4 + 3
    terminated = torch.zeros(shape, dtype=torch.bool)
    terminated[0, 2] = True
    done = terminated.clone()
    done[1, 4] = True
    obs = torch.randn(ENVS, STEPS, OBS, generator=gen, dtype=torch.float64)
    next_obs = torch.randn(ENVS, STEPS, OBS, generator=gen, dtype=torch.float64)
    return TensorDict(
        {
            "observation": obs,
            "next": {
                "observation": next_obs,
                "reward": extrinsic + ETA * intrinsic,
                "extrinsic_reward": extrinsic,
                "intrinsic_reward": intrinsic,
                "done": done,
                "terminated": terminated,
            },
        },
        [ENVS, STEPS],
    )


def _reference_gae(reward, value, next_value, done, terminated, gamma, lmbda):
    """GAE by its definition, one step at a time (an independent, slow computation)."""
    advantage = torch.zeros_like(reward)
    for env in range(reward.shape[0]):
        running = 0.0
        for t in reversed(range(reward.shape[1])):
            if done[env, t]:
                running = 0.0
            bootstrap = 0.0 if terminated[env, t] else gamma * next_value[env, t]
            delta = reward[env, t] + bootstrap - value[env, t]
            running = delta + gamma * lmbda * running
            advantage[env, t] = running
    return advantage


def _reference_returns(reward, done, gamma):
    """Σ_k γ^k r_{t+k}, cut at episode ends and at the end of the batch."""
    zeros = torch.zeros_like(reward)
    return _reference_gae(reward, zeros, zeros, done, done, gamma, 1.0)


def _values(critic, batch):
    with torch.no_grad():
        value = critic(batch.select("observation").clone())[critic.out_keys[0]]
        next_value = critic(batch["next"].select("observation").clone())[critic.out_keys[0]]
    return value, next_value


def test_discounted_sum_is_the_reference_sum():
    batch = _batch()
    x, done = batch["next", "intrinsic_reward"], batch["next", "done"]
    torch.testing.assert_close(discounted_sum(x, done, 0.7), _reference_returns(x, done, 0.7))
    # a time dim in another position gives the same numbers
    moved = discounted_sum(x.transpose(0, 1), done.transpose(0, 1), 0.7, time_dim=0)
    torch.testing.assert_close(moved.transpose(0, 1), _reference_returns(x, done, 0.7))


@pytest.mark.parametrize("center", [True, False])
def test_extrinsic_structure(center):
    batch = _batch()
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    gae = ExplorationGAE("extrinsic", gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                         center_bonus=center)
    out = gae(batch.clone())
    nxt = batch["next"]
    bonus = ETA * nxt["intrinsic_reward"]
    if center:
        bonus = bonus - bonus.mean()
    value, next_value = _values(critic, batch)
    expected = _reference_gae(nxt["extrinsic_reward"] + bonus, value, next_value, nxt["done"],
                              nxt["terminated"], GAMMA, LMBDA)
    torch.testing.assert_close(out["advantage"], expected)
    # the critic learns the discounted extrinsic return, bootstrapped where a path is only
    # interrupted (env 1's time limit, the batch's end), as the advantage is
    mc = _reference_gae(nxt["extrinsic_reward"], value, next_value, nxt["done"],
                        nxt["terminated"], GAMMA, 1.0)
    torch.testing.assert_close(out["value_target"], mc + value)
    # the bonus's own advantage: the bonus term as it entered (centred only with center_bonus)
    torch.testing.assert_close(
        out["bonus_advantage"], _reference_returns(bonus, nxt["done"], GAMMA * LMBDA)
    )


def test_extrinsic_structure_with_a_zero_critic_and_no_reward_is_the_bonus_alone():
    batch = _batch()
    batch["next", "extrinsic_reward"].zero_()
    batch["next", "reward"] = ETA * batch["next", "intrinsic_reward"]
    critic = StandardizedRegressor(nn.Linear(OBS, 1).double(), in_features=OBS).double()
    critic.fit_statistics(batch["observation"], torch.zeros(ENVS, STEPS, 1, dtype=torch.float64))
    gae = ExplorationGAE("extrinsic", gamma=GAMMA, lmbda=LMBDA,
                         value_network=ValueOperator(critic, in_keys=["observation"]))
    out = gae(batch)
    assert pearson_of(out["advantage"], out["bonus_advantage"]) > 1 - 1e-6


def pearson_of(a, b):
    a, b = a.flatten() - a.mean(), b.flatten() - b.mean()
    return float((a @ b) / (a.norm() * b.norm()))


@pytest.mark.parametrize("value_target", ["monte_carlo", "td_lambda"])
def test_combined_structure(value_target):
    batch = _batch()
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    gae = ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                         value_target=value_target)
    out = gae(batch.clone())
    nxt = batch["next"]
    bonus = ETA * nxt["intrinsic_reward"]
    reward = nxt["extrinsic_reward"] + bonus - bonus.mean()
    value, next_value = _values(critic, batch)
    expected = _reference_gae(reward, value, next_value, nxt["done"], nxt["terminated"],
                              GAMMA, LMBDA)
    torch.testing.assert_close(out["advantage"], expected)
    if value_target == "monte_carlo":
        target = value + _reference_gae(reward, value, next_value, nxt["done"], nxt["terminated"],
                                        GAMMA, 1.0)
    else:
        target = expected + value
    torch.testing.assert_close(out["value_target"], target)


def test_bad_structures_raise_at_construction():
    critic = _linear_critic([0.0, 0.0, 0.0], 0.0)
    with pytest.raises(ValueError, match="structure must be one of"):
        ExplorationGAE("intrinsic", gamma=0.9, lmbda=0.9, value_network=critic)
    with pytest.raises(ValueError, match="structure must be one of"):
        ExplorationGAE("dual", gamma=0.9, lmbda=0.9, value_network=critic)  # retired
    with pytest.raises(ValueError, match="value_target"):
        ExplorationGAE("extrinsic", gamma=0.9, lmbda=0.9, value_network=critic,
                       value_target="bootstrap")
    with pytest.raises(ValueError, match="gamma"):
        ExplorationGAE("extrinsic", gamma=1.5, lmbda=0.9, value_network=critic)
    gae = ExplorationGAE("extrinsic", gamma=0.9, lmbda=0.9, value_network=critic)
    batch = _batch()
    del batch["next", "extrinsic_reward"]
    with pytest.raises(KeyError, match=r"extrinsic reward.*bonus transform"):
        gae(batch)


def _actor(tanh: bool = False):
    if tanh:
        net = nn.Sequential(MLP(OBS, 2, num_cells=[8]), NormalParamExtractor())
        return ProbabilisticActor(TensorDictModule(net, ["observation"], ["loc", "scale"]),
                                  in_keys=["loc", "scale"], distribution_class=TanhNormal,
                                  return_log_prob=True)
    head = nn.Sequential(nn.Linear(OBS, 1), AddStateIndependentNormalScale(1))
    return ProbabilisticActor(TensorDictModule(head, ["observation"], ["loc", "scale"]),
                              in_keys=["loc", "scale"], distribution_class=IndependentNormal,
                              return_log_prob=True)


def _float_batch_with_actions(actor):
    batch = _batch().apply(lambda x: x.float() if x.dtype == torch.float64 else x)
    with torch.no_grad():
        actor(batch)
    return batch


def test_torchrl_ppo_uses_it_as_its_value_estimator():
    actor = _actor(tanh=True)
    critic = ValueOperator(nn.Linear(OBS, 1), in_keys=["observation"])
    ppo = ClipPPOLoss(actor, critic, normalize_advantage=False)
    gae = ExplorationGAE("extrinsic", gamma=GAMMA, lmbda=LMBDA, value_network=critic)
    ppo.make_value_estimator(gae)
    assert ppo.value_estimator is gae
    batch = _float_batch_with_actions(actor)
    out = ppo(batch.clone())  # PPO computes the advantage itself with our estimator
    assert torch.isfinite(out["loss_objective"]) and torch.isfinite(out["loss_critic"])
    with_advantage = gae(batch.clone())  # computed beforehand, as a PPO loop does
    torch.testing.assert_close(ppo(with_advantage)["loss_objective"], out["loss_objective"])


def test_fit_critic_fits_the_critic_and_reports_its_explained_variance():
    torch.manual_seed(0)
    actor = _actor()
    critic = ValueOperator(MLP(OBS, 1, num_cells=[16]), in_keys=["observation"])
    loss = TRPOLoss(actor, critic)
    loss.make_value_estimator(ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA,
                                             value_network=critic))
    batch = _float_batch_with_actions(actor)
    with torch.no_grad():
        loss.value_estimator(batch)
    with pytest.raises(ValueError, match="does not hold every parameter"):
        fit_critic(loss, batch, torch.optim.Adam(list(critic.parameters())[:1]), epochs=1)

    def error():
        with torch.no_grad():
            return loss.loss_critic(batch)[0].mean().item()

    before = error()
    out = fit_critic(loss, batch, torch.optim.Adam(critic.parameters(), lr=1e-2), epochs=300,
                     minibatch_size=14)
    assert error() < 0.3 * before, (before, error())
    with torch.no_grad():
        prediction = critic(batch.clone())["state_value"]
        residual = (batch["value_target"] - prediction).var(unbiased=False)
        expected = 1 - residual / batch["value_target"].var(unbiased=False)
    torch.testing.assert_close(out["explained_variance"], expected)


def test_fit_critic_standardises_a_standardized_regressor_on_the_batch():
    actor = _actor()
    net = StandardizedRegressor(nn.Linear(OBS, 1), in_features=OBS)
    critic = ValueOperator(net, in_keys=["observation"])
    loss = TRPOLoss(actor, critic)
    batch = _float_batch_with_actions(actor)
    batch["value_target"] = 3.0 + 0.5 * torch.randn(ENVS, STEPS, 1)
    fit_critic(loss, batch, torch.optim.Adam(critic.parameters()), epochs=1)
    torch.testing.assert_close(net.output_loc, batch["value_target"].mean().reshape(1))
    torch.testing.assert_close(net.input_loc, batch["observation"].reshape(-1, OBS).mean(0))


def test_terminal_path_ends_is_rllab_s_no_bootstrap_at_any_path_end():
    batch = _batch()
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    gae = ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                         value_target="td_lambda", terminal_path_ends=True)
    out = gae(batch.clone())
    nxt = batch["next"]
    path_end = nxt["done"].clone()
    path_end[:, -1] = True  # the batch's cut ends a path too
    bonus = ETA * nxt["intrinsic_reward"]
    reward = nxt["extrinsic_reward"] + bonus - bonus.mean()
    value, next_value = _values(critic, batch)
    # env 1's truncation at step 4 and both batch ends: no bootstrap, as a termination
    expected = _reference_gae(reward, value, next_value, path_end, path_end, GAMMA, LMBDA)
    torch.testing.assert_close(out["advantage"], expected)
    assert "_path_end" not in out["next"]
    plain = ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                           value_target="td_lambda")(batch.clone())
    assert not torch.allclose(plain["advantage"], expected)


def test_monte_carlo_targets_with_terminal_path_ends_are_rllab_s_cut_returns():
    batch = _batch()
    # consecutive steps: each state is the previous step's next state
    batch["observation"][:, 1:] = batch["next", "observation"][:, :-1]
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    gae = ExplorationGAE("extrinsic", gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                         terminal_path_ends=True)
    out = gae(batch.clone())
    path_end = batch["next", "done"].clone()
    path_end[:, -1] = True
    # rllab's path["returns"]: the discounted rewards to every path's end, no bootstrap
    expected = _reference_returns(batch["next", "extrinsic_reward"], path_end, GAMMA)
    torch.testing.assert_close(out["value_target"], expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("shape", "time_dim"), [((1, 900, 1), 1), ((6, 40, 1), 1),
                                                 ((40, 6, 2), 0), ((2, 3, 30, 1), 2)])
def test_generalized_advantage_is_torchrl_s_loop_bit_for_bit(dtype, shape, time_dim):
    gen = torch.Generator().manual_seed(len(shape) + shape[0])
    # values over six orders of magnitude: any reordering of a product or sum would show
    value, next_value, reward = (torch.randn(shape, generator=gen, dtype=dtype)
                                 * 10.0 ** torch.randint(-3, 4, shape, generator=gen)
                                 for _ in range(3))
    done = torch.rand(shape, generator=gen) < 0.05
    terminated = done & (torch.rand(shape, generator=gen) < 0.5)
    gamma, lmbda = torch.tensor(0.995, dtype=dtype), torch.tensor(0.95, dtype=dtype)
    ours = generalized_advantage(gamma, lmbda, value, next_value, reward, done, terminated,
                                 time_dim=time_dim)
    torchs = generalized_advantage_estimate(gamma, lmbda, value, next_value, reward, done,
                                            terminated, time_dim=time_dim)
    assert all(torch.equal(a, b) for a, b in zip(ours, torchs, strict=True))


@pytest.mark.parametrize("structure", ["extrinsic", "combined"])
def test_exploration_gae_gives_torchrl_s_loop_numbers_and_its_vectorised_form_on_request(
        structure):
    batch = _batch().apply(lambda x: x.float() if x.dtype == torch.float64 else x)
    original = batch.clone()
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1).float()
    loop = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, vectorized=False)
    gae = ExplorationGAE(structure, gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                         value_target="td_lambda")
    out = gae(batch.clone())
    reward = "extrinsic_reward" if structure == "extrinsic" else "reward"
    loop.set_keys(reward=reward)
    if structure == "combined":  # its critic's reward: r_e + η·U with the bonus centred
        bonus = batch["next", "reward"] - batch["next", "extrinsic_reward"]
        batch["next", "reward"] = batch["next", "extrinsic_reward"] + (bonus - bonus.mean())
    expected = loop(batch.clone())
    target = expected["value_target"]
    assert torch.equal(out["value_target"], target)
    if structure == "combined":
        assert torch.equal(out["advantage"], expected["advantage"])
    # asked for, torchrl's vectorised form: its numbers, bit for bit (they round otherwise)
    vectorised = ExplorationGAE(structure, gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                                value_target="td_lambda", vectorized=True)(original)
    torchs = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, vectorized=True)
    torchs.set_keys(reward=reward)
    assert torch.equal(vectorised["value_target"], torchs(batch.clone())["value_target"])



# -- What mutation testing found unasserted (issue 100)

def _extrinsic(**kwargs):
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    return ExplorationGAE("extrinsic", gamma=GAMMA, lmbda=LMBDA, value_network=critic, **kwargs)


def test_generalized_advantage_of_a_value_that_carries_a_gradient_is_torchrl_s_and_differentiable():
    gen = torch.Generator().manual_seed(1)
    value, next_value, reward = torch.randn(3, 2, 30, 1, generator=gen).unbind(0)
    done = torch.rand(2, 30, 1, generator=gen) < 0.1
    terminated = done & (torch.rand(2, 30, 1, generator=gen) < 0.5)
    gamma, lmbda = torch.tensor(0.99), torch.tensor(0.9)
    expected = generalized_advantage_estimate(gamma, lmbda, value, next_value, reward, done,
                                              terminated)
    value.requires_grad_(True)
    advantage, target = generalized_advantage(gamma, lmbda, value, next_value, reward, done,
                                              terminated)
    assert advantage.requires_grad
    assert torch.equal(advantage.detach(), expected[0]) and torch.equal(target.detach(),
                                                                        expected[1])
    moved = generalized_advantage(gamma, lmbda, *(t.transpose(0, 1) for t in (
        value, next_value, reward, done, terminated)), time_dim=0)
    assert torch.equal(moved[0].detach().transpose(0, 1), expected[0])


def test_each_structure_s_default_value_target():
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    assert ExplorationGAE("extrinsic", gamma=GAMMA, lmbda=LMBDA,
                          value_network=critic).value_target == "monte_carlo"
    assert ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA,
                          value_network=critic).value_target == "td_lambda"


def test_gamma_and_lambda_may_be_one():
    gae = ExplorationGAE("extrinsic", gamma=1.0, lmbda=1.0,
                         value_network=_linear_critic([0.3, -0.2, 0.5], 0.1))
    assert (gae.gamma, gae.lmbda) == (1.0, 1.0)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"value_network": None}, "value_network (the critic) is required."),
        ({"gamma": 1.5}, "gamma must be in [0, 1], got 1.5."),
        ({"lmbda": 1.5}, "lmbda must be in [0, 1], got 1.5."),
        ({"lmbda": -0.5}, "lmbda must be a finite number >= 0, got -0.5."),
    ],
)
def test_bad_construction_is_refused_with_the_whole_message(kwargs, message):
    arguments = {"gamma": GAMMA, "lmbda": LMBDA,
                 "value_network": _linear_critic([0.3, -0.2, 0.5], 0.1)} | kwargs
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ExplorationGAE("extrinsic", **arguments)


def test_bad_batches_are_refused_with_the_whole_message():
    gae = _extrinsic()
    batch = _batch()
    batch["next", "info", "height"] = torch.zeros(ENVS, STEPS, 1)  # nested keys are listed whole
    cases = [
        (batch.exclude("next"), KeyError,
         "ExplorationGAE needs transitions with a 'next' entry (as collectors write them); got "
         "keys ['observation']."),
        (batch.exclude(("next", "extrinsic_reward")), KeyError,
         "the 'extrinsic' advantage needs the extrinsic reward at ('next', 'extrinsic_reward'). "
         "A bonus transform (SurpriseRewardTransform, RNDRewardTransform) writes it. Keys "
         "present under 'next': ['observation', 'reward', 'intrinsic_reward', 'done', "
         "'terminated', ('info', 'height')]."),
        (batch.exclude(("next", "done")), KeyError,
         "the 'extrinsic' advantage needs the done flag at ('next', 'done'). Keys present under "
         "'next': ['observation', 'reward', 'extrinsic_reward', 'intrinsic_reward', "
         "'terminated', ('info', 'height')]."),
        (batch.exclude(("next", "reward")), KeyError,
         "the 'extrinsic' advantage needs the reward at ('next', 'reward'). Keys present under "
         "'next': ['observation', 'extrinsic_reward', 'intrinsic_reward', 'done', "
         "'terminated', ('info', 'height')]."),
        (batch[0, 0], RuntimeError,
         "ExplorationGAE needs a batch with a time dimension, [*B, T]."),
    ]
    for bad, error, message in cases:
        # a KeyError's text is its message quoted: the whole of it between the quotes
        whole = re.escape(message) if error is RuntimeError else f'"{re.escape(message)}"'
        whole = f"^{whole}$"
        with pytest.raises(error, match=whole):
            gae(bad.clone())
    with pytest.raises(ValueError, match=re.escape(
            "time_dim 2 is out of range for batch torch.Size([2, 7]).")):
        gae(batch.clone(), time_dim=2)


@pytest.mark.parametrize("value_target", ["monte_carlo", "td_lambda"])
@pytest.mark.parametrize("how", ["time_dim=0", "time_dim=-2", "named"])
def test_the_time_dim_may_be_any_dim_of_the_batch(value_target, how):
    gae = _extrinsic(value_target=value_target)
    expected = gae(_batch())
    moved = _batch().transpose(0, 1)  # [T, B]
    kwargs = {}
    if how == "named":
        moved.names = ["time", None]
    else:
        kwargs["time_dim"] = int(how.split("=")[1])
    out = gae(moved, **kwargs)
    for key in ("advantage", "value_target", "bonus_advantage"):
        torch.testing.assert_close(out[key].transpose(0, 1), expected[key])


def test_an_explicit_last_time_dim_and_a_single_path_are_the_default():
    gae = _extrinsic()
    expected = gae(_batch())
    torch.testing.assert_close(gae(_batch(), time_dim=-1)["advantage"], expected["advantage"])
    single = gae(_batch()[1])  # one path, [T]
    torch.testing.assert_close(single["advantage"], gae(_batch()[1:])["advantage"][0])


def test_a_batch_without_terminated_takes_done_for_it():
    batch = _batch()
    batch["next", "terminated"] = batch["next", "done"].clone()
    for value_target in ("monte_carlo", "td_lambda"):
        gae = _extrinsic(value_target=value_target)
        expected = gae(batch.clone())
        out = gae(batch.exclude(("next", "terminated")))
        for key in ("advantage", "value_target"):
            torch.testing.assert_close(out[key], expected[key])


def test_combined_gae_on_a_reward_without_a_bonus_is_plain_gae():
    batch = _batch().exclude(("next", "extrinsic_reward"), ("next", "intrinsic_reward"))
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    out = ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA, value_network=critic)(batch.clone())
    value, next_value = _values(critic, batch)
    nxt = batch["next"]
    torch.testing.assert_close(out["advantage"], _reference_gae(
        nxt["reward"], value, next_value, nxt["done"], nxt["terminated"], GAMMA, LMBDA))
    assert float(out["bonus_advantage"].abs().max()) == 0.0


def test_custom_advantage_and_value_target_keys_are_accepted_and_written():
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    gae = ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA, value_network=critic)
    gae.set_keys(advantage="adv", value_target="target")
    out = gae(_batch())
    default = ExplorationGAE("combined", gamma=GAMMA, lmbda=LMBDA,
                             value_network=_linear_critic([0.3, -0.2, 0.5], 0.1))(_batch())
    torch.testing.assert_close(out["target"], default["value_target"])
    torch.testing.assert_close(out["adv"], default["advantage"])


def test_the_critic_parameters_given_are_the_ones_used():
    # torchrl's functional call: V(s) with params, V(s') with target_params
    critic = _linear_critic([0.3, -0.2, 0.5], 0.1)
    params = TensorDict.from_module(critic).clone()
    params["module", "weight"].mul_(2.0)
    target_params = TensorDict.from_module(critic).clone().zero_()
    batch = _batch()
    value, _ = _values(_linear_critic([0.6, -0.4, 1.0], 0.1), batch)
    _, next_value = _values(_linear_critic([0.0, 0.0, 0.0], 0.0), batch)
    nxt = batch["next"]
    bonus = nxt["reward"] - nxt["extrinsic_reward"]
    for structure in ("extrinsic", "combined"):
        gae = ExplorationGAE(structure, gamma=GAMMA, lmbda=LMBDA, value_network=critic,
                             value_target="td_lambda")
        out = gae(batch.clone(), params=params, target_params=target_params)
        expected = _reference_gae(nxt["extrinsic_reward"] + (bonus - bonus.mean()), value,
                                  next_value, nxt["done"], nxt["terminated"], GAMMA, LMBDA)
        torch.testing.assert_close(out["advantage"], expected, rtol=1e-6, atol=1e-6)


def test_value_estimate_is_the_value_target_and_leaves_the_batch_alone():
    gae = _extrinsic()
    batch = _batch()
    estimate = gae.value_estimate(batch)
    torch.testing.assert_close(estimate, gae(_batch())["value_target"])
    assert not {"advantage", "value_target"} & set(batch.keys())
