#!/usr/bin/env bash
# Here (a CPU machine with the package index): Ray and what it needs, as wheels for the
# device machine's Python 3.12, into .whl/ (ignored by git), small enough for one command's
# files there (64 MiB). Ray's wheel is 79 MB, 32 MB of it the jar of its Java workers, which
# a Python-only cluster never starts: the jar is left out of the copy (and out of its RECORD).
#   bash experiments/device/ray_wheels.sh        # then carry .whl to the device
set -euo pipefail
DEST=${DEST:-.whl}
RAY=${RAY_VERSION:-$(python -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$DEST"
python -m pip download -q --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$TMP" "ray==$RAY" 2>&1 | grep -v "is ignored" || true
for wheel in "$TMP"/*.whl; do
  case "$(basename "$wheel")" in
    ray-*) python - "$wheel" "$DEST/$(basename "$wheel")" <<'PY'
import sys, zipfile
source, target = sys.argv[1:]
with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
    for info in src.infolist():
        if info.filename.startswith("ray/jars/"):
            continue
        data = src.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            data = b"".join(line for line in data.splitlines(keepends=True)
                            if not line.startswith(b"ray/jars/"))
        out.writestr(info, data)
PY
    ;;
    *) cp "$wheel" "$DEST/" ;;
  esac
done
du -ch "$DEST"/*.whl | tail -1
