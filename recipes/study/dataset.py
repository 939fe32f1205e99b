"""A study's runs as one dataset: one Parquet file, one row a run.

Each row holds the run's cell (``task``, ``measure``, ``seed``), where and how it ran
(``run_id``, ``git_commit``, ``processor``, ``start``, ``end``, ``minutes``, ``note``,
``environment``, ``policy_log_std``), its resolved configuration (``config``: the YAML of its
``config.yaml`` artifact) and every metric it logged, one list column a metric, one value an
iteration (``frames`` the MLflow step; NaN where a metric was not logged at that step). The
file carries ``SCHEMA_VERSION`` in its metadata; a file of another version is refused, not
read wrongly. Writes hold the file's lock from the read to the swap, and the new file replaces
the old in one ``os.replace``: two launchers ending runs in the same second keep both rows.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "study.parquet"
    >>> upsert(path, [{"task": "mountain_car", "measure": "vase", "seed": 0,
    ...                "metrics": {"frames": [5000.0, 10000.0], "Return/mean": [0.0, 1.0]}}])
    True
    >>> runs = read(path)
    >>> runs[0].seed, runs[0].returns.tolist()
    (0, [0.0, 1.0])
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

#: bumped whenever a column changes meaning; a file of another version is refused
SCHEMA_VERSION = "1"
_VERSION_KEY = b"torchrl_vase.study_schema"
#: the columns of a run that are not metrics
KEYS = ("task", "measure", "seed")
PROVENANCE = ("status", "run_id", "git_commit", "processor", "start", "end", "minutes",
              "iteration", "error", "note", "environment", "resumed_elsewhere", "policy_log_std",
              "config")
METRIC_PREFIX = "m:"


@dataclass
class Run:
    """One run of a study: its cell, provenance and per-iteration metrics."""

    task: str
    measure: str
    seed: int
    metrics: dict[str, np.ndarray]
    provenance: dict[str, str | float | None] = field(default_factory=dict)

    def metric(self, name: str) -> np.ndarray:
        """``name``'s values an iteration (all NaN where the run never logged it)."""
        values = self.metrics.get(name)
        return np.full(self.frames.size, np.nan) if values is None else values

    @property
    def frames(self) -> np.ndarray:
        return self.metrics["frames"]

    @property
    def returns(self) -> np.ndarray:
        """The extrinsic return an iteration (``Return/mean``)."""
        return self.metric("Return/mean")

    @property
    def first_reward(self) -> float:
        """The frame of the first extrinsic reward; NaN: never found."""
        first = self.metric("train/first_reward_step")
        first = first[np.isfinite(first)]
        return float(first[0]) if first.size else math.nan

    @property
    def commit(self) -> str:
        return str(self.provenance.get("git_commit") or "")


class SchemaError(ValueError):
    """A dataset written by another version of the schema."""


def processor(note: str) -> str:
    """The machine a launcher's note names (``"started on vm (2 cores, Intel(R) Xeon(R)
    Processor), load ..."`` -> ``"vm (2 cores, Intel(R) Xeon(R) Processor)"``), or ``""``."""
    found = re.search(r"started on (.*?\)),? load", note or "")
    return found.group(1) if found else ""


def _table(runs: Iterable[dict]) -> pa.Table:
    rows = list(runs)
    names = sorted({name for row in rows for name in row["metrics"]})
    columns: dict[str, list] = {key: [row[key] for row in rows] for key in KEYS}
    for key in PROVENANCE:
        columns[key] = [None if (value := row.get("provenance", {}).get(key)) is None
                        else str(value) for row in rows]
    for name in names:
        columns[METRIC_PREFIX + name] = [
            None if (values := row["metrics"].get(name)) is None
            else np.asarray(values, dtype=np.float64) for row in rows]
    schema = pa.schema(
        [("task", pa.string()), ("measure", pa.string()), ("seed", pa.int64())]
        + [(key, pa.string()) for key in PROVENANCE]
        + [(METRIC_PREFIX + name, pa.list_(pa.float64())) for name in names],
        metadata={_VERSION_KEY: SCHEMA_VERSION.encode()})
    return pa.table(columns, schema=schema)


def _rows(table: pa.Table) -> list[dict]:
    data = table.to_pydict()
    count = table.num_rows
    metrics = [c for c in table.column_names if c.startswith(METRIC_PREFIX)]
    return [{"task": data["task"][i], "measure": data["measure"][i], "seed": data["seed"][i],
             "provenance": {k: data[k][i] for k in PROVENANCE if data[k][i] is not None},
             "metrics": {c.removeprefix(METRIC_PREFIX): np.asarray(data[c][i], dtype=np.float64)
                         for c in metrics if data[c][i] is not None}}
            for i in range(count)]


def _load(path: Path, columns: list[str] | None = None) -> pa.Table:
    """The file's table (its ``columns`` alone, where given), once its schema version is this
    code's."""
    version = (pq.read_schema(path).metadata or {}).get(_VERSION_KEY, b"").decode() or "none"
    if version != SCHEMA_VERSION:
        raise SchemaError(f"{path} was written by study schema version {version}; this code "
                          f"reads version {SCHEMA_VERSION}. Convert it with the code of its "
                          "version, or run its cells again.")
    return pq.read_table(path, columns=columns)


def index(path: Path) -> list[dict]:
    """Each stored run's cell, seed, status and MLflow run id, without its metrics (what a
    launcher asks: which runs are in, which to run); none if the file does not exist."""
    if not Path(path).exists():
        return []
    table = _load(path, [*KEYS, "status", "run_id"]).to_pylist()
    return [row | {"status": row["status"] or "FINISHED"} for row in table]


def read_rows(path: Path) -> list[dict]:
    """Every run of ``path`` as a dict (``KEYS``, ``provenance``, ``metrics``); none if the
    file does not exist."""
    return _rows(_load(path)) if Path(path).exists() else []


def read(path: Path, where: Callable[[Run], bool] | None = None,
         status: str = "FINISHED") -> list[Run]:
    """The runs of ``path`` that ended with ``status`` (``"FAILED"``: the failures, their
    ``error`` and ``iteration`` in ``provenance``) and that ``where`` keeps, by task, measure
    and seed."""
    runs = [Run(r["task"], r["measure"], int(r["seed"]), r["metrics"], r["provenance"])
            for r in read_rows(path) if r["provenance"].get("status", "FINISHED") == status]
    runs = [run for run in runs if where is None or where(run)]
    return sorted(runs, key=lambda r: (r.task, r.measure, r.seed))


def _write(path: Path, table: pa.Table) -> None:
    """Replace ``path`` with ``table`` in one swap (a failed write leaves it as it was)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".parquet.tmp")
    os.close(handle)
    try:
        metrics = [c for c in table.column_names if c.startswith(METRIC_PREFIX)]
        # floats split by byte before zstd: a third smaller than dictionary pages (18 MB
        # against 24 MB for Figure 3's runs)
        pq.write_table(table.replace_schema_metadata({_VERSION_KEY: SCHEMA_VERSION.encode()}),
                       temporary, compression="zstd", compression_level=19,
                       use_dictionary=[c for c in table.column_names if c not in metrics],
                       use_byte_stream_split=[f"{c}.list.element" for c in metrics])
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write(path: Path, rows: list[dict]) -> None:
    """Replace ``path`` with ``rows`` in one swap (a failed write leaves it as it was)."""
    _write(Path(path), _table(rows))


def upsert(path: Path, rows: Iterable[dict]) -> bool:
    """Add ``rows`` to ``path`` under its lock, each replacing a stored run of its cell, seed
    and status (a rerun replaces the run; a failure is kept beside a later finished run);
    whether anything was written. The stored runs stay Arrow columns throughout."""
    rows = list(rows)
    if not rows:
        return False
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = _table(rows)
    with FileLock(str(path) + ".lock"):
        table = new
        if path.exists():
            old = _load(path)

            def keys(t: pa.Table) -> list[tuple]:
                status = [value or "FINISHED" for value in t.column("status").to_pylist()]
                return list(zip(*(t.column(k).to_pylist() for k in KEYS), status, strict=True))

            replaced = set(keys(new))
            kept = old.filter(pa.array([key not in replaced for key in keys(old)]))
            table = pa.concat_tables([kept, new], promote_options="default")
        _write(path, table)
    return True


def cells(runs: Iterable[Run]) -> dict[str, dict[str, list[Run]]]:
    """``task -> measure -> runs`` (by seed)."""
    grouped: dict[str, dict[str, list[Run]]] = {}
    for run in sorted(runs, key=lambda r: r.seed):
        grouped.setdefault(run.task, {}).setdefault(run.measure, []).append(run)
    return grouped
