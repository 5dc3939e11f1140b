"""The device scripts' shell helpers that a CPU can run (experiments/device/lib.sh): the
compile cache's trip between two fresh machines, packed in pieces and unpacked again, and the
refusal of a recording command that would repeat the last one's work."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _bash(script: str, tmp: Path, options: str = "-eu") -> subprocess.CompletedProcess:
    """``script`` after sourcing lib.sh, under ``set OPTIONS`` (the record scripts run
    ``set -u -o pipefail``), with the machine's /tmp in ``tmp``."""
    env = {**os.environ, "TMPDIR": str(tmp / "machine"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["bash", "-c", f"set {options}; source experiments/device/lib.sh; {script}; echo end"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _machine_cache(tmp_path: Path) -> Path:
    from autoprofiler_env.harness.process import default_cache_dir

    (tmp_path / "machine").mkdir(exist_ok=True)
    return tmp_path / "machine" / default_cache_dir().name  # TMPDIR is the machine's /tmp


def test_the_compile_cache_travels_in_pieces_and_comes_back_the_same(tmp_path):
    cache = _machine_cache(tmp_path)
    graphs = cache / "inductor" / "fxgraph"
    graphs.mkdir(parents=True)
    (graphs / "graph.bin").write_bytes(os.urandom(20 * 1024 * 1024))  # two 15 MB pieces
    (cache / "triton").mkdir()
    (cache / "triton" / "kernel.cubin").write_bytes(b"cubin")
    out = tmp_path / "out"
    out.mkdir()
    saved = _bash(f"save_compile_cache {out} 5 36", tmp_path)
    assert saved.returncode == 0, saved.stderr
    assert sorted(p.name for p in out.iterdir()) == ["compile-cache.tgz.0",
                                                     "compile-cache.tgz.1"]
    assert "compile cache: saved all (" in saved.stdout and "in 2 piece(s)" in saved.stdout
    # a fresh machine: nothing in its cache folder until the pieces are restored
    shutil.rmtree(cache)
    restored = _bash(f"restore_compile_cache {out}", tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert (graphs / "graph.bin").stat().st_size == 20 * 1024 * 1024
    assert (cache / "triton" / "kernel.cubin").read_bytes() == b"cubin"
    # nothing to restore is no error; more than the pieces allowed is left out, saying so
    assert _bash(f"restore_compile_cache {tmp_path / 'nowhere'}", tmp_path).returncode == 0
    again = tmp_path / "again"
    again.mkdir()
    refused = _bash(f"save_compile_cache {again} 1 36", tmp_path)
    assert refused.returncode == 0 and not list(again.iterdir())
    assert "not saved, the next command compiles again" in refused.stderr


def test_a_cache_too_large_to_carry_keeps_inductors_compiled_graphs(tmp_path):
    cache = _machine_cache(tmp_path)
    graphs = cache / "inductor" / "fxgraph"
    graphs.mkdir(parents=True)
    (graphs / "entry").write_bytes(b"graph" * 1000)
    (cache / "triton").mkdir()
    (cache / "triton" / "autotune.cubin").write_bytes(os.urandom(3 * 1024 * 1024))
    out = tmp_path / "out"
    out.mkdir()
    saved = _bash(f"save_compile_cache {out} 5 2", tmp_path)  # 2 MB at most
    assert saved.returncode == 0, saved.stderr
    assert "all packs into" in saved.stderr and "saved graphs (1 MB)" in saved.stdout
    shutil.rmtree(cache)
    assert _bash(f"restore_compile_cache {out}", tmp_path).returncode == 0
    assert (graphs / "entry").read_bytes() == b"graph" * 1000
    assert not (cache / "triton").exists()


@pytest.mark.parametrize("options", ["-eu", "-u -o pipefail"])
def test_a_cache_folder_that_cannot_be_known_is_a_warning_not_a_failure(tmp_path, options):
    """Without the package importable the harness's cache folder is unknown: both functions
    say so and return, the recording's command goes on (and nothing is unpacked into '')."""
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / "compile-cache.tgz.0").write_bytes(b"not a tarball")
    broken = "compile_cache_dir() { python3 -c 'import no_such_module'; }"
    for call in (f"restore_compile_cache {pieces}", f"save_compile_cache {tmp_path} 5 36"):
        done = _bash(f"{broken}; {call}", tmp_path, options)
        assert done.returncode == 0 and done.stdout.endswith("end\n"), done.stderr
        assert "cache folder is unknown" in done.stderr
    # pieces that do not unpack: a warning, and the command goes on
    cache = _machine_cache(tmp_path)
    done = _bash(f"restore_compile_cache {pieces}", tmp_path, options)
    assert done.returncode == 0 and "did not unpack" in done.stderr
    assert cache.is_dir()


def test_a_command_started_from_a_state_another_advanced_is_refused(tmp_path):
    """The device works on a copy of the checkout: a recording command started before the
    last one's recording was unpacked there starts from the state that one advanced, and is
    refused (REPEAT=1 runs it anyway); a state no command advanced, or a fresh machine, is
    not."""
    (tmp_path / "machine").mkdir()
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "timings.jsonl").write_text('{"part": "full", "wall_s": 1.0}\n')
    start = f"START=$(recording_state {rec}); refuse_stale_recording {rec}"
    advance = f"echo '{{\"part\": \"candidates\"}}' >> {rec}/timings.jsonl"
    first = _bash(f"{start}; {advance}; note_advanced_recording {rec} \"$START\"", tmp_path)
    assert first.returncode == 0, first.stderr
    (rec / "timings.jsonl").write_text('{"part": "full", "wall_s": 1.0}\n')  # not unpacked
    again = _bash(start, tmp_path)
    assert again.returncode == 1 and "unpack that command's recording.tgz" in again.stderr
    assert _bash(f"REPEAT=1; {start}", tmp_path).returncode == 0
    # the advanced state itself (unpacked), or a command that changed nothing: no refusal
    (rec / "timings.jsonl").write_text('{"part": "full", "wall_s": 1.0}\n{"part": "candidates"}\n')
    unchanged = _bash(f"{start}; note_advanced_recording {rec} \"$START\"; {start}", tmp_path)
    assert unchanged.returncode == 0, unchanged.stderr
    # a fresh machine remembers nothing; a recording without a log yet is never refused
    shutil.rmtree(tmp_path / "machine")
    (tmp_path / "machine").mkdir()
    (rec / "timings.jsonl").write_text('{"part": "full", "wall_s": 1.0}\n')
    assert _bash(start, tmp_path).returncode == 0
    (rec / "timings.jsonl").unlink()
    assert _bash(f"{start}; note_advanced_recording {rec} \"$START\"", tmp_path).returncode == 0


def test_the_log_filter_drops_inductors_autotuning_chatter_and_keeps_the_recorders_lines(
        tmp_path):
    kept = ['compiled problem://kernelbench/level1/38_L1Norm_ compile: 30 s',
            '\x1b[A\x1b[Acompiled problem://kernelbench/level3/27_RegNet compile+tf32: 19 s',
            '{"problems": 250, "complete": 69, "failed": 10}',
            'autoprofiler: the time budget ran out; run the same command again to go on',
            'E1204 11:47:28.394000 2 autoprofiler_env/harness/worker.py:1] an error of ours']
    dropped = [  # lines of 2026-12-04's first recording command on the H200
        ('E1204 11:47:28.394000 2 torch/_inductor/select_algorithm.py:3541] [0/0] '
         'RuntimeError: No valid triton configs. OutOfMemoryError: out of resource'),
        'Autotune Choices Stats:',
        '{"num_choices": 16, "num_triton_choices": 15, "best_kernel": "convolution"}',
        'AUTOTUNE convolution(128x3x224x224, 64x3x3x3)',
        'judge and time:  43%|####      | 9/21 [01:44<02:10, 10.86s/it]',
        'units:  50%|#####     | 2/4 [00:10<00:10,  5.01s/unit]', '   ',
        'ncu full:   0%|          | 0/1 [00:00<?, ?run/s]\x1b[A',  # nested bars: cursor up
        'judge and time:  48%|####8     | 10/21 [04:30<10:17, 56.17s/it]\x1b[A',
        'kernelbench chunks:  25%|##5       | 8/32 [02:47<00:00, 69.21chunk/s]',
        '                                                      \x1b[A\x1b[A']
    log = tmp_path / "record.log"
    log.write_text("\n".join(dropped[:3] + kept[:2] + dropped[3:] + kept[2:]) + "\n")
    run = _bash(f"quiet_log < {log}", tmp_path, options="-u -o pipefail")
    assert run.returncode == 0 and run.stdout.splitlines() == [*kept, "end"]
    nothing = _bash("echo | quiet_log", tmp_path, options="-u -o pipefail")
    assert nothing.returncode == 0 and nothing.stdout == "end\n"  # no line left is no error


def test_a_budget_that_would_outlast_the_commands_limit_is_lowered(tmp_path):
    """The device tool stops a command at its limit and brings back only what $OUT holds: the
    recorder's budget, its kill after it and the packing must all end within LIMIT
    (2026-12-04: BUDGET=570 with a kill 40 s later ran into the 600-s limit, nothing came
    back)."""
    kept = _bash("command_budget 520 40", tmp_path)
    assert kept.returncode == 0 and kept.stdout.split() == ["520", "end"] and not kept.stderr
    # the script's age is read once, and the warning says it: a loaded machine may take a
    # second to source lib.sh (CI, 2026-12-06: 539 where a test without the age expected 540)
    lowered = _bash("command_budget 570 40", tmp_path)
    age = int(re.search(r"started (\d+) s ago", lowered.stderr).group(1))
    assert age < 10 and lowered.returncode == 0
    assert lowered.stdout.split() == [str(540 - age), "end"]
    assert f"BUDGET=570 lowered to {540 - age}" in lowered.stderr
    # time already spent (wheels, the self-check) counts; a raised LIMIT raises the cap
    late = _bash("SECONDS=100; command_budget 520 40", tmp_path)
    age = int(re.search(r"started (\d+) s ago", late.stderr).group(1))
    assert age >= 100 and late.stdout.split() == [str(540 - age), "end"]
    assert _bash("LIMIT=900 command_budget 570 40", tmp_path).stdout.split() == ["570", "end"]
    nothing = _bash("LIMIT=100 command_budget 520 40", tmp_path)
    age = int(re.search(r"started (\d+) s ago", nothing.stderr).group(1))
    assert nothing.returncode == 1 and f"only {40 - age} s would be left" in nothing.stderr


@pytest.mark.skipif(Path("/tmp/wheels").exists(), reason="this machine has staged wheels")
def test_installing_no_wheels_goes_on_under_set_e(tmp_path):
    """Reviewed (2026-12-07, on a device): reference_pinning.sh, under ``set -euo
    pipefail``, stopped at install_wheels without a word: the ``ls`` of the missing
    /tmp/wheels failed the assignment."""
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {ROOT}/experiments/device/lib.sh; "
                       "install_wheels; echo end"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "end\n", done


@pytest.mark.parametrize("script", ["record_kernelbench_h200.sh", "record_h200.sh",
                                    "fanout_h200.sh", "fidelity_h200.sh", "judge_h200.sh",
                                    "live_h200.sh", "reference_pinning.sh", "lib.sh"])
def test_the_device_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / "experiments" / "device" / script)]
                          ).returncode == 0
