#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: go on with the recording of a KernelBench
# checkout's levels 1-3 (chunk by chunk: each chunk's reference timings, ncu's full set, the
# plan and the planned candidates before the next), then pack the recording for the trip back.
#   OUT=results KERNELBENCH=.kernelbench/KernelBench KERNELBENCH_COMMIT=SHA \
#     RECORDING=docs/data/recording_kernelbench_h200 BUDGET=520 [CHUNK=8] [WARM=6] \
#     [MAX_OPS=64] bash experiments/device/record_kernelbench_h200.sh
# KERNELBENCH: a KernelBench checkout (the folder holding level1/, or its parent), carried to
# the device in an ignored folder (carry it by name); never copied into the repository.
# KERNELBENCH_COMMIT: its commit, where the carried copy has no .git (the manifest's commit
# is checked against nothing else: each file's sha256 is).
# RECORDING: the recording folder, prepared on a CPU first (its kernelbench.json:
#   autoprofiler record --source "$KERNELBENCH" --commit SHA --out "$RECORDING" --prepare).
# BUDGET: seconds after which nothing new starts (ncu stopped, finished work kept); the
# recorder is killed 40 s later so that the packing below always runs. LIMIT (default 600,
# the device tool's limit for one command): BUDGET is lowered, with a warning, where the
# recorder's kill and the packing would not end within LIMIT s of the script's start.
# CANDIDATE_TIMEOUT: the judge's limit for one candidate in seconds (default: KernelBench's 180).
# WORKERS=N (a machine of N GPUs): each part of a chunk spread over them, a unit per problem
# (give CHUNK a multiple of N); WARM then counts warm workers per unit.
# PARTS=reference: only the reference timings, of every problem (under a second each), so
# that the problems the judge refuses are counted before the costly parts.
# SELF_CHECK=0 skips the judge's self-check (experiments/bench_judge.py on the GPU, about 30 s:
# an honest candidate with a 1 GB output must be judged correct before anything is recorded).
# Needs the wheels of docs/dataset.md "Recording" in .whl/ (gymnasium; einops for level 3).
# CACHE (optional, e.g. .compile-cache, git-ignored and carried by name): the compile caches
# of the last command, unpacked before recording and packed again after it
# (experiments/device/lib.sh), so that compiles a command's time budget stopped are not done
# again by the next one; CACHE_MAX_MB (default 36) bounds what comes back, so that it can be
# carried with the tree, the checkout and the wheels within a command's 64 MiB.
# Out: $OUT/record.log (its last 150 lines), $OUT/status.json (how far the recording is;
# empty where the command's timeout stopped the recorder before it said), $OUT/compiles.log
# (every warm compile's seconds, also appended to $RECORDING/compiles.log),
# $OUT/machine.txt, $OUT/self_check.txt and the recording as $OUT/recording.tgz.0, .1, ...
# (15 MB pieces, at most 6: the device tool returns 8 files of 16 MB at most), with CACHE
# $OUT/compile-cache.tgz.0, ... in what is left of the 8; here:
#   cat recording.tgz.* | tar xzf -
#   ls compile-cache.tgz.* >/dev/null 2>&1 && rm -rf .compile-cache && mkdir .compile-cache \
#     && cp compile-cache.tgz.* .compile-cache/       (the last cache kept where none came back)
# Resumable: run it again (with the recording brought back and committed) to continue. A
# command started from a state that an earlier command on the same (warm) machine advanced
# is refused: unpack that command's recording first (REPEAT=1 runs it anyway).
set -u -o pipefail
FINAL=${OUT:-results}
RECORDING=${RECORDING:-docs/data/recording_kernelbench_h200}
BUDGET=${BUDGET:-520}
if [ -z "${KERNELBENCH:-}" ]; then
  echo "record_kernelbench_h200.sh: error: set KERNELBENCH to a KernelBench checkout (the folder holding level1/, or its parent)" >&2
  exit 2
fi
if [ ! -f "$RECORDING/kernelbench.json" ]; then
  echo "record_kernelbench_h200.sh: error: $RECORDING has no kernelbench.json: prepare it on a CPU first (autoprofiler record --source \"\$KERNELBENCH\" --commit SHA --out $RECORDING --prepare) and carry it" >&2
  exit 2
fi
mkdir -p "$FINAL"
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/lib.sh"
refuse_stale_recording "$RECORDING" || exit 2  # the last command's recording not unpacked
START_STATE=$(recording_state "$RECORDING")
install_wheels
{
  machine_facts
  kernelbench_commit "$KERNELBENCH"
} > "$FINAL/machine.txt" 2>&1
cat "$FINAL/machine.txt"
[ -n "${CACHE:-}" ] && restore_compile_cache "$CACHE"
if [ "${SELF_CHECK:-1}" != 0 ]; then  # a judge that fails an honest candidate records nothing
  if ! timeout 120 python3 -m experiments.bench_judge --device cuda --mb 1024 --repeats 2 \
      2>&1 | tee "$FINAL/self_check.txt"; then
    echo "record_kernelbench_h200.sh: error: the judge failed its self-check (an honest ReLU, 1 GB output; $FINAL/self_check.txt): nothing recorded" >&2
    exit 1
  fi
fi
BUDGET=$(command_budget "$BUDGET" 40) || exit 2
timeout -s TERM $(( BUDGET + 40 )) python3 -m experiments.cli record --source "$KERNELBENCH" \
  ${KERNELBENCH_COMMIT:+--commit "$KERNELBENCH_COMMIT"} --out "$RECORDING" \
  --time-budget "$BUDGET" --chunk "${CHUNK:-8}" --warm-workers "${WARM:-6}" \
  ${MAX_OPS:+--max-ops "$MAX_OPS"} ${REUSE:+--reuse "$REUSE"} ${PARTS:+--parts "$PARTS"} \
  ${CANDIDATE_TIMEOUT:+--candidate-timeout "$CANDIDATE_TIMEOUT"} \
  ${WORKERS:+--workers "$WORKERS"} 2>&1 | tr '\r' '\n' | quiet_log \
  | sed "s#$PWD#.#g" > "$FINAL/record.full.log"
note_advanced_recording "$RECORDING" "$START_STATE"
tail -150 "$FINAL/record.full.log" | tee "$FINAL/record.log"
# the recorder's last word, how far the recording is, kept whatever the log's tail holds
grep -E '^\{"problems": ' "$FINAL/record.full.log" | tail -1 > "$FINAL/status.json" || true
# every warm compile's seconds (and those stopped, and why one failed), for the cost of the
# warm batches; appended to the recording's compiles.log too, so that they are kept with it
grep -oE "(compiled problem://|compile stopped after ).*" "$FINAL/record.full.log" \
  > "$FINAL/compiles.log" || true
{ echo "# a command of $(date -u +%Y-%m-%dT%H:%M:%SZ), BUDGET=$BUDGET WARM=${WARM:-6}"
  cat "$FINAL/compiles.log"; } >> "$RECORDING/compiles.log"
rm -f "$FINAL/record.full.log"
tar czf - --exclude=_work "$RECORDING" | split -b 15m -d -a 1 - "$FINAL/recording.tgz."
pieces=$(ls "$FINAL"/recording.tgz.* | wc -l)
if [ "$pieces" -gt 6 ]; then
  echo "record_kernelbench_h200.sh: warning: the recording packs into $pieces pieces, more than the 6 that come back: pack only what changed" | tee -a "$FINAL/record.log" >&2
fi
if [ -n "${CACHE:-}" ]; then
  # the files the device tool brings back: 8 in all
  save_compile_cache "$FINAL" $(( 8 - $(ls "$FINAL" | wc -l) )) "${CACHE_MAX_MB:-36}" 2>&1 \
    | tee -a "$FINAL/record.log"
fi
ls -la "$FINAL"
