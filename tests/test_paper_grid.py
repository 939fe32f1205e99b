"""recipes/study/paper_grid.py (issue 26's launcher), recipes/study/export_runs.py, and
compare.py on CSVs."""

import csv
import fcntl
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import mlflow
import numpy as np
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
from recipe_modules import ROOT, load_recipe

from torchrl_vase.provenance import RESUMED_ELSEWHERE, environment_tags

paper_grid = load_recipe("study/paper_grid")
study_timing = load_recipe("study/study_timing")
export_runs = load_recipe("study/export_runs")
compare = load_recipe("study/compare")


def _write_run(path: Path, frames: list[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["frames", "Return/mean"])
        writer.writerows([frame, 0.0] for frame in frames)


def test_the_workers_log_lines_never_run_into_each_other(capsys):
    # two workers' threads report side by side; print() writes a line and its newline in two
    # writes, and two threads' lines ran together in the launcher's log (with print, this test
    # found such lines in 4 runs of 4 with threads switching this often)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def report(worker: int) -> None:
        for i in range(10_000):
            paper_grid.say(f"start worker{worker} job{i} (vm)")

    threads = [threading.Thread(target=report, args=(k,)) for k in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 20_000
    pattern = r"\d\d:\d\d:\d\d start worker[01] job\d+ \(vm\)"
    assert all(re.fullmatch(pattern, line) for line in lines)


def test_the_plan_skips_whole_runs_only_and_follows_the_issues_order(tmp_path):
    whole = paper_grid.task_frames("half_cheetah")
    assert whole == 600 * 5000
    assert paper_grid.task_frames("point_robot") == 500 * 5000  # 2.5 M steps to find it
    _write_run(tmp_path / "half_cheetah" / "vase" / "seed0.csv", [5000, whole + 412])  # whole
    _write_run(tmp_path / "half_cheetah" / "vase" / "seed1.csv", [5000, 10_000])  # cut short
    found = tmp_path / "point_robot" / "none" / "seed0.csv"  # stopped at its first reward
    found.parent.mkdir(parents=True)
    found.write_text("frames,Return/mean,train/first_reward_step\n5000,0.0,\n10000,0.0,9001\n")
    _write_run(tmp_path / "point_robot" / "none" / "seed1.csv", [5000, 10_000])  # killed
    jobs, done = paper_grid.plan(["lunar_lander", "half_cheetah", "point_robot"],
                                 ["none", "vase", "vase_paper", "trpo_authors"],
                                 list(range(12)), out=tmp_path)
    assert done == [("half_cheetah", "vase", 0), ("point_robot", "none", 0)]
    cells = list(dict.fromkeys((j.task, j.measure, j.seeds[0] < 10) for j in jobs))
    assert cells == [
        # seeds 0-9: VASE and the authors' TRPO (HalfCheetah first), the point robot, the
        # control, VASE at the text's settings (not on LunarLander); then seeds 10-11 alike
        *[(task, measure, True) for task in ("half_cheetah", "lunar_lander")
          for measure in ("vase", "trpo_authors")],
        ("point_robot", "vase", True), ("point_robot", "none", True),
        ("half_cheetah", "none", True), ("lunar_lander", "none", True),
        ("half_cheetah", "vase_paper", True),
        *[(task, measure, False) for task in ("half_cheetah", "lunar_lander")
          for measure in ("vase", "trpo_authors")],
        ("point_robot", "vase", False), ("point_robot", "none", False),
        ("half_cheetah", "none", False), ("lunar_lander", "none", False),
        # VASE at the text's settings runs its ten seeds only (SEED_COUNT)
    ]
    assert [j.seeds for j in jobs[:3]] == [(1,), (2,), (3,)]  # seed 0 done, one seed a job
    assert len(jobs) == 12 * 9 - 2 - 2
    command = jobs[0].command("sqlite:///s.db", Path("/c"), "python")
    assert {"env=half_cheetah", "surprise=vase", "seed=1", "resume=true",
            "mlflow.experiment=figure3-half_cheetah"} <= set(command)
    robot = next(j for j in jobs if j.task == "point_robot")
    command = robot.command("sqlite:///s.db", Path("/c"), "python", overrides=("a.b=1",))
    assert {"stop_at_first_reward=true", "iterations=500"} <= set(command)
    assert command[-1] == "a.b=1"
    paper = next(j for j in jobs if j.measure == "vase_paper")
    command = paper.command("sqlite:///s.db", Path("/c"), "python", iterations=3)
    assert {"seed=0", "preset=paper", "iterations=3"} <= set(command)
    # a secondary has an experiment of its own: compare.py never pools it with VASE's runs
    assert "mlflow.experiment=figure3-half_cheetah-vase_paper" in command
    assert paper_grid.seed_list("0,2,5-7") == [0, 2, 5, 6, 7]
    assert paper_grid.Job("ant", "nll", (0, 2, 3)).name == "ant nll seeds0,2,3"


def test_the_given_order_runs_the_cells_as_named_each_cell_s_seeds_in_one_block(tmp_path):
    _write_run(tmp_path / "mountain_car" / "vase" / "seed0.csv", [5000, 50 * 5000])
    jobs, done = paper_grid.plan(
        ["mountain_car", "ant", "half_cheetah"],
        ["vase", "vase_paper", "vase_linear_init"], list(range(20)), out=tmp_path,
        seed_block=20, given_order=True)
    assert done == [("mountain_car", "vase", 0)]
    cells = [(j.task, j.measure) for j in jobs]
    # the tasks as named, each task's measures as named, only the cells ORDER knows (VASE at
    # the text's settings: not on MountainCar; Ant's scale checks: on Ant only)
    assert list(dict.fromkeys(cells)) == [
        ("mountain_car", "vase"), ("ant", "vase"), ("ant", "vase_paper"),
        ("ant", "vase_linear_init"), ("half_cheetah", "vase"), ("half_cheetah", "vase_paper")]
    assert [j.seeds[0] for j in jobs if j.task == "mountain_car"] == list(range(1, 20))
    assert [j.seeds[0] for j in jobs if j.measure == "vase_linear_init"] == list(range(10))
    command = next(j for j in jobs if j.measure == "vase_linear_init").command(
        "sqlite:///s.db", Path("/c"), "python")
    assert {"surprise=vase", "surprise.init_mean=uniform",
            "mlflow.experiment=figure3-ant-vase_linear_init"} <= set(command)


def test_the_sac_study_plans_its_cells_by_sac_s_frames_and_experiments(tmp_path):
    frames = paper_grid.task_frames("half_cheetah", algorithm="sac")
    assert frames == 300 * 1000  # conf/trpo_vase.yaml: sac.frames, in batches of 1,000
    assert paper_grid.task_frames("half_cheetah", 7, algorithm="sac") == 7 * 1000
    _write_run(tmp_path / "half_cheetah" / "rnd" / "seed0.csv", [1000, frames])  # whole
    _write_run(tmp_path / "half_cheetah" / "rnd" / "seed1.csv", [1000, 150_000])  # cut short
    jobs, done = paper_grid.plan(["mountain_car", "half_cheetah"], ["none", "vase", "rnd"],
                                 [0, 1], out=tmp_path, algorithm="sac")
    assert done == [("half_cheetah", "rnd", 0)]
    assert len(jobs) == 2 * 3 * 2 - 1 and {job.algorithm for job in jobs} == {"sac"}
    command = jobs[0].command("sqlite:///s.db", Path("/c"), "python")
    assert "algorithm=sac" in command and not any(o.startswith("iterations=") for o in command)
    assert f"mlflow.experiment=sac-{jobs[0].task}" in command
    assert jobs[0].study == "sac study"
    # sac.sh runs seed-major: a study cut short has every cell at the same seeds
    jobs, _ = paper_grid.plan(["mountain_car", "half_cheetah"], ["none", "vase", "rnd"],
                              [0, 1], out=tmp_path, algorithm="sac", seed_block=1)
    cells = [(task, measure) for measure in ("vase", "none", "rnd")
             for task in ("half_cheetah", "mountain_car")]
    assert [(j.task, j.measure, j.seeds) for j in jobs] == [
        *[(*cell, (0,)) for cell in cells if cell != ("half_cheetah", "rnd")],  # done
        *[(*cell, (1,)) for cell in cells]]

def _store(uri: str, tmp_path: Path) -> tuple[str, MlflowClient, str]:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("grid", artifact_location=(tmp_path / "a").as_uri())
    return uri, client, experiment


def _log(client, experiment, surprise: str, seed: int, returns: list[float],
         finish: bool = True) -> str:
    run_id = client.create_run(experiment, tags={"surprise": surprise, "seed": str(seed),
                                                 "git_commit": f"c{seed}"}).info.run_id
    metrics, first = [], None
    for i, value in enumerate(returns):
        step = (i + 1) * 1000
        metrics += [Metric("Return/mean", value, 0, step),
                    Metric("train/wall_time", float(i + 1), 0, step)]
        if i % 2:  # a metric logged every other iteration: empty cells between
            metrics.append(Metric("eval/return", 10 * value, 0, step))
        first = step if first is None and value > 0 else first
        if first is not None:
            metrics.append(Metric("train/first_reward_step", first, 0, step))
    client.log_batch(run_id, metrics=metrics)
    if finish:
        client.set_terminated(run_id)
    return run_id


def test_export_writes_the_asked_seeds_of_a_measure_with_their_provenance(tmp_path, sqlite_uri):
    uri, client, experiment = _store(sqlite_uri, tmp_path)
    _log(client, experiment, "none", 0, [0, 0, 1])
    seed0 = _log(client, experiment, "vase", 0, [0, 2, 3])
    config = tmp_path / "config.yaml"
    config.write_text("surprise:\n  name: vase\n  sigma_c: 0.5\nseed: 0\n")
    client.log_artifact(seed0, str(config))
    where = environment_tags()  # as TrainingRun tags a new run, and a resume elsewhere
    for key, value in {**where, RESUMED_ELSEWHERE: "machine=b (4 cores, Y)"}.items():
        client.set_tag(seed0, key, value)
    _log(client, experiment, "vase", 1, [1, 1, 1])
    _log(client, experiment, "vase", 2, [5, 5], finish=False)  # running: never exported
    mlflow.set_tracking_uri(None)
    out = tmp_path / "out"
    written = export_runs.export(uri, "grid", out, surprise="vase", seeds=[0, 2], note="here")
    assert written == [out / "vase" / "seed0.csv"]
    # the run's resolved configuration beside its CSV, as the run logged it
    assert (out / "vase" / "seed0.config.yaml").read_text() == config.read_text()
    with written[0].open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["frames"] for row in rows] == ["1000", "2000", "3000"]
    assert [float(row["Return/mean"]) for row in rows] == [0, 2, 3]
    assert [row["eval/return"] for row in rows] == ["", "20.0", ""]
    with (out / "vase" / "runs.csv").open(newline="") as handle:
        [provenance] = list(csv.DictReader(handle))
    assert provenance["seed"] == "0" and provenance["git_commit"] == "c0"
    assert provenance["note"] == "here" and float(provenance["minutes"]) >= 0
    # where it computed: every environment tag, and no other (surprise, seed, git_commit)
    recorded = dict(entry.split("=", 1) for entry in provenance["environment"].split("; "))
    assert recorded == where
    assert provenance[RESUMED_ELSEWHERE] == "machine=b (4 cores, Y)"
    # a secondary's runs go under its own name (their surprise tag is the measure they vary)
    written = export_runs.export(uri, "grid", out, measure="trpo_authors", surprise="none")
    assert written == [out / "trpo_authors" / "seed0.csv"]
    with (out / "trpo_authors" / "runs.csv").open(newline="") as handle:
        [untagged] = list(csv.DictReader(handle))  # a run from before the tags existed
    assert untagged["environment"] == untagged[RESUMED_ELSEWHERE] == ""


def test_a_failed_job_is_recorded_with_its_error_and_kept_when_its_seed_runs_again(
        tmp_path, sqlite_uri, capsys):
    client = MlflowClient(tracking_uri=sqlite_uri)
    experiment = client.create_experiment("figure3-half_cheetah",
                                          artifact_location=(tmp_path / "a").as_uri())
    failed = _log(client, experiment, "vime", 3, [1, 2, 3], finish=False)
    client.log_batch(failed, metrics=[Metric("train/iteration", 2.0, 0, 3000)])
    client.set_terminated(failed, "FAILED")
    killed = _log(client, experiment, "vime", 4, [1], finish=False)  # stopped, not failed
    client.set_terminated(killed, "KILLED")
    args = paper_grid.argparse.Namespace(scratch=tmp_path / "scratch", out=tmp_path / "out",
                                         commit=False, keep_checkpoints=True)
    launcher = paper_grid.Launcher(args, sqlite_uri)
    job = paper_grid.Job("half_cheetah", "vime", (3,))
    launcher.log_path(job).write_text(
        "Traceback (most recent call last):\n  File ...\n"
        "ValueError: log-probs (key 'action_log_prob') contain non-finite values.\n\n"
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n")
    launcher.finish(job, 1, paper_grid.time.time(), "vm (2 cores)")
    assert "failed (exit 1" in capsys.readouterr().out
    path = args.out / "half_cheetah" / "vime" / "failures.csv"
    with path.open(newline="") as handle:
        [row] = list(csv.DictReader(handle))
    assert (row["seed"], row["run_id"], row["git_commit"], row["iteration"]) == (
        "3", failed, "c3", "2")
    assert row["error"] == ("ValueError: log-probs (key 'action_log_prob') contain non-finite "
                            "values.")
    assert row["note"] == "started on vm (2 cores)" and not (path.parent / "seed3.csv").exists()
    # the seed trained again and finished: exported beside its failure, which stays on record
    again = _log(client, experiment, "vime", 3, [4, 5])
    launcher.finish(job, 0, paper_grid.time.time(), "vm (2 cores)")
    assert (path.parent / "seed3.csv").exists()
    with path.open(newline="") as handle:
        assert [r["run_id"] for r in csv.DictReader(handle)] == [failed]
    # a run that says why it failed (the library's ``error`` tag) is taken at its word
    client.set_tag(failed, "error", "RuntimeError: from the run")
    export_runs.export_failures(sqlite_uri, "figure3-half_cheetah", args.out / "half_cheetah",
                                measure="vime", error="from the log")
    with path.open(newline="") as handle:
        assert [r["error"] for r in csv.DictReader(handle)] == ["RuntimeError: from the run"]
    assert again != failed
    # a job stopped by the launcher (its SIGTERM) is no failure
    launcher.stopping.set()
    launcher.finish(paper_grid.Job("half_cheetah", "vime", (4,)), 1, 0.0, "vm")
    with path.open(newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 1


def test_the_final_policy_log_std_is_read_from_the_run_s_weights_and_filled_in_later(
        tmp_path, sqlite_uri):
    import torch

    from torchrl_vase.modules import gaussian_policy

    uri, client, experiment = _store(sqlite_uri, tmp_path)
    run = _log(client, experiment, "vime", 5, [1, 2])
    actor = gaussian_policy(3, 2, [4])
    with torch.no_grad():
        next(v for k, v in actor.named_parameters() if k.endswith("state_independent_scale")
             ).copy_(torch.tensor([-0.25, 41.3125]))
    weights = tmp_path / "weights.pt"
    torch.save({"actor": actor.state_dict(), "critic": {}}, weights)
    client.log_artifact(run, str(weights))
    no_weights = _log(client, experiment, "vime", 6, [1])  # never checkpointed
    out = tmp_path / "out"
    export_runs.export(uri, "grid", out, surprise="vime")
    with (out / "vime" / "runs.csv").open(newline="") as handle:
        rows = {row["seed"]: row for row in csv.DictReader(handle)}
    assert rows["5"]["policy_log_std"] == "-0.250 41.312"
    assert rows["6"]["policy_log_std"] == "" and rows["6"]["run_id"] == no_weights
    # a runs.csv written before the column existed, with a run of another store: the column is
    # filled where the run is here, and nothing else changes
    old = out / "old" / "runs.csv"
    old.parent.mkdir()
    columns = [c for c in export_runs.PROVENANCE if c != "policy_log_std"]
    with old.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerow({**{c: "x" for c in columns}, "seed": "5", "run_id": run})
        writer.writerow({**{c: "y" for c in columns}, "seed": "7", "run_id": "elsewhere"})
    assert export_runs.fill_policy_log_std(uri, out / "old") == [old]
    with old.open(newline="") as handle:
        filled = list(csv.DictReader(handle))
    assert [row["policy_log_std"] for row in filled] == ["-0.250 41.312", ""]
    assert filled[0]["note"] == "x" and filled[1]["note"] == "y"
    assert export_runs.fill_policy_log_std(uri, out / "old") == []  # nothing left to fill


def test_two_jobs_of_a_cell_ending_at_once_both_keep_their_row_in_runs_csv(tmp_path):
    """A launcher's workers are threads: two seeds of a cell that end in the same second both
    upsert the cell's runs.csv (Ant's follow-up seeds 2 and 3 once left only seed 3's row)."""
    path = tmp_path / "ant" / "vase" / "runs.csv"
    line = lambda seed: {**dict.fromkeys(export_runs.PROVENANCE, ""), "seed": str(seed),  # noqa: E731
                         "run_id": f"run{seed}"}
    export_runs._record_provenance(path, line(0))
    # the folder held by another writer: an upsert waits for it, then keeps both rows
    folder = os.open(path.parent, os.O_RDONLY)
    fcntl.flock(folder, fcntl.LOCK_EX)
    waiting = threading.Thread(target=export_runs._record_provenance, args=(path, line(2)))
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()  # blocked by the held folder, nothing written meanwhile
    with path.open(newline="") as handle:
        assert [row["seed"] for row in csv.DictReader(handle)] == ["0"]
    os.close(folder)
    waiting.join(10)
    # many at once: every row kept, sorted by seed, no temporary file left behind
    racers = [threading.Thread(target=export_runs._record_provenance, args=(path, line(seed)))
              for seed in range(3, 19)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(10)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["seed"] for row in rows] == [str(seed) for seed in (0, *range(2, 19))]
    assert [row["run_id"] for row in rows][:2] == ["run0", "run2"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["runs.csv"]
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_rewrite_that_fails_midway_leaves_the_file_as_it_was_and_nothing_beside_it(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("seed,run_id\n0,run0\n")
    with pytest.raises(ValueError, match="not in fieldnames"):  # a row with an unknown column
        export_runs.rewrite_rows(path, ("seed", "run_id"),
                                 lambda rows: [*rows, {"seed": "1", "extra": "x"}])
    assert path.read_text() == "seed,run_id\n0,run0\n"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]
    assert not export_runs.rewrite_rows(path, ("seed", "run_id"), lambda rows: None)
    assert export_runs.rewrite_rows(path, ("seed", "run_id"), lambda rows: rows[:0])
    assert path.read_text() == "seed,run_id\n"


def test_a_seed_that_failed_at_the_jobs_commit_is_not_started_again_unless_asked(
        tmp_path, capsys):
    out = tmp_path / "out"
    cell = out / "mountain_car" / "vime"
    cell.mkdir(parents=True)
    here = paper_grid.git_commit(paper_grid.ROOT)
    (cell / "failures.csv").write_text(
        "seed,run_id,git_commit,start,end,iteration,error,note,policy_log_std\n"
        f"1,r1,{here},s,e,7,ValueError: nan,,\n"
        "2,r2,0123abc,s,e,9,ValueError: elsewhere,,\n")
    several = paper_grid.Job("mountain_car", "vime", (0, 1, 2))
    single = paper_grid.Job("mountain_car", "vime", (1,))
    other = paper_grid.Job("mountain_car", "nll", (1,))
    kept, skipped = paper_grid.without_failed([several, single, other], out, here)
    # the seed that failed at this commit leaves every job it is in; one that failed at another
    # commit (a fix since) runs
    assert kept == [paper_grid.Job("mountain_car", "vime", (0, 2)), other]
    assert skipped == [(single, "ValueError: nan"), (single, "ValueError: nan")]
    args = ["--tasks", "mountain_car", "--measures", "vime", "--seeds", "0-2", "--out", str(out),
            "--scratch", str(tmp_path / "scratch"), "--dry-run"]
    assert paper_grid.main(args) == 0
    printed = capsys.readouterr().out
    assert f"skipped, failed at {here[:7]} before (--retry-failed runs it): mountain_car vime " \
           "seed1: ValueError: nan" in printed
    assert "0 cells done, 2 to run in 2 jobs" in printed
    assert "2 jobs not timed (no run finished yet)" in printed  # nothing has finished
    assert paper_grid.main([*args, "--retry-failed"]) == 0
    assert "0 cells done, 3 to run in 3 jobs" in capsys.readouterr().out


def test_compare_reads_the_exported_csvs_as_it_reads_the_store(tmp_path, sqlite_uri):
    uri, client, experiment = _store(sqlite_uri, tmp_path)
    rng = np.random.default_rng(0)
    for surprise in ("none", "vase"):
        for seed in range(4):
            _log(client, experiment, surprise, seed, list(rng.integers(0, 5, 6).astype(float)))
    mlflow.set_tracking_uri(None)
    export_runs.export(uri, "grid", tmp_path / "csv")

    def table(runs: list) -> str:  # the table compare.py writes, without drawing the figures
        groups, _ = compare.latest_per_seed(compare.by_measure(runs))
        return compare.markdown_table("grid", groups, 2) + compare.diagnostics_table(groups)

    from_store = table(compare.load_runs(MlflowClient(tracking_uri=uri), "grid")[0])
    from_csv = table(compare.load_csv_runs(tmp_path / "csv")[0])
    assert from_csv == from_store
    rows = [line for line in from_csv.splitlines() if line.startswith("| grid |")]
    assert [row.split("|")[2].strip() for row in rows] == ["none", "vase"]
    assert all(row.rstrip(" |").endswith("| 4") for row in rows)  # four seeds each


def test_the_launcher_runs_a_slice_exports_and_commits_it_and_skips_it_the_next_time(
        tmp_path, capsys, fresh_store):
    (tmp_path / "scratch").mkdir()
    fresh_store(tmp_path / "scratch" / "mlflow.db")  # the launcher's store: made, not tested here
    # two jobs: seeds 3 and 4
    out = tmp_path / "results"
    out.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=out, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], cwd=out, check=True)
    (out / "mine.txt").write_text("a person's work beside the study")
    args = ["--tasks", "mountain_car", "--measures", "none", "--seeds", "3-4", "--workers", "1",
            "--iterations", "1", "--scratch", str(tmp_path / "scratch"),
            "--out", str(out), "--commit", "--overrides", "eval.every=0"]
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    handlers = [signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)]
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        assert paper_grid.main(args) == 0
    # each run's checkpoint went once it was exported (it held its pool until then)
    removed = capsys.readouterr().out
    assert "removed the checkpoint of mountain_car none seed3" in removed
    assert "removed the checkpoint of mountain_car none seed4" in removed
    checkpoints = tmp_path / "scratch" / "checkpoints" / "figure3-mountain_car"
    assert not checkpoints.is_dir() or not list(checkpoints.iterdir())
    # the launcher passes signals to its jobs while it runs, and gives the caller's back after
    assert [signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)] == handlers
    path = out / "mountain_car" / "none" / "seed3.csv"
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["frames"] for row in rows] == ["5000"] and "Return/mean" in rows[0]
    log = subprocess.run(["git", "log", "--format=%s", "--name-only", "-1"], cwd=out,
                         capture_output=True, text=True, check=True).stdout
    assert log.splitlines()[0] == "figure 3: mountain_car none seed4"  # a commit a run
    assert "mountain_car/none/seed4.csv" in log and "mountain_car/none/seed3.csv" not in log
    assert "mountain_car/none/runs.csv" in log
    assert "mine.txt" not in log  # only the study's files are committed
    capsys.readouterr()
    assert paper_grid.main(args) == 0
    assert "2 cells done, 0 to run in 0 jobs" in capsys.readouterr().out
    # a launcher stopped between a job's end and its export: the next one exports the finished
    # run from the store instead of training it again
    path.unlink()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        assert paper_grid.main(args) == 0
    out_text = capsys.readouterr().out
    assert "exported 1 runs the store had finished before" in out_text
    assert "2 cells done, 0 to run in 0 jobs" in out_text and path.exists()


def test_jobs_run_together_only_as_far_as_the_memory_holds_and_small_ones_fill_the_gaps(
        tmp_path, monkeypatch):
    args = paper_grid.argparse.Namespace(scratch=tmp_path, workers=3)
    launcher = paper_grid.Launcher(args, "sqlite:///unused.db")
    launcher.memory_free = 10.0
    monkeypatch.setattr(launcher, "free_disk", lambda: 2**40)  # the disk holds them all
    ant01, ant23 = paper_grid.Job("ant", "vase", (0, 1)), paper_grid.Job("ant", "vase", (2, 3))
    car, ant4 = paper_grid.Job("mountain_car", "vase", (0,)), paper_grid.Job("ant", "vase", (4,))
    launcher.needs = {("ant", "vase"): 4.0, ("mountain_car", "vase"): 1.0}
    running, peak, started, lock = [], [], [], paper_grid.threading.Lock()

    def fake_run(job):
        with lock:
            running.append(job)
            started.append(job)
            peak.append(sum(launcher.need(j) for j in running))
        paper_grid.time.sleep(0.2)
        with lock:
            running.remove(job)

    monkeypatch.setattr(launcher, "_run", fake_run)
    launcher.run([ant01, ant23, car, ant4])
    # two Ant pairs (8 each) never together; the small job starts beside the first at once,
    # ahead of the second pair that waits for memory; the plan's order otherwise; nothing held
    assert started == [ant01, car, ant23, ant4]
    assert max(peak) <= 10.0 and launcher.memory_held == 0
    # a job bigger than the whole budget still runs, alone
    launcher.needs[("ant", "vase")] = 40.0
    peak.clear()
    launcher.run([ant01, ant23])
    assert peak == [80.0, 80.0]
    # a stopped launcher starts nothing more
    launcher.stopping.set()
    started.clear()
    launcher.run([car])
    assert started == []


def _export_run(out, task, measure, seed, wall_seconds):
    path = out / task / measure / f"seed{seed}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"frames,train/wall_time\n5000,{wall_seconds / 2}\n10000,{wall_seconds}\n")


def test_until_starts_only_jobs_expected_to_end_by_then_and_shorter_ones_fill_the_time(
        tmp_path, monkeypatch):
    out = tmp_path / "out"
    for seed, minutes in enumerate((40, 60, 50)):  # Ant VASE's median run: 50 min
        _export_run(out, "ant", "vase", seed, 60 * minutes)
    _export_run(out, "mountain_car", "trpo_authors", 0, 60 * 4)
    # by hand: the median, with the margin, per seed, and the start; NLL timed as VASE; the
    # control as the authors' TRPO; a measure of neither kind finished: unknown
    assert study_timing.expected_minutes(out, "ant", "vase") == pytest.approx(1.25 * 50 + 2)
    assert study_timing.expected_minutes(out, "ant", "nll", seeds=2) == pytest.approx(
        1.25 * 100 + 2)
    assert study_timing.expected_minutes(out, "mountain_car", "none") == pytest.approx(1.25 * 4 + 2)
    assert study_timing.expected_minutes(out, "double_pendulum", "vase") is None
    # a task with no run of either kind, given its frames: the slowest run's minutes a frame
    # (Ant VASE's 60 min for 10,000 frames), with the margin, and the start
    assert study_timing.expected_minutes(out, "double_pendulum", "vase", frames=2_000_000) == \
        pytest.approx(1.25 * 60 / 10_000 * 2_000_000 + 2)
    now = paper_grid.time.time()
    args = paper_grid.argparse.Namespace(scratch=tmp_path, workers=1, out=out,
                                         until=now + 60 * 30)  # half an hour left
    launcher = paper_grid.Launcher(args, "sqlite:///unused.db")
    monkeypatch.setattr(launcher, "free_disk", lambda: 2**40)
    ant, car = paper_grid.Job("ant", "nll", (3,)), paper_grid.Job("mountain_car", "none", (1,))
    pendulum = paper_grid.Job("double_pendulum", "vase", (0,))
    started = []
    monkeypatch.setattr(launcher, "_run", started.append)
    launcher.run([ant, pendulum, car])
    # Ant (64 min) and the pendulum (its 400 × 5,000 frames at Ant's rate) would be cut off:
    # left; the car (7 min) runs
    assert started == [car]
    left = {job: state for job, state in launcher.results if state.startswith("left for")}
    assert set(left) == {ant, pendulum}
    assert "expected to take 64 min" in left[ant]
    assert "expected to take 15002 min" in left[pendulum]
    # with the whole day left, the plan's order
    launcher.args.until, launcher.results = now + 24 * 3600, []
    started.clear()
    launcher.run([ant, car])
    assert started == [ant, car]


def test_until_times_a_cell_with_no_run_of_its_kind_by_the_studys_slowest_rate(
        tmp_path, monkeypatch):
    out = tmp_path / "out"
    args = paper_grid.argparse.Namespace(scratch=tmp_path, workers=1, out=out, iterations=None,
                                         until=paper_grid.time.time() + 60 * 60 * 3)
    launcher = paper_grid.Launcher(args, "sqlite:///unused.db")
    monkeypatch.setattr(launcher, "free_disk", lambda: 2**40)
    started = []
    monkeypatch.setattr(launcher, "_run", started.append)
    car = paper_grid.Job("mountain_car", "none", (0,), algorithm="sac")
    # no run of the study has finished: nothing to time it by, so it is left for later, and
    # the launcher ends (it once waited for ever once every job left was left for later)
    worker = paper_grid.threading.Thread(target=launcher.run, args=([car],), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the launcher hangs with every job left for later"
    assert started == [] and "no run of the study has finished" in launcher.results[0][1]
    # the SAC study's first run: 120 min for its 300,000 frames (two of 150 and 100 min, at
    # 600,000 and 400,000 frames, run faster a frame); the car's cell has none of its own
    path = out / "half_cheetah" / "vase" / "seed0.csv"
    path.parent.mkdir(parents=True)
    path.write_text("frames,train/wall_time\n150000,3000\n300000,7200\n")
    (out / "half_cheetah" / "rnd").mkdir()
    (out / "half_cheetah" / "rnd" / "seed0.csv").write_text(
        "frames,train/wall_time\n600000,9000\n")
    (out / "half_cheetah" / "rnd" / "seed1.csv").write_text(
        "frames,train/wall_time\n400000,6000\n")
    assert study_timing.slowest_rate(out) == pytest.approx(120 / 300_000)
    # by hand: 1.25 × 120 min × 300,000 / 300,000 frames + 2 min start
    launcher.timings, launcher.results = {}, []
    assert launcher.expected(car) == pytest.approx(1.25 * 120 + 2)
    launcher.run([car])
    assert started == [car]  # 152 min fit in three hours
    launcher.args.until, launcher.results, launcher.timings = (
        paper_grid.time.time() + 60 * 120, [], {})
    started.clear()
    launcher.run([car])
    assert started == [] and "expected to take 152 min" in launcher.results[0][1]


def test_until_times_a_job_by_the_runs_of_its_own_commit_and_machine_first(tmp_path):
    out, here = tmp_path / "out", ("c" * 40, "vm (2 cores, AMD EPYC)")
    old = "vm (2 cores)"
    rows = {("ant", "vase"): [(0, 90, "b" * 40, old), (1, 100, "b" * 40, old)],
            ("ant", "nll"): [(0, 30, *here), (1, 40, "c" * 40, old), (2, 34, *here)],
            ("ant", "vime"): [(0, 80, "b" * 40, old)]}
    for (task, measure), runs in rows.items():
        lines = ["seed,run_id,git_commit,start,end,minutes,run_name,run_identity,population,note"]
        for seed, minutes, commit, machine in runs:
            _export_run(out, task, measure, seed, 60 * minutes)
            lines.append(f'{seed},r,{commit},s,e,{minutes},n,i,single run,"started on {machine}, '
                         'load average 4.2 4.1 4.1; ended at load average 6.0 4.6 3.9"')
        (out / task / measure / "runs.csv").write_text("\n".join(lines) + "\n")
    assert study_timing.started_on("started on vm (2 cores, AMD EPYC), load average 1.0 1.0 1.0; "
                                 "ended at load average 2.0") == "vm (2 cores, AMD EPYC)"
    assert study_timing.started_on("exported by hand") == ""
    # by hand: NLL's two runs at this commit on this machine (30, 34 min: median 32), not the
    # one at this commit elsewhere; VASE has none here, so it is timed by NLL's here (like cost)
    # before its own at another commit and machine; VIME's chain (VASE, NLL) reaches NLL's too
    for measure in ("nll", "vase", "vime"):
        assert study_timing.expected_minutes(out, "ant", measure, setup=here) == pytest.approx(
            1.25 * 32 + 2), measure
    # nothing of this setup on the task: every run counts, as without a setup
    assert study_timing.expected_minutes(out, "ant", "vase", setup=("d" * 40, here[1])) == \
        study_timing.expected_minutes(out, "ant", "vase") == pytest.approx(1.25 * 95 + 2)
    assert study_timing.like_costs("vase_paper") == ["vase_paper", "vase", "nll"]
    assert study_timing.like_costs("none") == ["none", "trpo_authors"]


def test_until_times_a_resumed_job_by_what_its_run_has_left(tmp_path, monkeypatch, sqlite_uri):
    out = tmp_path / "out"
    for seed in range(3):
        _export_run(out, "ant", "vase", seed, 60 * 50)  # Ant VASE's median run: 50 min
    client = MlflowClient(tracking_uri=sqlite_uri)
    experiment = client.create_experiment("figure3-ant")
    for seed, surprise, frames, status in ((3, "nll", 2_400_000, "KILLED"),  # 80 % of 3 M
                                           (3, "vime", 600_000, "KILLED"),
                                           (4, "nll", 3_000_000, "FINISHED")):
        run = client.create_run(experiment, tags={"seed": str(seed), "surprise": surprise})
        client.log_metric(run.info.run_id, "train/frames", frames, step=frames)
        client.set_terminated(run.info.run_id, status)
    ant3, ant4 = paper_grid.Job("ant", "nll", (3,)), paper_grid.Job("ant", "nll", (4,))
    vime3, car = paper_grid.Job("ant", "vime", (3,)), paper_grid.Job("mountain_car", "nll", (0,))
    done = paper_grid.frames_done(sqlite_uri, [ant3, ant4, vime3, car])
    assert done == {ant3: 2_400_000, vime3: 600_000}  # a finished run is nothing to resume
    args = paper_grid.argparse.Namespace(scratch=tmp_path, workers=1, out=out, iterations=None,
                                         until=paper_grid.time.time() + 60 * 30)
    launcher = paper_grid.Launcher(args, sqlite_uri)
    launcher.frames_done = done
    monkeypatch.setattr(launcher, "free_disk", lambda: 2**40)
    # by hand: 1.25 × 50 min × the fraction left + 2 min
    assert launcher.expected(ant3) == pytest.approx(1.25 * 50 * 0.2 + 2)
    assert launcher.expected(vime3) == pytest.approx(1.25 * 50 * 0.8 + 2)
    started = []
    monkeypatch.setattr(launcher, "_run", started.append)
    launcher.run([vime3, ant3])
    assert started == [ant3]  # 14.5 min fits in 30; the VIME run's 52 do not
    # no store yet: nothing begun, and no store made by asking
    missing = tmp_path / "none.db"
    assert paper_grid.frames_done(f"sqlite:///{missing}", [ant3]) == {} and not missing.exists()


def test_until_reads_a_clock_time_or_a_date_and_refuses_anything_else():
    from datetime import datetime

    morning = datetime(2026, 11, 29, 3, 0).timestamp()
    assert paper_grid.deadline("05:20", now=morning) == datetime(2026, 11, 29, 5, 20).timestamp()
    # a time already past today is tomorrow's
    assert paper_grid.deadline("02:10", now=morning) == datetime(2026, 11, 30, 2, 10).timestamp()
    assert paper_grid.deadline("2026-12-01T08:00") == datetime(2026, 12, 1, 8).timestamp()
    with pytest.raises(paper_grid.argparse.ArgumentTypeError, match="HH:MM"):
        paper_grid.deadline("soon")
    with pytest.raises(SystemExit):
        paper_grid.main(["--until", "05:20", "--launcher", "submitit_local", "--dry-run"])


@pytest.mark.parametrize("dry_run", [["--dry-run"], ["--until", "23:40", "--dry-run"], []])
def test_the_study_launcher_plans_in_the_foreground_wherever_dry_run_stands(tmp_path, dry_run):
    # `sac.sh --until 23:40 --dry-run` started the plan in the background once (only a first
    # --dry-run was seen), its "plan" written to the study's log and the shell told a study ran
    root = ROOT
    python = tmp_path / "python"  # stands in for the venv's: says how it was called
    python.write_text('#!/bin/sh\necho "called:" "$@"\n')
    python.chmod(0o755)
    scratch = tmp_path / "scratch"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()
    args = dry_run or ["--until", "23:40"]
    shown = subprocess.run(
        ["bash", "recipes/study/pinned_study.sh", "demo", head, "--measures", "none", "--",
         *args], cwd=root, capture_output=True, text=True, check=True,
        env={**os.environ, "SCRATCH": str(scratch), "CODE": str(root), "PY": str(python)},
    ).stdout
    called = ["called:", "recipes/study/paper_grid.py", "--commit", "--code", str(root),
              "--scratch", str(scratch), "--measures", "none", *args]
    log = scratch / "launcher.out"
    if dry_run:
        assert shown.split() == called
        assert not log.exists()
    else:
        assert "runs in the background" in shown
        deadline = time.monotonic() + 60  # the background launch writes its log a moment later
        while not (log.exists() and log.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.read_text().split() == called


@pytest.mark.parametrize("option", ["--workers", "--seed-block"])
def test_a_count_below_one_is_refused_before_any_plan(option, capsys):
    with pytest.raises(SystemExit):
        paper_grid.main([option, "0", "--dry-run"])
    assert "--workers and --seed-block must be at least 1" in capsys.readouterr().err


def test_jobs_start_only_as_far_as_the_disk_holds_their_checkpoints(tmp_path, monkeypatch):
    args = paper_grid.argparse.Namespace(scratch=tmp_path, workers=3)
    launcher = paper_grid.Launcher(args, "sqlite:///unused.db")
    launcher.DISK_MARGIN, launcher.disk_poll = 0, 0.02
    free = [11]
    monkeypatch.setattr(launcher, "free_disk", lambda: free[0])
    ant01, ant23 = paper_grid.Job("ant", "vase", (0, 1)), paper_grid.Job("ant", "vase", (2, 3))
    car, ant4 = paper_grid.Job("mountain_car", "vase", (0,)), paper_grid.Job("ant", "vase", (4,))
    launcher.disk_needs = {("ant", "vase"): (2, 1), ("mountain_car", "vase"): (0, 1)}  # pool, rest
    # a member's pool is appended once, the rest written whole beside the last one (twice);
    # less what a resumed job's directory already holds, its pool's directory included
    assert launcher.pool_appended  # this checkout's code
    assert launcher.disk_to_come(ant01) == 2 * (2 + 2 * 1) and launcher.disk_to_come(car) == 2
    older = paper_grid.Launcher(paper_grid.argparse.Namespace(
        scratch=tmp_path, workers=1, code=tmp_path / "old"), "sqlite:///unused.db")
    (tmp_path / "old" / "torchrl_vase").mkdir(parents=True)
    (tmp_path / "old" / "torchrl_vase" / "exploration.py").write_text("class Exploration: ...")
    older.disk_needs = launcher.disk_needs  # code that writes the pool whole: twice
    assert not older.pool_appended and older.disk_to_come(ant01) == 2 * (2 * 2 + 2 * 1)
    running, peak, started, lock = [], [], [], paper_grid.threading.Lock()
    seconds = [0.2]  # a job's run

    def fake_run(job):
        with lock:
            running.append(job)
            started.append(job)
            peak.append(sum(launcher.disk_to_come(j) for j in running))
        paper_grid.threading.Event().wait(seconds[0])
        with lock:
            running.remove(job)

    monkeypatch.setattr(launcher, "_run", fake_run)
    launcher.run([ant01, ant23, car, ant4])
    # ant01 (8) and the car (2) together; ant23 (6) and ant4 (4) wait for ant01's room
    assert started[:2] == [ant01, car] and set(started[2:]) == {ant23, ant4}
    assert max(peak) <= 11 and launcher.active == []
    # a job the disk cannot hold even alone is refused before it trains; the others run
    launcher.disk_needs[("ant", "vase")] = (20, 1)
    started.clear()
    launcher.run([ant01, car])
    assert started == [car]
    [(job, state)] = [result for result in launcher.results if result[1].startswith("failed")]
    assert job == ant01 and "checkpoint needs about" in state
    # a job held back by the disk starts when space is freed, with no job ending
    launcher.disk_needs[("ant", "vase")] = (2, 1)
    free[0], started[:] = 9, []
    paper_grid.threading.Timer(0.3, lambda: free.__setitem__(0, 40)).start()
    seconds[0] = 1.0
    launcher.run([car, ant01])
    assert started == [car, ant01]
    assert peak[-1] == 10  # ant01 began while the car still ran: the freed space, not its end


def test_the_recipe_s_estimates_grow_with_the_task_s_pool():
    (ant, ant_disk), (car, car_disk) = (paper_grid.run_estimates(task, "vase")
                                        for task in ("ant", "mountain_car"))
    assert ant > 2**31 > 2**28 > car  # Ant's 3 M transitions of 258 floats; MountainCar's few
    assert ant_disk[0] > 2**31 > car_disk[0] and ant - ant_disk[0] == car - car_disk[0]  # pools
    none, none_disk = paper_grid.run_estimates("ant", "none")  # plain TRPO keeps no pool
    assert none < car and none_disk == (0, paper_grid.CHECKPOINT_OVERHEAD)
    assert ant_disk[1] == car_disk[1] == paper_grid.CHECKPOINT_OVERHEAD  # the rest: networks


@pytest.mark.parametrize("keep", [False, True])
def test_a_finished_job_s_checkpoint_goes_unless_kept(tmp_path, keep):
    args = paper_grid.argparse.Namespace(scratch=tmp_path, workers=1, keep_checkpoints=keep,
                                         overrides=[], out=tmp_path / "out",
                                         python=sys.executable, iterations=1)
    launcher = paper_grid.Launcher(args, "sqlite:///unused.db")
    single = paper_grid.Job("mountain_car", "vase", (5,))
    # a run's checkpoint is under its run id, which the export wrote into runs.csv
    provenance = tmp_path / "out" / "mountain_car" / "vase" / "runs.csv"
    provenance.parent.mkdir(parents=True)
    provenance.write_text("seed,run_id\n5,abc123\n")
    run = tmp_path / "checkpoints" / "figure3-mountain_car" / "abc123"
    run.mkdir(parents=True)
    (run / "last.pt").write_bytes(b"pool")
    launcher.remove_checkpoint(single)
    assert run.exists() == keep


def test_the_submitit_launcher_runs_cells_through_the_local_executor_and_skips_them_after(
        tmp_path, capsys, fresh_store):
    (tmp_path / "scratch").mkdir()
    fresh_store(tmp_path / "scratch" / "mlflow.db")  # the launcher's store: made, not tested here
    out = tmp_path / "results"
    args = ["--tasks", "mountain_car", "--measures", "none", "--seeds", "3-4", "--iterations",
            "1", "--scratch", str(tmp_path / "scratch"), "--out", str(out), "--launcher",
            "submitit_local", "--poll", "0.5", "--overrides", "eval.every=0"]
    assert paper_grid.main(args) == 0
    printed = capsys.readouterr().out
    assert printed.count("submitted mountain_car none seed") == 2
    assert "2 jobs done, 0 failed" in printed
    with (out / "mountain_car" / "none" / "runs.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["seed"] for row in rows] == ["3", "4"]  # each exported once
    assert {row["population"] for row in rows} == {"single run"}
    for seed in (3, 4):
        with (out / "mountain_car" / "none" / f"seed{seed}.csv").open(newline="") as handle:
            assert [row["frames"] for row in csv.DictReader(handle)] == ["5000"]
    assert paper_grid.main(args) == 0
    assert "2 cells done, 0 to run in 0 jobs" in capsys.readouterr().out
