#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: the tests marked gpu (the judge's CUDA
# cheats among them), then the current judge on a sample of the recorded (problem,
# transformation) pairs, in the rejudge study's order (resumable: bring RUNS/rejudged.jsonl
# back, commit it, run again).
#   OUT=results TESTS=1 BUDGET=380 RUNS=docs/data/rejudge_h200_v3 bash experiments/device/judge_h200.sh
# RUNS: docs/data/rejudge_h200 holds judge 2's rows, docs/data/rejudge_h200_v3 judge 3's (the
# default). TESTPATHS narrows the tests (judge 3's run: "tests/test_harness_gpu.py").
# Needs the wheels of docs/dataset.md "Recording" in .whl/ (gymnasium, stable-baselines3).
set -u -o pipefail
FINAL=${OUT:-results}
RUNS=${RUNS:-docs/data/rejudge_h200_v3}
mkdir -p "$FINAL" "$RUNS"
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/lib.sh"
install_wheels
if [ "${TESTS:-1}" = 1 ]; then
  LIMIT=${LIMIT:-200} OUT="$FINAL" bash experiments/device/gpu_tests.sh
fi
timeout -s TERM $(( ${BUDGET:-380} + 60 )) python3 -m experiments.studies.rejudge run \
  --out "$RUNS" --deadline "${BUDGET:-380}" 2>&1 | tr '\r' '\n' \
  | quiet_log | tail -15 | tee "$FINAL/rejudge.log"
cp "$RUNS/rejudged.jsonl" "$FINAL/"
ls -la "$FINAL"
