"""The loop's logger seam: ``Logger`` and ``CSVLogger`` (torchrl's CSV files) beside the
in-memory logger of ``test_loop.py``; a killed and resumed run's CSV files hold each step once."""

import math

import pytest
from test_loop import ListLogger, ToyStep, _loop, _without_timings

from torchrl_vase import CSVLogger, Logger, TrainingLoop
from torchrl_vase.checkpointing import Checkpointer
from torchrl_vase.tracking import MLflowTracker


def _csv_history(logger: CSVLogger) -> list[tuple[int, dict[str, float]]]:
    """The CSV files read back as ``(step, metrics)``, the way the loop logged them."""
    steps: dict[int, dict[str, float]] = {}
    for key in logger.logged_keys():
        for step, value in logger.history(key):
            assert key not in steps.setdefault(step, {}), f"{key} at step {step} twice"
            steps[step][key] = value
    return sorted(steps.items())


def _nan_as_text(steps):
    return [(s, {k: "nan" if math.isnan(v) else v for k, v in m.items()}) for s, m in steps]


def test_both_loggers_satisfy_the_protocol():
    assert isinstance(CSVLogger("x", log_dir="/tmp/unused-csv"), Logger)
    assert isinstance(ListLogger(), Logger)
    assert all(hasattr(MLflowTracker, name) for name in ("log", "log_artifact",
                                                          "last_logged_step"))


def test_the_csv_files_hold_what_the_loop_logged_value_for_value(tmp_path):
    memory, files = ListLogger(), CSVLogger("run", log_dir=tmp_path)
    _loop(memory)[0].run()
    _loop(files)[0].run()
    expected = _without_timings(memory.steps)
    assert len(expected) == 6 and expected[0][1]["loss"] > 0
    got = _without_timings(_csv_history(files))
    assert [s for s, _ in got] == [s for s, _ in expected]
    assert _nan_as_text(got) == _nan_as_text(expected)  # str(float) round-trips exactly


def test_a_killed_run_resumed_writes_each_step_once_to_its_csv_files(tmp_path):
    reference = CSVLogger("reference", log_dir=tmp_path)
    _loop(reference)[0].run()
    logger, checkpointer = CSVLogger("run", log_dir=tmp_path), Checkpointer(tmp_path / "ck")
    saves = []

    def save_then_die(state):  # written, not yet logged: the next process logs it
        checkpointer.save(state)
        saves.append(1)
        if len(saves) == 2:
            raise KeyboardInterrupt("killed after the write")

    loop = _loop(logger)[0]
    loop.checkpoint = save_then_die
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    resumed_logger = CSVLogger("run", log_dir=tmp_path)  # the next process
    loop = _loop(resumed_logger, checkpointer)[0]
    loop.load_state_dict(checkpointer.load())
    loop.run()
    assert _without_timings(_csv_history(resumed_logger)) == _without_timings(
        _csv_history(reference))


def test_an_artifact_is_copied_under_the_run(tmp_path):
    logger = CSVLogger("run", log_dir=tmp_path / "logs")
    figure = tmp_path / "heatmap.png"
    figure.write_bytes(b"png")
    logger.log_artifact(figure, artifact_path="figures")
    assert (tmp_path / "logs" / "run" / "artifacts" / "figures" / "heatmap.png").read_bytes() \
        == b"png"


def test_a_loop_needs_its_run_s_seed_as_an_int():
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'seed'"):
        TrainingLoop([], ToyStep(), iterations=1, progress=False)
    with pytest.raises(TypeError, match="seed must be an int"):
        TrainingLoop([], ToyStep(), iterations=1, seed=[0, 1], progress=False)
