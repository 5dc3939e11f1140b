#!/usr/bin/env bash
# On a GPU machine: every test marked gpu (the live environment's Gymnasium and SB3 checks, the
# harness's CUDA timing and faults), which CI's CPU machine skips.
#   OUT=results bash experiments/device/gpu_tests.sh
# Needs pytest and stable-baselines3: the wheels in .whl/ are installed first where they
# travelled (docs/dataset.md "Recording"). The log lands in $OUT/gpu_tests.txt.
set -u -o pipefail
FINAL=${OUT:-results}
mkdir -p "$FINAL"
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/lib.sh"
install_wheels
timeout -s KILL "${LIMIT:-540}" python3 -m pytest -m gpu -v -p no:cacheprovider ${TESTPATHS:-tests/} 2>&1 \
  | sed "s#$PWD#.#g" | tail -40 | tee "$FINAL/gpu_tests.txt"  # no machine paths in the log
