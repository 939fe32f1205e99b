#!/usr/bin/env bash
# The point robot's placebo (issue 77's rule for positive effects): VASE with each iteration's
# bonus shuffled across its transitions (shuffle_bonus=true), 20 seeds, beside the Figure 3
# rerun's VASE and none cells; its rule: recipes/study/robot_placebo.py.
#   bash recipes/study/robot_placebo.sh            # start or continue it in the background
#   bash recipes/study/robot_placebo.sh --dry-run  # what is done, what would run (foreground)
#   bash recipes/study/robot_placebo.sh stop       # the running jobs checkpoint and stop
# How it runs: recipes/study/pinned_study.sh.
set -euo pipefail
# the Figure 3 rerun's commit 01cdad2 with the placebo's switch added (off there), nothing else;
# 0587003 before it failed at the first bonus (a flat bonus for an [envs, steps] batch)
STUDY_COMMIT=d6e11a990df06f467d10e422e62fe3dd5d7cd582
cd "$(dirname "$0")/../.."
exec bash recipes/study/pinned_study.sh robot_placebo "$STUDY_COMMIT" \
    --tasks point_robot --measures vase_shuffled --seeds "${SEEDS:-0-19}" \
    --workers "${WORKERS:-1}" --out "$PWD/docs/results/figure3" -- "$@"
