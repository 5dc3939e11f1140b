#!/usr/bin/env bash
# Does where the judge's processes run explain the level-3 reference drift
# (docs/dataset.md "Known problems in the data")? Runs experiments.studies.reference_noise's
# `fresh` setting (a new judge, so new reference and candidate processes, per judgement)
# under `taskset`: on every CPU (the judge as it runs), on the GPU's own CPUs
# (nvidia-smi topo's CPU affinity), on a single CPU, on the CPUs not the GPU's own (where
# there are any). Writes $OUT/pinning_<where>.jsonl and prints the machine's CPUs first.
#
#   OUT=out KERNELBENCH=.kernelbench/KernelBench REPEATS=4 \
#       bash experiments/device/reference_pinning.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/device/lib.sh
install_wheels
: "${OUT:?set OUT to a folder for the rows}" "${KERNELBENCH:?set KERNELBENCH to a checkout}"
PROBLEMS=${PROBLEMS:-level3/15_DenseNet121,level3/9_ResNet18}
lscpu | grep -E "^(CPU\(s\)|Model name|Thread|Core|Socket|NUMA)" || true
nvidia-smi topo -m | head -3 || true
all=$(taskset -cp $$ | sed 's/.*: //')
local_cpus=$(nvidia-smi topo -m 2>/dev/null | awk '/^GPU0/ {for (i = 2; i <= NF; i++)
  if ($i ~ /^[0-9]+([-,][0-9]+)*$/) {print $i; exit}}')
local_cpus=${local_cpus:-$all}
first=${local_cpus%%[-,]*}
other=$(python3 - "$all" "$local_cpus" <<'PY'
import sys
def cpus(text):
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
print(",".join(map(str, sorted(cpus(sys.argv[1]) - cpus(sys.argv[2])))))
PY
)
echo "CPUs: all $all; the GPU's own $local_cpus; one $first; others ${other:-none}"
for where in all local one other; do
  case $where in
    all) cpus=$all ;; local) cpus=$local_cpus ;; one) cpus=$first ;; other) cpus=$other ;;
  esac
  if [ -z "$cpus" ] || { [ "$where" = local ] && [ "$cpus" = "$all" ]; }; then
    echo "$where: skipped (no such CPUs on this machine)"; continue
  fi
  echo "$where: taskset -c $cpus"
  taskset -c "$cpus" python3 -m experiments.studies.reference_noise \
    --kernelbench "$KERNELBENCH" --out "$OUT/pinning_$where.jsonl" --settings fresh \
    --repeats "${REPEATS:-4}" --candidates identity --problems "$PROBLEMS" 2>&1 \
    | grep -E "^fresh |error" | sed "s/^/$where /" || true
done
