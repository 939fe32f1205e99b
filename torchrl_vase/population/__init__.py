"""Populations: K seeds of one config trained in one process, in lockstep.

Member k is the single run with seed ``seeds[k]`` (its initial weights, env starts and random
draws are that run's); the many small operations of an iteration (the policy's steps in the
envs, the ELBO's minibatch steps, TRPO's conjugate gradient and line search, the critic fit)
run for all members at once on stacked weights, so the per-call overhead that bounds these tiny
networks on a CPU is paid once instead of K times.

- ``MemberStreams``: one random stream per member.
- ``PopulationCollector``: every member's envs in one vector env, the policies in one call.
- ``PopulationStep``: the members' ``OnPolicyStep``s, the costly phases batched
  (``population_trpo_step``, ``population_critic_fit``, ``Exploration.elbo_steps``).
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
