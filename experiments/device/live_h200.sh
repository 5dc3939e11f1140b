#!/usr/bin/env bash
# On a GPU machine, inside one time-limited command: an experiment's runs played live
# (experiments/live.py), the experiment's replay runs made beforehand on a CPU and carried:
#   autoprofiler experiment --config compare --out runs/experiment/compare      # here, on a CPU
#   OUT=results CONFIG=compare_live EXP=runs/experiment/compare BUDGET=360 [WORKERS=1|ray] \
#     [PROBLEMS="uri uri"] bash experiments/device/live_h200.sh                 # there
# carrying EXP and .whl: the docs/dataset.md wheels and the experiment's (rliable 1.2 is an
# sdist on PyPI, built here; arch 7, which it needs, does not import under pandas 3, and
# pandas 2 needs pytz, which the device's pandas 3 did not bring):
#   python -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d .whl \
#       "arch<8" "pandas<3" sb3-contrib pytz tzdata python-dateutil six
#   python -m pip wheel --no-deps "rliable==1.2.0" -w .whl
# A command carries at most 64 MiB with the working tree (38.5 MB on 2026-12-05): carry a copy
# of EXP with what the live units read only (each agents/*/seed-N's tree.json or
# best_model.zip and run.json, runs/, settings.json, the leaderboard files; 6.6 MB for
# compare's 36 MB): the replay runs are reused from runs/ alone.
# PROBLEMS plays only those problems of the splits (live.problems); the rows of a sample count
# for the whole later. Resumable: bring live.tgz back into EXP, carry EXP again, run again.
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
install_wheels
FINAL=${OUT:-results}
EXP=${EXP:?set EXP to the experiment folder (its replay runs made on a CPU)}
export PYTHONUNBUFFERED=1
mkdir -p "$FINAL"
machine_facts | tee "$FINAL/machine.txt"
CONFIG=$(python3 - "${CONFIG:-compare_live}" "${PROBLEMS:-}" <<'EOF'
import sys

import yaml

from experiments.experiment import config_path

path, problems = config_path(sys.argv[1]), sys.argv[2].split()
if not problems:
    print(path)
else:
    data = yaml.safe_load(path.read_text())
    data.setdefault("live", {})["problems"] = problems
    out = "/tmp/live-config.yaml"
    with open(out, "w") as f:
        yaml.safe_dump(data, f)
    print(out)
EOF
)
# no problem starts after BUDGET s of live play; one in flight stops between episodes 60 s
# later (experiments/live.py); the replay's aggregation before it and an episode's own
# length get the rest of the margin below a 600 s command
timeout -s TERM $(( ${BUDGET:-360} + 180 )) python3 -m experiments.cli experiment --config "$CONFIG" \
  --out "$EXP" --workers "${WORKERS:-1}" --time-budget "${BUDGET:-360}" 2>&1 | tr '\r' '\n' \
  | quiet_log | tee "$FINAL/live.log" | tail -60
tar czf "$FINAL/live.tgz" -C "$EXP" live
ls -la "$FINAL"
