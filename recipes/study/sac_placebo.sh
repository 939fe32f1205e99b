#!/usr/bin/env bash
# Issue 77's placebos for SAC + VASE on MountainCar (5 of 5 seeds reached the goal, 0 of 5
# without a bonus): does the bonus's content matter? Seeds 0-4 of VASE with the model trained and
# no bonus (surprise.eta=0) and of VASE with each sampled batch's bonus shuffled across its
# transitions (shuffle_bonus=true), beside the SAC study's cells.
#   bash recipes/study/sac_placebo.sh            # start or continue it in the background
#   bash recipes/study/sac_placebo.sh --dry-run  # what is done, what would run (foreground)
#   bash recipes/study/sac_placebo.sh stop       # the running jobs checkpoint and stop
# How it runs: recipes/study/pinned_study.sh.
set -euo pipefail
# the SAC study's commit 397f176 with the placebo's switch added (shuffle_bonus, owned by
# Exploration as on main; off there), nothing else. dac5268 (sac.shuffle_bonus) ran it first,
# until 2026-12-06; no run of it finished
STUDY_COMMIT=aae97c97c7ca9284ab817170fd387e2507fa5752
cd "$(dirname "$0")/../.."
exec bash recipes/study/pinned_study.sh sac_placebo "$STUDY_COMMIT" \
    --algorithm sac --tasks mountain_car --measures vase_eta0 vase_shuffled \
    --seeds "${SEEDS:-0-4}" --seed-block 1 --workers "${WORKERS:-2}" --out "$PWD/docs/results/sac" -- "$@"
