"""recipes/study/recheck.py: the draw of an earlier commit's cells and the value-for-value check."""

import csv
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from recipe_modules import load_recipe

recheck = load_recipe("study/recheck")
ROOT = Path(__file__).resolve().parents[1]


def _cell(study: Path, task: str, measure: str, rows: list[tuple[int, str]],
          values=(1.0, 2.5, float("nan")), identity: str = "abc") -> Path:
    """A cell whose runs.csv says which seed ran at which commit, each seed's CSV beside it."""
    cell = study / task / measure
    cell.mkdir(parents=True, exist_ok=True)
    with (cell / "runs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["seed", "run_id", "git_commit", "run_identity", "note"])
        for seed, commit in rows:
            writer.writerow([seed, f"r{seed}", commit, identity, "started on vm, load average 1"])
            _seed_csv(cell / f"seed{seed}.csv", values)
    return cell


def _seed_csv(path: Path, values, wall=(1.0, 2.0, 3.0)) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frames", "Return/mean", "train/wall_time", "train/fps"])
        for i, (value, clock) in enumerate(zip(values, wall[:len(values)], strict=True)):
            writer.writerow([5000 * (i + 1), value, clock, 1000.0 / clock])


def test_the_draw_takes_only_seeds_finished_at_the_commit_and_is_fixed_by_its_seed(tmp_path):
    _cell(tmp_path, "mountain_car", "vase", [(s, "b2b53df1" if s < 6 else "82a8bde1")
                                             for s in range(10)])
    _cell(tmp_path, "mountain_car", "nll", [(0, "b2b53df1"), (1, "b2b53df1")])
    (tmp_path / "mountain_car" / "nll" / "seed1.csv").unlink()  # a row without its CSV
    _cell(tmp_path, "lunar_lander", "vase", [(0, "82a8bde1")])  # nothing at the earlier commit
    cells = recheck.finished_at(tmp_path, "b2b53df", ["mountain_car", "lunar_lander"],
                                ["vase", "nll"])
    assert cells == {("mountain_car", "vase"): [0, 1, 2, 3, 4, 5], ("mountain_car", "nll"): [0]}
    first = recheck.draw(cells, 2, rng_seed=0)
    assert first == recheck.draw(cells, 2, rng_seed=0)
    assert [(t, m) for t, m, _ in first] == [("mountain_car", "nll"), ("mountain_car", "vase"),
                                             ("mountain_car", "vase")]
    assert {s for _, m, s in first if m == "vase"} <= set(range(6))
    draws = {tuple(recheck.draw(cells, 2, rng_seed=k)) for k in range(20)}
    assert len(draws) > 1  # the generator's seed decides it, not the order of the seeds


def test_a_rerun_is_equal_only_when_every_metric_but_the_clocks_and_the_identity_agree(tmp_path):
    earlier = _cell(tmp_path / "study", "mountain_car", "vase", [(3, "b2b53df1")])
    rerun = _cell(tmp_path / "out", "mountain_car", "vase", [(3, "82a8bde1")])
    _seed_csv(rerun / "seed3.csv", (1.0, 2.5, float("nan")), wall=(9.0, 9.5, 9.9))
    assert recheck.compare_run(earlier, rerun, 3) == {
        "iterations": 3, "metrics_compared": 2, "metrics_differing": "",
        "identity_equal": True, "result": "equal", "first_difference": "",
        "logged_by_one_run": "", "environment_differs": ""}
    _seed_csv(rerun / "seed3.csv", (1.0, 2.5000000000000004, float("nan")))  # one ulp off
    result = recheck.compare_run(earlier, rerun, 3)
    assert result["result"] == "DIFFERENT" and result["metrics_differing"] == "Return/mean"
    assert result["first_difference"] == "iteration 1: Return/mean"
    _seed_csv(rerun / "seed3.csv", (1.0, 2.5, 0.0))  # NaN is not 0
    assert recheck.compare_run(earlier, rerun, 3)["result"] == "DIFFERENT"
    _seed_csv(rerun / "seed3.csv", (1.0, 2.5))  # an iteration short
    assert recheck.compare_run(earlier, rerun, 3)["metrics_differing"] == "Return/mean frames"
    other = _cell(tmp_path / "other", "mountain_car", "vase", [(3, "82a8bde1")], identity="xyz")
    result = recheck.compare_run(earlier, other, 3)
    assert result["result"] == "DIFFERENT" and result["identity_equal"] is False


def _provenance(cell: Path, rows: list[tuple[int, str, str]]) -> None:
    """``cell``'s runs.csv as export_runs writes it: each seed's note and environment."""
    with (cell / "runs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["seed", "run_id", "git_commit", "run_identity", "note", "environment"])
        for seed, note, environment in rows:
            writer.writerow([seed, f"r{seed}", "01cdad2a", "abc", note, environment])


INTEL, AMD = "vm (2 cores, Intel(R) Xeon(R) Processor)", "vm (2 cores, AMD EPYC)"


def test_the_environments_the_two_runs_recorded_are_compared_tag_by_tag(tmp_path):
    where = f"machine={INTEL}; machine.cpu_capability=AVX512; software.torch=2.13.0+cpu"

    def differs(environment: str) -> str:
        rerun = _cell(tmp_path / environment[-12:], "ant", "vase", [(1, "01cdad2a")])
        _provenance(rerun, [(1, "", environment)])
        return recheck.compare_run(study, rerun, 1)["environment_differs"]

    study = _cell(tmp_path / "study", "ant", "vase", [(1, "01cdad2a")])
    _provenance(study, [(1, "", where)])
    assert differs(where) == "none"
    assert differs(where.replace(INTEL, AMD)) == "machine"
    # a tag one run recorded and the other did not counts, and names sort
    assert differs(f"software.torch=2.14.0+cpu; machine={AMD}") == (
        "machine machine.cpu_capability software.torch")
    assert differs("") == ""  # a run from before the tags: nothing to compare


def test_the_listing_flags_the_seeds_whose_run_started_on_another_machine(tmp_path, monkeypatch,
                                                                          capsys):
    cell = _cell(tmp_path, "ant", "vase", [(0, "01cdad2a"), (1, "01cdad2a"), (2, "01cdad2a")])
    _provenance(cell, [(0, f"started on {INTEL}, load average 2.0 2.0 2.1; ended", ""),
                       (1, f"started on {AMD}, load average 1.0; ended", ""),
                       (2, "exported by hand", "")])
    monkeypatch.setattr(recheck, "machine", lambda: AMD)
    monkeypatch.setattr(recheck, "git_commit", lambda code: "01cdad2a" + "0" * 32)
    assert recheck.main(["--study", str(tmp_path), "--commit", "01cdad2", "--code",
                         str(tmp_path), "--same-commit", "--tasks", "ant", "--measures",
                         "vase", "--per-cell", "3", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "ant vase seed0" in lines[1] and lines[1].endswith(f"[its run started on {INTEL}]")
    assert "ant vase seed1" in lines[2] and "ant vase seed2" in lines[3]
    assert "started on" not in lines[2] + lines[3]  # this machine's, and one not named
    assert lines[4].startswith(f"1 of them started on another machine than this {AMD}")


def _eval_csv(path: Path, evaluations: list[str], first_reward=("", "", "")) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frames", "Return/mean", "eval/return", "train/first_reward_step"])
        for i, (evaluation, reward) in enumerate(zip(evaluations, first_reward, strict=True)):
            writer.writerow([5000 * (i + 1), 1.0, evaluation, reward])


def test_an_evaluation_one_run_made_alone_is_no_different_value_but_is_named(tmp_path):
    """A run paused at iteration 1 (before 67d98e2 it evaluated at the stop) against one that
    was not: equal where both evaluated, the row named; any other metric that one run logged
    and the other did not is a different value."""
    earlier = _cell(tmp_path / "study", "ant", "vase", [(2, "b2b53df1")])
    rerun = _cell(tmp_path / "out", "ant", "vase", [(2, "82a8bde1")])
    _eval_csv(earlier / "seed2.csv", ["", "", "7.5"])
    _eval_csv(rerun / "seed2.csv", ["", "3.0", "7.5"])
    result = recheck.compare_run(earlier, rerun, 2)
    assert result["result"] == "equal where both logged" and result["metrics_differing"] == ""
    assert result["logged_by_one_run"] == "iteration 1: eval/return"
    assert result["first_difference"] == ""
    _eval_csv(rerun / "seed2.csv", ["", "3.0", "7.25"])  # and a different evaluation after
    result = recheck.compare_run(earlier, rerun, 2)
    assert result["result"] == "DIFFERENT" and result["metrics_differing"] == "eval/return"
    assert result["first_difference"] == "iteration 2: eval/return"
    _eval_csv(rerun / "seed2.csv", ["", "", "7.5"], first_reward=("", "", "15000"))
    result = recheck.compare_run(earlier, rerun, 2)  # the reward found by one run only
    assert result["result"] == "DIFFERENT"
    assert result["first_difference"] == "iteration 2: train/first_reward_step"
    assert result["logged_by_one_run"] == ""


def test_the_record_is_compared_again_from_the_kept_reruns_without_running_any(
        tmp_path, monkeypatch):
    """--recompare: the record's comparison fields, the attribution's too, recomputed from the
    reruns under --scratch (here an evaluation the study's run made at its pause, which an
    earlier version of the comparison called different); nothing runs."""
    study, scratch = tmp_path / "study", tmp_path / "scratch"
    earlier = _cell(study, "ant", "vase", [(2, "0000000a")])
    _eval_csv(earlier / "seed2.csv", ["", "3.0", "7.5"])
    for folder in (scratch / "out", scratch / "at-0000000" / "out"):
        _eval_csv(_cell(folder, "ant", "vase", [(2, "1234567f")]) / "seed2.csv", ["", "", "7.5"])
    recheck.append(study / "recheck_0000000.csv", {
        "task": "ant", "measure": "vase", "seed": 2, "earlier_commit": "0000000a",
        "commit": "1234567", "iterations": 3, "metrics_compared": 3,
        "metrics_differing": "eval/return", "identity_equal": True, "result": "DIFFERENT",
        "first_difference": "iteration 1: eval/return", "earlier_here": "equal"})
    monkeypatch.setattr(recheck, "run_paper_grid", lambda command: pytest.fail("it ran"))
    monkeypatch.setattr(recheck, "git_commit", lambda code: "1234567f" + "0" * 32)
    assert recheck.main(["--study", str(study), "--commit", "0000000a", "--code",
                         str(tmp_path), "--scratch", str(scratch), "--recompare"]) == 0
    [row] = recheck.read_record(study / "recheck_0000000.csv")
    assert row["result"] == "equal where both logged" and row["metrics_differing"] == ""
    assert row["logged_by_one_run"] == "iteration 1: eval/return"
    assert row["first_difference"] == "" and row["earlier_here"] == "equal"
    assert row["commit"] == "1234567" and row["iterations"] == "3"


def test_each_drawn_seed_is_rerun_once_recorded_and_skipped_the_next_time(tmp_path,
                                                                         monkeypatch):
    study = tmp_path / "study"
    _cell(study, "mountain_car", "vase", [(s, "0000000a") for s in range(3)])
    _cell(study, "mountain_car", "nll", [(0, "0000000a")], values=(4.0, 4.0, 4.0))
    runs = []

    def fake_paper_grid(command: list[str]) -> int:
        """paper_grid.py as the reruns call it: writes the seed's CSV (the NLL cell's a value
        off) and its runs.csv row into --out."""
        assert str(command[1]).endswith("paper_grid.py")
        out = Path(command[command.index("--out") + 1])
        task, measure = command[command.index("--tasks") + 1], command[command.index(
            "--measures") + 1]
        seed = int(command[command.index("--seeds") + 1])
        runs.append((task, measure, seed, command[command.index("--code") + 1]))
        source = study / task / measure
        cell = _cell(out, task, measure, [(seed, "1234567f")])
        shutil.copy(source / f"seed{seed}.csv", cell / f"seed{seed}.csv")
        if measure == "nll":
            _seed_csv(cell / f"seed{seed}.csv", (4.0, 4.0, 4.5))
        return 0

    monkeypatch.setattr(recheck, "run_paper_grid", fake_paper_grid)
    monkeypatch.setattr(recheck, "git_commit", lambda code: "1234567f" + "0" * 32)
    args = ["--study", str(study), "--commit", "0000000a", "--code", str(tmp_path),
            "--tasks", "mountain_car", "--measures", "vase", "nll", "--scratch",
            str(tmp_path / "scratch")]
    assert recheck.main(args) == 0
    assert [r[:3] for r in runs] == recheck.draw(
        recheck.finished_at(study, "0000000a", ["mountain_car"], ["vase", "nll"]), 1, 0)
    assert {r[3] for r in runs} == {str(tmp_path)}
    with (study / "recheck_0000000.csv").open(newline="") as handle:
        rows = {r["measure"]: r for r in csv.DictReader(handle)}
    assert rows["vase"]["result"] == "equal" and rows["vase"]["commit"] == "1234567"
    assert rows["nll"]["result"] == "DIFFERENT"
    assert rows["nll"]["metrics_differing"] == "Return/mean"
    assert recheck.main(args) == 0 and len(runs) == 2  # recorded: not run again


def test_the_newer_code_must_not_be_the_commit_being_checked(capsys):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    with pytest.raises(SystemExit) as exit_info:
        recheck.main(["--commit", head[:7], "--code", str(ROOT), "--dry-run"])
    assert exit_info.value.code == 2
    assert "point it at the newer one" in capsys.readouterr().err
    # unless asked for: a rerun at the commit the runs ran at (bit for bit on this machine?)
    assert recheck.main(["--commit", head[:7], "--code", str(ROOT), "--same-commit",
                         "--dry-run"]) == 0


def test_the_first_difference_names_the_first_iteration_where_the_runs_part():
    old = {"frames": ["1", "2", "3", "4"], "a": ["1", "2", "3", "4"], "b": ["1", "2", "3", "4"]}
    new = {"frames": ["1", "2", "3", "4"], "a": ["1", "2", "3", "5"], "b": ["1", "2", "9", "9"]}
    assert recheck.first_difference(old, new, ["a", "b"]) == "iteration 2: b"
    new["a"][2] = "3.0000001"
    assert recheck.first_difference(old, new, ["a", "b"]) == "iteration 2: a b"
    assert recheck.first_difference(old, old, []) == ""
    short = {name: column[:3] for name, column in old.items()}  # a run an iteration short
    assert recheck.first_difference(old, short, ["a", "b", "frames"]) == "iteration 3: a b frames"


def test_a_differing_seed_is_rerun_at_the_earlier_commit_here_to_tell_the_commit_from_the_machine(
        tmp_path, monkeypatch):
    """The study's NLL seed differs from its rerun at the newer commit; rerun at the earlier one
    here, it equals the newer (not the commit) on one seed and parts from it on another; a
    record written before the attribution's fields existed is completed by a later call."""
    study = tmp_path / "study"
    _cell(study, "mountain_car", "nll", [(0, "0000000a"), (1, "0000000a")], values=(4.0,) * 3)
    newer_code, earlier_code = tmp_path / "newer", tmp_path / "earlier"
    runs = []

    def fake_paper_grid(command: list[str]) -> int:
        """Both commits give (4, 4, 4.5) for seed 0; for seed 1 the newer (4, 4, 4.5) and
        the earlier (4, 4.25, 4.5)."""
        assert str(command[1]).endswith("paper_grid.py")
        out = Path(command[command.index("--out") + 1])
        code = Path(command[command.index("--code") + 1])
        seed = int(command[command.index("--seeds") + 1])
        runs.append((code.name, seed))
        cell = _cell(out, "mountain_car", "nll", [(seed, code.name)])
        second = 4.25 if (code == earlier_code and seed == 1) else 4.0
        _seed_csv(cell / f"seed{seed}.csv", (4.0, second, 4.5))
        return 0

    monkeypatch.setattr(recheck, "run_paper_grid", fake_paper_grid)
    monkeypatch.setattr(recheck, "git_commit", lambda code: (
        "0000000a" if Path(code) == earlier_code else "1234567f") + "0" * 32)
    args = ["--study", str(study), "--commit", "0000000a", "--code", str(newer_code),
            "--tasks", "mountain_car", "--measures", "nll", "--per-cell", "2", "--scratch",
            str(tmp_path / "scratch")]
    assert recheck.main(args) == 0  # without --earlier-code: no attribution
    record = study / "recheck_0000000.csv"
    rows = {r["seed"]: r for r in recheck.read_record(record)}
    assert rows["0"]["result"] == "DIFFERENT"
    assert rows["0"]["first_difference"] == "iteration 2: Return/mean"
    assert rows["0"]["earlier_here"] == "" and runs == [("newer", 0), ("newer", 1)]
    # as an older version of the tool wrote it: without the attribution's three fields
    old_fields = recheck.RECORD_FIELDS[:-3]
    with record.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, old_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows.values())
    assert recheck.main([*args, "--earlier-code", str(earlier_code)]) == 0
    rows = {r["seed"]: r for r in recheck.read_record(record)}
    assert rows["0"]["first_difference"] == "iteration 2: Return/mean"
    assert rows["0"]["earlier_here"] == "equal" and rows["0"]["earlier_here_differing"] == ""
    assert rows["1"]["earlier_here"] == "DIFFERENT from iteration 1: Return/mean"
    assert rows["1"]["earlier_here_differing"] == "Return/mean"
    assert sorted(runs[2:]) == [("earlier", 0), ("earlier", 1), ("newer", 0), ("newer", 1)]
    assert recheck.main([*args, "--earlier-code", str(earlier_code)]) == 0
    assert len(runs) == 6  # attributed: nothing runs again


def test_the_earlier_code_must_be_at_the_commit_being_checked(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(recheck, "git_commit", lambda code: "1234567f" + "0" * 32)
    with pytest.raises(SystemExit) as exit_info:
        recheck.main(["--commit", "0000000a", "--code", str(tmp_path), "--earlier-code",
                      str(tmp_path), "--dry-run", "--study", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "--earlier-code is at 1234567, not at 0000000a" in capsys.readouterr().err


def test_a_sigterm_to_the_recheck_reaches_its_paper_grid_which_stops_as_it_would(tmp_path):
    """Paused with ``pkill -TERM -f study/recheck.py``, the recheck passes the signal on to the
    paper_grid.py it runs (whose jobs checkpoint and stop) instead of dying and leaving it
    running; its own SIGTERM handling is back afterwards."""
    ready, stopped = tmp_path / "ready", tmp_path / "stopped"
    child = (  # a paper_grid.py's part: a SIGTERM is recorded, then status 3
        "import pathlib, signal, sys, time\n"
        f"def stop(signum, frame): pathlib.Path({str(stopped)!r}).write_text('SIGTERM'); "
        "sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(60)\n")

    def sigterm_once_the_child_runs() -> None:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)  # to this process, as pkill sends it

    before = signal.getsignal(signal.SIGTERM)
    sender = threading.Thread(target=sigterm_once_the_child_runs)
    sender.start()
    status = recheck.run_paper_grid([sys.executable, "-c", child])
    sender.join()
    assert status == 3 and stopped.read_text() == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_two_rechecks_recording_into_one_record_at_once_keep_each_others_rows(tmp_path):
    """Two calls, a cell each, append to one record: each append is read, changed and written
    with the folder locked, so neither drops the other's row (seed 0 kept as 0, not empty)."""
    record = tmp_path / "recheck_0000000.csv"
    rows = [{"task": "ant", "measure": measure, "seed": seed, "result": "equal"}
            for measure in ("vase", "vase_paper") for seed in range(8)]
    appenders = [threading.Thread(target=recheck.append, args=(record, row)) for row in rows]
    for appender in appenders:
        appender.start()
    for appender in appenders:
        appender.join(10)
    recorded = recheck.read_record(record)
    assert sorted((r["measure"], r["seed"]) for r in recorded) == sorted(
        (r["measure"], str(r["seed"])) for r in rows)
    assert all(set(r) == set(recheck.RECORD_FIELDS) for r in recorded)
    assert [p.name for p in tmp_path.iterdir()] == [record.name]
