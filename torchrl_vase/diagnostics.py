"""Is my bonus steering the policy? Measurements for every iteration of a training loop.

* ``advantage_alignment``: how much of the advantage the policy update uses is the bonus's own
  advantage (its correlation with it, and the bonus's share of its variance).
* ``novelty_correlation``: whether the bonus ranks transitions as novel where they are: the
  Spearman correlation between U and the distance of s' to its k-th nearest neighbour among
  states seen before (standardised), a novelty estimate that works on any env.
* ``CoverageGrid``: the fraction of grid cells of a bounded space visited so far (the point
  robot's coverage)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["CoverageGrid", "advantage_alignment", "knn_distance", "novelty_correlation", "pearson",
           "rank", "spearman"]


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


def rank(x: Tensor) -> Tensor:
    """Ranks 0 … n − 1 of a flat tensor, ties given their mean rank (as Spearman's ρ needs).

    Examples:
        >>> import torch
        >>> rank(torch.tensor([10.0, 30.0, 20.0, 20.0])).tolist()
        [0.0, 3.0, 1.5, 1.5]
    """
    x = x.reshape(-1).double()
    order = torch.argsort(x, stable=True)
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(x.numel(), dtype=x.dtype, device=x.device)
    # ties: every member of a group of equal values gets the group's mean rank
    _, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
    sums = torch.zeros(counts.numel(), dtype=x.dtype, device=x.device).index_add_(0, inverse, ranks)
    return (sums / counts)[inverse]


def spearman(x: Tensor, y: Tensor) -> float:
    """Spearman's rank correlation: Pearson's correlation of the ranks.

    Examples:
        >>> import torch
        >>> spearman(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 8.0, 27.0, 64.0]))
        1.0
    """
    x, y = _paired(x, y)
    return pearson(rank(x), rank(y))


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


def knn_distance(
    queries: Tensor, reference: Tensor, k: int = 10, *, chunk_size: int = 1024) -> Tensor:
    """Distance from each query ``[Q, D]`` to its k-th nearest neighbour in ``reference [R, D]``.

    Computed in chunks of queries, so memory stays ``chunk_size × R``.

    Examples:
        >>> import torch
        >>> reference = torch.tensor([[0.0], [1.0], [3.0]])
        >>> knn_distance(torch.tensor([[0.0], [2.0]]), reference, k=2).tolist()
        [1.0, 1.0]
    """
    if queries.dim() != 2 or reference.dim() != 2 or queries.shape[1] != reference.shape[1]:
        raise ValueError(
            f"queries {tuple(queries.shape)} and reference {tuple(reference.shape)} must be "
            "[Q, D] and [R, D].")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= reference.shape[0]:
        raise ValueError(f"k must be an int in [1, {reference.shape[0]}], got {k!r}.")
    distances = [
        torch.cdist(chunk, reference).topk(k, dim=1, largest=False).values[:, -1]
        for chunk in queries.split(chunk_size)]
    return torch.cat(distances)


def novelty_correlation(bonus: Tensor, next_states: Tensor, reference: Tensor, *, k: int = 10,
                        num_queries: int = 1000, num_reference: int = 10_000,
                        generator: torch.Generator | None = None) -> float:
    """Spearman's ρ between the bonus ``[*B]`` and the novelty of the next states ``[*B, D]``: the
    distance to the k-th nearest of the ``reference`` states ``[R, D]`` (seen before), all
    standardised by the reference's statistics, both subsampled; NaN with at most ``k`` references.

    Examples:
        >>> import torch
        >>> seen = torch.randn(2000, 2)
        >>> new = torch.randn(500, 2) * 3
        >>> novelty = knn_distance(new, seen, k=10)
        >>> novelty_correlation(novelty, new, seen, k=10) > 0.99
        True
    """
    states = next_states.reshape(-1, next_states.shape[-1])
    bonus = bonus.reshape(-1)
    if bonus.numel() != states.shape[0]:
        raise ValueError(
            f"bonus has {bonus.numel()} values but next_states {states.shape[0]} states.")
    reference = reference.reshape(-1, reference.shape[-1])
    if reference.shape[0] <= k:
        return float("nan")
    if states.shape[0] > num_queries:
        pick = torch.randperm(states.shape[0], generator=generator)[:num_queries]
        states, bonus = states[pick], bonus[pick]
    if reference.shape[0] > num_reference:
        pick = torch.randperm(reference.shape[0], generator=generator)[:num_reference]
        reference = reference[pick]
    reference = reference.float()
    loc, scale = reference.mean(0), reference.std(0, unbiased=False) + 1e-8
    novelty = knn_distance((states.float() - loc) / scale, (reference - loc) / scale, k)
    return spearman(bonus, novelty)


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
