"""The loop's logger seam: ``Logger`` is what ``MLflowTracker`` and the in-memory logger of
``test_loop.py`` both are (``test_loop.py`` holds the loop's logging and resume behaviour)."""

import pytest
from test_loop import ListLogger, ToyStep

from torchrl_vase import Logger, TrainingLoop
from torchrl_vase.tracking import MLflowTracker


def test_the_tracker_and_a_user_s_logger_satisfy_the_protocol_and_a_stranger_does_not():
    assert isinstance(ListLogger(), Logger)
    assert not isinstance(object(), Logger)
    assert all(callable(getattr(MLflowTracker, name)) for name in ("log", "log_artifact",
                                                                    "last_logged_step"))


def test_a_loop_needs_its_run_s_seed_as_an_int():
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'seed'"):
        TrainingLoop([], ToyStep(), iterations=1, progress=False)
    with pytest.raises(TypeError, match="seed must be an int"):
        TrainingLoop([], ToyStep(), iterations=1, seed=[0, 1], progress=False)
