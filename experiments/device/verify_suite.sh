#!/usr/bin/env bash
# On a GPU machine: time every suite problem's eager reference, run the GPU harness tests, and
# save what ncu says about itself (sections, sets, section files) for the profiler's catalogue.
#   OUT=results bash experiments/device/verify_suite.sh
# Everything lands in $OUT/verify.tgz (the device tool returns at most 8 files).
set -u -o pipefail
FINAL=${OUT:-results}
OUT=$(mktemp -d)/verify
mkdir -p "$OUT" "$FINAL"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' | tee -a "$OUT/gpu.txt"
if command -v ncu >/dev/null; then
  ncu --version | tee -a "$OUT/gpu.txt"
  ncu --list-sections > "$OUT/ncu_list_sections.txt" 2>&1
  ncu --list-sets > "$OUT/ncu_list_sets.txt" 2>&1
  sections_dir=$(dirname "$(readlink -f "$(command -v ncu)")")/sections
  [ -d "$sections_dir" ] && tar czf "$OUT/ncu_sections.tgz" -C "$(dirname "$sections_dir")" sections
fi
python3 -m experiments.cli time-reference --device cuda --out "$OUT/reference_h200.jsonl" 2>&1 | tr '\r' '\n' | grep -v '^reference timing: ' 
python3 -m pytest -q -p no:cacheprovider tests/test_harness_gpu.py 2>&1 | tail -15 | tee "$OUT/gpu_tests.txt"

# A first look at ncu on this machine (for the profiler): one kernel, one section, then the full set.
if command -v ncu >/dev/null; then
  cat > /tmp/ncu_probe.py <<'PY'
import torch
x = torch.randn(4096, 4096, device="cuda")
for _ in range(3):
    torch.relu(x)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("measure")
y = torch.relu(x)
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
PY
  ls "$(dirname "$(readlink -f "$(command -v ncu)")")/extras/python" > "$OUT/ncu_extras_python.txt" 2>&1
  for what in "--section SpeedOfLight" "--set full"; do
    start=$(date +%s%N)
    timeout 300 ncu --clock-control none --nvtx --nvtx-include "measure/" $what -f -o /tmp/probe python3 /tmp/ncu_probe.py > "$OUT/ncu_probe_log_${what##* }.txt" 2>&1
    echo "ncu $what: rc=$? ms=$(( ($(date +%s%N) - start) / 1000000 ))" | tee -a "$OUT/ncu_probe.txt"
    ls -la /tmp/probe.ncu-rep | tee -a "$OUT/ncu_probe.txt"
    ncu --import /tmp/probe.ncu-rep --page raw --csv > "$OUT/ncu_probe_raw_${what##* }.csv" 2>&1
    ncu --import /tmp/probe.ncu-rep --page details --csv > "$OUT/ncu_probe_details_${what##* }.csv" 2>&1
  done
fi
ls -la "$OUT"
tar czf "$FINAL/verify.tgz" -C "$(dirname "$OUT")" verify
