#!/usr/bin/env bash
# On a GPU machine: the same problems recorded by the single-GPU path and by the fan-out's
# unit processes (`record --workers 1`, or `--workers ray`: a local Ray cluster on the one
# GPU), one path per command, then compared (experiments/studies/fanout_check.py) with the
# plain one:
#   OUT=results WAY=plain  bash experiments/device/fanout_h200.sh   # then, in a next command:
#   OUT=results WAY=fanned bash experiments/device/fanout_h200.sh
#   OUT=results WAY=ray    bash experiments/device/fanout_h200.sh   # Ray's wheels staged first
#                                                       # (experiments/device/ray_wheels.sh says how)
# The recordings live in RECORDINGS (default docs/data/fanout_h200): bring the first one back
# (recordings.tgz) before the next command, so that the check finds both.
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
install_wheels
FINAL=${OUT:-results}
ROOT=${RECORDINGS:-docs/data/fanout_h200}
export PYTHONUNBUFFERED=1
mkdir -p "$FINAL" "$ROOT"
machine_facts | tee "$FINAL/machine.txt"
# five problems of the composed optimizer's plan, seven candidates in all
PROBLEMS=${PROBLEMS:-argmax_dim1_128x1024x1024 avg_pool2d_32x128x112x112 cross_entropy_32768x4096 \
mlp_3layer_4096x1024x4096 conv1d_32x128x8192}
case "${WAY:?set WAY=plain or WAY=fanned}" in
  plain) WORKERS= ;;
  fanned) WORKERS="--workers 1" ;;
  ray) WORKERS="--workers ray" ;;
  *) echo "WAY must be plain, fanned or ray" >&2; exit 2 ;;
esac
# a unit in flight finishes its candidate after the budget (on one GPU through Ray, one
# candidate with its recheck took 80 s): 120 s of margin, or what it finished is lost
BUDGET=$(command_budget "${BUDGET:-420}" 120) || exit 2  # all of it within the command's LIMIT
timeout -s TERM $(( BUDGET + 120 )) python3 -m experiments.cli record --out "$ROOT/$WAY" \
  --parts reference,full,candidates --time-budget "$BUDGET" --warm-workers "${WARM:-6}" \
  --plan docs/data/recording_h200_v2/plan.json $WORKERS $PROBLEMS 2>&1 | tr '\r' '\n' \
  | quiet_log | tail -30 | tee "$FINAL/$WAY.log"
for other in fanned ray; do
  if [ -d "$ROOT/plain" ] && [ -d "$ROOT/$other" ]; then
    python3 -m experiments.studies.fanout_check "$ROOT/plain" "$ROOT/$other" \
      --out "$FINAL/fanout_check_$other.json" | tail -40
  fi
done
tar czf "$FINAL/recordings.tgz" --exclude=_work "$ROOT"
ls -la "$FINAL"
