"""The learners' networks: rllab's Gaussian policy as a TorchRL actor, the initialisations TRPO
implementations use, the critic's standardised regressor (rllab's baselines), and SAC's
tanh-squashed actor and Q network as torchrl's SAC example builds them.

The state-independent log-std of rllab's ``GaussianMLPPolicy`` is tensordict's
``AddStateIndependentNormalScale`` with ``scale_lb=0`` (``exp(log_std)``, no floor): the same
numbers as rllab's head. Its distribution is ``FiniteLogProbNormal``: torch's ``IndependentNormal``
whose log-density stays finite for the very wide stds rllab's policy can learn."""

from __future__ import annotations

import math

import torch
from tensordict.nn import (
    AddStateIndependentNormalScale,
    InteractionType,
    NormalParamExtractor,
    TensorDictModule,
)
from torch import Tensor, nn
from torch.distributions.utils import _sum_rightmost
from torchrl.data import Bounded
from torchrl.modules import MLP, IndependentNormal, ProbabilisticActor, TanhNormal, ValueOperator

from torchrl_vase._validation import check_layer_widths, check_positive_int

INITIALIZATIONS = ("torch", "glorot", "orthogonal")
#: hidden-unit activations by the name a config gives them
ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


class FiniteLogProbNormal(IndependentNormal):
    """torchrl's ``IndependentNormal`` whose ``log_prob`` stays right while the scale is finite.

    torch's ``Normal.log_prob`` turns ``−inf``, ``nan`` or drops its quadratic term once ``σ²`` or
    ``(a − μ)²`` leaves float32's normal range (``|log σ|`` above ~43, which TRPO's learned log-std
    passes under VIME on HalfCheetah); rllab standardises first, ``−((a − μ)/σ)²/2 − log σ − …``.
    That form is used where torch's is not finite or ``σ²`` is not a normal float; elsewhere the
    result is torch's, bit for bit.

    Examples:
        >>> import torch
        >>> from torchrl.modules import IndependentNormal
        >>> loc, scale = torch.zeros(1, 2), torch.tensor([[1.0, 3e19]])
        >>> action = torch.tensor([[0.5, 3e19]])
        >>> IndependentNormal(loc, scale).log_prob(action).isnan().item()
        True
        >>> # rllab's form: −0.5²/2 − 1²/2 − log 3e19 − log 2π
        >>> FiniteLogProbNormal(loc, scale).log_prob(action)
        tensor([-47.3106])
    """

    def log_prob(self, value: Tensor) -> Tensor:
        normal = self.base_dist
        torch_form = normal.log_prob(value)
        variance = normal.scale.detach() ** 2
        outside = (
            ~torch.isfinite(torch_form)
            | ~torch.isfinite(variance)
            | (variance < torch.finfo(variance.dtype).tiny))
        if not outside.any():
            return _sum_rightmost(torch_form, self.reinterpreted_batch_ndims)
        # Both forms recomputed on inputs made harmless where each is not used, so that neither
        # one's inf or nan reaches the gradients through torch.where.
        loc, scale = normal.loc.expand_as(torch_form), normal.scale.expand_as(torch_form)
        value = value.expand_as(torch_form)
        one = torch.ones_like(torch_form)
        torch_form = torch.distributions.Normal(
            torch.where(outside, one, loc), torch.where(outside, one, scale)
        ).log_prob(torch.where(outside, one, value))
        wide_scale = torch.where(outside, scale, one)
        deviation = torch.where(outside, value, one) - torch.where(outside, loc, one)
        standardized_form = (
            -0.5 * (deviation / wide_scale) ** 2
            - wide_scale.log()
            - math.log(math.sqrt(2 * math.pi)))
        log_prob = torch.where(outside, standardized_form, torch_form)
        return _sum_rightmost(log_prob, self.reinterpreted_batch_ndims)


def mlp_layers(mlp: MLP) -> list[tuple[int, nn.Module | None]]:
    """A torchrl ``MLP`` as the index of each ``nn.Linear`` (with a bias) and the activation after
    it (``None`` after the last), for code that runs its layers as tensor operations; a
    ``TypeError`` unless it alternates the two.

    Examples:
        >>> [(i, type(a).__name__) for i, a in mlp_layers(MLP(3, 1, num_cells=[8]))]
        [(0, 'Tanh'), (2, 'NoneType')]
    """
    linears = [i for i, module in enumerate(mlp) if isinstance(module, nn.Linear)
               and module.bias is not None]
    layers = [(i, mlp[i + 1] if k < len(linears) - 1 else None) for k, i in enumerate(linears)]
    if [i for i, _ in layers] != list(range(0, len(mlp), 2)) or len(mlp) != 2 * len(layers) - 1:
        raise TypeError("the MLP must alternate nn.Linear layers (with biases) and activations.")
    return layers


def activate(h: Tensor, activation: nn.Module | None) -> Tensor:
    """``activation(h)`` for ``h`` a matrix product's own output, which is not needed again: a
    ReLU in place and a Tanh as ``torch.tanh`` (their modules' values, without a module call or
    a second buffer); any other activation called as it is."""
    if activation is None:
        return h
    kind = type(activation)
    return h.relu_() if kind is nn.ReLU else torch.tanh(h) if kind is nn.Tanh else activation(h)


@torch.no_grad()
def initialize_(network: nn.Module, scheme: str, *, output_gain: float = 1.0) -> nn.Module:
    """Re-initialise every ``nn.Linear`` of a network in place and return it: ``"torch"`` (PyTorch's
    own), ``"glorot"`` (rllab's: Glorot-uniform weights, zero biases) or ``"orthogonal"``
    (sb3's: gain √2, the last layer ``output_gain``, zero biases).

    Examples:
        >>> from torch import nn
        >>> net = initialize_(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)),
        ...                   "orthogonal", output_gain=0.01)
        >>> float(net[0].bias.detach().abs().max()), round(float(net[2].weight.detach().norm()), 4)
        (0.0, 0.0141)
    """
    if scheme not in INITIALIZATIONS:
        raise ValueError(f"scheme must be one of {INITIALIZATIONS}, got {scheme!r}.")
    if scheme == "torch":
        return network
    layers = [m for m in network.modules() if isinstance(m, nn.Linear)]
    for i, layer in enumerate(layers):
        if scheme == "glorot":
            nn.init.xavier_uniform_(layer.weight)
        else:
            gain = output_gain if i == len(layers) - 1 else math.sqrt(2)
            nn.init.orthogonal_(layer.weight, gain=gain)
        if layer.bias is not None:
            layer.bias.zero_()
    return network


def gaussian_policy(obs_dim: int, action_dim: int, num_cells: list[int], init: str = "torch", *,
                    init_log_std: float = 0.0,
                    device: torch.device | str | None = None) -> ProbabilisticActor:
    """rllab's ``GaussianMLPPolicy`` as a TorchRL actor: a tanh MLP for the mean, a
    state-independent log-std starting at ``init_log_std`` and a ``FiniteLogProbNormal`` over
    actions in [−1, 1] (the envs scale them to their bounds). The recipe's policy, and what
    ``load_policy`` rebuilds.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> policy = gaussian_policy(2, 1, [32])
        >>> policy(TensorDict({"observation": torch.zeros(4, 2)}, [4]))["action"].shape
        torch.Size([4, 1])
    """
    if not math.isfinite(init_log_std) or abs(init_log_std) > 20:
        raise ValueError(
            f"init_log_std must be in [-20, 20], got {init_log_std}: its std exp(init_log_std) "
            "(in [-1, 1] action units) would leave float32 or make every action the bound.")
    num_cells = check_layer_widths("num_cells", num_cells)
    mean = MLP(obs_dim, action_dim, num_cells=num_cells, activation_class=nn.Tanh)
    head = nn.Sequential(
        initialize_(mean, init, output_gain=0.01),
        AddStateIndependentNormalScale(action_dim, scale_lb=0.0, init_value=init_log_std),
    ).to(device)
    return ProbabilisticActor(TensorDictModule(head, ["observation"], ["loc", "scale"]),
                              in_keys=["loc", "scale"], distribution_class=FiniteLogProbNormal,
                              return_log_prob=True)


@torch.no_grad()
def tanh_policy(obs_dim: int, action_dim: int, num_cells: list[int], *,
                activation: type[nn.Module] = nn.ReLU, default_scale: float = 1.0,
                scale_lb: float = 0.1,
                device: torch.device | str | None = None) -> ProbabilisticActor:
    """SAC's actor as torchrl's SAC example builds it: an MLP giving ``(loc, scale)`` (a biased
    softplus: ``default_scale`` at zero input, at least ``scale_lb``) and a ``TanhNormal`` over
    [−1, 1]; its deterministic action is ``tanh(loc)``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> policy = tanh_policy(2, 1, [32, 32])
        >>> action = policy(TensorDict({"observation": torch.zeros(4, 2)}, [4]))["action"]
        >>> action.shape, bool(action.abs().max() < 1)
        (torch.Size([4, 1]), True)
    """
    num_cells = check_layer_widths("num_cells", num_cells)
    if not (math.isfinite(scale_lb) and scale_lb > 0 and default_scale > scale_lb):
        raise ValueError(f"need 0 < scale_lb < default_scale, got scale_lb={scale_lb}, "
                         f"default_scale={default_scale}.")
    head = nn.Sequential(
        MLP(obs_dim, 2 * action_dim, num_cells=num_cells, activation_class=activation),
        NormalParamExtractor(scale_mapping=f"biased_softplus_{default_scale}",
                             scale_lb=scale_lb),
    ).to(device)
    return ProbabilisticActor(TensorDictModule(head, ["observation"], ["loc", "scale"]),
                              in_keys=["loc", "scale"],
                              spec=Bounded(-1.0, 1.0, (action_dim,), device=device),
                              distribution_class=TanhNormal,
                              distribution_kwargs={"low": -1.0, "high": 1.0, "tanh_loc": False},
                              default_interaction_type=InteractionType.RANDOM)


def q_value_network(obs_dim: int, action_dim: int, num_cells: list[int], *,
                    activation: type[nn.Module] = nn.ReLU,
                    device: torch.device | str | None = None) -> ValueOperator:
    """``Q(s, a)``: an MLP on ``[action, observation]`` writing ``state_action_value`` (what
    torchrl's ``SACLoss`` reads; it makes the twin copies itself).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> q = q_value_network(2, 1, [32])
        >>> q(TensorDict({"observation": torch.zeros(4, 2), "action": torch.zeros(4, 1)},
        ...              [4]))["state_action_value"].shape
        torch.Size([4, 1])
    """
    num_cells = check_layer_widths("num_cells", num_cells)
    net = MLP(obs_dim + action_dim, 1, num_cells=num_cells, activation_class=activation)
    return ValueOperator(net.to(device), in_keys=["action", "observation"])


# rllab adds 1e-8 to the std of inputs and targets
_STD_EPS = 1e-8


class StandardizedRegressor(nn.Module):
    """``y = μ_y + σ_y · network((x − μ_x) / σ_x)``, the statistics refitted to each training set.

    rllab's ``GaussianMLPBaseline`` (the authors' critic on the classic tasks) standardises by each
    fit's data; before a sparse task's first reward every target is 0, so σ_y = 0 and the critic
    predicts exactly 0, leaving the bonus alone in the advantage. ``fit_statistics(x, y)`` sets the
    statistics (buffers; the identity before the first call); ``fit_critic`` calls it.

    Args:
        network: the regression network, ``[*B, in_features] → [*B, out_features]``.
        in_features: its input size.
        out_features: its output size.

    Examples:
        >>> import torch
        >>> regressor = StandardizedRegressor(torch.nn.Linear(3, 1), in_features=3)
        >>> x = torch.randn(100, 3)
        >>> regressor.fit_statistics(x, torch.zeros(100, 1))
        >>> regressor(x).abs().max().item() < 1e-6  # every target was 0
        True
    """

    def __init__(self, network: nn.Module, in_features: int, out_features: int = 1) -> None:
        super().__init__()
        check_positive_int("in_features", in_features)
        check_positive_int("out_features", out_features)
        self.network = network
        self.in_features = in_features
        self.out_features = out_features
        self.register_buffer("input_loc", torch.zeros(in_features))
        self.register_buffer("input_scale", torch.ones(in_features))
        self.register_buffer("output_loc", torch.zeros(out_features))
        self.register_buffer("output_scale", torch.ones(out_features))

    @torch.no_grad()
    def fit_statistics(self, inputs: Tensor, targets: Tensor) -> None:
        """Set the statistics from a training set: ``inputs [*B, in]``, ``targets [*B, out]``."""
        if inputs.shape[-1:] != (self.in_features,) or targets.shape[-1:] != (self.out_features,):
            raise ValueError(
                f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} must end in "
                f"{self.in_features} and {self.out_features} features.")
        x = inputs.reshape(-1, self.in_features)
        y = targets.reshape(-1, self.out_features)
        if x.shape[0] != y.shape[0] or x.shape[0] < 2:
            raise ValueError("fit_statistics needs at least 2 (input, target) pairs, as many each.")
        for name, value in (("input", x), ("output", y)):
            getattr(self, f"{name}_loc").copy_(value.mean(0))
            getattr(self, f"{name}_scale").copy_(value.std(0, unbiased=False) + _STD_EPS)

    def forward(self, *inputs: Tensor) -> Tensor:
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, dim=-1)
        out = self.network((x - self.input_loc) / self.input_scale)
        return self.output_loc + self.output_scale * out
