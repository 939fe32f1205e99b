"""Populations: K seeds of one config trained in one process, in lockstep.

Member k is the single run with seed ``seeds[k]``, value for value (its initial weights, env
starts and random draws are that run's, and every computation gives it that run's numbers); the
members' envs step in one vector env and the bonus model's ELBO steps of an iteration run for all
members at once, so their per-call overhead is paid once instead of K times.

- ``MemberStreams``: one random stream per member.
- ``PopulationCollector``: every member's envs in one vector env, each acting with its policy.
- ``PopulationStep``: the members' ``OnPolicyStep``s, the ELBO's steps for all at once.
- ``PopulationMembers``: the population as ``TrainingLoop``'s ``members`` (one stream and one
  logger per member); ``MemberParts``: the members' parts in the loop's one checkpoint.
"""

from torchrl_vase.population.collector import PopulationCollector
from torchrl_vase.population.members import MemberParts, PopulationMembers
from torchrl_vase.population.step import PopulationStep
from torchrl_vase.population.streams import MemberStreams, check_seeds

__all__ = [
    "MemberParts",
    "MemberStreams",
    "PopulationCollector",
    "PopulationMembers",
    "PopulationStep",
    "check_seeds",
]
