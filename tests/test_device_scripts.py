"""The device scripts' shell helpers that a CPU can run (experiments/device/lib.sh): the
compile cache's trip between two fresh machines, packed in pieces and unpacked again."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _bash(script: str, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp / "machine"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", f"set -eu; source experiments/device/lib.sh; {script}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_the_compile_cache_travels_in_pieces_and_comes_back_the_same(tmp_path):
    from autoprofiler_env.harness.process import default_cache_dir

    (tmp_path / "machine").mkdir()
    cache = tmp_path / "machine" / default_cache_dir().name  # TMPDIR is the machine's /tmp
    inductor = cache / "inductor" / "fxgraph"
    inductor.mkdir(parents=True)
    (inductor / "graph.bin").write_bytes(os.urandom(20 * 1024 * 1024))  # two 15 MB pieces
    (cache / "triton").mkdir()
    (cache / "triton" / "kernel.cubin").write_bytes(b"cubin")
    out = tmp_path / "out"
    out.mkdir()
    saved = _bash(f"save_compile_cache {out} 5 36", tmp_path)
    assert saved.returncode == 0, saved.stderr
    assert sorted(p.name for p in out.iterdir()) == ["compile-cache.tgz.0",
                                                     "compile-cache.tgz.1"]
    assert "MB in 2 piece(s)" in saved.stdout and "compile cache: saved" in saved.stdout
    # a fresh machine: nothing in its cache folder until the pieces are restored
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    restored = _bash(f"restore_compile_cache {out}", tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert (inductor / "graph.bin").stat().st_size == 20 * 1024 * 1024
    assert (cache / "triton" / "kernel.cubin").read_bytes() == b"cubin"
    # nothing to restore is no error; more than the pieces allowed is left out, saying so
    assert _bash(f"restore_compile_cache {tmp_path / 'nowhere'}", tmp_path).returncode == 0
    again = tmp_path / "again"
    again.mkdir()
    refused = _bash(f"save_compile_cache {again} 1 36", tmp_path)
    assert refused.returncode == 0 and not list(again.iterdir())
    assert "not saved, the next command compiles again" in refused.stderr


@pytest.mark.parametrize("script", ["record_kernelbench_h200.sh", "lib.sh"])
def test_the_device_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / "experiments" / "device" / script)]
                          ).returncode == 0
