#!/usr/bin/env bash
# Here (a CPU machine with the package index): Ray and what it needs, as wheels for the
# device machine's Python 3.12. Ray's wheel is 79 MB, 32 MB of it the jar of its Java
# workers, which a Python-only cluster never starts: the jar is left out of the copy (and
# out of its RECORD). The 45 MiB left travel alone (.whl-ray/, ignored by git): with the tree
# (16 MiB) they fill a command's 64 MiB of carried files. Its dependencies go to .whl/.
#   bash experiments/device/ray_wheels.sh
#   device: carry [".whl-ray"], run: mkdir -p /tmp/wheels && cp .whl-ray/*.whl /tmp/wheels/
#   device, next command on the same (warm) machine: carry [".whl"], run the script
#   (experiments/device/lib.sh's install_wheels installs both folders' wheels)
set -euo pipefail
DEST=${DEST:-.whl}
RAY_DEST=${RAY_DEST:-.whl-ray}
RAY=${RAY_VERSION:-$(python -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$DEST" "$RAY_DEST"
python -m pip download -q --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$TMP" "ray==$RAY" 2>&1 | grep -v "is ignored" || true
for wheel in "$TMP"/*.whl; do
  case "$(basename "$wheel")" in
    ray-*) python - "$wheel" "$RAY_DEST/$(basename "$wheel")" <<'PY'
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
du -ch "$RAY_DEST"/*.whl | tail -1
du -ch "$DEST"/*.whl | tail -1
