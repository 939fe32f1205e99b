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


def _resume_population(uri: str, checkpoints: str, seed: int, barrier) -> list[str]:
    from torchrl_vase.runs import PopulationRun

    members = [{"tracking_uri": uri, "experiment": "populations", "config": {"seed": s},
                "run_name": f"seed{s}"}
               for s in (seed, seed + 1)]
    barrier.wait()  # every job opens the fresh store at the same moment
    with PopulationRun(members, config={"seeds": [seed, seed + 1]}, checkpoint_dir=checkpoints,
                       resume=True) as population:
        return [run.run_id for run in population.runs]


def concurrent_population_resumes(uri: str, checkpoints: str, jobs: int = 4) -> list[list[str]]:
    """``jobs`` forked processes each start a population with ``resume=true`` on one fresh
    store at once (no checkpoint yet: they look up their members' latest runs first); their
    members' run ids (an error in any of them fails the pool)."""
    context = multiprocessing.get_context("fork")
    barrier = context.Manager().Barrier(jobs)
    with context.Pool(jobs) as pool:
        return pool.starmap(_resume_population,
                            [(uri, checkpoints, 10 * job, barrier) for job in range(jobs)])
