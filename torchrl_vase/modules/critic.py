"""A regressor that standardises its inputs and its targets, as rllab's baselines do."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from torchrl_vase._validation import check_positive_int

# rllab adds 1e-8 to the std of inputs and targets
_STD_EPS = 1e-8


class StandardizedRegressor(nn.Module):
    """``y = μ_y + σ_y · network((x − μ_x) / σ_x)``, the statistics refitted to each training set.

    rllab's ``GaussianMLPBaseline`` (the VASE authors' critic on the classic tasks) normalises
    its inputs and outputs by the mean and std of the data of each fit. With a critic fitted to
    the extrinsic return of a sparse task, that matters: before the first reward every target is
    0, so σ_y = 0 and the critic predicts exactly 0, leaving the bonus alone in the advantage. An
    unstandardised network fitted to zeros keeps a residual error of its own, which can be larger
    than the bonus's effect.

    ``fit_statistics(x, y)`` sets the four statistics (buffers, saved in ``state_dict``); before
    the first call they are the identity. ``fit_critic`` calls it for every critic it fits.

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
                f"{self.in_features} and {self.out_features} features."
            )
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
