"""The sandbox of a candidate's process: what it may see and do, set up before any of its code
runs. docs/harness.md says what each part stops and what it does not.

The judge starts the process with a scrubbed environment (:func:`scrubbed_environment`) in a
fresh temporary folder; the process then calls :func:`isolate` before it imports torch:

- it dies with its parent (``PR_SET_PDEATHSIG``), in a session of its own;
- new network, mount and PID namespaces (as root, or in a user namespace where unprivileged
  ones are allowed): no network, not even loopback; every file system read-only except its
  temporary folder, the shared compile cache and ``/dev``; its own ``/proc``; and when it
  exits, everything it started dies with it (it is PID 1 of its namespace);
- no capabilities (bounding set emptied, ``no_new_privs``), so it cannot mount or remount;
- resource limits: file size, core dumps, CPU time, and on a CPU device address space.

Each step is tried and reported: :func:`isolate` returns what it achieved, which the result
carries (``EvalResult.isolation``); where the OS allows none of it, the result says so. The
namespaces, ``PR_SET_PDEATHSIG`` and the capabilities are Linux's: elsewhere (macOS) only the
resource limits and the session of its own are had, and the report says so.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from autoprofiler_env.processes import die_with_parent

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, \
    0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38

_MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
_KEEP_RW = ("/dev", "/proc")  # device nodes (the GPU) and the process's own /proc

ENV_KEEP = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONHASHSEED",
            "LD_LIBRARY_PATH", "LD_PRELOAD", "CC", "CXX", "SHELL", "USER", "LOGNAME",
            "VIRTUAL_ENV", "CONDA_PREFIX"}
ENV_KEEP_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "CUBLAS_", "CUDNN_", "NCCL_", "TORCH_",
                     "TORCHINDUCTOR_", "TORCHDYNAMO_", "TRITON_", "OMP_", "MKL_", "OPENBLAS_",
                     "KMP_", "PYTORCH_", "NVTE_")
ENV_SECRET_MARKS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH",
                    "COOKIE", "SESSION", "PROXY")


def scrubbed_environment(base: dict, home: str, cache_dir: str) -> dict:
    """The environment a candidate's process starts with: what torch, CUDA, Triton and the
    compilers need, nothing with a secret-like name (``*KEY*``, ``*TOKEN*``, proxies, ...);
    its home and temporary folder are its own, its compile caches the shared ``cache_dir``."""
    env = {}
    for name, value in base.items():
        upper = name.upper()
        if any(mark in upper for mark in ENV_SECRET_MARKS):
            continue
        if name in ENV_KEEP or name.startswith(ENV_KEEP_PREFIXES):
            env[name] = value
    env.update(HOME=home, TMPDIR=home, XDG_CACHE_HOME=os.path.join(home, ".cache"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"),
               CUDA_CACHE_PATH=os.path.join(cache_dir, "cuda"),
               PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    return env


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _err(what: str) -> str:
    e = ctypes.get_errno()
    return f"{what}: {os.strerror(e)}" if e else what


def _unshare(libc, flags: int) -> bool:
    return libc.unshare(flags) == 0


def _map_user(uid: int, gid: int) -> None:
    """In a fresh user namespace: this process is root inside, ``uid`` outside."""
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                       ("/proc/self/gid_map", f"0 {gid} 1")):
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError:
            pass


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def _mounts() -> list[tuple[str, int]]:
    """(mount point, per-mount flags to keep) from /proc/self/mountinfo, shortest first."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 6:
                continue
            flags = 0
            for opt in fields[5].split(","):
                flags |= _MOUNT_FLAGS.get(opt, 0)
            out.append((_unescape(fields[4]), flags))
    return sorted(set(out), key=lambda m: (m[0].count("/"), m[0]))


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _read_only_filesystem(libc, writable: list[str]) -> str:
    """Every mount read-only except ``writable`` (bound onto themselves first), /dev and
    /proc. Returns what it achieved."""
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return "not isolated: " + _err("making / private failed")
    for path in writable:
        if libc.mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None) != 0:
            return "not isolated: " + _err(f"binding {path} failed")
    failed = []
    for point, flags in _mounts():
        if _under(point, _KEEP_RW) or _under(point, writable):
            continue
        if libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags,
                      None) != 0:
            failed.append(point)
    if "/" in failed:
        return "not isolated: " + _err("remounting / read-only failed")
    note = f" ({len(failed)} mounts left writable: {', '.join(failed[:3])})" if failed else ""
    return "read-only except its folder, the compile cache and /dev" + note


def _own_proc(libc) -> None:
    """A /proc of the new PID namespace (the judge's processes are not in it), with its
    /proc/sys read-only."""
    if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0:
        libc.mount(b"/proc/sys", b"/proc/sys", None, MS_BIND, None)
        libc.mount(None, b"/proc/sys", None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)


def _drop_capabilities(libc) -> str:
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return "not dropped: " + _err("capset failed")
    return "none (bounding set empty, no_new_privs)"


def _limits(cpu_seconds: float | None, address_space: int | None) -> dict:
    try:
        import resource
    except ImportError:  # not a POSIX system
        return {}
    applied = {}
    wanted = [(resource.RLIMIT_CORE, 0, "core"),
              (resource.RLIMIT_FSIZE, 4 << 30, "file_size")]
    if cpu_seconds:
        wanted.append((resource.RLIMIT_CPU, int(cpu_seconds), "cpu_s"))
    if address_space:
        wanted.append((resource.RLIMIT_AS, int(address_space), "address_space"))
    if os.geteuid() != 0:  # the kernel does not apply RLIMIT_NPROC to root
        wanted.append((resource.RLIMIT_NPROC, 4096, "processes"))
    for which, value, name in wanted:
        try:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, hard))
            applied[name] = value
        except (ValueError, OSError):
            pass
    return applied


def isolate(parent_pid: int, writable: list[str], cpu_seconds: float | None = None,
            address_space: int | None = None) -> dict:
    """Isolates the calling process (a candidate's worker, before it imports anything heavy).

    May fork: when a PID namespace is made, the calling process stays outside it, waits for
    its child (PID 1 inside) and exits with its status; only the child returns. Returns what
    was achieved, per part.
    """
    report = {"environment": "scrubbed (docs/harness.md lists what is kept)",
              "parent_death": "SIGKILL"}
    die_with_parent(parent_pid)
    if not sys.platform.startswith("linux"):
        reason = f"namespaces are Linux's, not {sys.platform}'s"
        report.update(parent_death=f"not tied (PR_SET_PDEATHSIG is Linux's, not "
                                   f"{sys.platform}'s): a judge killed outright may leave it "
                                   "running",
                      network=f"not isolated: {reason}",
                      processes=f"a process group of its own; not isolated otherwise: {reason}",
                      filesystem=f"not isolated: {reason}",
                      capabilities=f"not dropped: capabilities are Linux's, not "
                                   f"{sys.platform}'s",
                      limits=_limits(cpu_seconds, address_space))
        return report
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    namespaces = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
    made = 0
    if _unshare(libc, namespaces):
        made = namespaces
    elif _unshare(libc, namespaces | CLONE_NEWUSER):
        made = namespaces
        _map_user(uid, gid)
        report["user"] = f"root inside a user namespace, uid {uid} outside"
    else:
        for flag in (CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID):
            if _unshare(libc, flag):
                made |= flag
    reason = "the OS refused the namespace (run as root, or allow unprivileged user namespaces)"
    report["network"] = "none (a new network namespace)" if made & CLONE_NEWNET else \
        f"not isolated: {reason}"
    if made & CLONE_NEWPID:
        _wait_and_exit_as(os.fork())  # outside the namespace: returns only in the child
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        report["processes"] = "in a new PID namespace: all it starts dies with it"
    else:
        report["processes"] = f"a process group of its own; not isolated otherwise: {reason}"
    if made & CLONE_NEWNS:
        report["filesystem"] = _read_only_filesystem(libc, writable)
        if made & CLONE_NEWPID:
            _own_proc(libc)
    else:
        report["filesystem"] = f"not isolated: {reason}"
    report["capabilities"] = _drop_capabilities(libc)
    report["limits"] = _limits(cpu_seconds, address_space)
    if made & CLONE_NEWPID:
        # This process is PID 1 of the namespace, which ignores the signals it has no handler
        # for (abort() would end as SIGSEGV): it stays a reaper, the worker is its child.
        _wait_and_exit_as(os.fork(), reaper=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return report


def _wait_and_exit_as(child: int, reaper: bool = False) -> None:
    """In the parent of a fork: waits for ``child`` (reaping any orphan meanwhile) and exits
    the way it did; in the child (``child == 0``) returns at once."""
    if child == 0:
        return
    os.closerange(3, 1 << 16)
    while True:
        pid, status = os.waitpid(-1 if reaper else child, 0)
        if pid == child:
            break
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if not reaper:  # die of the same signal, so the judge sees it
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    if not reaper and code > 128 and code - 128 in signal.valid_signals():
        signal.signal(code - 128, signal.SIG_DFL)  # the reaper's way of saying "signal N"
        os.kill(os.getpid(), code - 128)
    os._exit(code)
