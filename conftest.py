"""Every test and doctest runs in a fresh temporary working directory: what the code under test
writes to the working directory (MuJoCo's MUJOCO_LOG.TXT, a default ``sqlite:///mlflow.db``,
``checkpoints/``) never lands in the repository.

An empty MLflow SQLite store is created once a session, by the library's own creation path, and
copied wherever a test needs a fresh store rather than its creation: MLflow's migrations cost
seconds a store. tests/test_tracking.py and tests/test_sqlite_races.py create theirs."""

import logging
import os
import runpy
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# `make test` runs the suite in pytest-xdist workers, one a core, and tests start processes of
# their own. An idle OpenMP (torch) or OpenBLAS (the ELBO kernel's np.dot) thread spins on its core
# for up to a tenth of a second, waiting for the next parallel region, and so starves a process
# beside it: two tests run at once on two cores took 35 s and 40 s, against 15 s and 27 s
# asleep-when-idle, and the whole suite in two workers used 959 s of CPU against 592 s in one
# process. Asleep when idle, the threads leave the core to the other process; their number, and so
# every number a test computes, stays as it is. Set here, before anything loads torch or SciPy, and
# so inherited by every process a test starts.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # 2**4 cycles of spinning, OpenBLAS' least

# The test modules that take longest, longest first (seconds in one process on a quiet two-core
# machine). `--dist loadfile` hands each worker whole modules, so that a module's fixtures (a
# PostgreSQL server, four racing jobs) are made once, and `--no-loadscope-reorder` hands them out
# in the order collected: the long ones first, the short ones even out the end. Left to xdist's
# own order (most tests first), one worker ran the PostgreSQL module alone for the last 53 s; in
# this order the two workers ended 12 s apart. Only a schedule: the modules pass in any order.
LONGEST_FIRST = (
    "test_trpo_vase_recipe.py",  # 148 s
    "test_tracking_server.py",  # 71 s
    "test_docs.py",  # 50 s
    "test_tracking.py",  # 40 s
    "test_elbo_kernel.py",  # 30 s
    "test_recipes.py",  # 25 s
    "test_sqlite_races.py",  # 18 s
    "test_device.py",  # 16 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: in-module order kept


@pytest.fixture(autouse=True)
def _run_in_a_temporary_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def migrated_store(tmp_path_factory) -> Path:
    """The session's empty, migrated SQLite store; copied by ``fresh_store``."""
    from torchrl_vase.tracking import check_tracking_store

    database = tmp_path_factory.mktemp("migrated") / "mlflow.db"
    check_tracking_store(f"sqlite:///{database}")
    return database


@pytest.fixture(scope="session")
def fresh_store(migrated_store):
    """``fresh_store(path)``: a new empty SQLite store at ``path``, as MLflow would have created
    it there (its Default experiment's artifacts beside it, not beside the template); its URI."""

    def copy(database: Path) -> str:
        database = Path(database)
        shutil.copyfile(migrated_store, database)
        connection = sqlite3.connect(database)
        with connection:
            connection.execute(
                "UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                (str(database.parent / "mlruns" / "0"),))
        connection.close()
        return f"sqlite:///{database}"

    return copy


@pytest.fixture
def sqlite_uri(tmp_path, fresh_store) -> str:
    """A new empty SQLite store, ``mlflow.db`` in the test's directory; its URI."""
    return fresh_store(tmp_path / "mlflow.db")


@pytest.fixture(scope="module")
def store(tmp_path_factory, fresh_store):
    """A throw-away MLflow store and checkpoint root for one test module's recipe runs:
    ``(tracking URI, root directory)``."""
    root = tmp_path_factory.mktemp("store")
    return fresh_store(root / "mlflow.db"), root


@pytest.fixture
def run_script(capsys, monkeypatch):
    """``run_script(path, *args)``: the repository's script run as ``python path args`` runs it,
    but in this process (its imports are this process's: seconds cheaper than a new
    interpreter), from the test's temporary directory; a ``subprocess.CompletedProcess``. An
    exit with a message (``SystemExit("…")``, as a refused input ends) is status 1 with the
    message on stderr, as the interpreter gives it; an exception is raised as it is (it would be
    a traceback). ``check=True`` fails the test on a non-zero status, showing stderr."""
    import torch

    def run(script: str, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        monkeypatch.setattr(sys, "argv", [str(ROOT / script), *args])
        threads = torch.get_num_threads()
        logging_state = _logging_state()  # a Hydra script configures logging for its process
        status = 0
        try:
            runpy.run_path(str(ROOT / script), run_name="__main__")
        except SystemExit as exit_:  # as the interpreter ends on it
            if isinstance(exit_.code, int):
                status = exit_.code
            elif exit_.code is not None:
                print(exit_.code, file=sys.stderr)
                status = 1
        finally:
            torch.set_num_threads(threads)
            _restore_logging(logging_state)
        captured = capsys.readouterr()
        if check:
            assert status == 0, captured.err[-3000:]
        return subprocess.CompletedProcess([script, *args], status, captured.out, captured.err)

    return run


def _logging_state() -> list[tuple[logging.Logger, list, int, bool, bool]]:
    loggers = [logging.root, *(logger for logger in logging.Logger.manager.loggerDict.values()
                               if isinstance(logger, logging.Logger))]
    return [(logger, logger.handlers[:], logger.level, logger.disabled, logger.propagate)
            for logger in loggers]


def _restore_logging(state: list[tuple[logging.Logger, list, int, bool, bool]]) -> None:
    for logger, handlers, level, disabled, propagate in state:
        logger.handlers[:] = handlers
        logger.level, logger.disabled, logger.propagate = level, disabled, propagate
