"""Jobs racing on one SQLite store (tests/tracking_jobs.py): the set-up of fresh experiments
and runs resumed on a store that does not exist yet. One set of four concurrent jobs serves
both tests (each job pays the imports beyond those its fork server preloads)."""

from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient
from tracking_jobs import TAGS, sqlite_races

FRESH_EXPERIMENTS = ("fresh0", "fresh1", "fresh2")


@pytest.fixture(scope="module")
def races(tmp_path_factory, fresh_store) -> SimpleNamespace:
    """Four concurrent jobs: three fresh experiments set up at once on a created store, each
    round at once, then eight runs resumed, four at once, on a store that does not exist yet."""
    root = tmp_path_factory.mktemp("sqlite_races")
    set_up_uri = fresh_store(root / "set_up.db")
    resumed_uri = f"sqlite:///{root / 'resumed.db'}"
    set_up_ids, resumed_run_ids = sqlite_races(set_up_uri, FRESH_EXPERIMENTS, resumed_uri,
                                                  str(root / "checkpoints"))
    return SimpleNamespace(root=root, set_up_uri=set_up_uri, set_up_ids=set_up_ids,
                           resumed_uri=resumed_uri, resumed_run_ids=resumed_run_ids)


def test_four_jobs_set_up_one_fresh_experiment_on_sqlite_at_once(races):
    assert len(races.set_up_ids) == len(FRESH_EXPERIMENTS)
    for ids in races.set_up_ids:
        assert len(ids) == 4 and len(set(ids)) == 1
        client = MlflowClient(tracking_uri=races.set_up_uri)
        experiment = client.get_experiment(ids[0])
        assert {key: experiment.tags[key] for key in TAGS} == TAGS
        assert len(client.search_runs(ids)) == 4
        # the artifacts of a SQLite store's experiment live beside the database
        assert experiment.artifact_location == (races.root / "mlruns").as_uri()


def test_runs_resumed_at_once_on_a_fresh_store_each_start_their_run(races):
    # resume=true with no checkpoint looks up the config's latest run before any run exists:
    # the store must be created under its lock first, or parallel jobs race to build its tables
    run_ids = races.resumed_run_ids
    assert len(run_ids) == 4 and len({run_id for ids in run_ids for run_id in ids}) == 8
    client = MlflowClient(tracking_uri=races.resumed_uri)
    experiment = client.get_experiment_by_name("resumed")
    assert len(client.search_runs([experiment.experiment_id])) == 8
