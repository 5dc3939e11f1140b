#!/usr/bin/env bash
# On a GPU machine: what the profiler's section catalogue is made from.
#   OUT=results bash experiments/device/probe_ncu.sh
# - ncu's own lists of sections and sets, and its .section files (metrics per section);
# - replay passes and seconds of every section and set, alone, on one small CUDA C kernel
#   (a compiled program, so Python's start-up does not hide the profiler's cost);
# - whether one ncu invocation can tell several problems apart by NVTX range (regex filter).
set -u -o pipefail
FINAL=${OUT:-results}
OUT=$(mktemp -d)/probe
mkdir -p "$OUT" "$FINAL"
ncu --version > "$OUT/ncu_version.txt"
ncu --list-sections > "$OUT/ncu_list_sections.txt" 2>&1
ncu --list-sets > "$OUT/ncu_list_sets.txt" 2>&1
find / -name "SpeedOfLight.section" -not -path "/proc/*" 2>/dev/null > "$OUT/section_dirs.txt"
find / -name "ncu_report.py" -not -path "/proc/*" 2>/dev/null > "$OUT/ncu_report_paths.txt"
sections_dir=$(dirname "$(head -n1 "$OUT/section_dirs.txt")")
tar czf "$OUT/sections.tgz" -C "$(dirname "$sections_dir")" "$(basename "$sections_dir")"

cat > /tmp/axpy.cu <<'CU'
#include <cstdio>
__global__ void axpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
  int n = 1 << 24; float *x, *y;
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
  cudaMemset(x, 0, n * sizeof(float)); cudaMemset(y, 0, n * sizeof(float));
  axpy<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
CU
nvcc -O2 -arch=sm_90 -o /tmp/axpy /tmp/axpy.cu || exit 1
sections=$(awk 'NR>3 && $1 != "" && $1 !~ /^-/ {print $1}' "$OUT/ncu_list_sections.txt")
{
  echo "kind,name,rc,passes,ms"
  for s in $sections; do
    t=$(date +%s%N)
    ncu --clock-control none --section "$s" /tmp/axpy > /tmp/log.txt 2>&1; rc=$?
    passes=$(grep -o '[0-9]* pass' /tmp/log.txt | grep -o '[0-9]*' | head -n1)
    echo "section,$s,$rc,${passes:-},$(( ($(date +%s%N) - t) / 1000000 ))"
  done
  for set in basic detailed full; do
    t=$(date +%s%N)
    ncu --clock-control none --set "$set" /tmp/axpy > /tmp/log.txt 2>&1; rc=$?
    passes=$(grep -o '[0-9]* pass' /tmp/log.txt | grep -o '[0-9]*' | head -n1)
    echo "set,$set,$rc,${passes:-},$(( ($(date +%s%N) - t) / 1000000 ))"
  done
  t=$(date +%s%N); /tmp/axpy > /dev/null; echo "none,no-profiler,$?,0,$(( ($(date +%s%N) - t) / 1000000 ))"
} > "$OUT/section_passes.csv"
cp /tmp/log.txt "$OUT/full_set_log.txt"

# Several problems in one invocation, told apart by NVTX ranges.
cat > /tmp/multi.py <<'PY'
import torch
xs = [torch.randn(1 << 20, device="cuda") for _ in range(3)]
for x in xs:
    torch.relu(x)
torch.cuda.synchronize()
for i, x in enumerate(xs):
    torch.cuda.nvtx.range_push(f"ap_{i}")
    torch.relu(x) if i != 1 else torch.softmax(x.view(1024, -1), dim=1).sum()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
PY
ncu --clock-control none --nvtx --nvtx-include "regex:ap_[0-9]+/" --section SpeedOfLight --section WarpStateStats -f -o /tmp/multi python3 /tmp/multi.py > "$OUT/multi_log.txt" 2>&1
echo "rc=$?" >> "$OUT/multi_log.txt"
ncu --import /tmp/multi.ncu-rep --page details --csv > "$OUT/multi_details.csv" 2>&1
ncu --import /tmp/multi.ncu-rep --page raw --csv --print-units base > "$OUT/multi_raw.csv" 2>&1
ncu --import /tmp/multi.ncu-rep --page details --csv --section SpeedOfLight > "$OUT/multi_details_sol_only.csv" 2>&1
# Failure outputs, for the error tests: an unknown section, and a program that crashes.
ncu --section NoSuchSection /tmp/axpy > "$OUT/err_unknown_section.txt" 2>&1; echo "rc=$?" >> "$OUT/err_unknown_section.txt"
ncu --section SpeedOfLight python3 -c 'import torch; x=torch.ones(1,device="cuda"); import os; os.abort()' > "$OUT/err_target_crash.txt" 2>&1; echo "rc=$?" >> "$OUT/err_target_crash.txt"
ncu --import /tmp/does_not_exist.ncu-rep --page raw --csv > "$OUT/err_bad_report.txt" 2>&1; echo "rc=$?" >> "$OUT/err_bad_report.txt"
head -c 100000 /tmp/multi.ncu-rep > /tmp/truncated.ncu-rep
ncu --import /tmp/truncated.ncu-rep --page raw --csv > "$OUT/err_truncated_report.txt" 2>&1; echo "rc=$?" >> "$OUT/err_truncated_report.txt"
ls -la "$OUT"
tar czf "$FINAL/probe.tgz" -C "$(dirname "$OUT")" probe
