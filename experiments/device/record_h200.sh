#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: go on with the recording of the shipped
# dataset, then pack the recording for the trip back (the device tool returns at most 8 files).
#   OUT=results RECORDING=docs/data/recording_h200 BUDGET=520 PARTS=reference,full,candidates \
#     WARM=6 [PLAN=FILE] [REUSE=FILE] bash experiments/device/record_h200.sh
# PLAN: a recording plan (the candidates part records its composed candidates, in its order);
# REUSE: candidate rows to copy where the judge and the source are the same.
# Resumable: run it again (with the recording brought back and committed) to continue. A
# command started from a state that an earlier command on the same (warm) machine advanced
# is refused: unpack that command's recording first (REPEAT=1 runs it anyway).
set -u -o pipefail
FINAL=${OUT:-results}
RECORDING=${RECORDING:-docs/data/recording_h200}
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/lib.sh"
refuse_stale_recording "$RECORDING" || exit 2  # the last command's recording not unpacked
START_STATE=$(recording_state "$RECORDING")
mkdir -p "$FINAL" "$RECORDING"
# killed (SIGTERM: ncu is stopped, finished work is kept) 40 s past the budget, so that the
# packing below always runs; the budget lowered where that would outlast the command's LIMIT
BUDGET=$(command_budget "${BUDGET:-520}" 40) || exit 2
timeout -s TERM $(( BUDGET + 40 )) python3 -m experiments.cli record --out "$RECORDING" --parts "${PARTS:-reference,full,candidates}" \
  --time-budget "$BUDGET" --warm-workers "${WARM:-6}" ${PLAN:+--plan "$PLAN"} \
  ${REUSE:+--reuse "$REUSE"} 2>&1 | tr '\r' '\n' | quiet_log \
  | tail -40 | tee "$FINAL/record.log"
note_advanced_recording "$RECORDING" "$START_STATE"
tar czf "$FINAL/recording.tgz" --exclude=_work "$RECORDING"
ls -la "$FINAL"
