"""Fixtures that several test modules share."""

from types import SimpleNamespace

import pytest
from tracking_jobs import sqlite_races

from torchrl_vase.tracking import check_tracking_store

FRESH_EXPERIMENTS = ("fresh0", "fresh1", "fresh2")


@pytest.fixture(scope="session")
def sqlite_races_outcome(tmp_path_factory) -> SimpleNamespace:
    """Four spawned jobs racing on SQLite (tests/tracking_jobs.py), run once for the tests of
    test_tracking.py and test_population.py that read it: three fresh experiments set up at
    once on a created store, then four populations resumed at once on a store that does not
    exist yet."""
    root = tmp_path_factory.mktemp("sqlite_races")
    set_up_uri = f"sqlite:///{root / 'set_up.db'}"
    check_tracking_store(set_up_uri)
    population_uri = f"sqlite:///{root / 'populations.db'}"
    set_up_ids, population_run_ids = sqlite_races(set_up_uri, FRESH_EXPERIMENTS, population_uri,
                                                  str(root / "checkpoints"))
    return SimpleNamespace(root=root, set_up_uri=set_up_uri, set_up_ids=set_up_ids,
                           population_uri=population_uri, population_run_ids=population_run_ids)
