"""Is my bonus steering the policy? Measurements for every iteration of a training loop.

* ``advantage_alignment``: how much of the advantage the policy update uses is the bonus's own
  advantage (its correlation with it, and the bonus's share of its variance).
* ``CoverageGrid``: the fraction of grid cells of a bounded space visited so far (the point
  robot's coverage)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["CoverageGrid", "advantage_alignment", "pearson"]


def pearson(x: Tensor, y: Tensor) -> float:
    """Pearson's correlation of two equally sized tensors (flattened); NaN if either is constant.

    Examples:
        >>> import torch
        >>> pearson(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 4.0, 7.0]))
        0.9933992677987828
    """
    x, y = _paired(x, y)
    x, y = x - x.mean(), y - y.mean()
    denominator = (x.square().sum() * y.square().sum()).sqrt()
    if denominator == 0:
        return float("nan")
    return float((x * y).sum() / denominator)


def _paired(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    x, y = x.reshape(-1).double(), y.reshape(-1).double()
    if x.numel() != y.numel():
        raise ValueError(f"x and y must have as many elements, got {x.numel()} and {y.numel()}.")
    if x.numel() < 2:
        raise ValueError("a correlation needs at least 2 pairs.")
    return x, y


def advantage_alignment(advantage: Tensor, bonus_advantage: Tensor) -> dict[str, float]:
    """How much the advantage the policy update uses follows the bonus's own (``bonus_advantage``,
    ``ExplorationGAE``'s): ``correlation`` (Pearson's) and ``bonus_share``, ``Var(bonus_advantage) /
    Var(advantage)``, near 1 when the bonus is all there is.

    Examples:
        >>> import torch
        >>> bonus = torch.randn(1000)
        >>> out = advantage_alignment(bonus + 0.1 * torch.randn(1000), bonus)
        >>> out["correlation"] > 0.99, 0.95 < out["bonus_share"] < 1.05
        (True, True)
    """
    advantage, bonus_advantage = _paired(advantage, bonus_advantage)
    variance = advantage.var(unbiased=False)
    share = float(bonus_advantage.var(unbiased=False) / variance) if variance > 0 else float("nan")
    return {"correlation": pearson(advantage, bonus_advantage), "bonus_share": share}


class CoverageGrid(nn.Module):
    """Which cells of a box ``[low, high)`` (cells of ``cell_size``) have been visited: the point
    robot's coverage. ``update(positions)`` marks cells, ``coverage()`` is the visited fraction,
    ``counts`` (a buffer) the visits per cell.

    Examples:
        >>> import torch
        >>> grid = CoverageGrid(low=[-2.0, -2.0], high=[2.0, 2.0], cell_size=0.1)
        >>> grid.counts.shape
        torch.Size([40, 40])
        >>> grid.update(torch.tensor([[0.0, 0.0], [0.05, 0.05], [1.0, 1.0]]))
        >>> grid.coverage() == 2 / 1600
        True
    """

    def __init__(self, low: Sequence[float], high: Sequence[float], cell_size: float) -> None:
        super().__init__()
        low_t = torch.as_tensor(low, dtype=torch.float64)
        high_t = torch.as_tensor(high, dtype=torch.float64)
        if low_t.dim() != 1 or low_t.shape != high_t.shape or not (high_t > low_t).all():
            raise ValueError(f"low {list(low)} and high {list(high)} must be vectors, high > low.")
        if not cell_size > 0:
            raise ValueError(f"cell_size must be > 0, got {cell_size}.")
        cells = torch.ceil((high_t - low_t) / cell_size - 1e-9).long()
        self.register_buffer("low", low_t)
        self.register_buffer("high", high_t)
        self.cell_size = float(cell_size)
        self.register_buffer("counts", torch.zeros(cells.tolist(), dtype=torch.long))

    @torch.no_grad()
    def update(self, positions: Tensor) -> None:
        """Count the visits of ``positions [*B, D]`` (on any device; counted where the grid is)."""
        flat = positions.reshape(-1, positions.shape[-1]).to(self.counts.device, torch.float64)
        if flat.shape[1] != self.counts.dim():
            raise ValueError(
                f"positions have {flat.shape[1]} coordinates, the grid {self.counts.dim()}.")
        device = self.counts.device
        shape = torch.tensor(self.counts.shape, device=device)
        index = ((flat - self.low) / self.cell_size).floor().long()
        index = torch.minimum(index.clamp_min(0), shape - 1)
        strides = torch.tensor(self.counts.stride(), device=device)
        self.counts.view(-1).index_add_(
            0, (index * strides).sum(1), torch.ones(index.shape[0], dtype=torch.long, device=device)
        )

    def like(self, counts: Tensor) -> CoverageGrid:
        """A grid over the same box holding the given ``counts`` (e.g. an earlier snapshot)."""
        grid = CoverageGrid(self.low.tolist(), self.high.tolist(), self.cell_size)
        grid.counts.copy_(counts)
        return grid

    def coverage(self) -> float:
        """The fraction of cells visited at least once."""
        return float((self.counts > 0).double().mean())
