"""rliable's own numbers on the Figure 3 study's runs: the reference our estimators are tested
against (``tests/test_study_statistics.py``).

``study_statistics.py`` computes rliable's aggregates itself (IQM with a stratified bootstrap,
the probability of improvement, performance profiles): rliable 1.2.0 installs with this
project's pins but does not import (its ``arch`` 7.2 fails under pandas 3, which MLflow's pins
bring). This script runs rliable in an environment of its own on the study's cells that no
rerun touches (plain TRPO as the authors ran it, the control and VIME, 20 seeds on each of the
six tasks: every task has as many runs, rliable's runs × tasks matrix), each run's mean return
over the whole run, min–max normalised per task over those runs, and writes rliable's IQM of
each measure (with its 95 % stratified-bootstrap interval) and the probability of improvement of
each pair to ``tests/rliable_reference.json``.

    python3 -m venv /tmp/rliable && /tmp/rliable/bin/pip install rliable==1.2.0 pandas==2.2.3
    /tmp/rliable/bin/python recipes/study/rliable_reference.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from study_runs import ROOT, TASKS, load  # beside this script
from study_statistics import normalise, window_mean

#: the cells the rerun leaves as they are (VASE's and NLL's are being rerun)
MEASURES = ("trpo_authors", "none", "vime")
OUT = ROOT / "tests" / "rliable_reference.json"


def study_scores(study: Path = ROOT / "docs" / "results" / "figure3") -> dict[str, np.ndarray]:
    """Each measure's ``[runs, tasks]`` matrix of whole-run returns, min–max normalised per
    task over every run of ``MEASURES`` there (``study_statistics.normalise``)."""
    data = load(study, MEASURES)
    scores = {task: {m: np.array([window_mean(s.returns, "whole") for s in data[task][m]])
                     for m in MEASURES} for task in TASKS}
    normalised, _ = normalise(scores)
    return {m: np.stack([normalised[task][m] for task in TASKS], axis=1) for m in MEASURES}


def main() -> None:
    from rliable import library, metrics  # an environment of its own: see the module

    scores = study_scores()
    iqm, intervals = library.get_interval_estimates(
        scores, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=5_000)
    pairs = {f"{a},{b}": (scores[a], scores[b]) for a in MEASURES for b in MEASURES if a != b}
    improvement, _ = library.get_interval_estimates(
        pairs, metrics.probability_of_improvement, reps=200)
    OUT.write_text(json.dumps({
        "tasks": list(TASKS), "measures": list(MEASURES),
        "iqm": {m: float(iqm[m][0]) for m in MEASURES},
        "iqm_interval": {m: [float(v) for v in intervals[m][:, 0]] for m in MEASURES},
        "probability_of_improvement": {pair: float(value[0]) if np.ndim(value) else float(value)
                                       for pair, value in improvement.items()},
    }, indent=1) + "\n")
    print(f"written {OUT}")


if __name__ == "__main__":
    main()
