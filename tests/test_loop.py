"""TrainingLoop's guarantees with a toy iteration (a linear model fitted to random batches): exact
resume after a crash at any point, SIGTERM, the evaluation and checkpoint schedules, bad input."""

import itertools
import math
import os
import re
import signal
import threading
import time

import pytest
import torch
from tensordict import TensorDict
from torch import nn

import torchrl_vase.loop as loop_module
from torchrl_vase import TrainingLoop
from torchrl_vase.checkpointing import Checkpointer
from torchrl_vase.loop import (
    StopAtOnce,
    StopNow,
    StopSignals,
    is_clock,
    stop_due,
    stop_requested,
)
from torchrl_vase.timing import phase

NUM_ENVS, STEPS = 2, 4


class ToyCollector:
    """Endless batches whose contents come from torch's global generator (the loop seeds it),
    so a batch is a function of (seed, iteration) when ``reseed`` is off; with ``set_seed`` the
    collector keeps a generator of its own, as fresh-path collectors do."""

    def __init__(self) -> None:
        self.generator = torch.Generator().manual_seed(0)
        self.updates = 0
        self.closed = False

    def __iter__(self):
        while True:
            observation = torch.randn(NUM_ENVS, STEPS, 3)
            noise = torch.randn(NUM_ENVS, STEPS, 1, generator=self.generator)
            yield TensorDict({"observation": observation,
                              "next": {"reward": observation.sum(-1, keepdim=True) + noise}},
                             [NUM_ENVS, STEPS])

    def set_seed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def update_policy_weights_(self) -> None:
        self.updates += 1

    def shutdown(self) -> None:
        self.closed = True

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


class ToyStep(nn.Module):
    """One SGD step of a linear model on the batch; dropout makes it consume random numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Sequential(nn.Dropout(0.2), nn.Linear(3, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.1)
        self.crash_at: int | None = None
        self.calls = 0

    def forward(self, batch) -> dict[str, float]:
        self.calls += 1
        if self.crash_at is not None and self.calls == self.crash_at:
            raise KeyboardInterrupt("killed")
        loss = (self.model(batch["observation"]) - batch["next", "reward"]).square().mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.item(), "weight": self.model[1].weight.sum().item()}


class ListLogger:
    def __init__(self) -> None:
        self.steps: list[tuple[int, dict]] = []

    def log(self, steps) -> None:
        self.steps.extend((step, dict(metrics)) for step, metrics in steps)

    def log_artifact(self, path, artifact_path=None) -> None:
        pass

    def last_logged_step(self, key: str) -> int:
        return max((step for step, metrics in self.steps if key in metrics), default=-1)


def _loop(logger, checkpointer=None, iterations=6, every=2, step=None, **kwargs):
    torch.manual_seed(0)  # the parts' initial weights: a run killed before its first checkpoint
    step = step or ToyStep()  # starts again from them
    collector = ToyCollector()
    loop = TrainingLoop(
        collector, step, iterations=iterations, seed=3, logger=logger,
        state={"step": step, "optimizer": step.optimizer, "collector": collector},
        checkpoint=checkpointer.save if checkpointer else None, checkpoint_every=every,
        progress=False, **kwargs)
    return loop, step, collector


def _without_timings(steps):
    return [(s, {k: v for k, v in m.items() if not is_clock(k)})
            for s, m in steps]


def _uninterrupted(tmp_path, **kwargs):
    logger = ListLogger()
    loop, _, _ = _loop(logger, Checkpointer(tmp_path / "reference"), **kwargs)
    loop.run()
    return _without_timings(logger.steps)


@pytest.mark.parametrize("crash_at", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("reseed", [False, True])
def test_a_crash_at_any_iteration_and_a_resume_log_the_uninterrupted_history(
        tmp_path, crash_at, reseed):
    expected = _uninterrupted(tmp_path, reseed_collector=reseed)
    logger, checkpointer = ListLogger(), Checkpointer(tmp_path / "run")
    loop, step, _ = _loop(logger, checkpointer, reseed_collector=reseed)
    step.crash_at = crash_at
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    # metrics go out only with a checkpoint: what was logged is what the checkpoint holds
    logged = [s for s, _ in logger.steps]
    assert logged == [8 * i for i in range(1, 2 * ((crash_at - 1) // 2) + 1)]
    while True:  # the next process: a new loop, the checkpoint loaded
        loop, _, _ = _loop(logger, checkpointer, reseed_collector=reseed)
        if checkpointer.exists():
            loop.load_state_dict(checkpointer.load())
        if loop.run().iterations_done == 6:
            break
    assert _without_timings(logger.steps) == expected


def test_a_crash_between_the_checkpoint_and_the_log_logs_each_step_once(tmp_path):
    expected = _uninterrupted(tmp_path)
    logger, checkpointer = ListLogger(), Checkpointer(tmp_path / "run")
    saves = []

    def save_then_die(state):
        checkpointer.save(state)
        saves.append(1)
        if len(saves) == 2:  # written, not yet logged: the next process logs it
            raise KeyboardInterrupt("killed after the write")

    loop, _step, _collector = _loop(logger, None)
    loop.checkpoint = save_then_die
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    assert [s for s, _ in logger.steps] == [8, 16]
    loop, _, _ = _loop(logger, checkpointer)
    loop.load_state_dict(checkpointer.load())
    loop.run()
    assert _without_timings(logger.steps) == expected


def test_sigterm_ends_the_iteration_with_a_checkpoint_off_schedule(tmp_path):
    logger, checkpointer = ListLogger(), Checkpointer(tmp_path / "run")
    step = ToyStep()
    original = step.forward

    def signal_in_the_third(batch):
        if step.calls == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(batch)

    step.forward = signal_in_the_third
    loop, _, collector = _loop(logger, checkpointer, iterations=100, every=50, step=step)
    # whatever handler the process had (torchrl's memmap storages install one) comes back
    before = signal.getsignal(signal.SIGTERM)
    result = loop.run()
    assert result.stopped_by == "SIGTERM" and result.iterations_done == 3
    assert checkpointer.load()["iterations_done"] == 3  # not a multiple of 50: the signal's
    assert [s for s, _ in logger.steps] == [8, 16, 24]
    assert collector.closed
    assert signal.getsignal(signal.SIGTERM) is before  # handlers given back


def test_evaluation_every_k_iterations_and_at_the_last(tmp_path):
    seen = []
    loop, _, _ = _loop(ListLogger(), iterations=7, evaluate=lambda i: seen.append(i) or
                       {"eval/x": float(i)}, eval_every=3)
    result = loop.run()
    assert seen == [2, 5, 6] and result.metrics["eval/x"] == 6.0


def test_a_run_stopped_by_a_signal_and_resumed_evaluates_as_an_uninterrupted_one(tmp_path):
    def evaluate(iteration):
        return {"eval/x": float(iteration)}

    expected_logger = ListLogger()
    loop, _, _ = _loop(expected_logger, iterations=7, evaluate=evaluate, eval_every=3)
    loop.run()
    logger, checkpointer = ListLogger(), Checkpointer(tmp_path / "run")
    loop, step, _ = _loop(logger, checkpointer, iterations=7, every=50, evaluate=evaluate,
                          eval_every=3)
    original = step.forward

    def signal_in_the_second(batch):  # off the evaluation schedule (iterations 3 and 6)
        if step.calls == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(batch)

    step.forward = signal_in_the_second
    assert loop.run().stopped_by == "SIGTERM"
    assert not any("eval/x" in metrics for _, metrics in logger.steps)  # none at the stop
    loop, _, _ = _loop(logger, checkpointer, iterations=7, evaluate=evaluate, eval_every=3)
    loop.load_state_dict(checkpointer.load())
    loop.run()
    assert _without_timings(logger.steps) == _without_timings(expected_logger.steps)
    assert [m["eval/x"] for _, m in logger.steps if "eval/x" in m] == [2.0, 5.0, 6.0]


def test_evaluation_does_not_change_the_training(tmp_path):
    expected = _uninterrupted(tmp_path)
    logger = ListLogger()
    loop, _, _ = _loop(logger, evaluate=lambda i: {"eval/r": torch.randn(()).item()},
                       eval_every=1)
    loop.run()
    without_eval = [(s, {k: v for k, v in m.items() if not k.startswith("eval/")})
                    for s, m in _without_timings(logger.steps)]
    assert without_eval == expected


def test_stop_when_ends_the_run_and_a_resumed_stopped_run_does_nothing(tmp_path):
    logger, checkpointer = ListLogger(), Checkpointer(tmp_path / "run")
    loop, step, _ = _loop(logger, checkpointer, stop_when=lambda: step.calls >= 3)
    assert loop.run().iterations_done == 3
    assert checkpointer.load()["iterations_done"] == 3  # off schedule: the stop is a last one
    loop, step, _collector = _loop(logger, checkpointer, stop_when=lambda: True)
    loop.load_state_dict(checkpointer.load())
    assert loop.run().iterations_done == 3 and step.calls == 0


def test_the_counters_and_seeding(tmp_path):
    logger = ListLogger()
    loop, _, collector = _loop(logger, iterations=3)
    result = loop.run()
    assert [m["train/iteration"] for _, m in logger.steps] == [0, 1, 2]
    assert [m["train/frames"] for _, m in logger.steps] == [8, 16, 24]
    assert collector.updates == 3 and collector.closed
    walls = [m["train/wall_time"] for _, m in logger.steps]
    assert walls == sorted(walls) and math.isfinite(result.metrics["train/fps"])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_reward_stops_at_its_iteration_and_is_named_whole(bad):
    class BadCollector(ToyCollector):
        def __iter__(self):
            for batch in super().__iter__():
                batch["next", "reward"][0, 1] = bad
                yield batch

    loop = TrainingLoop(BadCollector(), ToyStep(), iterations=2, seed=0, progress=False)
    with pytest.raises(FloatingPointError) as refused:
        loop.run()
    assert str(refused.value) == ("the env's reward ('next', 'reward') is not finite in 1 of 8 "
                                  f"transitions of iteration 0 (e.g. {bad}).")


def test_a_checkpoint_without_a_part_is_refused(tmp_path):
    checkpointer = Checkpointer(tmp_path / "run")
    loop, _, _ = _loop(ListLogger(), checkpointer, iterations=1)
    loop.run()
    state = checkpointer.load()
    state["parts"]["optimizer"] = None
    loop, _, _ = _loop(ListLogger(), checkpointer)
    with pytest.raises(KeyError, match=r"no state for \['optimizer'\]"):
        loop.load_state_dict(state)


def test_a_checkpoint_of_the_recipe_before_the_loop_is_refused_with_the_way_out():
    loop, _, _ = _loop(ListLogger())
    old = {"actor": {}, "iteration": 4, "frames": 320, "pending_metrics": []}
    with pytest.raises(ValueError, match=r"not written by TrainingLoop.*resume=false"):
        loop.load_state_dict(old)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"iterations": 0}, "iterations must be an int >= 1, got 0"),
    ({"checkpoint_every": 0}, "checkpoint_every must be an int >= 1"),
    ({"eval_every": -1}, "eval_every must be an int >= 0"),
])
def test_bad_cadences_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainingLoop(ToyCollector(), ToyStep(), **{"iterations": 2, "seed": 0, **kwargs})


def _sigterm_when(event: threading.Event) -> None:
    """SIGTERM to this process, from another thread, once ``event`` is set (within 30 s)."""
    def send() -> None:
        event.wait(30)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=send, daemon=True).start()


def test_a_signal_in_a_long_collection_drops_the_partial_batch_within_the_grace(tmp_path):
    hanging = threading.Event()

    class SlowFourthBatch:
        def __iter__(self):
            for index in itertools.count():
                if index == 3:  # a batch of two billion frames: minutes, not seconds
                    hanging.set()
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline:
                        time.sleep(0.01)
                    raise AssertionError("the collection was not abandoned")
                yield TensorDict({"next": {"reward": torch.zeros(4, 1)}}, [4])

        def update_policy_weights_(self):
            pass

        def shutdown(self):
            pass

    saved, logged = [], []

    class Logger:
        def log(self, steps):
            logged.extend(step for step, _ in steps)

    loop = TrainingLoop(SlowFourthBatch(), lambda batch: {"loss": 1.0}, iterations=10, seed=0,
                        logger=Logger(), checkpoint=lambda state: saved.append(
                            state["iterations_done"]), checkpoint_every=2, progress=False,
                        stop_grace=0.2)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGALRM)
    _sigterm_when(hanging)
    started = time.monotonic()
    result = loop.run()
    assert time.monotonic() - started < 10
    # iterations 0-1 checkpointed and logged; iteration 2 computed, not saved: dropped with
    # the partial batch, so a resumed run computes it again (no step logged twice)
    assert result.stopped_by == "SIGTERM" and result.dropped == 1
    assert result.iterations_done == 2 and saved == [2] and logged == [4, 8]
    assert signal.getsignal(signal.SIGTERM) == before[0]  # the handlers given back
    assert signal.getsignal(signal.SIGALRM) == before[1]


def test_a_signal_in_a_long_update_abandons_it_after_the_grace_and_keeps_the_checkpoint():
    saved, hanging, calls, logger = [], threading.Event(), [], ListLogger()

    def step(batch):  # the third iteration's updates run on and on (SAC at utd_ratio=100)
        calls.append(len(calls))
        with phase("policy"):
            while len(calls) == 3:
                hanging.set()
                if (name := stop_due()) is not None:  # as SACUpdate asks between updates
                    raise StopNow(name)
                time.sleep(0.01)
        return {"loss": 1.0}

    loop = TrainingLoop(ToyCollector(), step, iterations=10, seed=0, logger=logger,
                        checkpoint=lambda state: saved.append(state["iterations_done"]),
                        checkpoint_every=2, progress=False, stop_grace=0.2)
    _sigterm_when(hanging)
    started = time.monotonic()
    result = loop.run()
    assert time.monotonic() - started < 10
    assert result.stopped_by == "SIGTERM" and result.dropped == 0
    frames = NUM_ENVS * STEPS
    assert result.iterations_done == 2 and saved == [2]
    assert [step for step, _ in logger.steps] == [frames, 2 * frames]


def test_a_signal_in_an_ordinary_collection_keeps_the_iteration_and_checkpoints_it():
    saved = []

    class SignalledOnce:
        def __iter__(self):
            for index in itertools.count():
                if index == 2:  # the signal arrives during the collection, which then ends
                    os.kill(os.getpid(), signal.SIGTERM)
                yield TensorDict({"next": {"reward": torch.zeros(4, 1)}}, [4])

        def update_policy_weights_(self):
            pass

        def shutdown(self):
            pass

    loop = TrainingLoop(SignalledOnce(), lambda batch: {"loss": 1.0}, iterations=10, seed=0,
                        checkpoint=lambda state: saved.append(state["iterations_done"]),
                        checkpoint_every=5, progress=False, stop_grace=5.0)
    result = loop.run()
    assert result.stopped_by == "SIGTERM" and result.dropped is None
    assert result.iterations_done == 3 and saved == [3]
    with pytest.raises(ValueError, match="stop_grace"):
        TrainingLoop(SignalledOnce(), lambda batch: {}, iterations=1, seed=0, stop_grace=0)


# ------------------------------------------------------------------------------------------------
# What mutation testing found unasserted (docs/mutation.md): the defaults, the resumed clock and
# display, each phase's time, the watchers' arguments, the threads, the signals' words and timer
# ------------------------------------------------------------------------------------------------
SLOW = 0.06  # seconds a batch of SlowCollector takes


class SlowCollector(ToyCollector):
    """Each batch takes ``SLOW`` seconds to collect: every iteration's slowest phase."""

    def __iter__(self):
        for batch in super().__iter__():
            time.sleep(SLOW)
            yield batch


def test_the_defaults_and_a_seed_that_is_not_an_int():
    loop = TrainingLoop(ToyCollector(), ToyStep(), iterations=2, seed=0)
    assert (loop.checkpoint_every, loop.eval_every, loop.progress, loop.name, loop.stop_grace) \
        == (10, 0, True, "training", 10.0)
    assert (loop.iteration, loop.frames, loop.wall_time, loop.pending) == (0, 0, 0.0, [])
    assert loop.stop_when() is False
    assert StopSignals().grace == 10.0
    for seed in (1.5, True):
        with pytest.raises(TypeError) as refused:
            TrainingLoop(ToyCollector(), ToyStep(), iterations=2, seed=seed)
        assert str(refused.value) == f"seed must be an int, got {seed!r}."


def test_a_resumed_run_continues_the_earlier_processes_clock(tmp_path):
    checkpointer = Checkpointer(tmp_path / "run")
    loop, step, _ = _loop(ListLogger(), checkpointer, iterations=4, every=1,
                          stop_when=lambda: step.calls >= 2)
    loop.run()
    state = checkpointer.load()
    state["wall_time"] = 1000.0  # seconds the earlier processes spent
    logger = ListLogger()
    loop, _, _ = _loop(logger, checkpointer, iterations=4, every=1)
    loop.load_state_dict(state)
    loop.run()
    # the checkpointed iteration 2 logged again (this logger never had it), then 3 and 4
    walls = [metrics["train/wall_time"] for _, metrics in logger.steps]
    assert len(walls) == 3 and walls[0] < 60 and 1000.0 < walls[1] < walls[2] < 1000.0 + 60


def test_a_finished_run_resumed_does_nothing_and_says_it_is_done(tmp_path):
    checkpointer, logger = Checkpointer(tmp_path / "run"), ListLogger()
    loop, _, _ = _loop(logger, checkpointer, iterations=2)
    loop.run()
    logged = list(logger.steps)
    loop, step, collector = _loop(logger, checkpointer, iterations=2)
    loop.load_state_dict(checkpointer.load())
    result = loop.run()
    assert (result.iterations_done, result.stopped_by, step.calls) == (2, None, 0)
    assert logger.steps == logged
    assert collector.closed


def test_a_logger_that_cannot_say_what_it_holds_gets_every_unlogged_step(tmp_path):
    class Plain:  # no last_logged_step
        def __init__(self):
            self.steps = []

        def log(self, steps):
            self.steps.extend(step for step, _ in steps)

    checkpointer = Checkpointer(tmp_path / "run")
    loop, step, _ = _loop(Plain(), checkpointer, iterations=4, every=2)
    step.crash_at = 4  # after the checkpoint of iteration 2 the logger holds frames 8 and 16
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    state = checkpointer.load()
    state["pending_metrics"] = [(8, {"loss": 1.0}), (16, {"loss": 2.0})]  # as if not logged
    logger = Plain()
    loop, _, _ = _loop(logger, checkpointer, iterations=4, every=2)
    loop.load_state_dict(state)
    loop.run()
    assert logger.steps == [8, 16, 24, 32]


def test_a_checkpoint_of_another_writer_is_refused_whole():
    loop, _, _ = _loop(ListLogger())
    message = ("the checkpoint was not written by TrainingLoop.state_dict (a checkpoint of "
               "recipes/trpo_vase.py from before its loop became torchrl_vase.TrainingLoop?); "
               "start the run afresh (resume=false).")
    for state in ({"parts": {}}, {"iterations_done": 3}):
        with pytest.raises(ValueError) as refused:
            loop.load_state_dict(state)
        assert str(refused.value) == message
    with pytest.raises(KeyError) as refused:
        loop.load_state_dict({"parts": {"step": None}, "iterations_done": 1})
    assert refused.value.args[0] == ("the checkpoint holds no state for ['step', 'optimizer', "
                                     "'collector']: it is of another kind of run.")


def test_the_progress_display_starts_where_the_run_resumed_and_shows_each_iteration(
        tmp_path, monkeypatch):
    shown = []

    class Recorder:
        def __init__(self, total, name, *, initial=0, enabled=True):
            shown.append(("open", total, name, initial, enabled))

        def update(self, iteration, values):
            shown.append(("update", iteration, dict(values)))

        def close(self):
            shown.append(("close",))

    monkeypatch.setattr(loop_module, "Progress", Recorder)
    TrainingLoop(ToyCollector(), ToyStep(), iterations=1, seed=0, progress=False).run()
    assert shown[0] == ("open", 1, "training", 0, False)
    checkpointer = Checkpointer(tmp_path / "run")
    loop, step, _ = _loop(ListLogger(), checkpointer, iterations=3, every=1,
                          stop_when=lambda: step.calls >= 1)
    loop.run()
    collector = SlowCollector()
    step = ToyStep()
    loop = TrainingLoop(collector, step, iterations=3, seed=3, name="mc seed 3",
                        state={"step": step, "optimizer": step.optimizer, "collector": collector},
                        progress_keys={"loss": "loss", "absent": "no/such"})
    shown.clear()
    loop.load_state_dict(checkpointer.load())
    loop.run()
    assert shown[0] == ("open", 3, "mc seed 3", 1, True) and shown[-1] == ("close",)
    updates = [entry for entry in shown if entry[0] == "update"]
    assert [iteration for _, iteration, _ in updates] == [1, 2]
    for _, _, values in updates:
        assert set(values) == {"loss", "absent", "slowest"} and math.isfinite(values["loss"])
        assert math.isnan(values["absent"])
        assert re.fullmatch(r"collection \d\.?\d*(e-0\d)?s", values["slowest"])


def test_each_phase_is_timed_under_its_name_and_the_frame_rate_is_frames_over_seconds(
        tmp_path):
    logger = ListLogger()
    loop, _, _ = _loop(logger, Checkpointer(tmp_path / "run"), iterations=3, every=1,
                       evaluate=lambda i: {"eval/x": 1.0}, eval_every=1,
                       watchers=[lambda batch, before: {"watch/frames_before": float(before)}])
    loop.collector = SlowCollector()
    loop.run()
    loop_phases = {"collection", "watchers", "evaluation", "checkpoint", "logging", "other"}
    for index, (_, metrics) in enumerate(logger.steps):
        # the previous iteration's checkpoint and logging fall in this lap, none in the first
        expected = loop_phases - ({"checkpoint", "logging"} if index == 0 else set())
        assert {k for k in metrics if k.startswith("time/")} == {
            f"time/{name}" for name in expected} | {"time/iteration"}
        assert 8 / 2.0 < metrics["train/fps"] < 8 / SLOW  # 8 frames in more than SLOW s
    assert [m["watch/frames_before"] for _, m in logger.steps] == [0.0, 8.0, 16.0]


def test_a_part_the_run_lacks_is_kept_as_none(tmp_path):
    step = ToyStep()
    loop = TrainingLoop(ToyCollector(), step, iterations=1, seed=0, progress=False,
                        state={"step": step, "bonus": None})
    parts = loop.state_dict()["parts"]
    assert parts["bonus"] is None and set(parts["step"]) == set(step.state_dict())


def test_a_watcher_reads_the_batch_and_the_frames_before_it():
    seen = []
    loop = TrainingLoop(ToyCollector(), ToyStep(), iterations=2, seed=0, progress=False,
                        watchers=[lambda batch, before: seen.append((batch.numel(), before))
                                  or {}])
    loop.run()
    assert seen == [(8, 0), (8, 8)]


def test_each_iteration_and_the_end_set_the_threads_asked(monkeypatch):
    before = torch.get_num_threads()
    seen = []

    def step(batch):  # an env's close or a library may change them between iterations
        seen.append(torch.get_num_threads())
        torch.set_num_threads(2)
        return {}

    try:
        TrainingLoop(ToyCollector(), step, iterations=3, seed=0, threads=1,
                     progress=False).run()
        assert seen == [1, 1, 1] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_first_signal_is_announced_and_arms_the_timer_only_where_work_may_be_dropped(
        capfd):
    for interrupt, dropped in ((None, ""),
                               (lambda: False, "an iteration still running in 5 s is dropped; ")):
        with StopSignals(interrupt=interrupt, grace=5.0) as signals:
            assert stop_requested() is None
            os.kill(os.getpid(), signal.SIGTERM)
            assert signals.received == "SIGTERM" and stop_requested() == "SIGTERM"
            assert 4.0 < signals.deadline - time.monotonic() <= 5.0
            assert stop_due() is None  # its grace is not over
            armed = signal.getitimer(signal.ITIMER_REAL)[0]
            assert (armed > 4.0) if interrupt else armed == 0.0
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0.0  # disarmed at the exit
        assert capfd.readouterr().err == (f"SIGTERM: stopping after this iteration ({dropped}a "
                                          "second signal stops at once)\n")
    assert stop_requested() is None
    with StopSignals(grace=0.01):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.02)
        assert stop_due() == "SIGINT"
    capfd.readouterr()


def test_the_stops_name_their_signal():
    assert str(StopNow("SIGTERM")) == "SIGTERM: stopping now"
    at_once = StopAtOnce("SIGINT")
    assert at_once.signal_name == "SIGINT" and str(at_once) == (
        "second SIGINT: stopped at once; the last checkpoint holds the run (resume=true "
        "continues it)")


def test_outside_the_main_thread_the_signals_are_left_alone():
    errors = []

    def enter():
        try:
            with StopSignals(interrupt=lambda: True) as signals:
                errors.append(signals.received)
        except Exception as error:
            errors.append(error)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert errors == [None]
