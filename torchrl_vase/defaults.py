"""The library's one rule for defaults: the VASE authors' code wherever it and the paper's text
differ (their code produced the paper's figures); the text's settings are an option
(``PAPER_TEXT``). The recipe's ``conf/surprise/*.yaml`` follow the same rule (a test holds them
to each other); docs/concepts.md lists where the two sources disagree.

| setting | the authors' code (the default) | the paper's text (``PAPER_TEXT``) |
|---|---|---|
| σ_c | 0.5 (their experiment script's default) | 5 |
| δ | 0 (their bonus has no confidence term) | 1e-3 (in its best range, 1e-4 to 1e-2) |
| ``init_mean`` | ``"normal"``: the BNN's means from N(0, 1) | silent |
| ``sampling`` | ``"local_shared"``: one draw a unit, shared by the rows | weight samples (Eq. 10) |

VIME's information gain needs weight samples (``VIME_SAMPLING``). ``BayesianMLP`` alone keeps
Bayes by backprop's textbook form; the VASE model is ``DynamicsModel.build``'s.

Examples:
    >>> from torchrl_vase import PAPER_TEXT, DynamicsModel, vase_surprise
    >>> DynamicsModel.build(3, 1).sigma_c, DynamicsModel.build(3, 1).network.sampling
    (0.5, 'local_shared')
    >>> model = DynamicsModel.build(3, 1, sigma_c=PAPER_TEXT["sigma_c"])  # the text's σ_c
    >>> model.sigma_c
    5.0
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

#: σ_c, the likelihood's standard deviation (the authors' script; the text: 5).
SIGMA_C: Final = 0.5
#: δ, the weight of U_VASE's confidence term −δ·H(q) (the authors' code has none; the text: 1e-3).
DELTA: Final = 0.0
#: How the VASE model's posterior means start (the authors' BNN: N(0, 1)).
INIT_MEAN: Final = "normal"
#: How the VASE model draws its N networks (the authors' layer).
SAMPLING: Final = "local_shared"
#: The sampling of a model built for VIME's information gain (a gradient w.r.t. the weights).
VIME_SAMPLING: Final = "weights"

#: The paper's text where it differs from the authors' code: ``VASERewardTransform(**PAPER_TEXT)``
#: (the recipe's ``preset=paper`` sets the same, with its environment settings).
PAPER_TEXT: Final = MappingProxyType({"sigma_c": 5.0, "delta": 1e-3})


def sampling_for(measure: str) -> str:
    """The sampling of the model a bonus of ``measure`` is built with by default.

    Examples:
        >>> sampling_for("vase"), sampling_for("vime")
        ('local_shared', 'weights')
    """
    return VIME_SAMPLING if measure == "vime" else SAMPLING
