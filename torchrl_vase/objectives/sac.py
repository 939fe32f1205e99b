"""torchrl's SAC loss with its forward pass as a few tensor operations."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import NormalParamExtractor
from torch import Tensor, nn
from torchrl.modules import MLP, TanhNormal
from torchrl.objectives import SACLoss
from torchrl.objectives.utils import distance_loss
from torchrl.objectives.value import TD0Estimator
from torchrl.objectives.value.functional import td0_return_estimate

from torchrl_vase.modules.networks import activate, mlp_layers

__all__ = ["FusedSACLoss"]


def _layers(module: nn.Module, prefix: str) -> list[tuple[tuple[str, ...], nn.Module | None]]:
    """The one ``MLP`` of ``module``: each Linear's parameter path, the activation after it."""
    mlps = [(name, m) for name, m in module.named_modules() if isinstance(m, MLP)]
    if len(mlps) != 1:
        raise TypeError(f"FusedSACLoss: the {prefix} must hold exactly one torchrl MLP.")
    name, mlp = mlps[0]
    try:
        return [((*name.split("."), str(index)), activation)
                for index, activation in mlp_layers(mlp)]
    except TypeError as error:
        raise TypeError(f"FusedSACLoss: the {prefix}'s {error}") from None


class FusedSACLoss(SACLoss):
    """torchrl's ``SACLoss`` (version 2, twin critics, TD(0) targets) whose ``forward`` computes
    the same losses, value for value and gradient for gradient given the same random numbers, as
    a few batched matrix products: the critics' copies in one ``baddbmm`` a layer, no tensordict
    per network call. Everything else (parameters, target networks, ``SoftUpdate``, keys,
    ``state_dict``) is ``SACLoss``'s.

    It takes the actor ``tanh_policy`` builds (an ``MLP``, a ``NormalParamExtractor``, a
    ``TanhNormal`` on [−1, 1]) and a ``q_value_network`` (an ``MLP`` on ``[action,
    observation]``); anything else is refused at construction (use ``SACLoss``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl_vase import q_value_network, tanh_policy
        >>> actor, q = tanh_policy(3, 1, [16]), q_value_network(3, 1, [16])
        >>> from torchrl.objectives import SoftUpdate
        >>> loss = FusedSACLoss(actor, q, action_spec=actor.spec, loss_function="l2")
        >>> target_updater = SoftUpdate(loss, tau=0.005)
        >>> loss.make_value_estimator(gamma=0.99)
        >>> batch = TensorDict({"observation": torch.randn(8, 3), "action": torch.rand(8, 1),
        ...     "next": {"observation": torch.randn(8, 3), "reward": torch.randn(8, 1),
        ...              "done": torch.zeros(8, 1, dtype=torch.bool),
        ...              "terminated": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
        >>> sorted(loss(batch).keys())
        ['alpha', 'entropy', 'loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    def __init__(self, actor_network: nn.Module, qvalue_network: nn.Module, **kwargs) -> None:
        super().__init__(actor_network, qvalue_network, **kwargs)
        try:
            head, distribution = actor_network.module[0].module, actor_network.module[-1]
            extractors = [m for m in head.modules() if isinstance(m, NormalParamExtractor)]
            bounds = dict(distribution.distribution_kwargs)
            plain = (len(extractors) == 1 and distribution.distribution_class is TanhNormal
                     and float(bounds.get("low", -1.0)) == -1.0
                     and float(bounds.get("high", 1.0)) == 1.0 and not bounds.get("tanh_loc"))
        except (AttributeError, TypeError, IndexError):
            plain = False
        if not plain:
            raise TypeError("FusedSACLoss takes tanh_policy's actor (an MLP, a "
                            "NormalParamExtractor and a TanhNormal on [-1, 1] without tanh_loc); "
                            "use torchrl's SACLoss for another actor.")
        self._observation_key = actor_network.in_keys[0]
        if list(qvalue_network.in_keys) != [self.tensor_keys.action, self._observation_key]:
            raise TypeError("FusedSACLoss takes q_value_network's critic (in_keys ['action', "
                            "'observation']); use torchrl's SACLoss for another critic.")
        if self._version != 2 or self.skip_done_states or self.reduction != "mean":
            raise ValueError("FusedSACLoss computes SAC version 2 (no value network), the mean "
                             "over a batch, every transition: use torchrl's SACLoss otherwise.")
        self._extractor = extractors[0]
        self._distribution_kwargs = bounds
        self._actor_layers = [(("module", "0", "module", *path), act)
                              for path, act in _layers(head, "actor")]
        self._q_layers = _layers(qvalue_network, "critic")
        self._found: dict[str, list] = {}

    def _weights(self, which: str, detach: bool = False) -> list:
        """The ``(weight, bias, activation)`` of each layer of the ``which`` parameters
        (``actor_network_params``, ``qvalue_network_params`` or their target), looked up once:
        they are updated in place, and replaced only by a load or a move (``_apply``)."""
        if which not in self._found:
            params, layers = getattr(self, which), (
                self._actor_layers if which.startswith("actor") else self._q_layers)
            self._found[which] = [(params.get((*path, "weight")), params.get((*path, "bias")),
                                   activation) for path, activation in layers]
        found = self._found[which]
        return [(w.detach(), b.detach(), a) for w, b, a in found] if detach else found

    def _apply(self, *args, **kwargs):
        self._found = {}
        return super()._apply(*args, **kwargs)

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        self._found = {}
        super()._load_from_state_dict(*args, **kwargs)

    def _act(self, observation: Tensor) -> tuple[Tensor, Tensor]:
        """An action of the tanh-squashed policy and its log-probability: the policy's network run
        as its own operations, then ``TanhNormal.rsample_and_log_prob``, as ``SACLoss`` draws
        them."""
        h = observation
        for weight, bias, activation in self._weights("actor_network_params"):
            h = activate(torch.addmm(bias, h, weight.T), activation)
        loc, scale = self._extractor(h)
        return TanhNormal(loc, scale, **self._distribution_kwargs).rsample_and_log_prob()

    def _q(self, weights: list, action: Tensor, observation: Tensor) -> Tensor:
        """Every critic copy's ``Q(s, a)``, ``[copies, batch]``."""
        h = torch.cat([action, observation], -1).expand(self.num_qvalue_nets, *action.shape[:-1],
                                                        action.shape[-1] + observation.shape[-1])
        for weight, bias, activation in weights:
            h = activate(torch.baddbmm(bias.unsqueeze(-2), h, weight.transpose(-1, -2)),
                         activation)
        return h.squeeze(-1)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        estimator = self.value_estimator
        if type(estimator) is not TD0Estimator:
            raise TypeError("FusedSACLoss computes TD(0) targets: make its value estimator "
                            "with make_value_estimator(gamma=...) (TD0, the default).")
        keys, value_keys = self.tensor_keys, estimator.tensor_keys
        observation = tensordict.get(self._observation_key)
        next_observation = tensordict.get(("next", self._observation_key))
        alpha = self._alpha
        with torch.no_grad():
            next_action, next_log_prob = self._act(next_observation)
            next_q = self._q(self._weights("target_qvalue_network_params"),
                             next_action, next_observation)
            next_value = (next_q - alpha * next_log_prob).min(0)[0]
            reward = tensordict.get(("next", value_keys.reward)).squeeze(-1)
            terminated = tensordict.get(("next", value_keys.terminated)).squeeze(-1)
            target = td0_return_estimate(estimator.gamma, next_value, reward, terminated)
        predicted = self._q(self._weights("qvalue_network_params"),
                            tensordict.get(keys.action), observation)
        loss_qvalue = distance_loss(predicted, target.expand_as(predicted),
                                    loss_function=self.loss_function).sum(0).mean()
        action, log_prob = self._act(observation)
        q_new = self._q(self._weights("qvalue_network_params", detach=True),
                        action, observation).min(0)[0]
        tensordict.set(keys.priority, (predicted - target).abs().detach().max(0)[0])
        return TensorDict({
            "loss_actor": (alpha * log_prob - q_new).mean(),
            "loss_qvalue": loss_qvalue,
            "loss_alpha": self._alpha_loss(log_prob.detach()).mean(),
            "alpha": alpha,
            "entropy": -log_prob.detach().mean(),
        }, batch_size=[])
