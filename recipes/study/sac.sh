#!/usr/bin/env bash
# Issue 41's study: SAC with no bonus, VASE and RND on MountainCar v1 and HalfCheetah v1, seeds
# 0-4, sac.frames (300,000) each, every cell at one commit (docs/results/sac.md fixes the design).
#   bash recipes/study/sac.sh            # start or continue it in the background
#   bash recipes/study/sac.sh --dry-run  # what is done, what would run (foreground)
#   bash recipes/study/sac.sh stop       # the running jobs checkpoint and stop
# It runs only where the Figure 3 study leaves cores free (WORKERS, default 1): it must not delay
# that study. As recipes/study/figure3.sh: the jobs run the code of STUDY_COMMIT from a checkout
# of their own (studies/sac/code), the launcher exports and commits every finished cell into
# docs/results/sac/, checkpoints and the scratch MLflow store are under studies/sac/.
set -euo pipefail
STUDY_COMMIT=${STUDY_COMMIT:-4d3f5ac31892ccd5ae0a89124e5947d6c0daee2d}
cd "$(dirname "$0")/../.."
ROOT=$PWD
SCRATCH=${SCRATCH:-$ROOT/studies/sac}
CODE=${CODE:-$SCRATCH/code}
PY=${PY:-$ROOT/.venv/bin/python}

if [ "${1:-}" = stop ]; then
    pkill -TERM -f "paper_grid.py.*--code $CODE" || echo "no SAC study running"
    exit 0
fi
mkdir -p "$SCRATCH"
if [ ! -d "$CODE" ]; then
    git worktree add --detach "$CODE" "$STUDY_COMMIT"
    (cd "$CODE" && "$PY" -c \
        "from torchrl_vase.objectives import elbo_kernel; elbo_kernel.warm_up()")
fi
test "$(git -C "$CODE" rev-parse HEAD)" = "$(git rev-parse "$STUDY_COMMIT")" || {
    echo "$CODE is not at $STUDY_COMMIT"; exit 1; }
ARGS=(--algorithm sac --tasks mountain_car half_cheetah --measures none vase rnd
      --seeds "${SEEDS:-0-4}" --workers "${WORKERS:-1}" --commit --code "$CODE"
      --out "$ROOT/docs/results/sac" --scratch "$SCRATCH" "$@")
if [ "${1:-}" = --dry-run ]; then
    exec "$PY" recipes/study/paper_grid.py "${ARGS[@]}"
fi
setsid nohup "$PY" recipes/study/paper_grid.py "${ARGS[@]}" >> "$SCRATCH/launcher.out" 2>&1 < /dev/null &
echo "the SAC study runs in the background (pid $!); its log: $SCRATCH/launcher.out"
