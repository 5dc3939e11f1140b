#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: `autoprofiler optimize` on KernelBench
# files that are not in the project's suite (the tree walks each file, one ncu run per section
# collected; the optimizer is invoked once with that profile; the harness judges and times the
# candidate), each result packed for the trip back.
#   OUT=results KERNELBENCH=shared/KernelBench [KERNELBENCH_COMMIT=SHA] [TREE=FILE] [OPTIMIZER=reference] \
#     [BUDGET=0.3] [BUDGET_UNIT=passes] [DEADLINE=540] [LIMIT=300] [FILES="level1/19_ReLU.py ..."] \
#     bash experiments/device/optimize_h200.sh
# KERNELBENCH: a KernelBench checkout (its root, or the KernelBench/ folder holding level1/),
# carried to the device in an ignored folder; never copied into the repository.
# TREE: a tree file (default: the one shipped for OPTIMIZER, agents/tree/data/$OPTIMIZER.json;
# docs/tree/optimize-h200/ was run with reference-v1.json, before reference.json existed).
# DEADLINE: seconds until no new file starts; LIMIT: seconds one file may take (SIGTERM: ncu
# and the harness's workers stop with it).
# Needs the wheels of docs/dataset.md "Recording" in .whl/ (gymnasium).
# Out: $OUT/summary.tsv (a line per file), $OUT/optimize.log, $OUT/optimize.tgz (per file:
# the JSON result, the profile as the optimizer saw it, stderr).
set -u -o pipefail
FINAL=${OUT:-results}
DEADLINE=${DEADLINE:-540}
LIMIT=${LIMIT:-300}
OPTIMIZER=${OPTIMIZER:-reference}
TREE=${TREE:-agents/tree/data/$OPTIMIZER.json}
# a pointwise chain (fusion), a reduction over 16384 x 16384 (memory-bound), a GEMM with an
# epilogue (precision and fusion): three kinds of decision
FILES=${FILES:-level1/88_MinGPTNewGelu.py level1/98_KLDivLoss.py level2/76_Gemm_Add_ReLU.py}
if [ -z "${KERNELBENCH:-}" ]; then
  echo "optimize_h200.sh: error: set KERNELBENCH to a KernelBench checkout (the folder holding level1/, or its parent)" >&2
  exit 2
fi
KB=$KERNELBENCH
[ -d "$KB/level1" ] || KB=$KERNELBENCH/KernelBench
if [ ! -d "$KB/level1" ]; then
  echo "optimize_h200.sh: error: KERNELBENCH=$KERNELBENCH holds no level1/ (nor KernelBench/level1/): give a KernelBench checkout" >&2
  exit 2
fi
WORK=$(mktemp -d)/optimize
mkdir -p "$FINAL" "$WORK"
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/lib.sh"
install_wheels
{
  machine_facts
  kernelbench_commit "$KERNELBENCH"
} > "$WORK/machine.txt" 2>&1
cat "$WORK/machine.txt"
printf 'file\trc\tsections\tpasses\twall_s\tcandidate\tcorrect\tspeedup\teager_ms\tcandidate_ms\n' > "$FINAL/summary.tsv"
started=$(date +%s)
for rel in $FILES; do
  name=$(echo "$rel" | tr '/' '_' | sed 's/\.py$//')
  left=$(( DEADLINE - ($(date +%s) - started) ))
  if [ "$left" -lt 60 ]; then
    echo "$rel: skipped, the deadline is near" | tee -a "$WORK/optimize.log"
    continue
  fi
  if [ ! -f "$KB/$rel" ]; then
    echo "$rel: no such file in $KB" | tee -a "$WORK/optimize.log"
    printf '%s\t2\n' "$rel" >> "$FINAL/summary.tsv"
    continue
  fi
  limit=$(( left < LIMIT ? left : LIMIT ))
  echo "== $rel (at most ${limit} s)" | tee -a "$WORK/optimize.log"
  begun=$(date +%s)
  timeout -s TERM "$limit" python3 -m experiments.cli optimize "$KB/$rel" ${TREE:+--tree "$TREE"} \
    --optimizer "$OPTIMIZER" --budget "${BUDGET:-0.3}" --budget-unit "${BUDGET_UNIT:-passes}" \
    --json > "$WORK/$name.json" 2> "$WORK/$name.err"
  rc=$?
  echo "$rel: exit $rc in $(( $(date +%s) - begun )) s" | tee -a "$WORK/optimize.log"
  tail -3 "$WORK/$name.err" | sed "s#$PWD#.#g" | tee -a "$WORK/optimize.log"
  python3 - "$WORK/$name.json" "$rel" "$rc" >> "$FINAL/summary.tsv" <<'EOF'
import json, sys
path, rel, rc = sys.argv[1:]
try:
    d = json.load(open(path))
except (OSError, ValueError):
    print(f"{rel}\t{rc}")
    sys.exit()
open(path[:-5] + ".profile.md", "w").write(d["profile_markdown"])
v = d["verdict"] or {}
cells = [rel, rc, "+".join(d["sections"]) or "-", d["total"]["passes"],
         f"{d['total']['wall_s']:.1f}", v.get("candidate"), v.get("correct"), v.get("speedup"),
         v.get("eager_ms"), v.get("candidate_ms")]
print("\t".join("" if c is None else str(c) for c in cells))
EOF
done
cat "$FINAL/summary.tsv"
cp "$WORK/optimize.log" "$FINAL/"
tar czf "$FINAL/optimize.tgz" -C "$(dirname "$WORK")" optimize
ls -la "$FINAL"
