"""The phase clock behind every run's ``time/*`` metrics, on a clock the test moves by hand."""

import itertools
import threading

import pytest

from torchrl_vase import timing
from torchrl_vase.timing import PhaseClock, phase, timing_metrics


@pytest.fixture
def ticks(monkeypatch):
    """``time.perf_counter`` as the timing module sees it: advanced only by ``ticks.advance``."""

    class Ticks:
        now = 100.0

        def advance(self, seconds: float) -> None:
            self.now += seconds

    clock = Ticks()
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock.now)
    return clock


def test_nested_phases_count_each_second_once_in_the_innermost_and_laps_leave_no_gap(ticks):
    clock = PhaseClock()
    with clock.running():
        ticks.advance(1.0)  # outside every phase: other
        with phase("policy"):
            ticks.advance(2.0)
            with phase("bonus"):  # SAC's bonus inside its policy update's sampling
                ticks.advance(0.5)
            ticks.advance(3.0)
        first = clock.lap()
        with phase("model"):
            ticks.advance(4.0)
            second = clock.lap()  # a phase still open is split at the lap
            ticks.advance(1.0)
        third = clock.lap()
    assert first == {"policy": 5.0, "bonus": 0.5, "other": 1.0}
    # phases seen before report 0: regular series
    assert second == {"policy": 0.0, "bonus": 0.0, "model": 4.0, "other": 0.0}
    assert third == {"policy": 0.0, "bonus": 0.0, "model": 1.0, "other": 0.0}
    assert clock.last == 1.0


def test_without_a_running_clock_phases_time_nothing_and_raise_nothing(ticks):
    clock = PhaseClock()
    with phase("model"):
        ticks.advance(1.0)
    with clock.running():
        pass
    assert clock.lap() == {"other": 0.0}


def test_an_exception_inside_a_phase_closes_it(ticks):
    clock = PhaseClock()
    with clock.running():
        with pytest.raises(RuntimeError), phase("model"):
            ticks.advance(1.0)
            raise RuntimeError
        ticks.advance(2.0)
        assert clock.lap() == {"model": 1.0, "other": 2.0}


def test_a_clock_runs_for_its_own_thread_only(ticks):
    clock, seen = PhaseClock(), []

    def elsewhere():
        with phase("model"):
            ticks.advance(1.0)
        seen.append(True)

    with clock.running():
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert clock.lap() == {"other": 1.0}  # the thread's phase went to no clock
    assert seen == [True]


def test_timing_metrics_name_each_phase_and_the_exploration_share():
    metrics = timing_metrics({"collection": 3.0, "bonus": 0.5, "model": 1.0, "policy": 0.5,
                              "other": 0.0})
    assert metrics["time/iteration"] == 5.0
    assert metrics["time/exploration_share"] == pytest.approx(1.5 / 5.0)
    assert {"time/collection", "time/bonus", "time/model", "time/policy", "time/other"} < set(
        metrics)
    # plain TRPO: no exploration phase, no share
    assert "time/exploration_share" not in timing_metrics({"policy": 1.0, "other": 0.0})


def test_the_loop_logs_phases_that_add_up_to_each_lap_and_its_progress_names_the_slowest(
        ticks, capsys):
    import io

    import torch
    from tensordict import TensorDict

    from torchrl_vase import TrainingLoop
    from torchrl_vase.loggers import Progress

    class Batches:
        def __iter__(self):
            while True:
                with phase("env"):  # inside the loop's collection: the env's own time
                    ticks.advance(0.25)
                ticks.advance(0.5)
                yield TensorDict({"next": {"reward": torch.zeros(4, 1)}}, [4])

        def update_policy_weights_(self):
            pass

        def shutdown(self):
            pass

    def step(batch):
        with phase("model"):
            ticks.advance(2.0)
        return {}

    stream = io.StringIO()
    original = Progress.__init__

    def to_stream(self, *args, **kwargs):
        original(self, *args, **{**kwargs, "stream": stream, "every": 1})

    logged = []

    class Logger:
        def log(self, steps):
            logged.extend(steps)

    loop = TrainingLoop(Batches(), step, iterations=3, seed=0, logger=Logger(),
                        checkpoint=lambda state: ticks.advance(1.0), checkpoint_every=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Progress, "__init__", to_stream)
        loop.run()
    times = [{k.removeprefix("time/"): v for k, v in m.items() if k.startswith("time/")}
             for _, m in logged]
    assert [t["model"] for t in times] == [2.0, 2.0, 2.0]
    assert [t["collection"] for t in times] == [0.5, 0.5, 0.5]
    assert [t["env"] for t in times] == [0.25, 0.25, 0.25]
    # the checkpoint after iteration 2 is in iteration 3's lap (its own, at the end, in none)
    assert [t.get("checkpoint", 0.0) for t in times] == [0.0, 0.0, 1.0]
    for t in times:
        assert t["iteration"] == pytest.approx(sum(v for k, v in t.items()
                                                   if k not in ("iteration", "exploration_share")))
    assert "slowest model 2s" in stream.getvalue()
    assert list(itertools.accumulate(t["iteration"] for t in times))[-1] == pytest.approx(
        logged[-1][1]["train/wall_time"])
