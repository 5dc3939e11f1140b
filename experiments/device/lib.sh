# Shared by the device scripts: `source "$(dirname "$0")/lib.sh"`.

# The wheels of .whl/ (docs/dataset.md "Recording": gymnasium, stable-baselines3, einops...)
# and of /tmp/wheels/ (staged there by an earlier command on the same machine: Ray's, too
# large to travel with the tree and the other wheels, experiments/device/ray_wheels.sh),
# installed into /tmp/site and put on PYTHONPATH; nothing where neither holds any.
install_wheels() {
  local wheels
  wheels=$(ls .whl/*.whl /tmp/wheels/*.whl 2>/dev/null || true)  # none in one: not an error
  if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site $wheels && export PYTHONPATH=/tmp/site:$PWD
  fi
}

# command_budget BUDGET KILL_S: the recorder's time budget, BUDGET or less: the device tool
# stops a command LIMIT s after it started (default 600) and brings back only what $OUT holds
# by then, so the recorder's deadline, its kill KILL_S s after it (for the work in flight) and
# the packing (PACK_S, default 20 s) must fit in what is left of LIMIT (bash's SECONDS: the
# script's own age). 2026-12-04: BUDGET=570 with a kill 40 s later ran into the 600-s limit,
# and the command's 600 s of recording never came back. Fails where nothing is left.
command_budget() {
  local age=$SECONDS
  local left=$(( ${LIMIT:-600} - age - ${PACK_S:-20} - $2 ))
  if [ "$left" -lt 60 ]; then
    echo "error: only ${left} s would be left to record within the command's LIMIT=${LIMIT:-600} s (started ${age} s ago, ${2} s to stop, ${PACK_S:-20} s to pack): raise LIMIT to the device's limit, or start sooner" >&2
    return 1
  fi
  if [ "$1" -gt "$left" ]; then
    echo "warning: BUDGET=$1 lowered to $left, so that the recorder is stopped (${2} s later) and the recording packed (${PACK_S:-20} s) within the command's LIMIT=${LIMIT:-600} s (started ${age} s ago)" >&2
    echo "$left"
  else
    echo "$1"
  fi
}

# The GPU, torch and ncu, a line each.
machine_facts() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  ${NCU:-ncu} --version | tail -1
}

# KernelBench's commit: KERNELBENCH_COMMIT, else the git checkout at $1 if it is its own (a
# folder inside another repository would give that repository's commit).
kernelbench_commit() {
  if [ -n "${KERNELBENCH_COMMIT:-}" ]; then
    echo "KernelBench commit $KERNELBENCH_COMMIT"
  elif [ -e "$1/.git" ]; then
    git -C "$1" rev-parse HEAD | sed 's/^/KernelBench commit /'
  else
    echo "KernelBench commit unknown (not a git checkout: set KERNELBENCH_COMMIT)"
  fi
}

# The compile caches (Inductor's and Triton's) that the candidates' processes share
# (autoprofiler_env.harness.process.default_cache_dir). A fresh machine starts without them,
# and a KernelBench chunk's first warm batch (level-3 models under max-autotune) outlasts one
# command: they travel between commands as pieces of a tarball in an ignored folder here.
compile_cache_dir() {
  python3 -c 'from autoprofiler_env.harness.process import default_cache_dir; print(default_cache_dir())'
}

# restore_compile_cache DIR: unpack DIR/compile-cache.tgz.* into the cache folder (nothing
# where DIR holds none). Never fails the caller: a cache not restored is compiled again.
restore_compile_cache() {
  local pieces cache
  pieces=$(ls "$1"/compile-cache.tgz.* 2>/dev/null || true)
  [ -n "$pieces" ] || return 0
  cache=$(compile_cache_dir) && [ -n "$cache" ] || {
    echo "compile cache: warning: the harness's cache folder is unknown (autoprofiler_env not importable): not restored" >&2
    return 0
  }
  mkdir -p "$cache" && cat $pieces | tar xzf - -C "$cache" \
    && echo "compile cache: restored $(du -sh "$cache" | cut -f1) from $(echo $pieces | wc -w) piece(s)" \
    || echo "compile cache: warning: the pieces in $1 did not unpack: not restored" >&2
  return 0
}

# save_compile_cache DIR MAX_PIECES MAX_MB: pack the cache folder into DIR/compile-cache.tgz.N
# (15 MB pieces), within MAX_PIECES pieces and MAX_MB (what a later command can carry back
# with the tree), each packing bounded by CACHE_PACK_S seconds (default 60). Where the whole
# folder does not fit, only Inductor's compiled graphs (inductor/fxgraph,
# inductor/aotautograd: the output code of every finished compile, max-autotune's choices
# included; its Triton kernels are built again on load, and a pointwise kernel's own
# autotuned configuration may be benchmarked again); where those do not fit either, nothing,
# with a warning. Prints what each part of the folder takes. Never fails the caller.
save_compile_cache() {
  local cache tmp bytes mb pieces what parts
  cache=$(compile_cache_dir) && [ -n "$cache" ] || {
    echo "compile cache: warning: the harness's cache folder is unknown (autoprofiler_env not importable): not saved" >&2
    return 0
  }
  [ -d "$cache" ] || return 0
  echo "compile cache: $(cd "$cache" && du -sh -- * */* 2>/dev/null | sort -rh | head -8 | tr '\t\n' ' ;')"
  tmp=$(mktemp -d)
  for what in all graphs; do
    if [ "$what" = all ]; then
      parts=.
    else
      parts=$(cd "$cache" && ls -d inductor/fxgraph inductor/aotautograd 2>/dev/null || true)
      [ -n "$parts" ] || break
    fi
    if ! timeout "${CACHE_PACK_S:-60}" tar czf "$tmp/cache.tgz" -C "$cache" $parts; then
      echo "compile cache: $what did not pack within ${CACHE_PACK_S:-60} s" >&2
      continue
    fi
    bytes=$(stat -c %s "$tmp/cache.tgz")
    mb=$(( (bytes + 1048575) / 1048576 ))
    pieces=$(( (bytes + 15728639) / 15728640 ))
    if [ "$pieces" -le "$2" ] && [ "$mb" -le "$3" ]; then
      if split -b 15m -d -a 1 "$tmp/cache.tgz" "$1/compile-cache.tgz."; then
        echo "compile cache: saved $what ($mb MB) in $pieces piece(s)"
        rm -rf "$tmp"
        return 0
      fi
      rm -f "$1"/compile-cache.tgz.*
      echo "compile cache: $what did not split into $1" >&2
      continue
    fi
    echo "compile cache: $what packs into $mb MB ($pieces pieces), more than $3 MB or $2 pieces" >&2
  done
  echo "compile cache: warning: not saved, the next command compiles again" >&2
  rm -rf "$tmp"
  return 0
}

# A recording's state: the sha256 of its device-time log (timings.jsonl), to which every
# command that records anything appends; empty where it has none yet.
recording_state() {
  [ -f "$1/timings.jsonl" ] && sha256sum "$1/timings.jsonl" | cut -d' ' -f1 || true
}

# The states that an earlier command on this machine started from and then advanced, a line
# each, in the machine's temporary folder (it lasts as long as the machine stays warm).
advanced_states() {
  echo "${TMPDIR:-/tmp}/autoprofiler-advanced-recordings"
}

# refuse_stale_recording DIR: fails, saying why, where DIR is a state that an earlier command
# on this machine advanced: the device works on a copy of the checkout, so a command started
# before the last one's recording was unpacked there repeats its work (2026-12-03: 557 s).
# REPEAT=1 runs it anyway.
refuse_stale_recording() {
  local state
  state=$(recording_state "$1")
  if [ -n "$state" ] && [ "${REPEAT:-0}" != 1 ] \
      && grep -qx "$state" "$(advanced_states)" 2>/dev/null; then
    echo "error: $1 is the state that an earlier command on this machine started from and advanced: unpack that command's recording.tgz into the checkout, then run this again (REPEAT=1 runs it anyway, repeating that work)" >&2
    return 1
  fi
}

# note_advanced_recording DIR STATE: after a command that started from STATE, remembers
# STATE as advanced where DIR's state is another now.
note_advanced_recording() {
  if [ -n "${2:-}" ] && [ "$2" != "$(recording_state "$1")" ]; then
    echo "$2" >> "$(advanced_states)"
  fi
  return 0
}

# quiet_log: stdin to stdout without the lines that would bury a recorder's own in the last
# lines that come back (every device script's filter): progress bars (after `tr '\r' '\n'`;
# nested ones end in the terminal's cursor-up, ESC [A: 2026-12-04's ncu bars filled a log),
# Inductor's autotuning chatter
# (its tables, its choice statistics, and the logged tracebacks of the Triton configurations
# it skips for want of shared memory: 150 lines of them hid 2026-12-04's first command's
# final status) and blank lines.
quiet_log() {
  grep -v -E '^(\s|.\[A)*$|it/s\]$|s/(it|unit)\]$|\| *[0-9]+/[0-9?]+ \[[^]]*\](.\[A)*$|^(\S+ )?AUTOTUNE |^(strides|dtypes): |^\s+\S+ [0-9.]+ ms [0-9.]+%|^[EWI][0-9]{4} [0-9:.]+ +[0-9]+ torch/_inductor/|^Autotune Choices Stats:$|^\{"num_choices": ' || true
}
