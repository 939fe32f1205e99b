"""The paper's sparse-reward benchmark tasks as gymnasium envs, registered on import.

After ``import torchrl_vase``: ``gymnasium.make("torchrl_vase/SparseHalfCheetah-v0")`` or
``torchrl.envs.GymEnv("torchrl_vase/SparseHalfCheetah-v0")``. Every task has the paper's 500-step
limit. ``LunarLanderContinuous-v3`` is gymnasium's own.
"""

from __future__ import annotations

import gymnasium

from torchrl_vase.envs.classic import (
    SparseCartpoleSwingupEnv,
    SparseDoublePendulumEnv,
    SparseMountainCarEnv,
)
from torchrl_vase.envs.locomotion import SparseAntEnv, SparseHalfCheetahEnv
from torchrl_vase.envs.point_robot import PointRobot2DEnv

#: Registered ids and their classes.
SPARSE_ENVS = {
    "torchrl_vase/PointRobot2D-v0": PointRobot2DEnv,
    "torchrl_vase/SparseMountainCar-v0": SparseMountainCarEnv,
    "torchrl_vase/SparseCartpoleSwingup-v0": SparseCartpoleSwingupEnv,
    "torchrl_vase/SparseDoublePendulum-v0": SparseDoublePendulumEnv,
    "torchrl_vase/SparseHalfCheetah-v0": SparseHalfCheetahEnv,
    "torchrl_vase/SparseAnt-v0": SparseAntEnv,
}
MAX_EPISODE_STEPS = 500


def register_envs() -> None:
    """Register every sparse env with gymnasium (idempotent; ``import torchrl_vase`` calls it).

    Examples:
        >>> import gymnasium
        >>> register_envs()
        >>> gymnasium.spec("torchrl_vase/PointRobot2D-v0").max_episode_steps
        500
    """
    for env_id, env_class in SPARSE_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point=f"{env_class.__module__}:{env_class.__name__}",
                max_episode_steps=MAX_EPISODE_STEPS,
            )


register_envs()

__all__ = [
    "MAX_EPISODE_STEPS",
    "SPARSE_ENVS",
    "PointRobot2DEnv",
    "SparseAntEnv",
    "SparseCartpoleSwingupEnv",
    "SparseDoublePendulumEnv",
    "SparseHalfCheetahEnv",
    "SparseMountainCarEnv",
    "register_envs",
]
