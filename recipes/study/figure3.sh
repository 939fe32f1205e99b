#!/usr/bin/env bash
# Issue 38's study: Figure 3 at the authors' configuration, seeds 0-19, every cell at one commit.
#   bash recipes/study/figure3.sh            # start or continue it in the background
#   bash recipes/study/figure3.sh --dry-run  # what is done, what would run (foreground)
#   bash recipes/study/figure3.sh stop       # the running jobs checkpoint and stop
# The jobs run the code of STUDY_COMMIT from a checkout of their own (studies/figure3/code, a git
# worktree), so this checkout can move on while the study runs; the launcher is this checkout's
# recipes/study/paper_grid.py, which exports and commits every finished cell into
# docs/results/figure3/. A change that alters a run's numbers needs a new STUDY_COMMIT and a new
# start of the cells it touches (delete their CSVs). Checkpoints, the scratch MLflow store and the
# logs are under studies/figure3/ (ignored by git; SCRATCH and CODE move them): on the same
# machine a killed job continues from its checkpoint; on another, an unfinished cell starts again.
set -euo pipefail
STUDY_COMMIT=b2b53df1fbafcd3302f85ea97b2384d4f57f3170
cd "$(dirname "$0")/../.."
ROOT=$PWD
SCRATCH=${SCRATCH:-$ROOT/studies/figure3}
CODE=${CODE:-$SCRATCH/code}
PY=${PY:-$ROOT/.venv/bin/python}

if [ "${1:-}" = stop ]; then
    pkill -TERM -f "paper_grid.py.*--code $CODE" || echo "no study running"
    exit 0
fi
mkdir -p "$SCRATCH"
if [ ! -d "$CODE" ]; then
    git worktree add --detach "$CODE" "$STUDY_COMMIT"
    # the kernel's compile cache lives beside its source: compile it once, before the jobs
    (cd "$CODE" && "$PY" -c \
        "from torchrl_vase.objectives import elbo_kernel; elbo_kernel.warm_up()")
fi
test "$(git -C "$CODE" rev-parse HEAD)" = "$STUDY_COMMIT" || {
    echo "$CODE is not at $STUDY_COMMIT"; exit 1; }
ARGS=(--workers "${WORKERS:-2}" --commit --code "$CODE" --out "$ROOT/docs/results/figure3"
      --scratch "$SCRATCH" "$@")
if [ "${1:-}" = --dry-run ]; then
    exec "$PY" recipes/study/paper_grid.py "${ARGS[@]}"
fi
setsid nohup "$PY" recipes/study/paper_grid.py "${ARGS[@]}" >> "$SCRATCH/launcher.out" 2>&1 < /dev/null &
echo "the study runs in the background (pid $!); its log: $SCRATCH/launcher.out"
