"""Pages of MLflow 3's UI that open on a training run's return.

Read from MLflow 3.17's UI bundle (``mlflow/server/js/build``), checked in headless Chromium:

- **GenAI or model training.** The sidebar's switch is the URL's ``workflowType`` parameter,
  else the browser's last choice (``localStorage['mlflow.workflowType']``), which is *GenAI* on a
  fresh browser whatever the experiment says. The experiment tag ``mlflow.experimentKind =
  custom_model_development`` names the kind for the pages that read it; the URLs below carry
  ``workflowType=machine_learning`` so that the first page is the runs page.
- **The runs table's columns and order.** Metric columns are shown only when chosen; a chosen
  set can be kept as a *shared view*: an experiment tag ``mlflow.sharedViewState.<key>`` holding
  the page's state as JSON (``selectedColumns``, ``orderByKey``, ...), opened by the URL's
  ``viewStateShareKey=<key>``. ``return_first_view`` writes one with the return first, sorted
  best first.
- **A run's first page** is *Overview*, the metrics in a table below the fold; its
  ``model-metrics`` tab draws every metric, sections in name order, so ``Return/`` comes first.

Examples:
    >>> view = return_first_view(["Return/mean", "Return/success_rate"])
    >>> sorted(view)
    ['mlflow.sharedViewState.return-first']
    >>> runs_table_url("http://127.0.0.1:5000", "3")
    'http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=return-first'
    >>> run_charts_url("http://127.0.0.1:5000/", "3", "ab12")
    'http://127.0.0.1:5000/#/experiments/3/runs/ab12/model-metrics?workflowType=machine_learning'
"""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["MODEL_TRAINING_KIND", "RETURN_VIEW_KEY", "return_first_view", "run_charts_url",
           "runs_table_url"]

MODEL_TRAINING_KIND = {"mlflow.experimentKind": "custom_model_development"}
RETURN_VIEW_KEY = "return-first"
_SHARED_VIEW_TAG = "mlflow.sharedViewState."
_MODEL_TRAINING = "workflowType=machine_learning"


def _metric_column(name: str) -> str:
    """The runs table's key for a metric column (the UI's ``makeCanonicalSortKey``)."""
    if "`" in name:
        raise ValueError(f"a metric name with a backtick cannot be a runs-table column: {name!r}")
    return f"metrics.`{name}`"


def return_first_view(metrics: Sequence[str]) -> dict[str, str]:
    """The experiment tag of a shared view whose runs table shows ``metrics`` as columns,
    sorted by the first, highest first (every other setting the UI's default)."""
    if not metrics:
        raise ValueError("return_first_view needs at least one metric to show and sort by")
    columns = [_metric_column(name) for name in metrics]
    state = {"selectedColumns": columns, "orderByKey": columns[0], "orderByAsc": False}
    return {f"{_SHARED_VIEW_TAG}{RETURN_VIEW_KEY}": json.dumps(state)}


def runs_table_url(server: str, experiment_id: str, *, charts: bool = False) -> str:
    """The experiment's runs table on ``server``, in model-training mode, in the return-first
    view (the view's tag must be on the experiment, else the UI says the key does not exist);
    with ``charts``, the table's chart view (every run's metrics, ``Return/`` first)."""
    return (f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?{_MODEL_TRAINING}"
            f"&viewStateShareKey={RETURN_VIEW_KEY}" + ("&compareRunsMode=CHART" if charts else ""))


def run_charts_url(server: str, experiment_id: str, run_id: str) -> str:
    """One run's metric charts on ``server`` (``Return/`` first), in model-training mode."""
    return (f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}/model-metrics?"
            f"{_MODEL_TRAINING}")
