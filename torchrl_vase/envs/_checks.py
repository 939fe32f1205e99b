"""Action checks shared by the sparse envs."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces


def checked_action(action, space: spaces.Box) -> np.ndarray:
    """The action as a float array of the space's shape, clipped to its bounds.

    Wrong shapes and non-finite values raise ``ValueError`` (nothing is broadcast); values out of
    bounds are clipped.
    """
    array = np.asarray(action, dtype=np.float64)
    if array.shape != space.shape:
        raise ValueError(f"action has shape {array.shape}; the action space is {space.shape}.")
    if not np.isfinite(array).all():
        raise ValueError(f"action contains non-finite values: {array}.")
    return np.clip(array, space.low, space.high)
