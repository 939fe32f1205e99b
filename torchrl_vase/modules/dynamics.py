"""The dynamics model of VASE with everything that decides what it sees: its data's
standardisation, its target and its likelihood.

The ELBO that trains the model (paper, Eq. 12) and every bonus that evaluates it (Eqs. 4, 6, 10)
take this one object, so they cannot disagree: it owns the Bayesian network, σ_c of the
likelihood ``N(s'; f(s, a; θ), σ_c² I)`` (Eq. 11), the target (s' or s' − s), the encoding of
discrete actions and the standardisation statistics. Disagreement's ensemble and ICM's networks
(``modules.forward_models``) take the same object, for the same data."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchrl_vase import defaults
from torchrl_vase._validation import check_sigma_c
from torchrl_vase.modules.bayesian_mlp import BayesianMLP
from torchrl_vase.modules.forward_models import EnsembleMLP, ICMNetwork

TARGETS = ("next_observation", "delta")
# the authors' code adds 1e-8 to the pool's std before dividing
_STD_EPS = 1e-8
# below this std a feature counts as constant in the pool and is only centred, not scaled
_CONSTANT_STD = 1e-6
# the groups of features the statistics cover: s, a and s' − s
_GROUPS = ("observation", "action", "delta")
# rows per chunk when all of a pool's rows are read: bounds the float64 temporaries
_CHUNK_ROWS = 65536


def _merge_moments(moments: dict, count: int, rows: dict[str, Tensor]) -> int:
    """Merge a block of ``rows`` per group into float64 ``moments`` (mean, sum of squared
    deviations) that cover ``count`` rows (Chan, Golub & LeVeque's pairwise update); the new
    count."""
    added = next(iter(rows.values())).shape[0]
    total = count + added
    for name, block in rows.items():
        block = block.to(torch.float64)
        mean = block.mean(0)
        m2 = (block - mean).square().sum(0)
        if count == 0:
            moments[name] = (mean, m2)
            continue
        # moments restored from a checkpoint, or kept through `.to(device)`, may sit elsewhere
        old_mean, old_m2 = (t.to(block.device) for t in moments[name])
        delta = mean - old_mean
        moments[name] = (old_mean + delta * (added / total),
                         old_m2 + m2 + delta.square() * (count * added / total))
    return total


def _check_action_bounds(bounds, action_dim: int, action_classes: int | None
                         ) -> tuple[Tensor, Tensor]:
    """``(low, high)`` as float64 tensors of ``action_dim`` values, or a clear error."""
    if action_classes is not None:
        raise ValueError("action_bounds clip a continuous action; a discrete one (action_classes) "
                         "has none.")
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise TypeError(f"action_bounds must be a pair (low, high), got {bounds!r}.")
    try:
        low, high = (torch.as_tensor(bound, dtype=torch.float64).broadcast_to(action_dim).clone()
                     for bound in bounds)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"action_bounds must be numbers or {action_dim} values each (one per "
                         f"action feature): {error}") from None
    if not (torch.isfinite(low).all() and torch.isfinite(high).all() and (low < high).all()):
        raise ValueError(f"action_bounds must be finite with low < high, got low {low.tolist()}, "
                         f"high {high.tolist()}.")
    return low, high


class DynamicsModel(nn.Module):
    """A Bayesian dynamics model ``f_m(s, a; θ)`` that owns how its data is prepared.

    ``prepare(obs, action, next_obs)`` returns ``(s, a, y)`` as the network sees them: its dtype,
    discrete actions one-hot, and with ``standardize`` (the authors') standardised by the pool's
    statistics (``update_statistics``; the identity before its first call)::

        s ← (s − μ_s) / (σ_s + 1e-8)     a ← (a − μ_a) / (σ_a + 1e-8)
        y = s'  → (s' − μ_s) / (σ_s + 1e-8)         (target="next_observation"; the authors')
        y = s' − s → (y − μ_Δ) / (σ_Δ + 1e-8)       (target="delta")

    A feature constant in the pool (std < 1e-6) is centred, not scaled (the authors' code would
    divide it by 1e-8).

    Args:
        network: the Bayesian MLP (or an ``EnsembleMLP``, an ``ICMNetwork``); ``in_features`` =
            observation + action features (a discrete action's class count), ``out_features`` =
            observation features.

    Keyword Args:
        sigma_c: σ_c of the likelihood, in the standardised target's units (the authors' 0.5; the
            paper's text 5: ``torchrl_vase.defaults``).
        target: ``"next_observation"`` (the paper's) or ``"delta"``.
        standardize: standardise inputs and target by ``update_statistics``'s data.
        action_classes: a discrete action's class count; integer actions are one-hot encoded.
        action_bounds: ``(low, high)``: continuous actions clipped to them, so the model sees the
            action the env applies (``None``, the authors': the policy's raw sample, which a wide
            policy takes far outside the pool's statistics; docs/guides/transforms.md).

    Examples:
        >>> import torch
        >>> model = DynamicsModel.build(obs_dim=2, action_dim=1, num_cells=[32], sigma_c=0.5)
        >>> obs, action = torch.randn(100, 2) * 10 + 3, torch.randn(100, 1)
        >>> next_obs = obs + 0.1
        >>> model.update_statistics(obs, action, next_obs)
        >>> s, a, y = model.prepare(obs, action, next_obs)
        >>> bool(s.mean().abs() < 1e-5), round(s.std(unbiased=False).item(), 3)
        (True, 1.0)
        >>> model.network(s, a, num_samples=10).shape
        torch.Size([10, 100, 2])
    """

    def __init__(self, network: BayesianMLP | EnsembleMLP | ICMNetwork, *,
                 sigma_c: float = defaults.SIGMA_C,
                 target: str = "next_observation", standardize: bool = True,
                 action_classes: int | None = None,
                 action_bounds: tuple[float | Tensor, float | Tensor] | None = None) -> None:
        super().__init__()
        if not isinstance(network, (BayesianMLP, EnsembleMLP, ICMNetwork)):
            raise TypeError(f"network must be a BayesianMLP, EnsembleMLP or ICMNetwork, got "
                            f"{type(network).__name__}.")
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}.")
        obs_dim = network.out_features
        action_dim = network.in_features - obs_dim
        if action_dim < 1:
            raise ValueError(
                "the network must take cat(observation, action): in_features "
                f"({network.in_features}) must exceed out_features ({obs_dim}).")
        if action_classes is not None and (
            isinstance(action_classes, bool)
            or not isinstance(action_classes, int)
            or action_classes != action_dim):
            raise ValueError(
                f"action_classes ({action_classes!r}) must equal the network's action features "
                f"in_features - out_features = {action_dim}.")
        self.network = network
        self.sigma_c = check_sigma_c(sigma_c)
        self.target = target
        self.standardize = bool(standardize)
        self.action_classes = action_classes
        self.observation_dim = obs_dim
        self.action_dim = action_dim
        first = next(network.parameters())
        factory = {"dtype": first.dtype, "device": first.device}
        if action_bounds is not None:
            low, high = _check_action_bounds(action_bounds, action_dim, action_classes)
            # buffers only when set: an unbounded model's state_dict is what it always was
            self.register_buffer("action_low", low.to(**factory))
            self.register_buffer("action_high", high.to(**factory))
        for name, size in (("observation", obs_dim), ("action", action_dim), ("delta", obs_dim)):
            self.register_buffer(f"{name}_loc", torch.zeros(size, **factory))
            self.register_buffer(f"{name}_scale", torch.ones(size, **factory))
        #: How many transitions the statistics were computed from (0: never set).
        self.register_buffer("statistics_count", torch.zeros((), dtype=torch.long))
        # float64 (mean, sum of squared deviations) per group over those transitions: a pool
        # that grows adds only its new rows (``update_statistics(..., new=)``); kept in the
        # extra state, not in buffers, so that ``.to(dtype)`` leaves them float64
        self._moments: dict[str, tuple[Tensor, Tensor]] = {}

    @classmethod
    def build(cls, obs_dim: int, action_dim: int, num_cells: Sequence[int] = (32,),
              activation_class: type[nn.Module] = nn.ReLU, *, prior_std: float = 0.5,
              init_mean: str = defaults.INIT_MEAN, sigma_c: float = defaults.SIGMA_C,
              target: str = "next_observation", standardize: bool = True,
              action_classes: int | None = None,
              action_bounds: tuple[float | Tensor, float | Tensor] | None = None,
              sampling: str = defaults.SAMPLING, dtype: torch.dtype | None = None) -> DynamicsModel:
        """A model with a new ``BayesianMLP(obs_dim + action_dim, obs_dim, num_cells, ...)``
        (``sampling``: ``BayesianMLP``'s; ``"local_shared"`` is the VASE authors' layer).

        Examples:
            >>> DynamicsModel.build(3, 1, [64, 64], torch.nn.Tanh).network.layer_sizes
            [(4, 64), (64, 64), (64, 3)]
        """
        network = BayesianMLP(obs_dim + action_dim, obs_dim, num_cells, activation_class,
                              prior_std=prior_std, init_mean=init_mean, sampling=sampling,
                              dtype=dtype)
        return cls(network, sigma_c=sigma_c, target=target, standardize=standardize,
                   action_classes=action_classes, action_bounds=action_bounds)

    @property
    def clips_actions(self) -> bool:
        """Whether continuous actions are clipped to ``action_bounds`` (its buffers exist)."""
        return "action_low" in self._buffers

    # -- The posterior, for logging and the VASE confidence term
    def entropy(self) -> Tensor:
        """``H(q)`` of the network's posterior (paper, Eq. 10)."""
        return self.network.entropy()

    def kl_divergence(self) -> Tensor:
        """``KL(q ‖ P)`` of the network's posterior to its prior (paper, Eq. 12)."""
        return self.network.kl_divergence()

    # -- Data
    def encode_action(self, action: Tensor, batch_shape: torch.Size) -> Tensor:
        """The action as the network sees it: one-hot for integer actions, clipped to
        ``action_bounds`` if the model has them, the network's dtype."""
        if not isinstance(action, Tensor):
            raise TypeError(f"action must be a torch.Tensor, got {type(action).__name__}.")
        one_hot_shape = (*batch_shape, self.action_dim)
        if not action.dtype.is_floating_point and action.shape != one_hot_shape:
            if self.action_classes is None:
                raise TypeError(
                    f"action has integer dtype {action.dtype} but the model has no "
                    "action_classes; pass action_classes=... for a discrete action space.")
            if action.shape == (*batch_shape, 1):
                action = action.squeeze(-1)
            if action.shape != batch_shape:
                raise ValueError(
                    f"an integer (index) action must have shape {tuple(batch_shape)} or "
                    f"{(*batch_shape, 1)}, got {tuple(action.shape)}.")
            if action.numel() and (action.min() < 0 or action.max() >= self.action_classes):
                raise ValueError(f"action indices must lie in [0, {self.action_classes}).")
            action = F.one_hot(action.long(), self.action_classes)
        action = action.to(self.observation_loc.device, self.observation_loc.dtype)
        if self.clips_actions and action.dtype.is_floating_point:
            # a non-finite action is refused by _check, not hidden by the clip
            return torch.where(action.isfinite(), action.clamp(self.action_low, self.action_high),
                               action)
        return action

    def _check(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> tuple[Tensor, ...]:
        for name, tensor in (("observation", obs), ("next observation", next_obs)):
            if not isinstance(tensor, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}.")
            if not tensor.dtype.is_floating_point:
                raise TypeError(f"{name} has dtype {tensor.dtype}; expected floating point.")
            if tensor.dim() == 0 or tensor.shape[-1] != self.observation_dim:
                raise ValueError(
                    f"{name} has shape {tuple(tensor.shape)}; the model needs "
                    f"[*batch, {self.observation_dim}].")
        if next_obs.shape != obs.shape:
            raise ValueError(
                f"observation {tuple(obs.shape)} and next observation {tuple(next_obs.shape)} "
                "must have the same shape.")
        batch_shape = obs.shape[:-1]
        action = self.encode_action(action, batch_shape)
        if action.shape != (*batch_shape, self.action_dim):
            raise ValueError(
                f"action has shape {tuple(action.shape)} (as encoded); the model needs "
                f"{(*batch_shape, self.action_dim)} for observations of shape {tuple(obs.shape)}.")
        # the model's device and dtype: data from CPU envs reaches a model on the GPU
        where = {"device": self.observation_loc.device, "dtype": self.observation_loc.dtype}
        obs, next_obs = obs.to(**where), next_obs.to(**where)
        named = (("observation", obs), ("action", action), ("next observation", next_obs))
        for name, tensor in named:
            if not torch.isfinite(tensor).all():
                raise ValueError(f"{name} contains non-finite values (nan or inf).")
        return obs, action, next_obs

    @torch.no_grad()
    def update_statistics(self, obs: Tensor, action: Tensor, next_obs: Tensor, *,
                          new: int | None = None) -> None:
        """Set the standardisation statistics from these transitions (leading dims pooled): the
        population std, as the authors compute it over the whole pool each iteration.

        They come from float64 running moments: with ``new``, the rows are the last call's
        followed by ``new`` more, and only those are read (an iteration costs its batch, not its
        pool); moments that do not cover exactly the rows before (another pool, a wrapped ring)
        read every row.

        Examples:
            >>> import torch
            >>> model = DynamicsModel.build(obs_dim=2, action_dim=1)
            >>> obs, next_obs = torch.randn(300, 2), torch.randn(300, 2)
            >>> action = torch.randn(300, 1)
            >>> model.update_statistics(obs[:200], action[:200], next_obs[:200])
            >>> model.update_statistics(obs, action, next_obs, new=100)  # reads rows 200-299
            >>> torch.allclose(model.observation_scale, obs.std(0, unbiased=False))
            True
        """
        if not all(isinstance(t, Tensor) and t.dim() > 0 for t in (obs, next_obs)):
            self._check(obs, action, next_obs)  # raises what is wrong
        dims = obs.dim() - 1
        rows = [t.reshape(-1, t.shape[-1]) if t.dim() > dims else t.reshape(-1)
                for t in (obs, action, next_obs)]
        count = rows[0].shape[0]
        if new is not None and (isinstance(new, bool) or not isinstance(new, int)
                                or not 0 <= new <= count):
            raise ValueError(f"new must be an int in [0, {count}] (the rows added last), got "
                             f"{new!r}.")
        if count < 2:
            raise ValueError(f"statistics need at least 2 transitions, got {count}.")
        start = count - new if new is not None and self._covers(count - new) else 0
        if start == 0:
            self._moments, covered = {}, 0
        else:
            covered = start
        for first in range(start, count, _CHUNK_ROWS):
            block = [t[first : first + _CHUNK_ROWS] for t in rows]
            block_obs, block_action, block_next = self._check(*block)
            covered = _merge_moments(self._moments, covered, {
                "observation": block_obs.reshape(-1, self.observation_dim),
                "action": block_action.reshape(-1, self.action_dim),
                "delta": (block_next - block_obs).reshape(-1, self.observation_dim)})
        for name in _GROUPS:
            mean, m2 = self._moments[name]
            std = (m2 / covered).sqrt()
            getattr(self, f"{name}_loc").copy_(mean)
            # a feature constant in the pool (a contact force never felt yet, an action class
            # never taken) is left unscaled: dividing by 1e-8, as the authors' code would, turns
            # its first change into an input of millions
            getattr(self, f"{name}_scale").copy_(torch.where(std < _CONSTANT_STD, 1.0, std))
        self.statistics_count.fill_(covered)

    def _covers(self, rows: int) -> bool:
        """Whether the running moments are those of exactly ``rows`` earlier rows."""
        return rows > 0 and bool(self._moments) and int(self.statistics_count) == rows

    def get_extra_state(self) -> dict:
        """The running moments behind the statistics (float64), for an exact resume."""
        return {name: [t.clone() for t in pair] for name, pair in self._moments.items()}

    def set_extra_state(self, state: dict | None) -> None:
        device = self.observation_loc.device  # a checkpoint's moments may be the CPU's
        self._moments = ({} if not state else
                         {name: tuple(t.to(device, torch.float64) for t in pair)
                          for name, pair in state.items()})

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # a state from before the moments existed: none (the next update reads every row)
        state_dict.setdefault(prefix + "_extra_state", None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def prepare(
        self, obs: Tensor, action: Tensor, next_obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(s, a, y)``: checked, cast, encoded and (if ``standardize``) standardised; ``y`` is s'
        or s' − s."""
        obs, action, next_obs = self._check(obs, action, next_obs)
        target = next_obs - obs if self.target == "delta" else next_obs
        if not self.standardize:
            return obs, action, target
        obs_loc, obs_scale = self.observation_loc, self.observation_scale + _STD_EPS
        if self.target == "delta":
            target = (target - self.delta_loc) / (self.delta_scale + _STD_EPS)
        else:
            target = (target - obs_loc) / obs_scale
        obs = (obs - obs_loc) / obs_scale
        action = (action - self.action_loc) / (self.action_scale + _STD_EPS)
        return obs, action, target

    def extra_repr(self) -> str:
        return (
            f"sigma_c={self.sigma_c}, target={self.target!r}, standardize={self.standardize}, "
            f"action_classes={self.action_classes}, clips_actions={self.clips_actions}")
