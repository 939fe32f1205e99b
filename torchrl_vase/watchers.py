"""What a training loop reads off each batch before the algorithm touches it: the extrinsic
episode returns and the first extrinsic reward, as callables ``(batch, frames_before) ->
metrics`` for ``TrainingLoop(watchers=...)`` (``FirstReward`` is also in the loop's state).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> done = torch.tensor([[False, True], [False, False]]).unsqueeze(-1)
    >>> batch = TensorDict({"next": {"done": done, "reward": torch.tensor([[0., 1.], [0., 0.]])
    ...     .unsqueeze(-1), "episode_reward": torch.tensor([[0., 1.], [0., 0.]]).unsqueeze(-1),
    ...     "step_count": torch.tensor([[1, 2], [1, 2]]).unsqueeze(-1)}}, [2, 2])
    >>> episode_metrics(batch, 0)["Return/success_rate"]
    1.0
    >>> first = FirstReward()
    >>> first(batch, frames_before=100)  # env 0 found it at its 2nd step: after 2 × 2 frames
    {'train/first_reward_step': 104}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl_vase.diagnostics import CoverageGrid

__all__ = ["FirstReward", "episode_metrics"]

RETURN_METRICS = ("Return/mean", "Return/median", "Return/success_rate")


def episode_metrics(batch: TensorDictBase, frames_before: int = 0, *,
                    success: bool = True) -> dict[str, float]:
    """The extrinsic return (``RewardSum`` runs before any bonus), success (return > 0; with
    ``success``) and length of the episodes that ended in the batch (NaN when none did)."""
    done = batch["next", "done"].squeeze(-1)
    returns = batch["next", "episode_reward"].squeeze(-1)[done]
    keys = RETURN_METRICS if success else RETURN_METRICS[:2]
    if not returns.numel():
        return dict.fromkeys((*keys, "train/episode_length"), math.nan) | {"train/episodes": 0.0}
    return {
        "Return/mean": returns.mean().item(),
        "Return/median": returns.median().item(),
        **({"Return/success_rate": (returns > 0).float().mean().item()} if success else {}),
        "train/episode_length": batch["next", "step_count"].squeeze(-1)[done].float().mean().item(),
        "train/episodes": float(returns.numel()),
    }


class FirstReward(nn.Module):
    """The env step of the first extrinsic reward (> 0), and with a ``grid`` the visits until then
    and the coverage so far (``train/first_reward_step``, ``train/coverage``); time slice ``t`` of a
    ``[num_envs, T]`` batch ends at step ``frames_before + (t + 1) · num_envs``.

    Args:
        grid: a ``CoverageGrid`` over the observations' first coordinates, or ``None``."""

    def __init__(self, grid: CoverageGrid | None = None) -> None:
        super().__init__()
        self.grid = grid
        self.step: int | None = None
        self.snapshot: torch.Tensor | None = None  # the grid's counts when the reward was found

    def forward(self, batch: TensorDictBase, frames_before: int) -> dict[str, float]:
        if self.grid is not None:
            self.grid.update(batch["next", "observation"])
        reward = batch["next", "reward"]
        rewarded = (reward.reshape(*batch.shape) > 0).reshape(-1, batch.shape[-1]).any(0)
        if self.step is None and rewarded.any():
            num_envs = batch.numel() // batch.shape[-1]
            self.step = frames_before + (int(rewarded.nonzero()[0]) + 1) * num_envs
            if self.grid is not None:
                self.snapshot = self.grid.counts.clone()
        metrics = {} if self.step is None else {"train/first_reward_step": self.step}
        if self.grid is not None:
            metrics["train/coverage"] = self.grid.coverage()
        return metrics

    def get_extra_state(self) -> dict:
        return {"step": self.step, "snapshot": self.snapshot}

    def set_extra_state(self, state: Mapping) -> None:
        self.step, self.snapshot = state["step"], state["snapshot"]

    def heatmap(self, path: str | Path) -> Path:
        """Visits per cell until the first reward (all visits if none came yet), goal at (1, 1):
        the paper's exploration figure, as a PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm

        grid = self.grid if self.snapshot is None else self.grid.like(self.snapshot)
        counts = grid.counts.numpy().astype(float)
        counts[counts == 0] = math.nan
        low, high = grid.low.tolist(), grid.high.tolist()
        fig, ax = plt.subplots(figsize=(4.5, 4))
        image = ax.imshow(counts.T, origin="lower", extent=[low[0], high[0], low[1], high[1]],
                          cmap="viridis", interpolation="nearest", norm=LogNorm())
        side = f"{grid.cell_size:g}"
        fig.colorbar(image, ax=ax, label=f"visits per {side} × {side} cell")
        ax.plot([1], [1], marker="*", color="red", markersize=12)
        found = ("goal not reached" if self.step is None
                 else f"first reward at step {self.step:,}")
        ax.set_title(f"{found}; coverage {grid.coverage():.1%}", fontsize=10)
        ax.set_aspect("equal")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return Path(path)
