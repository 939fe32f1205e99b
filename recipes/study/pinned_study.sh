#!/usr/bin/env bash
# A study run by recipes/study/paper_grid.py at one commit, in the background, resumable: what
# figure3.sh and sac.sh share.
#   bash recipes/study/pinned_study.sh <name> <commit> [paper_grid args ...] -- [stop | --dry-run | more args]
# The jobs run the code of <commit> from a checkout of their own (studies/<name>/code, a git
# worktree), so this checkout can move on while the study runs; the launcher is this checkout's
# recipes/study/paper_grid.py, which exports and commits every finished cell. A change that alters
# a run's numbers needs a new commit and a new start of the cells it touches (delete their CSVs).
# Checkpoints, the scratch MLflow store and the logs are under studies/<name>/ (ignored by git;
# SCRATCH and CODE move them): on the same machine a killed job continues from its checkpoint; on
# another, an unfinished cell starts again.
set -euo pipefail
NAME=$1 STUDY_COMMIT=$2
shift 2
GRID=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do GRID+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the --
cd "$(dirname "$0")/../.."
ROOT=$PWD
SCRATCH=${SCRATCH:-$ROOT/studies/$NAME}
CODE=${CODE:-$SCRATCH/code}
PY=${PY:-$ROOT/.venv/bin/python}

if [ "${1:-}" = stop ]; then
    pkill -TERM -f "paper_grid.py.*--code $CODE" || echo "no $NAME study running"
    exit 0
fi
mkdir -p "$SCRATCH"
if [ ! -d "$CODE" ]; then
    git worktree add --detach "$CODE" "$STUDY_COMMIT"
    # the kernel's compile cache lives beside its source: compile it once, before the jobs
    # (torchrl_vase/kernels.py; objectives/elbo_kernel.py at commits before 2026-12-04's)
    KERNELS=torchrl_vase.kernels
    [ -f "$CODE/torchrl_vase/kernels.py" ] || KERNELS=torchrl_vase.objectives.elbo_kernel
    (cd "$CODE" && "$PY" -c "from $KERNELS import warm_up; warm_up()")
fi
test "$(git -C "$CODE" rev-parse HEAD)" = "$(git rev-parse "$STUDY_COMMIT")" || {
    echo "$CODE is not at $STUDY_COMMIT"; exit 1; }
ARGS=(--commit --code "$CODE" --scratch "$SCRATCH" "${GRID[@]}" "$@")
# a dry run prints its plan here and starts nothing, wherever --dry-run stands among the arguments
for arg in "$@"; do
    if [ "$arg" = --dry-run ]; then
        exec "$PY" recipes/study/paper_grid.py "${ARGS[@]}"
    fi
done
setsid nohup "$PY" recipes/study/paper_grid.py "${ARGS[@]}" >> "$SCRATCH/launcher.out" 2>&1 < /dev/null &
echo "the $NAME study runs in the background (pid $!); its log: $SCRATCH/launcher.out"
