#!/usr/bin/env bash
# Issue 12's study: which advantage structure lets the bonus steer the policy.
#   bash recipes/study/advantage_structures.sh select        # choose the default (seeds 100-104)
#   bash recipes/study/advantage_structures.sh study STRUCT  # report (seeds 0-9), STRUCT = chosen
#   bash recipes/study/advantage_structures.sh bar           # the bar's figures at the defaults
# Runs go to $STORE (default: sqlite:///studies/advantage_structures.db, outside git), two jobs at
# a time, one thread each, into experiments named as below plus "_$TAG" when TAG is set (a rerun
# after the defaults changed). Reports:
#   python recipes/study/compare.py --tracking-uri $STORE --experiment E --out docs/results/advantage_structures/E
set -euo pipefail
cd "$(dirname "$0")/../.."
STORE=${STORE:-sqlite:///$PWD/studies/advantage_structures.db}
mkdir -p studies
PY=${PY:-.venv/bin/python}
T=${TAG:+_$TAG}
COMMON=(hydra/launcher=joblib hydra.launcher.n_jobs=2 threads=1 progress_bar=false
        checkpoint.every=0 "mlflow.tracking_uri=$STORE" "hydra.sweep.dir=studies/multirun/\${now:%Y%m%d-%H%M%S}")
run() { "$PY" recipes/trpo_vase.py -m "${COMMON[@]}" "$@"; }

case "${1:-}" in
  select)
    SEEDS=100,101,102,103,104
    # point robot: coverage after 40,000 steps (8 iterations)
    run env=point_robot surprise=none seed=$SEEDS iterations=8 mlflow.experiment=select_point_robot_40k$T
    run env=point_robot surprise=vase advantage=extrinsic,combined,dual seed=$SEEDS iterations=8 \
        mlflow.experiment=select_point_robot_40k$T
    # MountainCar: the paper's 50 iterations
    run env=mountain_car surprise=vase advantage=extrinsic,combined,dual seed=$SEEDS \
        mlflow.experiment=select_mountain_car$T
    ;;
  study)
    CHOSEN=${2:?the structure chosen on the selection seeds}
    SEEDS=0,1,2,3,4,5,6,7,8,9
    # the bar: coverage after 40,000 steps
    run env=point_robot surprise=none seed=$SEEDS iterations=8 mlflow.experiment=point_robot_40k$T
    run env=point_robot surprise=vase advantage=$CHOSEN seed=$SEEDS iterations=8 \
        mlflow.experiment=point_robot_40k$T
    # point robot until the first reward, at most 300,000 steps
    for args in "surprise=none" "surprise=vase advantage=extrinsic,combined,dual" \
                "surprise=nll,vime,rnd advantage=$CHOSEN"; do
      # shellcheck disable=SC2086
      run env=point_robot $args seed=$SEEDS iterations=60 stop_at_first_reward=true \
          mlflow.experiment=point_robot_300k$T
    done
    # sparse MountainCar, the paper's 50 iterations
    for args in "surprise=none" "surprise=vase advantage=extrinsic,combined,dual" \
                "surprise=nll,vime,rnd advantage=$CHOSEN"; do
      # shellcheck disable=SC2086
      run env=mountain_car $args seed=$SEEDS mlflow.experiment=mountain_car$T
    done
    ;;
  bar)
    # issue 12's bar at the current defaults: the diagnostics of `trpo_vase.py surprise=vase
    # iterations=8` (seeds 0-9) on the point robot, beside plain TRPO, and on MountainCar
    SEEDS=0,1,2,3,4,5,6,7,8,9
    run env=point_robot surprise=none,vase seed=$SEEDS iterations=8 mlflow.experiment=bar_point_robot$T
    run env=mountain_car surprise=vase seed=$SEEDS iterations=8 mlflow.experiment=bar_mountain_car$T
    # the other structures beside the default (extrinsic since the rerun of the selection)
    run env=point_robot surprise=vase advantage=combined,dual seed=$SEEDS iterations=8 \
        mlflow.experiment=bar_point_robot$T
    ;;
  *) echo "usage: $0 select | study STRUCTURE | bar" >&2; exit 2 ;;
esac
