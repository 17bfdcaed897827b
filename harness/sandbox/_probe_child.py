"""The denial probes' child: tries every escape it is told to, then reports what it saw.

Run by the parent under exactly the confinement of a tool call (``exec_file``), with a job on
stdin naming the targets the parent set up: its own loopback TCP/UDP listeners, Unix sockets,
paths to create, victim files to alter, processes whose environment to read or to signal, a
credential file, the interpreter to spawn, and processes (the parent itself and victims it
started) whose limits, priority and SIGIO ownership to change. Then it tries to pass its own
resource caps: 2 GiB of memory, 2 GiB in memfds, 300 threads, each held for a moment so the
parent can watch it from outside. Every attempt is made honestly and its result
recorded, and everything read is echoed back, so the parent can look for secrets in it.

The report is only the child's view. The parent judges each probe by ground truth (a
connection queued on its listener, a file that appeared, a victim that changed, a process
in the child's session, a secret in the child's output, a victim's limits, priority or life,
the child's peak memory and threads), never by this report.
Standard library only: it runs under ``python -I -S``.
"""

from __future__ import annotations

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


def main() -> None:
    """Read the job from stdin, attempt every probe, write the report to stdout."""
    job = json.loads(sys.stdin.buffer.read())
    attempts: dict[str, str] = {}
    seen: dict[str, str] = {}
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
    attempts["memfd_huge"] = _attempt_report(_memfd)
    attempts["memory_2gib"] = _attempt_report(_memory)
    attempts["threads_300"] = _attempt_report(_threads)
    sys.stdout.write(json.dumps({"done": True, "attempts": attempts, "seen": seen}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
