#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: the harness's GPU tests, then judge 3
# (inputs made before the timed calls) on the rejudge study's sample, in its order, so that
# the first pairs compare with judge 2's (docs/data/rejudge_h200) and the first recording.
#   OUT=results BUDGET=300 bash experiments/device/judge3_h200.sh
# Resumable: bring docs/data/rejudge_h200_v3/rejudged.jsonl back, commit it, run again.
set -u -o pipefail
FINAL=${OUT:-results}
mkdir -p "$FINAL" docs/data/rejudge_h200_v3
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
LIMIT=${LIMIT:-200} OUT="$FINAL" TESTPATHS="tests/test_harness_gpu.py tests/test_judge.py" \
  bash experiments/device/gpu_tests.sh
timeout -s TERM $(( ${BUDGET:-300} + 60 )) python3 -m experiments.studies.rejudge run \
  --out docs/data/rejudge_h200_v3 --deadline "${BUDGET:-300}" 2>&1 | tr '\r' '\n' \
  | grep -v -E '^\s*$|it/s\]$|s/it\]$' | tail -15 | tee "$FINAL/rejudge.log"
cp docs/data/rejudge_h200_v3/rejudged.jsonl "$FINAL/"
ls -la "$FINAL"
