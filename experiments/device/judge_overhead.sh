#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: where judge 2's extra time on small
# programs comes from (experiments/studies/judge_overhead.py). Resumable: bring
# docs/data/judge_overhead_h200/rows.jsonl back from $OUT, and run again.
#   OUT=results BUDGET=360 PHASES=micro,judge VARIANTS=as_is JUDGE_REPS=2 \
#     bash experiments/device/judge_overhead.sh                                  # call 1
#   OUT=results BUDGET=300 PHASES=micro,probe,judge JUDGE_REPS=1 JUDGE_REP_START=2 \
#     VARIANTS=pregen_inputs,as_is,nospare,nosandbox,pregen_inputs \
#     JUDGE_PROBLEMS=mlp_tiny_8layer_64x256,linear_l2normalize_scale_16384x512x128,\
#     conv2d_groupnorm_silu_mean_16x128x64x64,conv_transpose2d_16x128x64x64 \
#     bash experiments/device/judge_overhead.sh                                  # call 2
# Needs the wheels of docs/dataset.md "Recording" in .whl/ (gymnasium: importing the package
# registers its environments).
set -u -o pipefail
FINAL=${OUT:-results}
DATA=docs/data/judge_overhead_h200
mkdir -p "$FINAL" "$DATA"
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/lib.sh"
install_wheels
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  nproc; grep -m1 'model name' /proc/cpuinfo; grep -m1 'cpu MHz' /proc/cpuinfo
  uname -r; cat /proc/loadavg; } > "$FINAL/machine.txt" 2>&1
nvidia-smi dmon -s pc -d 2 > "$FINAL/dmon.txt" 2>&1 &
DMON=$!
BUDGET=${BUDGET:-420}
timeout -s KILL $(( BUDGET + 90 )) python3 -m experiments.studies.judge_overhead run \
  --out "$DATA" --deadline "$BUDGET" --phases "${PHASES:-micro,judge}" --reps "${REPS:-3}" \
  --variants "${VARIANTS:-as_is}" --judge-reps "${JUDGE_REPS:-2}" \
  --judge-rep-start "${JUDGE_REP_START:-0}" ${PROBLEMS:+--problems "$PROBLEMS"} \
  ${JUDGE_PROBLEMS:+--judge-problems "$JUDGE_PROBLEMS"} 2>&1 \
  | grep -v -E '^\s*$' | sed "s#$PWD#.#g" | tail -120 > "$FINAL/run.log"
kill "$DMON" 2>/dev/null
cp "$DATA/rows.jsonl" "$FINAL/"
python3 -m experiments.studies.judge_overhead analyze --out "$DATA" > "$FINAL/tables.md" 2>&1
cp "$DATA/summary.json" "$FINAL/" 2>/dev/null
tail -25 "$FINAL/run.log"
ls -la "$FINAL"
