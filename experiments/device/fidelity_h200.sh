#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: go on with the fidelity runs (live
# episodes, then live pairs) against the shipped dataset, and pack them for the trip back.
#   OUT=results DEADLINE=540 bash experiments/device/fidelity_h200.sh
# DEADLINE: seconds until no new work starts; each step is also killed (SIGTERM: ncu is
# stopped, finished rows are kept) 30 s after it, so that the packing always runs.
# Resumable: run it again (with docs/data/fidelity_h200 brought back and committed).
set -u -o pipefail
FINAL=${OUT:-results}
RUNS=${RUNS:-docs/data/fidelity_h200}
DEADLINE=${DEADLINE:-540}
export PYTHONUNBUFFERED=1
mkdir -p "$FINAL" "$RUNS"
started=$(date +%s)
step() {  # step NAME ARGS...: one fidelity command within what is left of the deadline
  local name=$1; shift
  local left=$(( DEADLINE - ($(date +%s) - started) ))
  [ "$left" -gt 60 ] || return 0
  timeout -s TERM $(( left + 30 )) python3 -m experiments.studies.fidelity "$name" --out "$RUNS" \
    --deadline "$left" "$@" 2>&1 | tr '\r' '\n' | grep -v -E '^\s*$|it/s\]$|s/it\]$' \
    | tail -30 | tee "$FINAL/$name.log"
}
step episodes
step pairs --warm-workers "${WARM:-8}"
tar czf "$FINAL/fidelity.tgz" --exclude=_work "$RUNS"
ls -la "$FINAL"
