#!/usr/bin/env bash
# Issue 38's study: Figure 3 at the authors' configuration, seeds 0-19, every cell at one commit.
#   bash recipes/study/figure3.sh            # start or continue it in the background
#   bash recipes/study/figure3.sh --dry-run  # what is done, what would run (foreground)
#   bash recipes/study/figure3.sh stop       # the running jobs checkpoint and stop
#   bash recipes/study/figure3.sh --until 05:20  # start only the jobs expected to end by 05:20
# How it runs (a checkout of STUDY_COMMIT of its own, exports and commits, scratch, resume):
# recipes/study/pinned_study.sh.
set -euo pipefail
STUDY_COMMIT=b2b53df1fbafcd3302f85ea97b2384d4f57f3170
cd "$(dirname "$0")/../.."
exec bash recipes/study/pinned_study.sh figure3 "$STUDY_COMMIT" \
    --workers "${WORKERS:-2}" --out "$PWD/docs/results/figure3" -- "$@"
