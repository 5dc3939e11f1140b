#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: go on with the fidelity runs (live pairs,
# then live episodes) against the shipped dataset, and pack them for the trip back.
#   OUT=results DEADLINE=540 bash experiments/device/fidelity_h200.sh
# Resumable: run it again (with docs/data/fidelity_h200 brought back and committed).
set -u -o pipefail
FINAL=${OUT:-results}
RUNS=${RUNS:-docs/data/fidelity_h200}
DEADLINE=${DEADLINE:-540}
export PYTHONUNBUFFERED=1
mkdir -p "$FINAL" "$RUNS"
started=$(date +%s)
python3 -m experiments.fidelity pairs --out "$RUNS" --deadline "$DEADLINE" \
  --warm-workers "${WARM:-8}" 2>&1 | tr '\r' '\n' | grep -v -E '^\s*$|it/s\]$|s/it\]$' \
  | tail -30 | tee "$FINAL/pairs.log"
left=$(( DEADLINE - ($(date +%s) - started) ))
if [ "$left" -gt 60 ]; then
  python3 -m experiments.fidelity episodes --out "$RUNS" --deadline "$left" 2>&1 \
    | tr '\r' '\n' | grep -v -E '^\s*$|it/s\]$|s/it\]$' | tail -30 | tee "$FINAL/episodes.log"
fi
tar czf "$FINAL/fidelity.tgz" --exclude=_work "$RUNS"
ls -la "$FINAL"
