"""FusedSACLoss against torchrl's SACLoss: the same losses and gradients, bit for bit, from the
same random numbers."""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict
from torch import nn
from torchrl.objectives import SACLoss, SoftUpdate, ValueEstimators

from torchrl_vase import gaussian_policy, q_value_network, tanh_policy
from torchrl_vase.objectives.sac import FusedSACLoss

OBS, ACTION = 5, 2


def _batch(rows: int = 64, seed: int = 0) -> TensorDict:
    generator = torch.Generator().manual_seed(seed)
    return TensorDict({
        "observation": torch.randn(rows, OBS, generator=generator),
        "action": torch.rand(rows, ACTION, generator=generator) * 2 - 1,
        "next": {"observation": torch.randn(rows, OBS, generator=generator),
                 "reward": torch.randn(rows, 1, generator=generator),
                 "done": torch.zeros(rows, 1, dtype=torch.bool),
                 "terminated": torch.rand(rows, 1, generator=generator) < 0.2}}, [rows])


def _pair(cells, activation, **kwargs) -> tuple[FusedSACLoss, SACLoss]:
    torch.manual_seed(0)
    actor = tanh_policy(OBS, ACTION, cells, activation=activation)
    q = q_value_network(OBS, ACTION, cells, activation=activation)
    fused = FusedSACLoss(actor, q, action_spec=actor.spec, delay_qvalue=True, **kwargs)
    reference = SACLoss(copy.deepcopy(actor), copy.deepcopy(q), action_spec=actor.spec,
                        delay_qvalue=True, **kwargs)  # its own copies, so each loss steps alone
    for loss in (fused, reference):
        SoftUpdate(loss, tau=0.005)  # the targets' updater (not stepped here)
    with torch.no_grad():  # the critics' copies start apart: give both losses the same ones
        reference.qvalue_network_params.data.copy_(fused.qvalue_network_params.data)
        fused.target_qvalue_network_params.data.copy_(
            fused.qvalue_network_params.data * 0.9 + 0.01)  # targets that differ from the critics
        reference.target_qvalue_network_params.data.copy_(fused.target_qvalue_network_params.data)
    for loss in (fused, reference):
        loss.make_value_estimator(ValueEstimators.TD0, gamma=0.97)
    return fused, reference


def _run(loss, batch: TensorDict) -> tuple[TensorDict, list[torch.Tensor]]:
    torch.manual_seed(7)  # the two actions' noise, drawn in the same order by both
    out = loss(batch)
    (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
    grads = [p.grad.clone() for p in (*loss.actor_network_params.values(True, True),
                                       *loss.qvalue_network_params.values(True, True),
                                       loss.log_alpha)]
    loss.zero_grad(set_to_none=True)
    return out.detach(), grads


@pytest.mark.parametrize(("cells", "activation", "kwargs"), [
    ([32, 32], nn.ReLU, {"loss_function": "l2", "alpha_init": 0.3}),
    ([16, 16, 16], nn.Tanh, {"loss_function": "smooth_l1", "alpha_init": 1.7}),
    ([24], nn.ELU, {"loss_function": "l2", "num_qvalue_nets": 3, "alpha_init": 0.2,
                    "min_alpha": 0.5}),
])
def test_losses_and_gradients_equal_torchrls_sac_given_the_same_random_numbers(cells, activation,
                                                                               kwargs):
    fused, reference = _pair(cells, activation, **kwargs)
    batch = _batch()
    expected, expected_grads = _run(reference, batch.clone())
    got_batch = batch.clone()
    got, got_grads = _run(fused, got_batch)
    # bit for bit: the same operations in the same order (a run keeps its numbers)
    for key in ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy"):
        assert torch.equal(got[key], expected[key]), key
    assert expected["loss_alpha"] != 0  # the temperature's loss is exercised
    for got_grad, expected_grad in zip(got_grads, expected_grads, strict=True):
        assert torch.equal(got_grad, expected_grad)
    # the priority SACLoss writes into the sample: the largest critic error
    assert torch.equal(got_batch["td_error"], _priority(reference, batch))


def _priority(loss, batch: TensorDict) -> torch.Tensor:
    torch.manual_seed(7)
    loss(batch)
    return batch["td_error"]


def test_a_terminated_transition_does_not_bootstrap():
    fused, _ = _pair([16], nn.ReLU, loss_function="l2")
    batch = _batch(rows=2)
    batch["next", "terminated"] = torch.tensor([[True], [False]])
    with torch.no_grad():  # target critics that answer 1000 whatever the input
        for weight in fused.target_qvalue_network_params.values(True, True):
            weight.zero_()
        fused.target_qvalue_network_params["module", "2", "bias"].fill_(1000.0)
        for weight in fused.qvalue_network_params.values(True, True):
            weight.data.zero_()
    out = fused(batch)
    reward = batch["next", "reward"].squeeze(-1)
    # Q ≡ 0: the critic loss is the mean over copies' sum of (0 − target)²; the terminated
    # transition's target is its reward alone, the other's reward + γ (1000 − α log π)
    assert out["loss_qvalue"] > 2 * (0.97 * 900) ** 2 / 2
    assert out["loss_qvalue"] < 2 * ((reward[0] ** 2 + (reward[1] + 0.97 * 1100) ** 2) / 2)


def test_other_actors_and_estimators_are_refused_with_the_way_out():
    q = q_value_network(OBS, ACTION, [8])
    actor = gaussian_policy(OBS, ACTION, [8])
    with pytest.raises(TypeError, match=r"tanh_policy's actor .* use torchrl's SACLoss"):
        FusedSACLoss(actor, q, action_spec=tanh_policy(OBS, ACTION, [8]).spec)
    fused, _ = _pair([8], nn.ReLU, loss_function="l2")
    fused.make_value_estimator(ValueEstimators.TDLambda, gamma=0.9, lmbda=0.9)
    with pytest.raises(TypeError, match=r"TD\(0\) targets"):
        fused(_batch())


def test_it_follows_its_parameters_through_optimiser_steps_target_updates_and_a_reload():
    fused, reference = _pair([16, 16], nn.ReLU, loss_function="l2", alpha_init=0.5)
    updaters = {id(loss): SoftUpdate(loss, tau=0.3) for loss in (fused, reference)}
    optimisers = {id(loss): torch.optim.SGD(loss.parameters(), lr=0.05)
                  for loss in (fused, reference)}
    for seed in range(3):
        outs = []
        for loss in (fused, reference):
            torch.manual_seed(seed)
            out = loss(_batch(seed=seed))
            (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
            optimisers[id(loss)].step()
            optimisers[id(loss)].zero_grad(set_to_none=True)
            updaters[id(loss)].step()
            outs.append(out.detach())
        assert torch.equal(outs[0]["loss_qvalue"], outs[1]["loss_qvalue"])
        assert torch.equal(outs[0]["loss_actor"], outs[1]["loss_actor"])
    # a reloaded state is the one used next
    fused.load_state_dict(reference.state_dict())
    batch = _batch(seed=9)
    expected = (torch.manual_seed(9), reference(batch.clone()))[1]
    got = (torch.manual_seed(9), fused(batch.clone()))[1]
    assert torch.equal(got["loss_qvalue"], expected["loss_qvalue"])
