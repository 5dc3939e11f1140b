#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: go on with the fidelity runs (live
# episodes, then live pairs) against the shipped dataset, and pack them for the trip back.
#   OUT=results DEADLINE=540 bash experiments/device/fidelity_h200.sh
# KernelBench's sample (issue 18; the dataset shipped, the checkout carried by name):
#   OUT=results DEADLINE=540 RUNS=docs/data/fidelity_kernelbench_h200 STEPS=pairs \
#     STUDY_ARGS="--dataset kernelbench --optimizer reference --pairs 24 \
#     --source .kernelbench/KernelBench" bash experiments/device/fidelity_h200.sh
# STEPS: what to run, in order (default: episodes pairs); STUDY_ARGS: the study's settings
# (experiments/studies/fidelity.py; saved with its plan on the first call).
# DEADLINE: seconds until no new work starts; each step is also killed (SIGTERM: ncu is
# stopped, finished rows are kept) 30 s after it, so that the packing always runs.
# Resumable: run it again (with docs/data/fidelity_h200 brought back and committed).
set -u -o pipefail
FINAL=${OUT:-results}
RUNS=${RUNS:-docs/data/fidelity_h200}
DEADLINE=${DEADLINE:-540}
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/lib.sh"
install_wheels  # .whl/, where it travelled (docs/dataset.md, "Recording")
mkdir -p "$FINAL" "$RUNS"
started=$(date +%s)
step() {  # step NAME ARGS...: one fidelity command within what is left of the deadline
  local name=$1; shift
  local left=$(( DEADLINE - ($(date +%s) - started) ))
  [ "$left" -gt 60 ] || return 0
  # shellcheck disable=SC2086  # STUDY_ARGS: several words
  timeout -s TERM $(( left + 30 )) python3 -m experiments.studies.fidelity "$name" --out "$RUNS" \
    --deadline "$left" ${STUDY_ARGS:-} "$@" 2>&1 | tr '\r' '\n' | quiet_log \
    | tail -30 | tee "$FINAL/$name.log"
}
for what in ${STEPS:-episodes pairs}; do
  if [ "$what" = pairs ]; then step pairs --warm-workers "${WARM:-8}"; else step "$what"; fi
done
tar czf "$FINAL/fidelity.tgz" --exclude=_work "$RUNS"
ls -la "$FINAL"
