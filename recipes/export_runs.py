"""Export the finished runs of an MLflow experiment as CSV files: ``<out>/<measure>/seed<k>.csv``.

One row per iteration: ``frames`` (the MLflow step) and every metric the run logged at it (the
extrinsic return ``Return/mean`` among them), empty where a metric was not logged at that step.
A run's measure is its ``surprise`` tag (``ppo-`` in front for PPO runs); only FINISHED runs are
written, and an existing file is overwritten (a rerun of the same seed replaces it).

    python recipes/export_runs.py --store sqlite:///mlflow.db --experiment mountain_car \\
        --out docs/results/paper_grid/mountain_car
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from mlflow.tracking import MlflowClient


def export(store: str, experiment: str, out: Path) -> list[Path]:
    client = MlflowClient(tracking_uri=store)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no experiment {experiment!r} in {store}.")
    written = []
    for run in client.search_runs([found.experiment_id], max_results=10_000,
                                  filter_string="attributes.status = 'FINISHED'"):
        tags = run.data.tags
        measure = ("ppo-" if tags.get("algorithm") == "ppo" else "") + tags["surprise"]
        rows: dict[int, dict[str, float]] = {}
        for key in sorted(run.data.metrics):
            for metric in client.get_metric_history(run.info.run_id, key):
                rows.setdefault(metric.step, {})[key] = metric.value
        path = out / measure / f"seed{tags['seed']}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, ["frames", *sorted(run.data.metrics)])
            writer.writeheader()
            for step in sorted(rows):
                writer.writerow({"frames": step, **rows[step]})
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="the MLflow tracking URI")
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    written = export(args.store, args.experiment, args.out)
    print(f"{len(written)} runs written under {args.out}")


if __name__ == "__main__":
    main()
