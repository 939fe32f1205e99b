#!/usr/bin/env bash
# Issue 41's study: SAC with no bonus, VASE and RND on MountainCar v1 and HalfCheetah v1, seeds
# 0-4, sac.frames (300,000) each, every cell at one commit (docs/results/sac.md fixes the design).
#   bash recipes/study/sac.sh            # start or continue it in the background
#   bash recipes/study/sac.sh --dry-run  # what is done, what would run (foreground)
#   bash recipes/study/sac.sh stop       # the running jobs checkpoint and stop
# It ran on the core the Figure 3 study left free until that study ended (2026-12-02); since then
# on both (WORKERS, default 2). How it runs: recipes/study/pinned_study.sh (exports to
# docs/results/sac/).
set -euo pipefail
# 9945e54 when the design was fixed (2026-11-28); moved to 397f176 on 2026-12-02, before any run:
# a run stopped by a signal no longer evaluates at its stop (67d98e2) and the ELBO kernel gives the
# same bits compiled or loaded from numba's cache (e253547), and these ~3-hour runs are stopped and
# resumed at every session's end.
STUDY_COMMIT=397f176542eac33b15f67f2c32afc304914ce708
cd "$(dirname "$0")/../.."
exec bash recipes/study/pinned_study.sh sac "$STUDY_COMMIT" \
    --algorithm sac --tasks mountain_car half_cheetah --measures none vase rnd \
    --seeds "${SEEDS:-0-4}" --seed-block 1 --workers "${WORKERS:-2}" --out "$PWD/docs/results/sac" -- "$@"
