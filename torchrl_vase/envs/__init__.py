"""The paper's sparse-reward benchmark tasks as gymnasium envs, registered on import
(``gymnasium.make("torchrl_vase/SparseHalfCheetah-v1")``, ``GymEnv(...)``): the tasks as the VASE
authors ran them, ``-v1``, and the 2D point robot, ``-v0``, each with the paper's 500-step
limit (LunarLander 1,000, the authors')."""

from __future__ import annotations

import gymnasium
from gymnasium.envs.registration import load_env_creator

from torchrl_vase.envs._checks import check_continuous_control
from torchrl_vase.envs.batched import LeanVectorEnv, sync_vector_env
from torchrl_vase.envs.classic_v1 import (
    RllabCartpoleSwingupEnv,
    RllabDoublePendulumEnv,
    RllabMountainCarEnv,
)
from torchrl_vase.envs.locomotion_v1 import RllabAntEnv, RllabHalfCheetahEnv
from torchrl_vase.envs.lunar_lander_v1 import AuthorsLunarLanderEnv
from torchrl_vase.envs.point_robot import PointRobot2DEnv

#: Registered ids and their classes.
SPARSE_ENVS = {"torchrl_vase/PointRobot2D-v0": PointRobot2DEnv,
               "torchrl_vase/SparseMountainCar-v1": RllabMountainCarEnv,
               "torchrl_vase/SparseCartpoleSwingup-v1": RllabCartpoleSwingupEnv,
               "torchrl_vase/SparseDoublePendulum-v1": RllabDoublePendulumEnv,
               "torchrl_vase/SparseHalfCheetah-v1": RllabHalfCheetahEnv,
               "torchrl_vase/SparseAnt-v1": RllabAntEnv,
               "torchrl_vase/LunarLanderContinuous-v1": AuthorsLunarLanderEnv}
MAX_EPISODE_STEPS = 500
#: Limits other than MAX_EPISODE_STEPS (the authors' max_path_length).
EPISODE_STEPS = {"torchrl_vase/LunarLanderContinuous-v1": 1000}


def declares_sparse_goal(env_id: str) -> bool:
    """Whether ``env_id``'s reward is a sparse goal (this package's tasks, or an env whose
    ``metadata`` says ``"sparse_goal": True``), so a success rate and the first reward mean
    something.

    Examples:
        >>> declares_sparse_goal("torchrl_vase/SparseHalfCheetah-v1")
        True
        >>> declares_sparse_goal("Pendulum-v1")
        False
    """
    entry_point = gymnasium.spec(env_id).entry_point
    env_class = (load_env_creator(entry_point) if isinstance(entry_point, str)
                 else entry_point)
    if env_class in SPARSE_ENVS.values():
        return True
    return bool(getattr(env_class, "metadata", {}).get("sparse_goal", False))


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
            gymnasium.register(id=env_id,
                               entry_point=f"{env_class.__module__}:{env_class.__name__}",
                               max_episode_steps=EPISODE_STEPS.get(env_id, MAX_EPISODE_STEPS))


register_envs()

__all__ = ["EPISODE_STEPS", "MAX_EPISODE_STEPS", "SPARSE_ENVS", "AuthorsLunarLanderEnv",
           "LeanVectorEnv", "PointRobot2DEnv", "RllabAntEnv", "RllabCartpoleSwingupEnv",
           "RllabDoublePendulumEnv", "RllabHalfCheetahEnv", "RllabMountainCarEnv",
           "check_continuous_control", "declares_sparse_goal", "register_envs", "sync_vector_env"]
