# Shared by the device scripts: `source "$(dirname "$0")/lib.sh"`.

# The wheels of .whl/ (docs/dataset.md "Recording": gymnasium, stable-baselines3, einops...)
# and of /tmp/wheels/ (staged there by an earlier command on the same machine: Ray's, too
# large to travel with the tree and the other wheels, experiments/device/ray_wheels.sh),
# installed into /tmp/site and put on PYTHONPATH; nothing where neither holds any.
install_wheels() {
  local wheels
  wheels=$(ls .whl/*.whl /tmp/wheels/*.whl 2>/dev/null)
  if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site $wheels && export PYTHONPATH=/tmp/site:$PWD
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
