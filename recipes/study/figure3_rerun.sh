#!/usr/bin/env bash
# Issue 77's rerun: the Figure 3 cells that the Gaussian's normaliser touched, at the study's commit
# with the authors' bonus, seeds 0-19 (the text settings' VASE and Ant's scale checks: 0-9).
#   bash recipes/study/figure3_rerun.sh            # start or continue it in the background
#   bash recipes/study/figure3_rerun.sh --dry-run  # what is done, what would run (foreground)
#   bash recipes/study/figure3_rerun.sh stop       # the running jobs checkpoint and stop
#   bash recipes/study/figure3_rerun.sh --until 19:20  # start only the jobs expected to end by then
# How it runs (a checkout of STUDY_COMMIT of its own, exports and commits, scratch, resume):
# recipes/study/pinned_study.sh.
set -euo pipefail
# 82a8bde (the study's commit, whose cells of plain TRPO and VIME stay) and one change: VASE's and
# NLL's U without the normaliser D·log(√(2π)σ_c), as the authors' surprise() returns it. Which
# cells it touched: docs/results/figure3_normaliser/bonus_constant.md (every VASE and NLL cell).
STUDY_COMMIT=01cdad23ea061470834833ea773427eaa421bd26
# the short tasks first (the issue's order), each cell's 20 seeds before the next cell's
TASKS=${TASKS:-point_robot mountain_car lunar_lander double_pendulum cartpole_swingup half_cheetah ant}
# Ant's scale checks before the text settings' VASE (from 2026-12-05): they answer the question
# the page asks of Ant's VASE (docs/results.md#ant-scale); both changes together last (from
# 2026-12-06: ant_scale.FOLLOW_UP_RULE, asked after the two answered "undecided")
MEASURES=${MEASURES:-vase nll vase_linear_init vase_eta_tenth vase_paper vase_linear_eta_tenth}
cd "$(dirname "$0")/../.."
# shellcheck disable=SC2086  # the tasks and measures are words
exec bash recipes/study/pinned_study.sh figure3_rerun "$STUDY_COMMIT" \
    --tasks $TASKS --measures $MEASURES --given-order --seed-block 20 \
    --workers "${WORKERS:-2}" --out "$PWD/docs/results/figure3" \
    --overrides checkpoint.every=50 -- "$@"
