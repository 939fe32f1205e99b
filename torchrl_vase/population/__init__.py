"""Populations: K seeds of one config trained in one process, in lockstep.

Member k is the single run with seed ``seeds[k]``, value for value (its initial weights, env
starts and random draws are that run's, and every computation gives it that run's numbers); the
members' envs step in one vector env and the bonus model's 500 ELBO steps of an iteration run for
all members at once, so their per-call overhead is paid once instead of K times.

- ``MemberStreams``: one random stream per member.
- ``PopulationCollector``: every member's envs in one vector env, each acting with its policy.
- ``PopulationStep``: the members' ``OnPolicyStep``s, the ELBO's steps batched
  (``Exploration.elbo_steps``); TRPO's step and the critic fit batched on request
  (``population_trpo_step``, ``population_critic_fit``).
- ``PopulationLoop``: ``OnPolicyLoop`` with a logger per member and one checkpoint.
"""

from torchrl_vase.population.collector import PopulationCollector
from torchrl_vase.population.loop import MemberParts, PopulationLoop
from torchrl_vase.population.step import PopulationStep
from torchrl_vase.population.streams import MemberStreams, check_seeds
from torchrl_vase.population.updates import (
    StackedModules,
    batched_conjugate_gradient,
    population_critic_fit,
    population_trpo_step,
)

__all__ = [
    "MemberParts",
    "MemberStreams",
    "PopulationCollector",
    "PopulationLoop",
    "PopulationStep",
    "StackedModules",
    "batched_conjugate_gradient",
    "check_seeds",
    "population_critic_fit",
    "population_trpo_step",
]
