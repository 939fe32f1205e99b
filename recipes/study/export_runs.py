"""Export the finished runs of an MLflow experiment as CSV files: ``<out>/<measure>/seed<k>.csv``.

One row per iteration: ``frames`` (the MLflow step) and every metric the run logged at it (the
extrinsic return ``Return/mean`` among them), empty where a metric was not logged at that step.
A run's measure is its ``surprise`` tag (``ppo-`` or ``sac-`` in front for PPO and SAC runs)
unless ``--measure`` names it (a study's variant: ``trpo_authors`` for ``preset=authors_trpo``
runs); only FINISHED runs are written, and an existing file is overwritten (a rerun of the same
seed replaces it).
Beside them, ``<out>/<measure>/runs.csv`` keeps one line per seed: the MLflow run, the commit it
ran at (its ``git_commit`` tag), its start, end and minutes (end − start: a resumed run's pauses
included; its own clock, pauses left out, is the CSV's last ``train/wall_time``), its name (the
overrides that made it), its config's identity, "single run" (a population's name for the runs
trained as one until 2026-12-04), any ``--note`` (the machine and its load, say), so every figure
drawn from the CSVs can state its provenance, the final policy's log-std per action dimension
(``policy_log_std``, from its ``weights.pt``), where it computed (``environment``: its machine,
the CPU instruction set torch's kernels used and the libraries' versions, from the run's tags)
and, for a run continued on another machine or software, what changed (``resumed_elsewhere``).
Beside each CSV, ``seed<k>.config.yaml`` is the run's resolved configuration (its
``config.yaml`` artifact, every setting after Hydra's overrides and the presets), so a run
can be rerun or told apart from another without its store. FAILED runs are recorded in
``<out>/<measure>/failures.csv`` (``export_failures``), never written as CSVs.

    python recipes/study/export_runs.py --store sqlite:///mlflow.db --experiment mountain_car \\
        --out docs/results/paper_grid/mountain_car
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import torch
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from torchrl_vase.provenance import RESUMED_ELSEWHERE, recorded_environment

# a weights.pt read for its log-std is no download a person waits on: no progress bars in the logs
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

PROVENANCE = ("seed", "run_id", "git_commit", "start", "end", "minutes", "run_name",
              "run_identity", "population", "note", "policy_log_std", "environment",
              RESUMED_ELSEWHERE)


def _time(milliseconds: int | None) -> str:
    if not milliseconds:
        return ""
    return datetime.fromtimestamp(milliseconds / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Rows = list[dict[str, str]]


def rewrite_rows(path: Path, columns: tuple[str, ...],
                 change: Callable[[Rows], Rows | None]) -> bool:
    """Read ``path``'s rows (none if it does not exist), ``change`` them and write what it
    returns (``None``: nothing to write), with ``path``'s folder locked (``flock``) from the
    read to the write and the file swapped in whole; whether it wrote. A cell's ``runs.csv`` and
    ``failures.csv`` hold every seed's row, and two jobs of one cell can end in the same second
    (a launcher's workers are threads; two launchers may share a folder): without the lock,
    each reads the rows before the other's write and the last write drops a row. A write that
    fails leaves the file as it was and no temporary file beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)  # one open of the folder each: threads wait too
        rows = []
        if path.exists():
            with path.open(newline="") as handle:
                rows = list(csv.DictReader(handle))
        rows = change(rows)
        if rows is None:
            return False
        with tempfile.NamedTemporaryFile("w", newline="", dir=path.parent, delete=False,
                                         prefix=f".{path.name}.") as handle:
            try:
                writer = csv.DictWriter(handle, columns)
                writer.writeheader()
                writer.writerows(rows)
            except BaseException:
                os.unlink(handle.name)
                raise
        os.chmod(handle.name, 0o644)  # a tracked file's mode, not a temporary file's 0600
        os.replace(handle.name, path)
        return True
    finally:
        os.close(folder)  # and with it the lock


def _record_provenance(path: Path, line: dict[str, str]) -> None:
    """Upsert ``line`` by seed into the measure's ``runs.csv`` (rows sorted by seed)."""
    def upsert(rows: Rows) -> Rows:
        by_seed = {row["seed"]: row for row in rows} | {line["seed"]: line}
        return [by_seed[seed] for seed in sorted(by_seed, key=int)]

    rewrite_rows(path, PROVENANCE, upsert)


def policy_log_std(client: MlflowClient, run_id: str) -> str:
    """The run's last policy's state-independent log-std, one value per action dimension
    (``"-0.512 41.300"``), from its ``weights.pt`` (written with each checkpoint); ``""`` when it
    has none (no checkpoint yet, or a std that depends on the state: SAC's)."""
    if "weights.pt" not in {artifact.path for artifact in client.list_artifacts(run_id)}:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        weights = torch.load(client.download_artifacts(run_id, "weights.pt", tmp),
                             weights_only=True, map_location="cpu")
    scales = [value for key, value in (weights.get("actor") or {}).items()
              if key.endswith("state_independent_scale")]
    if len(scales) != 1:
        return ""
    return " ".join(f"{value:.3f}" for value in scales[0].flatten().tolist())


def environment(tags: dict[str, str]) -> str:
    """Where the run computed (``torchrl_vase.provenance.recorded_environment``) as one cell:
    ``"machine=vm (2 cores, AMD EPYC); machine.cpu_capability=AVX2; software.python=…"``;
    ``""`` for a run that predates the tags."""
    return "; ".join(f"{key}={value}" for key, value in recorded_environment(tags).items())


def parse_environment(cell: str) -> dict[str, str]:
    """``environment``'s cell read back into the tags it holds (``{}`` for an empty cell).

        >>> parse_environment("machine=vm (2 cores, X); machine.cpu_capability=AVX2")
        {'machine': 'vm (2 cores, X)', 'machine.cpu_capability': 'AVX2'}
    """
    return dict(entry.split("=", 1) for entry in cell.split("; ")) if cell else {}


def resolved_config(client: MlflowClient, run_id: str) -> str | None:
    """The run's resolved configuration, its ``config.yaml`` artifact's text; ``None`` when it
    logged none."""
    if "config.yaml" not in {artifact.path for artifact in client.list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return Path(client.download_artifacts(run_id, "config.yaml", tmp)).read_text()


def _runs(client: MlflowClient, store: str, experiment: str, status: str, measure: str | None,
          seeds: Iterable[int] | None, surprise: str | None) -> Iterator[tuple[Run, str]]:
    """The experiment's runs that ended ``status`` (of ``seeds`` and with the ``surprise`` tag,
    where given), oldest first, each with the folder its measure is written to."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no experiment {experiment!r} in {store}.")
    wanted = None if seeds is None else {str(seed) for seed in seeds}
    for run in client.search_runs([found.experiment_id], max_results=10_000,
                                  filter_string=f"attributes.status = '{status}'",
                                  order_by=["attributes.start_time ASC"]):
        tags = run.data.tags
        if ((wanted is not None and tags["seed"] not in wanted)
                or (surprise is not None and tags["surprise"] != surprise)):
            continue
        algorithm = tags.get("algorithm", "trpo")
        yield run, measure or ("" if algorithm == "trpo" else f"{algorithm}-") + tags["surprise"]


def export(store: str, experiment: str, out: Path, *, measure: str | None = None,
           seeds: Iterable[int] | None = None, surprise: str | None = None,
           note: str = "") -> list[Path]:
    """Write the experiment's finished runs (of ``seeds`` and with the ``surprise`` tag, where
    given); the paths written."""
    client = MlflowClient(tracking_uri=store)
    written = []
    for run, name in _runs(client, store, experiment, "FINISHED", measure, seeds, surprise):
        tags = run.data.tags
        rows: dict[int, dict[str, float]] = {}
        for key in sorted(run.data.metrics):
            for metric in client.get_metric_history(run.info.run_id, key):
                rows.setdefault(metric.step, {})[key] = metric.value
        path = out / name / f"seed{tags['seed']}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, ["frames", *sorted(run.data.metrics)])
            writer.writeheader()
            for step in sorted(rows):
                writer.writerow({"frames": step, **rows[step]})
        config = resolved_config(client, run.info.run_id)
        if config is not None:
            path.with_suffix(".config.yaml").write_text(config)
        start, end = run.info.start_time, run.info.end_time
        _record_provenance(path.parent / "runs.csv", {
            "seed": tags["seed"], "run_id": run.info.run_id,
            "git_commit": tags.get("git_commit", ""), "start": _time(start), "end": _time(end),
            "minutes": f"{(end - start) / 60_000:.1f}" if start and end else "",
            # the config: the run's name holds the overrides that made it, its identity the
            # whole config's hash (config.yaml in the run's artifacts)
            "run_name": run.info.run_name or "", "run_identity": tags.get("run_identity", ""),
            "population": tags.get("population", "single run"), "note": note,
            "policy_log_std": policy_log_std(client, run.info.run_id),
            "environment": environment(tags),
            RESUMED_ELSEWHERE: tags.get(RESUMED_ELSEWHERE, "")})
        written.append(path)
    return written


FAILURES = ("seed", "run_id", "git_commit", "start", "end", "iteration", "error", "note",
            "policy_log_std")


def export_failures(store: str, experiment: str, out: Path, *, measure: str | None = None,
                    seeds: Iterable[int] | None = None, surprise: str | None = None,
                    error: str = "", note: str = "") -> list[Path]:
    """Record the experiment's FAILED runs (of ``seeds`` and ``surprise``, where given) in
    ``<out>/<measure>/failures.csv``, one row a run (kept when the seed is run again, so a
    figure can say which of its seeds needed a second try and why): its commit, times, the last
    iteration it logged and its ``error`` tag (else ``error``, e.g. read from its log); the
    files written."""
    client = MlflowClient(tracking_uri=store)
    written = []
    for run, name in _runs(client, store, experiment, "FAILED", measure, seeds, surprise):
        tags = run.data.tags
        path = out / name / "failures.csv"
        iteration = run.data.metrics.get("train/iteration")
        line = {"seed": tags["seed"], "run_id": run.info.run_id,
                "git_commit": tags.get("git_commit", ""), "start": _time(run.info.start_time),
                "end": _time(run.info.end_time),
                "iteration": "" if iteration is None else str(int(iteration)),
                "error": tags.get("error", error), "note": note,
                "policy_log_std": policy_log_std(client, run.info.run_id)}

        def upsert(rows: Rows, line: dict[str, str] = line) -> Rows:
            by_run = {row["run_id"]: row for row in rows} | {line["run_id"]: line}
            return sorted(by_run.values(), key=lambda row: (int(row["seed"]), row["start"]))

        rewrite_rows(path, FAILURES, upsert)
        written.append(path)
    return written


def fill_policy_log_std(store: str, directory: Path) -> list[Path]:
    """Fill ``policy_log_std`` in the ``runs.csv`` and ``failures.csv`` files under
    ``directory`` wherever it is empty and the run is in ``store`` (rows exported before the
    column existed); every other value is left as it is. The files changed."""
    client = MlflowClient(tracking_uri=store)

    def fill(rows: Rows) -> Rows | None:
        filled = 0
        for row in rows:
            if row.get("policy_log_std"):
                continue
            try:
                client.get_run(row["run_id"])
            except Exception:  # exported from another machine's store
                row.setdefault("policy_log_std", "")
                continue
            row["policy_log_std"] = policy_log_std(client, row["run_id"])
            filled += bool(row["policy_log_std"])
        return rows if filled else None

    return [path for path in sorted([*directory.rglob("runs.csv"),
                                     *directory.rglob("failures.csv")])
            if rewrite_rows(path, PROVENANCE if path.name == "runs.csv" else FAILURES, fill)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="the MLflow tracking URI")
    parser.add_argument("--experiment", help="required unless --fill-policy-log-std")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--measure", default=None,
                        help="the folder's name (default: the run's surprise tag)")
    parser.add_argument("--seeds", type=int, nargs="*", default=None,
                        help="only these seeds (default: every finished run)")
    parser.add_argument("--surprise", default=None,
                        help="only the runs of this measure (default: every measure)")
    parser.add_argument("--note", default="", help="a note kept in runs.csv beside each seed")
    parser.add_argument("--fill-policy-log-std", action="store_true",
                        help="only fill the empty policy_log_std of the runs.csv and "
                             "failures.csv files under --out from --store")
    args = parser.parse_args()
    if args.fill_policy_log_std:
        changed = fill_policy_log_std(args.store, args.out)
        print(f"{len(changed)} files filled: {', '.join(map(str, changed))}")
        return
    if args.experiment is None:
        parser.error("--experiment is required (unless --fill-policy-log-std).")
    written = export(args.store, args.experiment, args.out, measure=args.measure,
                     seeds=args.seeds, surprise=args.surprise, note=args.note)
    print(f"{len(written)} runs written under {args.out}")


if __name__ == "__main__":
    main()
