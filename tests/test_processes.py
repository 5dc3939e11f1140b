"""Child processes that never outlive what started them (autoprofiler_env/processes.py)."""

import subprocess
import sys
import time

WATCHER = """import sys, time
from autoprofiler_env.processes import exit_with
exit_with(int(sys.argv[1]))
print("watching", flush=True)
time.sleep(600)
"""


def _watcher(pid: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WATCHER, str(pid)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)


def test_a_process_exits_with_one_that_is_not_its_parent_when_that_one_is_killed():
    """As the program ncu profiles does with the profiler: ncu, not the profiler, is its
    parent, in a session of its own, and a SIGKILL of the profiler reaches neither."""
    profiler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    watcher = _watcher(profiler.pid)
    try:
        assert watcher.stdout.readline().strip() == "watching"
        time.sleep(0.5)
        assert watcher.poll() is None  # the profiler alive: it goes on
        profiler.kill()
        profiler.wait()
        assert watcher.wait(timeout=10) == 1
    finally:
        for process in (profiler, watcher):
            process.kill()
            process.wait()


def test_a_process_exits_at_once_where_the_one_it_goes_with_is_gone():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process
    watcher = _watcher(gone.pid)
    try:
        assert watcher.wait(timeout=30) == 1 and watcher.stdout.read() == ""
    finally:
        watcher.kill()
        watcher.wait()
