"""The recipes run end to end on tiny budgets (wiring, not performance)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> str:
    """A script run from a temporary directory (what it writes stays out of the repository)."""
    script, *rest = args
    result = subprocess.run(
        [sys.executable, str(ROOT / script), *rest], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_train_bnn_lowers_the_elbo_loss(run_script):
    out = run_script("recipes/train_bnn.py", "frames=1000", "train.epochs=3",
                     "train.batch_size=20", "threads=1", check=True).stdout
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+-?\d", line)]
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3]
    elbo = [float(r[1]) for r in rows]
    held_out_nll = [float(r[4]) for r in rows]
    assert elbo[-1] > elbo[0], elbo
    assert held_out_nll[-1] < held_out_nll[0], held_out_nll


def test_train_bnn_rejects_an_unknown_activation_before_collecting(run_script):
    result = run_script("recipes/train_bnn.py", "model.activation=sigmoid")
    assert result.returncode != 0
    assert "model.activation must be one of ['relu', 'tanh']" in result.stderr
    assert "collected" not in result.stdout


def test_benchmark_bnn_prints_its_tables(run_script):
    out = run_script("recipes/benchmarks/benchmark_bnn.py", "--batch", "64", "--min-run-time",
                     "0.02", "--updates", "20", "--rounds", "1", "--value-draws", "3", "--pool",
                     "20000", check=True).stdout
    assert "looped/batched" in out and "ELBO steps per second" in out
    assert "autograd" in out and "numba" in out and "inductor" not in out
    # two forwards (one batch size); two training iterations, numba against autograd; the two
    # local samplings against weight sampling: training and bonus for each model; one ELBO step
    # autograd against compiled, three task models by three samplings
    assert len(re.findall(r"\d+\.\d+x", out)) == 21 and "The BNN's sampling" in out
    assert len(re.findall(r"^Ant .* local_shared +\d+ µs +\d+ µs +[\d.]+x +[\d.]+$", out,
                          flags=re.MULTILINE)) == 1
    assert re.search(r"matrix product on the same threads: torch \d+ GFLOP/s", out)
    assert re.search(r"^Ant .* +\d+ ms +[\d.]+ ms$", out, flags=re.MULTILINE)
    assert len(re.findall(r"^\S.* local_shared +\d+ → ", out, flags=re.MULTILINE)) == 2


def test_benchmark_surprise_prints_its_tables(run_script):
    out = run_script(
        "recipes/benchmarks/benchmark_surprise.py", "--batch", "64", "--per-transition-sample", "8",
        "--frames", "200", check=True).stdout
    assert "VASE/VIME loop" in out and "% of the collection" in out


def test_benchmark_checkpoint_writes_the_pool_once_and_resumes_both_alike(run_script, tmp_path):
    out = run_script("recipes/benchmarks/benchmark_checkpoint.py", "--pool", "30000", "--new",
                     "500", "--rounds", "1", "--obs", "4", "--action", "2", "--dir",
                     str(tmp_path), check=True).stdout  # it asserts the two resumes' pools equal
    assert re.search(r"whole save: +[\d.]+ s", out) and re.search(r"journal resume: +[\d.]+ s", out)
    sizes = dict(re.findall(r"^ *(\w+) checkpoint writes +([\d.]+) MiB$", out, flags=re.MULTILINE))
    assert 5 * float(sizes["appended"]) < float(sizes["whole"])  # 500 transitions, not 30,500
    assert list(tmp_path.iterdir()) == []  # its files removed


def test_kernel_rounding_s_computations_are_the_same_bits_in_two_fresh_processes(run_script):
    # the script's table reads "other bits" as the forced kernel's doing: that needs its
    # computations to repeat bit for bit in a fresh process with nothing forced
    runs = [json.loads(run_script("recipes/benchmarks/kernel_rounding.py", "--child",
                                  check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert runs[0]["elbo_backend"] == "numba"


def test_kernel_pinning_cost_runs_the_pinned_process_on_the_scalar_kernels(run_script):
    # numba's generic build left out: its first compilation alone takes a minute
    out = run_script("recipes/benchmarks/kernel_pinning_cost.py", "env.frames_per_batch=200",
                     "--env", "mountain_car", "--iterations", "2", "--rounds", "1", "--pin",
                     "ATEN_CPU_CAPABILITY", "MKL_CBWR", check=True).stdout
    # the runs' own tags: the pinned one ran ATen's scalar kernels, the other this machine's
    assert (f"ATen's kernels as installed: {torch.backends.cpu.get_cpu_capability()}; "
            "pinned: DEFAULT") in out
    rows = dict(re.findall(r"^\| (\w+) \| ([\d.]+) \| [\d.]+ \| [\d.-]+ \|$", out,
                           flags=re.MULTILINE))
    # every phase the runs logged, the fixed ones first, the iteration last
    assert list(rows)[:10] == ["collection", "bonus", "model", "pool", "advantage", "critic",
                               "policy", "evaluation", "watchers", "other"]
    assert list(rows)[-1] == "iteration"
    # the phases add up to the iteration's time (time/other is the rest), so each is summed over
    # the same iterations; 11 values rounded to 0.01 s
    phases = sum(float(value) for key, value in rows.items() if key != "iteration")
    assert phases > 0 and abs(phases - float(rows["iteration"])) <= 0.06


def test_benchmark_sac_times_each_bonus_against_none(run_script):
    out = run_script("recipes/benchmarks/benchmark_sac.py", "--updates", "3", "--rounds", "1",
                     "--obs", "3", "--action", "1", "--bnn", "8", check=True).stdout
    rows = re.findall(r"^ *(none|vase|rnd): +[\d.]+ ms/update \(([\d.]+)x none\), sample and "
                      r"bonus +[\d.]+ ms$", out, flags=re.MULTILINE)
    assert [kind for kind, _ in rows] == ["none", "vase", "rnd"] and rows[0][1] == "1.00"


def test_benchmark_trpo_runs_on_a_tiny_budget(run_script):
    out = run_script(
        "recipes/benchmarks/benchmark_trpo.py", "--learn-iterations", "2", "--fps-iterations", "2",
        "--frames-per-batch", "400", "--num-envs", "2", check=True).stdout
    assert "best mean return" in out
    fps_lines = re.findall(r"^(\S+-v\d)\s+[\d,]+ frames/s$", out, flags=re.MULTILINE)
    assert fps_lines == ["HalfCheetah-v5", "MountainCarContinuous-v0"]


def test_one_iteration_reaches_at_most_36_library_files(run_script):
    """Issue 96's reach: a two-iteration TRPO + VASE run, a checkpoint and an evaluation each,
    calls functions in at most 36 files of the library (module and class bodies aside)."""
    out = run_script("recipes/benchmarks/library_reach.py", check=True).stdout
    listed = re.findall(r"^(\S+\.py)\s+\d+ functions$", out, flags=re.MULTILINE)
    count = int(re.search(r"^(\d+) library files called", out, flags=re.MULTILINE).group(1))
    assert count == len(listed) and {"loop.py", "exploration.py", "kernels.py"} <= set(listed)
    assert count <= 36, listed


def test_benchmark_envs_prints_every_env(run_script):
    out = run_script(  # a few random-policy episodes: the script's 200 took two minutes here
        "recipes/benchmarks/benchmark_envs.py", "--steps", "50", "--episodes", "4", "--seeds", "2",
        "--cap", "1000", "--vector-envs", "2", check=True).stdout
    for env_id in ("PointRobot2D-v0", "SparseMountainCar-v1", "SparseCartpoleSwingup-v1",
                   "SparseDoublePendulum-v1", "SparseHalfCheetah-v1", "SparseAnt-v1",
                   "LunarLanderContinuous-v1"):
        assert re.search(rf"torchrl_vase/{env_id}\s+[\d,]+\s+[\d,]+", out), env_id
        assert re.search(rf"torchrl_vase/{env_id}\s+[\d.]+$", out, flags=re.MULTILINE), env_id
    lean = re.findall(r"^(torchrl_vase/\S+-v\d)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)$", out,
                      flags=re.MULTILINE)
    assert len(lean) == 7  # every task through both vector envs
    assert "steps to first reach the goal" in out


def test_benchmark_sb3_prints_the_ratio_table():
    pytest.importorskip("sb3_contrib", reason="the optional bench extra is not installed")
    out = _run("recipes/benchmarks/benchmark_sb3.py", "--skip-learning", "--fps-frames", "10000",
               "--rounds", "1", "--num-envs", "4")
    rows = re.findall(r"^(\S+-v\d)\s+[\d,]+\s+[\d,]+\s+\d+\.\d+x", out, flags=re.MULTILINE)
    assert rows == ["HalfCheetah-v5", "MountainCarContinuous-v0"]


def test_the_mutation_report_replaces_its_block_and_keeps_the_page_around_it(tmp_path):
    from recipe_modules import load_recipe

    mutation = load_recipe("benchmarks/mutation")
    start, end = mutation.REPORT_BLOCK
    page = tmp_path / "mutation.md"
    page.write_text(f"# Title\n\nabove\n{start}\nold table\n{end}\nthe survivors, read\n")
    mutation.write_report(page, "new table\n")
    assert page.read_text() == (f"# Title\n\nabove\n{start}\nnew table\n{end}\nthe survivors, "
                                "read\n")
    mutation.write_report(tmp_path / "bare.md", "a table\n")
    assert (tmp_path / "bare.md").read_text() == "a table\n"
    assert mutation.score({"killed": 9, "survived": 1, "timeout": 0, "suspicious": 0,
                           "no_tests": 0}) == 0.9
