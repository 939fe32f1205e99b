"""Jobs that set up one MLflow experiment at once, for the tests of concurrent set-up."""

import multiprocessing
import os

from mlflow.tracking import MlflowClient

from torchrl_vase.tracking import MLflowTracker, get_or_create_experiment

TAGS = {"mlflow.experimentKind": "custom_model_development", "mlflow.note.content": "a note"}


def _set_up(uri: str, name: str, barrier) -> str:
    barrier.wait()  # every process creates the experiment and its tags at the same moment
    client = MlflowClient(tracking_uri=uri)
    experiment = get_or_create_experiment(client, name, tags=TAGS)
    tracker = MLflowTracker.create(uri, experiment, run_name=f"pid{os.getpid()}")
    tracker.log([(1, {"x": 1.0})])
    tracker.end("FINISHED")
    return experiment.experiment_id


def concurrent_set_up(uri: str, name: str, jobs: int = 4) -> list[str]:
    """``jobs`` forked processes set up one fresh experiment at once; their experiment ids (an
    error in any of them fails the pool)."""
    context = multiprocessing.get_context("fork")
    barrier = context.Manager().Barrier(jobs)
    with context.Pool(jobs) as pool:
        return pool.starmap(_set_up, [(uri, name, barrier)] * jobs)
