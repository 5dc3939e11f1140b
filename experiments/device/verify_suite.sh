#!/usr/bin/env bash
# On a GPU machine: time every suite problem's eager reference (median and peak memory) and
# run the GPU harness tests.
#   OUT=results bash experiments/device/verify_suite.sh
# Everything lands in $OUT/verify.tgz (the device tool returns at most 8 files).
set -u -o pipefail
FINAL=${OUT:-results}
OUT=$(mktemp -d)/verify
mkdir -p "$OUT" "$FINAL"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' | tee -a "$OUT/gpu.txt"
python3 -m experiments.cli record --parts reference --device cuda --out "$OUT/recording" 2>&1 | tr '\r' '\n' | grep -v '^reference timing: '
cp "$OUT/recording/reference.jsonl" "$OUT/reference_h200.jsonl"
python3 -m pytest -q -p no:cacheprovider tests/test_harness_gpu.py 2>&1 | tail -15 | tee "$OUT/gpu_tests.txt"

ls -la "$OUT"
tar czf "$FINAL/verify.tgz" -C "$(dirname "$OUT")" verify
