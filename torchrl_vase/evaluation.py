"""Evaluating a policy with its deterministic action, and loading a trained one from MLflow.

``evaluate`` runs ``episodes`` whole episodes at once (one gymnasium vector env, one policy call
per step for all of them) with the policy's mode (``ExplorationType.DETERMINISTIC``: the Gaussian's
mean), actions mapped from [−1, 1] to the env's bounds and clipped as in training.
``load_policy(run_id)`` rebuilds a run of ``recipes/trpo_vase.py``'s policy from the run's
``config.yaml`` and ``weights.pt`` artifacts:

    >>> policy = load_policy(run_id, tracking_uri="sqlite:///mlflow.db")  # doctest: +SKIP
    >>> evaluate(policy, policy.env_id, episodes=10)                       # doctest: +SKIP
    {'return': 1.0, 'success_rate': 1.0, 'episode_length': 231.4}
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import gymnasium
import numpy as np
import torch
import yaml
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import Tensor, nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

from torchrl_vase._validation import check_positive_int, module_device
from torchrl_vase.checkpointing import load_checkpoint, trusting_unsigned
from torchrl_vase.collectors import VectorEnvCollector
from torchrl_vase.envs import declares_sparse_goal
from torchrl_vase.envs._checks import check_continuous_control
from torchrl_vase.envs.batched import sync_vector_env, unit_to_bounds
from torchrl_vase.modules.networks import ACTIVATIONS, gaussian_policy, tanh_policy

__all__ = ["WEIGHTS_FILE", "ObservationStandardization", "check_registered", "evaluate",
           "load_policy", "record_episode", "run_weights", "with_observation_standardization"]

#: The artifact of a run that holds its networks (``run_weights``), read by ``load_policy``.
WEIGHTS_FILE = "weights.pt"


class ObservationStandardization(nn.Module):
    """``(observation − loc) / scale``: the fixed statistics a run trained with
    (``VectorEnvCollector.fit_observation_normalization``), in front of a loaded policy."""

    def __init__(self, loc: Tensor, scale: Tensor) -> None:
        super().__init__()
        self.register_buffer("loc", loc.clone())
        self.register_buffer("scale", scale.clone())

    def forward(self, observation: Tensor) -> Tensor:
        return (observation - self.loc) / self.scale


def with_observation_standardization(
    actor: TensorDictModuleBase, loc: Tensor | None, scale: Tensor | None) -> TensorDictModuleBase:
    """The actor acting on the env's own observations: ``(observation − loc) / scale`` in front,
    or the actor itself when there is no standardisation (``loc`` is ``None``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl_vase.modules import gaussian_policy
        >>> actor = gaussian_policy(2, 1, [8])
        >>> policy = with_observation_standardization(actor, torch.ones(2), torch.full((2,), 2.0))
        >>> td = policy(TensorDict({"observation": torch.full((1, 2), 3.0)}, [1]))
        >>> td["observation"].tolist()  # what the actor saw
        [[1.0, 1.0]]
    """
    if loc is None:
        return actor
    standardization = ObservationStandardization(loc, scale).to(module_device(actor))
    return TensorDictSequential(
        TensorDictModule(standardization, ["observation"], ["observation"]), actor)


def acting_policy(actor: TensorDictModuleBase,
                  collector: VectorEnvCollector) -> TensorDictModuleBase:
    """The actor as it acts on the env's own observations, the collector's fixed observation
    standardisation in front, for ``evaluate`` and ``record_episode``."""
    return with_observation_standardization(actor, collector.observation_loc,
                                            collector.observation_scale)


@torch.no_grad()
def evaluate(policy: TensorDictModuleBase, env_id: str, *, episodes: int = 5, seed: int = 0,
             make_kwargs: dict | None = None, observation_key: str = "observation",
             success: bool | None = None) -> dict[str, float]:
    """Mean return, success rate (return > 0: the sparse tasks' reward; with ``success``, by
    default for an env that ``declares_sparse_goal``) and episode length of ``episodes``
    episodes of ``env_id`` under the policy's deterministic action.

    Copy ``i`` starts from ``reset(seed=seed + i)``; the global random state is not touched, so a
    training loop can evaluate without changing its own random numbers.

    Examples:
        >>> from torchrl_vase.modules import gaussian_policy
        >>> policy = gaussian_policy(2, 1, [32])
        >>> sorted(evaluate(policy, "torchrl_vase/SparseMountainCar-v1", episodes=2))
        ['episode_length', 'return', 'success_rate']
    """
    check_positive_int("episodes", episodes)
    with contextlib.closing(sync_vector_env(env_id, episodes, **(make_kwargs or {}))) as env:
        check_continuous_control(env_id, env.single_observation_space, env.single_action_space)
        returns, lengths = _run_episodes(policy, env, seed, observation_key)
    if success is None:
        success = declares_sparse_goal(env_id)
    return {"return": float(returns.mean()),
            **({"success_rate": float((returns > 0).mean())} if success else {}),
            "episode_length": float(lengths.mean())}


@torch.no_grad()
def _run_episodes(policy: TensorDictModuleBase, env: gymnasium.vector.VectorEnv, seed: int,
                  observation_key: str, on_step: Callable[[], None] = lambda: None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """One episode in each copy of ``env`` (auto-reset off) under the policy's deterministic
    action, from ``reset(seed=seed)`` (copy ``i``: ``seed + i``); their returns and lengths.
    ``on_step`` is called after the reset and after every step (a video's frames)."""
    space = env.single_action_space
    observation, _ = env.reset(seed=seed)
    on_step()
    returns, lengths = np.zeros(env.num_envs), np.zeros(env.num_envs, dtype=np.int64)
    running = np.ones(env.num_envs, dtype=bool)
    device = module_device(policy)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        while running.any():
            batch = TensorDict({observation_key: torch.as_tensor(
                observation, dtype=torch.float32, device=device)}, [env.num_envs])
            action = policy(batch)["action"].cpu().numpy()
            observation, reward, terminated, truncated, _ = env.step(
                unit_to_bounds(action, space.low, space.high))
            on_step()
            returns += np.where(running, reward, 0.0)
            lengths += running
            done = terminated | truncated
            running &= ~done
            if done.any() and running.any():
                # a finished copy must be reset before the next step; what it does is not counted
                observation, _ = env.reset(options={"reset_mask": done})
    return returns, lengths


def check_video(env_id: str, make_kwargs: dict | None = None) -> None:
    """Raise now, with the reason, if ``record_episode`` could not film ``env_id``: no
    ``imageio-ffmpeg`` (the ``video`` extra) or no ``rgb_array`` rendering (MuJoCo:
    ``MUJOCO_GL=egl``)."""
    try:
        import imageio  # noqa: F401
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise ImportError(
            "videos need imageio and imageio-ffmpeg: pip install -e '.[video]'.") from None
    try:
        with gymnasium.make(env_id, render_mode="rgb_array", **(make_kwargs or {})) as env:
            env.reset(seed=0)
            frame = env.render()
    except Exception as error:
        # MuJoCo picks its OpenGL backend from MUJOCO_GL: on a machine without a display, EGL
        # (or osmesa) renders where the default (GLFW, a window) cannot
        backend = ("" if os.environ.get("MUJOCO_GL") else
                   " For a MuJoCo task without a display, set MUJOCO_GL=egl (or osmesa) and "
                   "try again;")
        raise ValueError(
            f"{env_id} cannot render rgb_array frames ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:200]}).{backend} otherwise turn the video off."
        ) from None
    if not isinstance(frame, np.ndarray) or frame.ndim != 3:
        raise ValueError(f"{env_id} renders no rgb_array frame; turn the video off.")


@torch.no_grad()
def record_episode(policy: TensorDictModuleBase, env_id: str, path: str | Path, *, seed: int = 0,
                   make_kwargs: dict | None = None, fps: int | None = None,
                   observation_key: str = "observation") -> Path:
    """An mp4 of one episode from ``reset(seed=seed)`` under the policy's deterministic action, at
    ``fps`` (default: the env's ``render_fps``, else 30)."""
    import imageio

    check_video(env_id, make_kwargs)
    frames = []
    with contextlib.closing(sync_vector_env(env_id, 1, render_mode="rgb_array",
                                            **(make_kwargs or {}))) as env:
        _run_episodes(policy, env, seed, observation_key,
                      on_step=lambda: frames.append(env.render()[0]))
        fps = fps or env.metadata.get("render_fps") or 30
    path = Path(path)
    imageio.v2.mimwrite(path, frames, fps=fps, macro_block_size=1)
    return path


def run_weights(parts: dict) -> dict:
    """What ``weights.pt`` holds, taken from a checkpoint's state dicts ``parts`` (keys ``actor``,
    ``critic``, ``collector``, ``exploration``; ``None`` or absent for a
    part a run does not have): the networks without the replay pool or optimisers, and the
    observation standardisation (the collector's state). The pool is not copied: the values are
    the checkpoint's own tensors. ``load_policy`` reads it back.

    Examples:
        >>> from torchrl_vase.modules import gaussian_policy
        >>> parts = {"actor": gaussian_policy(2, 1, [8]).state_dict(), "critic": {},
        ...          "collector": {}, "exploration": None, "critic_optimizer": {"state": {}}}
        >>> sorted(run_weights(parts))
        ['actor', 'collector', 'critic', 'exploration']
    """
    weights = {name: parts.get(name) for name in ("actor", "critic", "collector")}
    exploration = parts.get("exploration")
    weights["exploration"] = None if exploration is None else {
        key: value for key, value in exploration.items() if not key.endswith("_extra_state")}
    return weights


def check_registered(env_id: str, whose: str) -> None:
    """Refuse an env id read from a run's files (``whose``) that gymnasium has not registered here:
    ``gymnasium.make("module:Env")`` would import and run that module."""
    if env_id not in gymnasium.registry:
        raise ValueError(
            f"{whose} names the env {env_id!r}, which is not registered with gymnasium in this "
            "process; only registered envs are built from a run's files (an id of the form "
            "'module:Env' would import that module). Import the package that registers it "
            "first, if you trust it.")


def load_policy(run_id: str, tracking_uri: str | None = None, *,
                trust_unsigned: bool = False) -> TensorDictModuleBase:
    """The policy of a ``recipes/trpo_vase.py`` run as a TorchRL actor on the env's own
    observations, rebuilt from its ``config.yaml`` and latest ``weights.pt``
    (``weights_only=True``), carrying ``env_id`` and ``make_kwargs`` for ``evaluate``. Its env must
    be registered (``import
    torchrl_vase`` registers the paper's); ``module:Env`` ids are refused."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    names = {artifact.path for artifact in client.list_artifacts(run_id)}
    missing = {"config.yaml", WEIGHTS_FILE} - names
    if missing:
        raise FileNotFoundError(
            f"run {run_id} has no {', '.join(sorted(missing))} artifact: it is not a run of "
            "recipes/trpo_vase.py, or it never wrote a checkpoint (checkpoint.every=0).")
    with tempfile.TemporaryDirectory() as tmp:
        config = yaml.safe_load(Path(client.download_artifacts(run_id, "config.yaml", tmp))
                                .read_text())
        with trusting_unsigned(trust_unsigned):
            weights = load_checkpoint(
                client.download_artifacts(run_id, WEIGHTS_FILE, tmp),
                what=f"run {run_id}'s {WEIGHTS_FILE} artifact",
                advice="The run's checkpoints write it; a file put there by other means is not "
                       "loaded.")
    env = config["env"]
    make_kwargs = env.get("make_kwargs") or {}
    check_registered(env["id"], f"run {run_id}'s config")
    with gymnasium.make(env["id"], **make_kwargs) as probe:
        obs_dim = int(probe.observation_space.shape[0])
        action_dim = int(probe.action_space.shape[0])
    if config.get("algorithm") == "sac":  # SAC's tanh-squashed actor, as the recipe built it
        sac = config["sac"]
        actor = tanh_policy(obs_dim, action_dim, sac["num_cells"],
                            activation=ACTIVATIONS[sac["activation"]],
                            default_scale=sac["default_policy_scale"], scale_lb=sac["scale_lb"])
    else:
        actor = gaussian_policy(obs_dim, action_dim, env["policy_cells"])
    actor.load_state_dict(weights["actor"])
    standardization = weights.get("collector") or {}
    policy = with_observation_standardization(actor, standardization.get("observation_loc"),
                                              standardization.get("observation_scale"))
    policy.env_id, policy.make_kwargs = env["id"], make_kwargs
    return policy
