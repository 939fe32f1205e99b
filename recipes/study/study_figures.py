"""How the studies' figures look on the docs page: legible fonts, the curves' smoothing, a link.

Every text of a figure is at least 10 px where the docs show it (a 690-px column): 12 pt at
90 dpi on a figure at most 11 in wide (990 px, shown at 0.7 ×); a click opens it full size.

    >>> import numpy as np
    >>> running_mean(np.array([1.0, 3.0, np.nan, 5.0]), window=2).tolist()
    [1.0, 2.0, 3.0, 5.0]
"""

from __future__ import annotations

import functools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from study_runs import FINAL

COLUMN_PX, DPI = 690, 90
LEGIBLE = {"font.size": 12, "axes.titlesize": 12, "axes.labelsize": 12, "xtick.labelsize": 12,
           "ytick.labelsize": 12, "legend.fontsize": 12, "legend.title_fontsize": 12,
           "figure.titlesize": 12}


def legible(plot):
    """Run a plot function under ``LEGIBLE``'s font sizes (ticks are drawn at ``savefig``)."""
    @functools.wraps(plot)
    def under_legible_fonts(*args, **kwargs):
        with plt.rc_context(LEGIBLE):
            return plot(*args, **kwargs)
    return under_legible_fonts


def running_mean(values: np.ndarray, window: int = FINAL) -> np.ndarray:
    """The trailing mean over ``window`` iterations (fewer at the start) of the finite values:
    an iteration in which no episode ended (LunarLander's 1,000-step episodes in 500-step
    paths) has no return and counts for nothing, as in the final return; NaN where a window
    has none."""
    finite = np.isfinite(values)
    sums = np.cumsum(np.where(finite, values, 0.0))
    counts = np.cumsum(finite)

    def trailing(totals: np.ndarray) -> np.ndarray:
        return totals - np.concatenate([np.zeros(window), totals])[: totals.size]

    with np.errstate(invalid="ignore", divide="ignore"):
        return trailing(sums) / trailing(counts)



def figure(link: str, name: str, alt: str) -> str:
    """A figure that opens at its full size when clicked."""
    return f"[![{alt}]({link}/{name})]({link}/{name})\n"
