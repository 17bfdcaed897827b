"""The denial probes' child: tries every escape it is told to, then reports what it saw.

Run by the parent under exactly the confinement of a tool call (``exec_file``), with a job on
stdin naming the targets the parent set up: its own loopback TCP/UDP listeners, Unix sockets,
paths to create, victim files to alter, processes whose environment to read or to signal, a
credential file, the interpreter to spawn, and processes (the parent itself and victims it
started) whose limits, priority and SIGIO ownership to change, the parent's SysV shared memory
segment, message queue and semaphore, and a directory to watch (inotify, fanotify). Then it
tries to pass its own resource caps: 2 GiB of memory, 2 GiB in memfds, 300 threads, each held
for a moment so the parent can watch it from outside. Every attempt is made honestly and its result
recorded, and everything read is echoed back, so the parent can look for secrets in it.

The report is only the child's view. The parent judges each probe by ground truth (a
connection queued on its listener, a file that appeared, a victim that changed, a process
in the child's session, a secret in the child's output, a victim's limits, priority or life,
the child's peak memory and threads), never by this report.
Standard library only: it runs under ``python -I -S``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

_CONNECT_TIMEOUT_S = 2.0


def _attempt(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - every failure is an answer, reported as type and text
        return f"{type(e).__name__}: {e}"
    return "succeeded"


def _tcp(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(_CONNECT_TIMEOUT_S)
        s.connect(("127.0.0.1", port))


def _udp(port: int, payload: bytes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(payload, ("127.0.0.1", port))


def _unix(address: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(_CONNECT_TIMEOUT_S)
        s.connect(address)


def _create(path: str) -> None:
    with open(path, "xb") as f:
        f.write(b"written by the sandbox probe\n")


def _modify(path: str) -> None:
    with open(path, "r+b") as f:
        f.write(b"MODIFIED")


def _read_into(seen: dict[str, str], key: str, path: str) -> None:
    with open(path, "rb") as f:
        seen[key] = f.read(1 << 20).decode("latin-1")


def _spawn_process(interpreter: str) -> None:
    import subprocess

    # Inherits the child's own descriptors: the attempt must not hinge on opening anything.
    subprocess.Popen([interpreter, "-I", "-S", "-c", "import time; time.sleep(30)"])


def _fork() -> None:
    if os.fork() == 0:  # the copy only lingers, so the parent can find it
        time.sleep(30)
        os._exit(0)


_F_SETSIG = 10
_FIOSETOWN = 0x8901
_SIGKILL = 9
_SIGURG = 23
_HOLD_S = 0.4  # how long a resource probe holds what it got, so the parent can see it
_GIB = 1 << 30
_CHUNK = 64 << 20


def _prlimit(pid: int, which: str, limits: tuple[int, int]) -> None:
    import resource

    resource.prlimit(pid, getattr(resource, which), limits)


def _sigio(pid: int, sig: int, *, owner_without_sig: bool) -> None:
    """Make I/O on a pipe of its own signal ``pid`` with ``sig`` (F_SETOWN or FIOSETOWN)."""
    import fcntl
    import struct

    r, w = os.pipe()
    try:
        try:
            fcntl.fcntl(r, _F_SETSIG, sig)
        except OSError:
            if not owner_without_sig:
                raise  # the plain SIGIO would terminate the target: only for a decoy
        try:
            fcntl.fcntl(r, fcntl.F_SETOWN, pid)
        except OSError:
            fcntl.ioctl(r, _FIOSETOWN, struct.pack("i", pid))
        fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
        os.write(w, b"x")
        time.sleep(0.05)
    finally:
        os.close(r)
        os.close(w)


def _memory() -> str:
    """Fill up to 2 GiB of memory, 64 MiB at a time; hold it; say how far it got."""
    blocks: list[bytes] = []
    try:
        while len(blocks) * _CHUNK < 2 * _GIB:
            blocks.append(b"\x01" * _CHUNK)
    except MemoryError:
        pass
    reached = len(blocks) * _CHUNK
    time.sleep(_HOLD_S)
    del blocks
    return f"filled {reached >> 20} MiB"


def _memfd() -> str:
    """Write up to 2 GiB into memfds (memory outside the address space); hold; report."""
    fds: list[int] = []
    total = 0
    data = b"\x01" * (_CHUNK // 4)
    error = ""
    try:
        while total < 2 * _GIB:
            fd = os.memfd_create("harness-probe")
            fds.append(fd)
            for _ in range(16):
                total += os.write(fd, data)
    except OSError as e:
        error = f"; {type(e).__name__}: {e}"
    time.sleep(_HOLD_S)
    for fd in fds:
        os.close(fd)
    return f"wrote {total >> 20} MiB into {len(fds)} memfd(s){error}"


def _threads() -> str:
    """Start up to 300 threads with small stacks; hold them; say how many started."""
    import threading

    threading.stack_size(64 * 1024)
    release = threading.Event()
    started: list[threading.Thread] = []
    error = ""
    try:
        while len(started) < 300:
            t = threading.Thread(target=release.wait, daemon=True)
            t.start()
            started.append(t)
    except RuntimeError as e:
        error = f"; RuntimeError: {e}"
    time.sleep(_HOLD_S)
    release.set()
    for t in started:
        t.join()
    return f"started {len(started)} thread(s){error}"


def _attempt_report(fn: Callable[[], str]) -> str:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - every failure is an answer
        return f"{type(e).__name__}: {e}"


_PLANT_PREFIX = "harness-planted-"
_PTRACE_ATTACH = 16
_PTRACE_DETACH = 17
_CLONE_PARENT = 0x00008000
_SIGCHLD = 17
_NR_CLONE = {"x86_64": 56, "aarch64": 220}


def _plant(nonce: str) -> None:
    """An earlier call: leave the nonce in the environment, module state, memory and a pipe."""
    from harness.tools import catalog

    os.environ["HARNESS_PLANTED"] = nonce
    catalog.__dict__["_harness_planted"] = nonce
    held = [nonce.encode() * 1024]
    r, w = os.pipe()
    os.write(w, nonce.encode())
    sys.modules["__main__"].__dict__["_held"] = (held, r, w)
    sys.stdout.write(f"planted {nonce}")
    sys.stdout.flush()


def _earlier_state() -> str:
    """Look for anything an earlier call left: environment, module state, memory, descriptors."""
    import gc

    found = [v for k, v in os.environ.items() if _PLANT_PREFIX in v or k == "HARNESS_PLANTED"]
    for module in list(sys.modules.values()):
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, str) and _PLANT_PREFIX in value:
                found.append(value)
    in_memory: set[str] = set()
    for obj in gc.get_objects():
        if obj is found or not isinstance(obj, (list, tuple, dict)):
            continue
        for item in list(obj.values() if isinstance(obj, dict) else obj):
            if isinstance(item, (str, bytes)) and len(item) < 1 << 20:
                text = item if isinstance(item, str) else item.decode("latin-1")
                if _PLANT_PREFIX in text:
                    in_memory.add(text[:200])
    found += sorted(in_memory)
    fds = []
    for fd in range(3, 64):
        try:
            os.fstat(fd)
        except OSError:
            continue
        fds.append(fd)
        try:
            os.set_blocking(fd, False)
            found.append(os.read(fd, 4096).decode("latin-1"))
        except OSError:
            pass
    found = [f for f in found if f != _PLANT_PREFIX]
    return f"descriptors {fds}; found {found}"


def _attack(pid: int) -> str:
    """Signal ``pid`` (SIGKILL) and try to ptrace it; say what happened."""
    import ctypes

    results = [_attempt(lambda: os.kill(pid, 9))]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
    if libc.ptrace(_PTRACE_ATTACH, pid, None, None) == 0:
        time.sleep(0.2)  # long enough for the parent's watch to see the tracer
        libc.ptrace(_PTRACE_DETACH, pid, None, None)
        results.append("ptrace attach succeeded")
    else:
        results.append(f"ptrace: {os.strerror(ctypes.get_errno())}")
    return "; ".join(results)


def _outlive() -> str:
    """Try to leave a process behind: a sibling by clone(CLONE_PARENT), and a forked copy."""
    import ctypes

    nr = _NR_CLONE.get(os.uname().machine)
    results = []
    if nr is None:
        results.append("no clone number for this machine")
    else:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        rc = libc.syscall(
            ctypes.c_long(nr), ctypes.c_long(_CLONE_PARENT | _SIGCHLD), None, None, None, None
        )
        if rc == 0:
            time.sleep(30)
            os._exit(0)
        results.append(
            f"clone(CLONE_PARENT): {rc}" + ("" if rc > 0 else f" {os.strerror(ctypes.get_errno())}")
        )
    results.append(_attempt(_fork))
    return "; ".join(results)


_IPC_RMID = 0
_SETVAL = 16
_IPC_NOWAIT = 0o4000
_WATCH_S = 0.6
_IN_NONBLOCK = 0o4000
_IN_CREATE = 0x100
_FAN_NOTIF_FLAGS = 0x2 | 0x400 | 0x800  # FAN_NONBLOCK | FAN_REPORT_DIR_FID | FAN_REPORT_NAME
_FAN_MARK_ADD = 1
_FAN_CREATE_ON_CHILD = 0x100 | 0x08000000 | 0x40000000  # CREATE | EVENT_ON_CHILD | ONDIR
_AT_FDCWD = -100


@functools.cache
def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
    libc.shmdt.argtypes = (ctypes.c_void_p,)
    libc.msgrcv.restype = ctypes.c_ssize_t
    libc.msgrcv.argtypes = (
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_long,
        ctypes.c_int,
    )
    libc.fanotify_mark.argtypes = (
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint64,
        ctypes.c_int,
        ctypes.c_char_p,
    )
    return libc


def _check(rc: int, what: str) -> int:
    import ctypes

    if rc == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc


def _sysv(job: dict[str, Any], seen: dict[str, str]) -> dict[str, str]:
    """Read, overwrite and remove the parent's SysV shared memory, message and semaphore."""
    import ctypes

    libc = _libc()
    out: dict[str, str] = {}

    def shm() -> None:
        addr = libc.shmat(job["shm_id"], None, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            _check(-1, "shmat")
        seen["sysv_shm"] = ctypes.string_at(addr, 64).decode("latin-1")
        ctypes.memmove(addr, b"OVERWRITTEN BY THE PROBE", 24)
        libc.shmdt(ctypes.c_void_p(addr))
        _check(libc.shmctl(job["shm_id"], _IPC_RMID, None), "shmctl(IPC_RMID)")

    def msg() -> None:
        buf = ctypes.create_string_buffer(8 + 256)
        n = _check(libc.msgrcv(job["msg_id"], buf, 256, 0, _IPC_NOWAIT), "msgrcv")
        seen["sysv_msg"] = buf.raw[8 : 8 + n].decode("latin-1")
        _check(libc.msgctl(job["msg_id"], _IPC_RMID, None), "msgctl(IPC_RMID)")

    def sem() -> None:
        _check(libc.semctl(job["sem_id"], 0, _SETVAL, ctypes.c_int(0)), "semctl(SETVAL)")
        _check(libc.semctl(job["sem_id"], 0, _IPC_RMID), "semctl(IPC_RMID)")

    out["sysv_shm"] = _attempt(shm)
    out["sysv_msg"] = _attempt(msg)
    out["sysv_sem"] = _attempt(sem)
    return out


def _watch(directory: str, seen: dict[str, str]) -> dict[str, str]:
    """Watch a directory it cannot list (inotify, fanotify); keep whatever events name."""
    import select

    libc = _libc()
    fds: dict[str, int] = {}

    def inotify() -> None:
        fd = _check(libc.inotify_init1(_IN_NONBLOCK), "inotify_init1")
        fds["inotify_watch"] = fd
        _check(libc.inotify_add_watch(fd, directory.encode(), _IN_CREATE), "inotify_add_watch")

    def fanotify() -> None:
        fd = _check(libc.fanotify_init(_FAN_NOTIF_FLAGS, os.O_RDONLY), "fanotify_init")
        fds["fanotify_watch"] = fd
        mark = libc.fanotify_mark(
            fd, _FAN_MARK_ADD, _FAN_CREATE_ON_CHILD, _AT_FDCWD, directory.encode()
        )
        _check(mark, "fanotify_mark")

    out = {"inotify_watch": _attempt(inotify), "fanotify_watch": _attempt(fanotify)}
    watching = {fd: name for name, fd in fds.items() if out[name] == "succeeded"}
    events: dict[str, list[bytes]] = {name: [] for name in watching.values()}
    deadline = time.monotonic() + _WATCH_S
    while watching and (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(list(watching), [], [], left)
        for fd in ready:
            with contextlib.suppress(BlockingIOError):
                events[watching[fd]].append(os.read(fd, 65536))
    for name, chunks in events.items():
        seen[name] = b"".join(chunks).decode("latin-1")
        out[name] += f"; {len(chunks)} event read(s)"
    for fd in fds.values():
        os.close(fd)
    return out


def main() -> None:
    """Read the job from stdin, attempt every probe, write the report to stdout."""
    job = json.loads(sys.stdin.buffer.read())
    if "plant" in job:
        _plant(job["plant"])
        return
    if "sibling_s" in job:
        time.sleep(job["sibling_s"])
        sys.stdout.write("sibling finished")
        return
    attempts: dict[str, str] = {}
    seen: dict[str, str] = {}
    attempts["earlier_call_state"] = _attempt_report(_earlier_state)
    seen["earlier_call_state"] = attempts["earlier_call_state"]
    attempts["signal_sibling"] = _attempt_report(lambda: _attack(job["sibling_pid"]))
    # The zygote is attacked last, after the report is out: if the attack worked, this child
    # dies with its zygote, and everything else must already have been judged.
    attempts["signal_zygote"] = "attempted after this report" if job["zygote_pid"] else "none"
    attempts["tcp_loopback"] = _attempt(lambda: _tcp(job["tcp_port"]))
    attempts["udp_loopback"] = _attempt(lambda: _udp(job["udp_port"], job["nonce"].encode("ascii")))
    attempts["unix_socket_path"] = _attempt(lambda: _unix(job["unix_path"]))
    attempts["unix_socket_abstract"] = _attempt(lambda: _unix("\0" + job["unix_abstract"]))
    for name, path in job["create"].items():
        attempts[name] = _attempt(functools.partial(_create, path))
    victims = job["victims"]
    attempts["victim_modify"] = _attempt(lambda: _modify(victims["victim_modify"]))
    attempts["victim_truncate"] = _attempt(lambda: os.truncate(victims["victim_truncate"], 0))
    attempts["victim_chmod"] = _attempt(lambda: os.chmod(victims["victim_chmod"], 0o600))
    attempts["victim_utime"] = _attempt(lambda: os.utime(victims["victim_utime"], None))
    attempts["victim_xattr"] = _attempt(
        lambda: os.setxattr(victims["victim_xattr"], "user.sandbox_probe", b"1")
    )
    attempts["victim_unlink"] = _attempt(lambda: os.unlink(victims["victim_unlink"]))
    seen["env"] = json.dumps(dict(os.environ), sort_keys=True)
    attempts["credential_env"] = _attempt(
        functools.partial(_read_into, seen, "self_environ", "/proc/self/environ")
    )
    attempts["parent_environ"] = "; ".join(
        _attempt(functools.partial(_read_into, seen, f"environ_{pid}", f"/proc/{pid}/environ"))
        for pid in job["environ_pids"]
    )
    attempts["credential_file"] = _attempt(
        functools.partial(_read_into, seen, "credential_file", job["credential_file"])
    )
    attempts["signal_other"] = _attempt(lambda: os.kill(job["signal_pid"], 15))
    attempts["spawn_subprocess"] = "; ".join(
        (_attempt(lambda: _spawn_process(job["interpreter"])), _attempt(_fork))
    )
    parent, limits_victim, sigio_victim = (
        job["parent_pid"],
        job["limits_victim"],
        job["sigio_victim"],
    )
    attempts["prlimit_parent"] = _attempt(
        lambda: _prlimit(parent, "RLIMIT_RTTIME", (job["rttime_mark"], -1))
    )
    attempts["prlimit_victim"] = _attempt(lambda: _prlimit(limits_victim, "RLIMIT_NOFILE", (3, 3)))
    attempts["setpriority_parent"] = _attempt(lambda: os.setpriority(os.PRIO_PROCESS, parent, 7))
    attempts["setpriority_victim"] = _attempt(
        lambda: os.setpriority(os.PRIO_PROCESS, limits_victim, 19)
    )
    attempts["sigio_parent"] = _attempt(lambda: _sigio(parent, _SIGURG, owner_without_sig=False))
    attempts["sigio_victim"] = _attempt(
        lambda: _sigio(sigio_victim, _SIGKILL, owner_without_sig=True)
    )
    attempts.update(_sysv(job, seen))
    attempts.update(_watch(job["watched_dir"], seen))
    attempts["memfd_huge"] = _attempt_report(_memfd)
    attempts["memory_2gib"] = _attempt_report(_memory)
    attempts["threads_300"] = _attempt_report(_threads)
    attempts["outlive_reply"] = _attempt_report(_outlive)
    attempts["zygote_state"] = "judged by the parent alone"
    sys.stdout.write(json.dumps({"done": True, "attempts": attempts, "seen": seen}))
    sys.stdout.flush()
    if job["zygote_pid"] is not None:
        sys.stderr.write(f"signal_zygote: {_attempt_report(lambda: _attack(job['zygote_pid']))}\n")
        sys.stderr.flush()


if __name__ == "__main__":
    main()
