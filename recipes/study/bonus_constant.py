"""Which Figure 3 cells did the Gaussian's normaliser touch? Its share of each run's bonus.

At the study's commit 82a8bde (its runs now under ``docs/results/figure3_normaliser/``), VASE's
and NLL's bonus U carried the Gaussian's normaliser
``c = D·log(√(2π) σ_c)`` (D the observation's dimensions), a constant the authors' code removes
(their ``surprise()`` adds it back; docs/concepts.md). Uncentred (the authors' configuration), a
constant in U is a reward of ``η·c`` a step. From each run's logged ``bonus/mean`` (the batch's
mean U, the constant included) this measures, per iteration, the constant's share ``c / U``
(``η·c / η·U``), and for the runs with the paper's confidence term (``vase_paper``: δ = 1e-3)
that term's share ``δ·H(q) / (U + δ·H(q))`` of the surprise, ``H(q)`` read from ``bnn/entropy``.

A cell is **touched** when its constant is ≥ 1 % of the mean bonus in ≥ 10 % of a run's
iterations, in at least one of its seeds (issue 77's rule, fixed before this table); touched
cells are rerun at the commit without the constant.

    python recipes/study/bonus_constant.py    # the table, Markdown, on stdout (the results
                                              # page's, figure3_report.py)

    >>> round(log_normaliser(2, 0.5), 4)  # MountainCar's constant at the authors' σ_c
    0.4516
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from study_runs import OBSERVATION_DIMS, ROOT  # beside this script

from torchrl_vase.gaussian import log_normaliser

#: measure -> (σ_c, δ) of the study's runs: the authors' code, and the paper's text
SETTINGS = {"vase": (0.5, 0.0), "nll": (0.5, 0.0), "vase_paper": (5.0, 1e-3)}
SHARE_FLOOR = 0.01  # the constant counts from 1 % of the mean bonus ...
ITERATION_FLOOR = 0.10  # ... in 10 % of a run's iterations


@dataclass(frozen=True)
class SeedShare:
    seed: int
    median_share: float  # of c / U over the iterations with a bonus
    touched_fraction: float  # the iterations where c / U ≥ SHARE_FLOOR
    median_confidence_share: float  # δ·H / (U + δ·H); nan where δ = 0


def seed_share(path: Path, constant: float, delta: float) -> SeedShare | None:
    """One run's shares from its CSV; ``None`` for a run that logged no bonus."""
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    bonus = np.array([float(r["bonus/mean"] or "nan") for r in rows])
    entropy = np.array([float(r.get("bnn/entropy") or "nan")
                        for r in rows])
    logged = np.isfinite(bonus) & (bonus != 0)
    if not logged.any():
        return None
    share = constant / bonus[logged]
    confidence = delta * entropy[logged]
    confidence_share = (np.nanmedian(confidence / (bonus[logged] + confidence))
                        if delta else float("nan"))
    return SeedShare(int(path.stem.removeprefix("seed")), float(np.median(share)),
                     float(np.mean(share >= SHARE_FLOOR)), float(confidence_share))


def cell_rows(study: Path) -> list[dict]:
    rows = []
    for task, dims in OBSERVATION_DIMS.items():
        for measure, (sigma_c, delta) in SETTINGS.items():
            folder = study / task / measure
            seeds = sorted(folder.glob("seed*.csv"), key=lambda p: int(p.stem[4:]))
            constant = log_normaliser(dims, sigma_c)
            shares = [s for p in seeds if (s := seed_share(p, constant, delta))]
            if not shares:
                continue
            touched = [s for s in shares if s.touched_fraction >= ITERATION_FLOOR]
            rows.append({
                "task": task, "measure": measure, "dims": dims, "sigma_c": sigma_c,
                "constant": constant, "seeds": len(shares),
                "median_share": float(np.median([s.median_share for s in shares])),
                "share_range": (min(s.median_share for s in shares),
                                max(s.median_share for s in shares)),
                "touched_fraction": float(np.median([s.touched_fraction for s in shares])),
                "touched_seeds": len(touched),
                "confidence_share": float(np.median([s.median_confidence_share
                                                     for s in shares])),
            })
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| task (D) | measure | σ_c | constant c (nats) | c / U: median over seeds [range of "
        "the seeds' medians] | iterations with c / U ≥ 1 % (median over seeds) | seeds touched "
        "| δ·H(q)'s share | rerun |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        low, high = r["share_range"]
        confidence = ("–" if math.isnan(r["confidence_share"])
                      else f"{r['confidence_share']:.2f}")
        lines.append(
            f"| {r['task']} ({r['dims']}) | {r['measure']} | {r['sigma_c']:g} | "
            f"{r['constant']:.3g} | {r['median_share']:.3f} [{low:.3f}, {high:.3f}] | "
            f"{r['touched_fraction']:.0%} | {r['touched_seeds']} / {r['seeds']} | {confidence} | "
            f"{'yes' if r['touched_seeds'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path,
                        default=ROOT / "docs" / "results" / "figure3_normaliser")
    args = parser.parse_args()
    print(markdown(cell_rows(args.study)), end="")


if __name__ == "__main__":
    main()
