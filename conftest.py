"""Every test and doctest runs in a fresh temporary working directory: what the code under test
writes to the working directory (MuJoCo's MUJOCO_LOG.TXT, a default ``sqlite:///mlflow.db``,
``checkpoints/``) never lands in the repository."""

import pytest


@pytest.fixture(autouse=True)
def _run_in_a_temporary_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A throw-away MLflow store and checkpoint root for one test module's recipe runs:
    ``(tracking URI, root directory)``."""
    root = tmp_path_factory.mktemp("store")
    return f"sqlite:///{root / 'mlflow.db'}", root
