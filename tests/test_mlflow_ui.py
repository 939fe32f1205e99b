"""The runs-table view and page URLs of ``torchrl_vase.tracking``."""

import json

import pytest

from torchrl_vase.tracking import return_first_view, run_charts_url, runs_table_url


def test_the_view_shows_the_metrics_in_order_sorted_by_the_first_best_first():
    (key, value), = return_first_view(["Return/mean", "train/frames"]).items()
    assert key == "mlflow.sharedViewState.return-first"
    state = json.loads(value)
    assert state == {"selectedColumns": ["metrics.`Return/mean`", "metrics.`train/frames`"],
                     "orderByKey": "metrics.`Return/mean`", "orderByAsc": False}


def test_the_urls_open_the_view_and_the_charts_in_model_training_mode():
    table = runs_table_url("https://mlflow.example.org/", "7")
    assert table == ("https://mlflow.example.org/#/experiments/7/runs?workflowType="
                     "machine_learning&viewStateShareKey=return-first")
    charts = run_charts_url("https://mlflow.example.org", "7", "abc")
    assert charts.startswith("https://mlflow.example.org/#/experiments/7/runs/abc/model-metrics?")


@pytest.mark.parametrize("metrics, message", [([], "at least one metric"),
                                              (["Return/`mean`"], "backtick")])
def test_a_view_the_ui_cannot_show_is_refused(metrics, message):
    with pytest.raises(ValueError, match=message):
        return_first_view(metrics)
