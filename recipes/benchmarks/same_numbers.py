"""Does a change keep the numbers? Record short runs' metrics at one commit, compare at another.

A refactor that must not change what a run computes (issue 78: "a single run's metrics with the
same seed are bit-identical before and after") or may change it only by rounding (issue 79) is
checked here: ``record`` trains each (task, measure) for a few iterations with one seed, one
thread, in a fresh process (``recipes/trpo_vase.py``, a scratch MLflow store) and writes every
metric it logged (the clocks aside) to a JSON file; ``compare`` reads two such files and prints,
per run, whether every value is bit-identical, else the largest absolute and relative difference
and the first iteration and metric where they part.

    python recipes/benchmarks/same_numbers.py record --out /tmp/before.json
    # ... change the code ...
    python recipes/benchmarks/same_numbers.py record --out /tmp/after.json
    python recipes/benchmarks/same_numbers.py compare /tmp/before.json /tmp/after.json
    # another commit's recipe and library, from its checkout (git worktree add DIR COMMIT)
    python recipes/benchmarks/same_numbers.py record --code DIR --out /tmp/then.json
    # a change that retires metrics on purpose names them: the rest must still agree
    python recipes/benchmarks/same_numbers.py compare /tmp/before.json /tmp/after.json \
        --retired bonus/novelty_spearman bonus/self_agreement

    >>> compare_runs({"a": [[1, 1.0], [2, 2.0]]}, {"a": [[1, 1.0], [2, 2.0]]})["identical"]
    True
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from mlflow.tracking import MlflowClient

from torchrl_vase.loop import is_clock  # the clocks: they differ between any two runs

ROOT = Path(__file__).resolve().parents[2]

TASKS = ("mountain_car", "half_cheetah")
MEASURES = ("vase", "nll", "vime", "rnd", "none")


def record_run(task: str, measure: str, iterations: int, seed: int, scratch: Path,
               overrides: tuple[str, ...] = (), code: Path = ROOT
               ) -> dict[str, list[list[float]]]:
    """Train one run in a fresh process with ``code``'s recipe and library; its metrics by name,
    ``[[step, value], ...]``."""
    store = f"sqlite:///{scratch}/mlflow.db"
    # run as a module from this checkout: Python puts it first on the path, so the run trains
    # this checkout's library (a worktree of another commit records that commit's numbers)
    command = [sys.executable, "-m", "recipes.trpo_vase", f"env={task}",
               f"surprise={measure}", f"iterations={iterations}", f"seed={seed}", "threads=1",
               "progress_bar=false", "eval.every=0", f"mlflow.tracking_uri={store}",
               f"mlflow.experiment=same-{task}-{measure}",
               f"checkpoint.dir={scratch}/checkpoints", *overrides]
    subprocess.run(command, check=True, cwd=code, stdout=subprocess.DEVNULL)
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name(f"same-{task}-{measure}")
    [run] = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"],
                               max_results=1)
    return {key: [[m.step, m.value] for m in client.get_metric_history(run.info.run_id, key)]
            for key in sorted(run.data.metrics) if not is_clock(key)}


def compare_runs(before: dict, after: dict) -> dict:
    """One run's two records: bit-identical or not, the largest differences, where they part."""
    result = {"identical": True, "max_abs": 0.0, "max_rel": 0.0, "first": None,
              "only_one": sorted(set(before) ^ set(after))}
    if result["only_one"]:
        result["identical"] = False
    for key in sorted(set(before) & set(after)):
        a, b = dict(map(tuple, before[key])), dict(map(tuple, after[key]))
        for step in sorted(set(a) | set(b)):
            x, y = a.get(step, math.nan), b.get(step, math.nan)
            if x == y or (math.isnan(x) and math.isnan(y)):
                continue
            result["identical"] = False
            if result["first"] is None or step < result["first"][0]:
                result["first"] = (step, key)
            if math.isfinite(x) and math.isfinite(y):
                result["max_abs"] = max(result["max_abs"], abs(x - y))
                result["max_rel"] = max(result["max_rel"], abs(x - y) / max(abs(x), 1e-12))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    record = verbs.add_parser("record", help="train the runs, write their metrics")
    record.add_argument("--out", type=Path, required=True)
    record.add_argument("--tasks", nargs="+", default=list(TASKS))
    record.add_argument("--measures", nargs="+", default=list(MEASURES))
    record.add_argument("--iterations", type=int, default=10)
    record.add_argument("--seed", type=int, default=0)
    record.add_argument("--overrides", nargs="*", default=[])
    record.add_argument("--code", type=Path, default=ROOT,
                        help="the checkout whose recipe and library train (default: this one)")
    compare = verbs.add_parser("compare", help="compare two records")
    compare.add_argument("before", type=Path)
    compare.add_argument("after", type=Path)
    compare.add_argument("--retired", nargs="*", default=[],
                         help="metrics the change removed on purpose: left out of both records")
    args = parser.parse_args()
    if args.verb == "record":
        runs = {}
        for task in args.tasks:
            for measure in args.measures:
                with tempfile.TemporaryDirectory() as scratch:
                    runs[f"{task} {measure}"] = record_run(task, measure, args.iterations,
                                                           args.seed, Path(scratch),
                                                           tuple(args.overrides), args.code)
                print(f"recorded {task} {measure}", flush=True)
        args.out.write_text(json.dumps(runs))
        return
    before, after = ({name: {key: values for key, values in run.items()
                             if key not in args.retired} for name, run in
                      json.loads(path.read_text()).items()} for path in (args.before, args.after))
    differing = 0
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            print(f"{name}: in one record only")
            differing += 1
            continue
        result = compare_runs(before[name], after[name])
        if result["identical"]:
            print(f"{name}: bit-identical ({len(before[name])} metrics)")
            continue
        differing += 1
        print(f"{name}: DIFFERENT, largest difference {result['max_abs']:.3g} (relative "
              f"{result['max_rel']:.3g}), first at step {result['first']}"
              + (f", metrics in one only: {result['only_one']}" if result["only_one"] else ""))
    raise SystemExit(1 if differing else 0)


if __name__ == "__main__":
    main()
