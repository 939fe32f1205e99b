"""Checks shared by the sparse envs, the collector, evaluation and the recipe."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces


def checked_action(action, space: spaces.Box) -> np.ndarray:
    """The action as a float array of the space's shape, clipped to its bounds; a wrong shape or a
    non-finite value raises ``ValueError``."""
    array = np.asarray(action, dtype=np.float64)
    if array.shape != space.shape:
        raise ValueError(f"action has shape {array.shape}; the action space is {space.shape}.")
    if not np.isfinite(array).all():
        raise ValueError(f"action contains non-finite values: {array}.")
    # np.minimum/np.maximum: np.clip's values at a third of its overhead (an env step's cost)
    return np.minimum(np.maximum(array, space.low), space.high)


def check_continuous_control(env_id: str, observation_space: spaces.Space,
                             action_space: spaces.Space) -> None:
    """The envs this library's Gaussian policy, critics and bonus models act on: a flat vector
    observation and a bounded vector ``Box`` action; else a ``TypeError`` (``ValueError`` for
    infinite bounds) that names the env, what it has and what to do.

    Examples:
        >>> import gymnasium
        >>> env = gymnasium.make("CartPole-v1")
        >>> check_continuous_control(  # doctest: +ELLIPSIS
        ...     "CartPole-v1", env.observation_space, env.action_space)
        Traceback (most recent call last):
        ...
        TypeError: CartPole-v1 has the action space Discrete(2): the Gaussian policy needs a ...
    """
    if not isinstance(action_space, spaces.Box) or len(action_space.shape) != 1:
        raise TypeError(
            f"{env_id} has the action space {action_space}: the Gaussian policy needs a bounded "
            "vector Box action space (continuous control). The bonus itself accepts discrete "
            "actions one-hot (DynamicsModel(action_classes=...)); train those with a categorical "
            "policy of your own.")
    if not np.isfinite(action_space.low).all() or not np.isfinite(action_space.high).all():
        raise ValueError(
            f"{env_id}'s action bounds must be finite to scale [-1, 1] to them, got "
            f"{action_space}; wrap the env with gymnasium.wrappers.ClipAction or rescale it.")
    if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        raise TypeError(
            f"{env_id} has the observation space {observation_space}: the policy, critics and "
            "bonus models need a flat vector observation (a one-dimensional Box). Register the "
            "env wrapped in gymnasium.wrappers.FlattenObservation (Dict, Tuple) or give it a "
            "state observation instead of pixels.")
