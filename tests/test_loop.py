"""TrainingLoop's guarantees with a toy iteration (a linear model fitted to random batches): exact
resume after a crash at any point, SIGTERM, the evaluation and checkpoint schedules, bad input."""

import itertools
import math
import os
import signal
import threading
import time

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from torchrl_vase import TrainingLoop
from torchrl_vase.checkpointing import Checkpointer
from torchrl_vase.loop import StopNow, is_clock, stop_due
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


def test_a_non_finite_reward_stops_at_its_iteration():
    class NaNCollector(ToyCollector):
        def __iter__(self):
            for batch in super().__iter__():
                batch["next", "reward"][0, 1] = math.nan
                yield batch

    loop = TrainingLoop(NaNCollector(), ToyStep(), iterations=2, seed=0, progress=False)
    with pytest.raises(FloatingPointError, match=r"reward.*not finite in 1 of 8 transitions of "
                                                 r"iteration 0"):
        loop.run()


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
