"""Denial probes: try to break out of the sandbox and judge by ground truth in the parent.

First a positive control: a normal tool call (echo) must succeed, so a broken sandbox that
kills every child is not mistaken for a strict one. Then one confined child (run exactly as a
tool call is, through ``exec_file``) attempts every escape against targets the parent set up:

- TCP and UDP to listeners the parent opened on 127.0.0.1 (never any other address), a Unix
  socket by path and an abstract one: denied when nothing arrived at the parent's end;
- creating a file in its working directory, /tmp, /var/tmp, /dev/shm and a store directory:
  denied when no file appeared;
- modifying, truncating, chmod, utime, setxattr and unlinking victim files: denied when the
  victim is byte-for-byte and stat-for-stat unchanged;
- reading planted credential variables (the environment it was offered holds them), the
  environment of its parent and of another process of the same user, and a credential file:
  denied when no secret appears anywhere in its stdout or stderr;
- signalling another process of the same user: denied when that process is still alive;
- spawning a subprocess (exec and fork): denied when no process but the child (and, in a tier
  with a pid namespace, its own pid 1) was seen in its session while it ran or after;
- changing the limits (``prlimit``) and priority (``setpriority``) of the parent and of a
  victim process the parent started, and making I/O signal them (``F_SETOWN``/``FIOSETOWN``
  with ``F_SETSIG``): denied when the parent's own limits and priority, the victim's
  ``/proc/PID/limits`` and priority are unchanged, no SIGURG reached the parent and the
  victim is alive;
- reading, overwriting and removing the parent's SysV shared memory segment, taking its queued
  message and resetting its semaphore (all mode 0600, reached by id, never created): denied when
  each is still there, unchanged, and no nonce it holds is in the child's output;
- watching a directory it cannot list (inotify, fanotify) while the parent creates files with
  secret names in it: denied when no such name is in the child's output;
- passing its own resource caps: denied when its peak resident memory stayed under 2 GiB, the
  machine's shared memory did not grow by 1 GiB (memfds) and it never had 300 threads (watched
  in ``/proc`` from outside while it ran).

The child's own report is shown beside each verdict but never decides one. A target the parent
cannot set up on this machine (no /var/tmp, no user xattrs) is "not applicable" rather than
silently passed; every other probe must be denied for the report to pass.

This module does not pick a backend; it probes the one it is given.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.errors import SandboxProbeError, SandboxZygoteError
from harness.log import get_logger
from harness.sandbox._backend import ChildBackend
from harness.sandbox._open import self_test
from harness.sandbox._policy import NO_TASK_CAP
from harness.sandbox._result import BackendInfo, RunResult
from harness.sandbox._runner import child_env

__all__ = [
    "PROBE_NAMES",
    "ProbeReport",
    "ProbeResult",
    "ProbeVerdict",
    "render_table",
    "run_probes",
]

PROBE_TIMEOUT_S: Final = 30.0
_PROBE_CHILD: Final = Path(__file__).resolve().parent / "_probe_child.py"
# The shared writable directories a tool must not leave anything in (targets, not used here).
_SYSTEM_WRITE_DIRS: Final = {
    "write_tmp": "/tmp",  # noqa: S108
    "write_var_tmp": "/var/tmp",  # noqa: S108
    "write_dev_shm": "/dev/shm",  # noqa: S108
}
# Targets a machine may lack; each is judged "not applicable" only when the parent's own control
# shows it cannot be reached at all (e.g. /proc/PID/environ where there is no /proc).
# ``sigio_parent`` needs a signal handler, which only the main thread can install;
# ``threads_300`` is not applicable to a tier that holds no task cap (``describe``: tasks null).
_OPTIONAL: Final = frozenset(
    {
        "write_var_tmp",
        "write_dev_shm",
        "victim_xattr",
        "parent_environ",
        "sigio_parent",
        "threads_300",
        "signal_zygote",
        "zygote_state",
        "sysv_shm",
        "sysv_msg",
        "sysv_sem",
        "inotify_watch",
        "fanotify_watch",
    }
)
_VICTIMS: Final = (
    "victim_modify",
    "victim_truncate",
    "victim_chmod",
    "victim_utime",
    "victim_xattr",
    "victim_unlink",
)
PROBE_NAMES: Final = (
    "tcp_loopback",
    "udp_loopback",
    "unix_socket_path",
    "unix_socket_abstract",
    "write_cwd",
    "write_tmp",
    "write_var_tmp",
    "write_dev_shm",
    "write_store",
    *_VICTIMS,
    "credential_env",
    "parent_environ",
    "credential_file",
    "signal_other",
    "spawn_subprocess",
    "prlimit_parent",
    "prlimit_victim",
    "setpriority_parent",
    "setpriority_victim",
    "sigio_parent",
    "sigio_victim",
    "sysv_shm",
    "sysv_msg",
    "sysv_sem",
    "inotify_watch",
    "fanotify_watch",
    "memfd_huge",
    "memory_2gib",
    "threads_300",
    "earlier_call_state",
    "signal_sibling",
    "signal_zygote",
    "outlive_reply",
    "zygote_state",
)
_GIB: Final = 1 << 30
_THREADS_TARGET: Final = 300
_RTTIME_MARK: Final = 123_456_789
_WATCH_INTERVAL_S: Final = 0.003
_PLANTED_ENV: Final = ("HARNESS_PROBE_CREDENTIAL", "GEMINI_API_KEY", "GOOGLE_API_KEY")
_VICTIM_MTIME_NS: Final = 1_000_000_000 * 1_000_000_000
_SIBLING_S: Final = 1.5
_SIBLING_DONE: Final = b"sibling finished"
# What a zygote's descriptors may be: its null standard streams, its sockets, its pidfds and
# its selector. A file, a pipe or a directory there would be something a child inherits.
_ZYGOTE_FD_KINDS: Final = ("/dev/null", "socket:[", "anon_inode:[pidfd]", "anon_inode:[eventpoll]")
_log = get_logger("harness.sandbox")


class ProbeVerdict(StrEnum):
    """A probe's verdict. Wire strings are stable."""

    DENIED = "denied"
    ALLOWED = "allowed"
    INCONCLUSIVE = "inconclusive"
    NOT_APPLICABLE = "not_applicable"
    PASSED = "passed"
    """The positive control's verdict when the normal call succeeded."""
    FAILED = "failed"
    """The positive control's verdict when the normal call did not succeed."""


class ProbeResult(msgspec.Struct, frozen=True, kw_only=True):
    """One probe: what it targeted, the verdict, the parent's evidence, the child's view."""

    name: str
    target: str
    verdict: ProbeVerdict
    ground_truth: str
    child_saw: str


class ProbeReport(msgspec.Struct, frozen=True, kw_only=True):
    """All probes against one backend. ``bool(report)`` is true only when everything held."""

    backend: BackendInfo
    positive_control: ProbeResult
    probes: tuple[ProbeResult, ...]
    child_exit_status: int | None

    @property
    def ok(self) -> bool:
        """Positive control passed and every probe denied (optional targets may be absent)."""
        if self.positive_control.verdict is not ProbeVerdict.PASSED:
            return False
        if tuple(p.name for p in self.probes) != PROBE_NAMES:
            return False
        return all(
            p.verdict is ProbeVerdict.DENIED
            or (p.verdict is ProbeVerdict.NOT_APPLICABLE and p.name in _OPTIONAL)
            for p in self.probes
        )

    def __bool__(self) -> bool:
        return self.ok

    def allowed(self) -> list[str]:
        """Names of the probes that got through."""
        return [p.name for p in self.probes if p.verdict is ProbeVerdict.ALLOWED]


class _Snapshot(msgspec.Struct, frozen=True):
    exists: bool
    content: bytes = b""
    mode: int = 0
    mtime_ns: int = 0
    xattrs: tuple[str, ...] = ()


def _snapshot(path: Path) -> _Snapshot:
    try:
        st = path.lstat()
        content = path.read_bytes()
    except FileNotFoundError:
        return _Snapshot(exists=False)
    try:
        xattrs = tuple(sorted(os.listxattr(path)))
    except OSError:
        xattrs = ()
    return _Snapshot(
        exists=True, content=content, mode=st.st_mode, mtime_ns=st.st_mtime_ns, xattrs=xattrs
    )


def _diff(before: _Snapshot, after: _Snapshot) -> str:
    changes = [
        name
        for name, a, b in (
            ("exists", before.exists, after.exists),
            ("content", before.content, after.content),
            ("mode", before.mode, after.mode),
            ("mtime", before.mtime_ns, after.mtime_ns),
            ("xattrs", before.xattrs, after.xattrs),
        )
        if a != b
    ]
    return ", ".join(changes)


def _session_members(session: int, *, include_zombies: bool = True) -> list[str]:
    """Processes in ``session`` other than its leader, as ``pid:comm`` (read from /proc).

    A zombie counts by default: it proves a process was started, even if it already ended.
    Without /proc (macOS) the child's process group stands in for its session, from ``ps``.
    """
    if not os.path.isdir("/proc/self"):
        return _group_members_ps(session, include_zombies=include_zombies)
    found: list[str] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == session:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2 :].split()
        in_session = len(fields) > 3 and int(fields[3]) == session
        if in_session and (include_zombies or fields[0] != "Z"):
            found.append(f"{entry}:{comm}")
    return found


def _group_members_ps(group: int, *, include_zombies: bool) -> list[str]:
    listing = subprocess.run(
        ["ps", "-A", "-o", "pid=", "-o", "pgid=", "-o", "stat=", "-o", "comm="],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode("utf-8", "replace")
    found: list[str] = []
    for line in listing.splitlines():
        fields = line.split(None, 3)
        if len(fields) < 4 or not fields[0].isdigit() or int(fields[0]) == group:
            continue
        if int(fields[1]) == group and (include_zombies or not fields[2].startswith("Z")):
            found.append(f"{fields[0]}:{fields[3]}")
    return found


class _Targets:
    """The live targets the parent opens for one probe run, and their controls."""

    def __init__(self, base: Path, store_dir: Path | None, interpreter: str) -> None:
        self.base = base
        self.interpreter = interpreter
        self.nonce = secrets.token_hex(12)
        self.cwd = base / "cwd"
        self.cwd.mkdir()
        if store_dir is None:
            self.store = base / "store"
            self.store.mkdir()
        elif store_dir.is_dir():
            self.store = store_dir
        else:
            raise SandboxProbeError(f"the store directory {str(store_dir)!r} does not exist")
        self.stack = contextlib.ExitStack()
        self.tcp = self._listen(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
        self.udp = self._listen(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
        self.unix_path = str(base / "probe.sock")
        self.unix = self._listen(socket.AF_UNIX, socket.SOCK_STREAM, self.unix_path)
        self.abstract_name = f"harness-sandbox-probe-{self.nonce}"
        self.abstract = self._listen(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + self.abstract_name)
        self.secrets = {name: f"{name.lower()}-{secrets.token_hex(16)}" for name in _PLANTED_ENV}
        self.decoy_secret = f"decoy-credential-{secrets.token_hex(16)}"
        self.file_secret = f"file-credential-{secrets.token_hex(16)}"
        self.credential_file = base / "credential.txt"
        self.credential_file.write_text(self.file_secret + "\n")
        self.decoy = subprocess.Popen(
            [interpreter, "-I", "-S", "-c", "import sys; sys.stdin.buffer.read()"],
            stdin=subprocess.PIPE,
            env={"HARNESS_PROBE_DECOY_CREDENTIAL": self.decoy_secret},
            start_new_session=True,
        )
        self.stack.callback(self._stop_decoy)
        # Victims of the cross-process probes: one for limits and priority, one for SIGIO.
        self.limits_victim = self._sleeper()
        self.sigio_victim = self._sleeper()
        self.creates: dict[str, Path | None] = {
            "write_cwd": self.cwd / f"probe-{self.nonce}",
            "write_store": self.store / f".sandbox-probe-{self.nonce}",
        }
        for name, directory in _SYSTEM_WRITE_DIRS.items():
            self.creates[name] = self._writable(Path(directory), name)
        victims_dir = base / "victims"
        victims_dir.mkdir()
        self.victims = {name: victims_dir / name for name in _VICTIMS}
        for path in self.victims.values():
            path.write_bytes(b"victim contents\n")
            os.chmod(path, 0o644)
            os.utime(path, ns=(_VICTIM_MTIME_NS, _VICTIM_MTIME_NS))
        self.xattr_supported = self._xattr_control(base / "xattr-control")
        self.sysv = _SysV(self.stack, self.nonce)
        self.watched = base / "watched"
        self.watched.mkdir()
        self.watch_names: list[str] = []
        self.watch_control = _watch_control(base / "watch-control")
        self.sibling_pid = 0
        self.zygote_pid: int | None = None

    def _listen(self, family: int, kind: int, address: Any) -> socket.socket:
        sock = self.stack.enter_context(socket.socket(family, kind))
        sock.bind(address)
        if kind == socket.SOCK_STREAM:
            sock.listen(16)
        sock.setblocking(False)
        self._control(sock, family, kind)
        return sock

    def _control(self, sock: socket.socket, family: int, kind: int) -> None:
        """Prove the listener would notice a client: connect (or send) once and take it."""
        address = sock.getsockname()
        try:
            with socket.socket(family, kind) as client:
                client.settimeout(5.0)
                if kind == socket.SOCK_STREAM:
                    client.connect(address)
                    with contextlib.closing(_accept_one(sock)):
                        pass
                else:
                    client.sendto(b"control", address)
                    if _recv_one(sock) != b"control":
                        raise OSError("the control datagram did not arrive")
        except OSError as e:
            raise SandboxProbeError(f"the probe listener at {address!r} is not live: {e}") from e

    def _writable(self, directory: Path, name: str) -> Path | None:
        """The target path in ``directory``, or None when this user cannot write there at all."""
        control = directory / f".harness-probe-control-{self.nonce}"
        try:
            control.write_bytes(b"")
            control.unlink()
        except OSError:
            _log.info("sandbox.probe_not_applicable", probe=name, directory=str(directory))
            return None
        return directory / f"harness-sandbox-probe-{self.nonce}"

    def _xattr_control(self, path: Path) -> bool:
        path.write_bytes(b"")
        try:
            os.setxattr(path, "user.sandbox_probe", b"1")
        except OSError:
            return False
        return True

    def environ_readable(self) -> bool:
        """Control: the parent itself can read the decoy's secret from its /proc environ."""
        try:
            return (
                self.decoy_secret.encode() in Path(f"/proc/{self.decoy.pid}/environ").read_bytes()
            )
        except OSError:
            return False

    def _sleeper(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [self.interpreter, "-I", "-S", "-c", "import sys; sys.stdin.buffer.read()"],
            stdin=subprocess.PIPE,
            env={},
            start_new_session=True,
        )
        self.stack.callback(_stop, proc)
        return proc

    def _stop_decoy(self) -> None:
        if self.decoy.stdin is not None:
            self.decoy.stdin.close()
        try:
            self.decoy.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.decoy.kill()
            self.decoy.wait()

    def job(self) -> bytes:
        return json.dumps(
            {
                "nonce": self.nonce,
                "tcp_port": self.tcp.getsockname()[1],
                "udp_port": self.udp.getsockname()[1],
                "unix_path": self.unix_path,
                "unix_abstract": self.abstract_name,
                "create": {k: str(v) for k, v in self.creates.items() if v is not None},
                "victims": {k: str(v) for k, v in self.victims.items()},
                "environ_pids": [os.getpid(), self.decoy.pid],
                "credential_file": str(self.credential_file),
                "signal_pid": self.decoy.pid,
                "interpreter": self.interpreter,
                "parent_pid": os.getpid(),
                "limits_victim": self.limits_victim.pid,
                "sigio_victim": self.sigio_victim.pid,
                "rttime_mark": _RTTIME_MARK,
                "sibling_pid": self.sibling_pid,
                "zygote_pid": self.zygote_pid,
                "shm_id": self.sysv.shm_id,
                "msg_id": self.sysv.msg_id,
                "sem_id": self.sysv.sem_id,
                "watched_dir": str(self.watched),
            }
        ).encode()

    def cleanup(self) -> None:
        for path in self.creates.values():
            if path is not None:
                with contextlib.suppress(OSError):
                    path.unlink()
        self.stack.close()


_IPC_PRIVATE: Final = 0
_IPC_CREAT: Final = 0o1000
_IPC_RMID: Final = 0
_GETVAL: Final = 12
_SETVAL: Final = 16
_SHM_RDONLY: Final = 0o10000
_SEM_VALUE: Final = 7
_SHM_BYTES: Final = 4096


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
    libc.shmdt.argtypes = (ctypes.c_void_p,)
    libc.msgsnd.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return libc


def _sysvipc_row(kind: str, ident: int) -> list[str] | None:
    """The object's row of ``/proc/sysvipc/<kind>`` (id in column 2), or None when gone."""
    try:
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[1] == str(ident):
            return fields
    return None


class _SysV:
    """A SysV shared memory segment, message queue and semaphore of the parent's, mode 0600.

    The child is given only their ids (a confined child must not create any: it could still
    reach these by id where it shares the host's IPC namespace). Removed on cleanup.
    """

    def __init__(self, stack: contextlib.ExitStack, nonce: str) -> None:
        libc = self.libc = _libc()
        self.shm_secret = f"shm-{nonce}-{secrets.token_hex(8)}".encode()
        self.msg_secret = f"msg-{nonce}-{secrets.token_hex(8)}".encode()
        self.shm_id = libc.shmget(_IPC_PRIVATE, _SHM_BYTES, _IPC_CREAT | 0o600)
        self.msg_id = libc.msgget(_IPC_PRIVATE, _IPC_CREAT | 0o600)
        self.sem_id = libc.semget(_IPC_PRIVATE, 1, _IPC_CREAT | 0o600)
        stack.callback(self.remove)
        self.ready = min(self.shm_id, self.msg_id, self.sem_id) >= 0
        if not self.ready:
            return
        addr = libc.shmat(self.shm_id, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            self.ready = False
            return
        ctypes.memmove(addr, self.shm_secret, len(self.shm_secret))
        libc.shmdt(ctypes.c_void_p(addr))
        message = ctypes.create_string_buffer(8 + len(self.msg_secret))
        ctypes.memmove(message, (1).to_bytes(8, "little"), 8)  # mtype 1 (x86_64, aarch64)
        ctypes.memmove(ctypes.addressof(message) + 8, self.msg_secret, len(self.msg_secret))
        sent = libc.msgsnd(self.msg_id, message, len(self.msg_secret), 0)
        set_value = libc.semctl(self.sem_id, 0, _SETVAL, ctypes.c_int(_SEM_VALUE))
        self.ready = sent == 0 and set_value == 0
        self.rows = {k: _sysvipc_row(k, i) for k, i in self.ids().items()}

    def ids(self) -> dict[str, int]:
        return {"shm": self.shm_id, "msg": self.msg_id, "sem": self.sem_id}

    def shm_breach(self) -> str | None:
        row = _sysvipc_row("shm", self.shm_id)
        if row is None:
            return "the segment was removed"
        if row[2] != self.rows["shm"][2]:  # type: ignore[index]
            return f"its mode went from {self.rows['shm'][2]} to {row[2]}"  # type: ignore[index]
        addr = self.libc.shmat(self.shm_id, None, _SHM_RDONLY)
        if addr in (None, ctypes.c_void_p(-1).value):
            return "the parent can no longer attach it"
        data = ctypes.string_at(addr, len(self.shm_secret))
        self.libc.shmdt(ctypes.c_void_p(addr))
        return None if data == self.shm_secret else "its contents changed"

    def msg_breach(self) -> str | None:
        row = _sysvipc_row("msg", self.msg_id)
        if row is None:
            return "the queue was removed"
        return None if row[4] == "1" else f"the queue holds {row[4]} messages, not 1"

    def sem_breach(self) -> str | None:
        if _sysvipc_row("sem", self.sem_id) is None:
            return "the semaphore was removed"
        value = self.libc.semctl(self.sem_id, 0, _GETVAL)
        return None if value == _SEM_VALUE else f"its value went from {_SEM_VALUE} to {value}"

    def remove(self) -> None:
        if self.shm_id >= 0:
            self.libc.shmctl(self.shm_id, _IPC_RMID, None)
        if self.msg_id >= 0:
            self.libc.msgctl(self.msg_id, _IPC_RMID, None)
        if self.sem_id >= 0:
            self.libc.semctl(self.sem_id, 0, _IPC_RMID)


def _watch_control(directory: Path) -> bool:
    """Control: inotify reports a file created in ``directory`` to the parent itself."""
    directory.mkdir()
    libc = _libc()
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return False
    try:
        if libc.inotify_add_watch(fd, str(directory).encode(), 0x100) < 0:
            return False
        name = f"control-{secrets.token_hex(8)}"
        (directory / name).write_bytes(b"")
        try:
            return name.encode() in os.read(fd, 65536)
        except BlockingIOError:
            return False
    finally:
        os.close(fd)


class _Creator:
    """Creates files with secret names in the watched directory while the probe child runs."""

    def __init__(self, t: _Targets) -> None:
        self.t = t
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Creator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stop.wait(0.02):
            name = f"watched-{secrets.token_hex(12)}"
            self.t.watch_names.append(name)
            path = self.t.watched / name
            with contextlib.suppress(OSError):
                path.write_bytes(b"")
                path.unlink()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _proc_limits(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/limits").read_text()
    except OSError:
        return ""


def _priority(pid: int) -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        return None


def _own_limits() -> dict[str, tuple[int, int]]:
    return {
        name: resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_")
    }


def _shmem_bytes() -> int:
    """The machine's shared memory (tmpfs, memfds) in bytes, from /proc/meminfo."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _status_fields(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


class _Watch:
    """Watches the probe child's session in /proc while it runs, from a thread of the parent.

    Records the most threads its processes had at once, the most the machine's shared memory
    grew, and any process in the session but the child and its own pid 1 (the copy a tier
    with a pid namespace runs in: parent is the child, pid 1 one namespace deeper).
    """

    def __init__(self) -> None:
        self.leader: int | None = None
        self.max_threads = 0
        self.shmem_base = _shmem_bytes()
        self.max_shmem_growth = 0
        self.others: dict[int, str] = {}
        self.watched: dict[str, int] = {}
        self.traced: dict[str, str] = {}
        self._started = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sandbox-probe-watch", daemon=True)

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._started.set()
        self._thread.join()

    def start(self, pid: int) -> None:
        """The child was started (``on_start``)."""
        self.leader = pid
        self._started.set()

    def _run(self) -> None:
        self._started.wait()
        while not self._stop.is_set() and self.leader is not None:
            self._sample(self.leader)
            time.sleep(_WATCH_INTERVAL_S)

    def _sample(self, leader: int) -> None:
        for name, pid in self.watched.items():
            tracer = _status_fields(pid).get("TracerPid", "0")
            if tracer not in ("0", ""):
                self.traced[name] = tracer
        self.max_shmem_growth = max(self.max_shmem_growth, _shmem_bytes() - self.shmem_base)
        leader_depth = len(_status_fields(leader).get("NSpid", "").split()) or 1
        threads = 0
        for member in [str(leader), *(m.split(":", 1)[0] for m in _session_members(leader))]:
            fields = _status_fields(int(member))
            if not fields or fields.get("State", "").startswith("Z"):
                continue
            threads += int(fields.get("Threads", "0") or 0)
            if int(member) == leader:
                continue
            nspid = fields.get("NSpid", "").split()
            own_init = (
                fields.get("PPid") == str(leader)
                and len(nspid) == leader_depth + 1
                and nspid[-1] == "1"
            )
            if not own_init:
                self.others[int(member)] = fields.get("Name", "?")
        self.max_threads = max(self.max_threads, threads)


class _Sibling:
    """A concurrent call through the same backend that only sleeps: the probe child's victim."""

    def __init__(self, backend: ChildBackend, timeout_s: float) -> None:
        self._started = threading.Event()
        self._pid = 0
        self._result: RunResult | None = None
        self._error = ""

        def run() -> None:
            try:
                self._result = backend.exec_file(
                    _PROBE_CHILD,
                    stdin=json.dumps({"sibling_s": _SIBLING_S}).encode(),
                    timeout_s=timeout_s,
                    on_start=self._on_start,
                )
            except Exception as e:  # noqa: BLE001 - reported as the sibling's failure
                self._error = f"{type(e).__name__}: {e}"
            finally:
                self._started.set()

        self._thread = threading.Thread(target=run, name="sandbox-probe-sibling", daemon=True)
        self._thread.start()

    def _on_start(self, pid: int) -> None:
        self._pid = pid
        self._started.set()

    def pid(self) -> int:
        """The sibling's pid, once it started (raises when it could not start)."""
        if not self._started.wait(PROBE_TIMEOUT_S) or not self._pid:
            raise SandboxProbeError(f"the sibling call did not start: {self._error or 'timeout'}")
        return self._pid

    def result(self) -> RunResult | None:
        """Wait for the sibling to end; None when it failed to run."""
        self._thread.join()
        return self._result


def _sibling_summary(run: RunResult | None) -> str:
    if run is None:
        return "it did not run"
    return f"exit status {run.exit_status}, stdout {run.stdout[:60]!r}"


def _alive(pid: int) -> bool:
    state = _status_fields(pid).get("State", "")
    return bool(state) and not state.startswith(("Z", "X"))


def _zygote_state(pid: int | None, allowed_env: dict[str, str]) -> tuple[bool, str | None]:
    """(applicable, breach): the zygote's environment and descriptors, read from outside."""
    if pid is None:
        return False, None
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        fds = {fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return False, None
    allowed = {f"{k}={v}".encode() for k, v in allowed_env.items()}
    extra_env = [e.split(b"=", 1)[0].decode("latin-1") for e in environ.split(b"\0") if e]
    extra_env = [
        name
        for name, entry in zip(extra_env, [e for e in environ.split(b"\0") if e], strict=True)
        if entry not in allowed
    ]
    bad_fds = [
        f"{fd} -> {target}"
        for fd, target in sorted(fds.items(), key=lambda item: int(item[0]))
        if not target.startswith(_ZYGOTE_FD_KINDS)
        or (target == "/dev/null") != (int(fd) in (0, 1, 2))
    ]
    problems = []
    if extra_env:
        problems.append(f"environment beyond the allowlist: {', '.join(extra_env)}")
    if bad_fds:
        problems.append(f"descriptors a child could use: {', '.join(bad_fds)}")
    return True, "; ".join(problems) or None


def _accept_one(sock: socket.socket) -> socket.socket:
    conn, _ = sock.accept()
    return conn


def _recv_one(sock: socket.socket) -> bytes:
    data, _ = sock.recvfrom(65536)
    return data


def _drain_stream(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def _drain_datagrams(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            sock.recvfrom(65536)
        except BlockingIOError:
            return count
        count += 1


def _parent_environ_entries(child_visible: dict[str, str]) -> list[str]:
    """This process's initial environment entries a child must never see (minus its own env)."""
    try:
        raw = Path(f"/proc/{os.getpid()}/environ").read_bytes()
    except OSError:
        return []
    own = {f"{k}={v}" for k, v in child_visible.items()}
    entries = [e.decode("latin-1") for e in raw.split(b"\0") if e]
    return [e for e in entries if e not in own and len(e) >= 8]


def run_probes(
    backend: ChildBackend,
    *,
    store_dir: Path | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> ProbeReport:
    """Run the positive control, then every denial probe, against ``backend``.

    Args:
        backend: the opened backend, used exactly as tool calls use it.
        store_dir: a store directory to try to write into (default: a fresh store-like one);
            a file the child managed to create there is removed again.
        timeout_s: wall-clock limit for the probe child.

    Returns:
        The report; ``bool(report)`` is true only when the control passed and all was denied.

    Raises:
        SandboxProbeError: when a target the parent opens is not live (so nothing is judged).
    """
    info = backend.describe()
    why = self_test(backend)
    control = ProbeResult(
        name="positive_control",
        target="echo tool call",
        verdict=ProbeVerdict.PASSED if why is None else ProbeVerdict.FAILED,
        ground_truth="the reply equals the arguments" if why is None else why,
        child_saw="",
    )
    if why is not None:
        _log.error("sandbox.positive_control_failed", reason=why)
        not_run = tuple(
            ProbeResult(
                name=n,
                target="",
                verdict=ProbeVerdict.INCONCLUSIVE,
                ground_truth="not run: the positive control failed",
                child_saw="",
            )
            for n in PROBE_NAMES
        )
        return ProbeReport(
            backend=info, positive_control=control, probes=not_run, child_exit_status=None
        )
    with tempfile.TemporaryDirectory(prefix="harness-sandbox-probe-") as tmp:
        base = Path(tmp)
        targets = _Targets(base, store_dir, str(backend.interpreter))
        try:
            report = _probe(backend, targets, info, control, timeout_s)
        finally:
            targets.cleanup()
            shutil.rmtree(base / "victims", ignore_errors=True)
    level = _log.info if report.ok else _log.error
    level(
        "sandbox.probes",
        backend=info.backend,
        tier=info.tier,
        landlock_abi=info.landlock_abi,
        ok=report.ok,
        allowed=report.allowed(),
    )
    return report


def _probe(  # noqa: C901 - the probe run and every judgement, in the order they observe
    backend: ChildBackend,
    t: _Targets,
    info: BackendInfo,
    control: ProbeResult,
    timeout_s: float,
) -> ProbeReport:
    before = {name: _snapshot(path) for name, path in t.victims.items()}
    env_source = dict(os.environ) | t.secrets
    left_behind: list[str] = []
    parent_limits = _own_limits()
    parent_priority = _priority(os.getpid())
    victim_limits = _proc_limits(t.limits_victim.pid)
    victim_priority = _priority(t.limits_victim.pid)
    t.zygote_pid = backend.zygote_pid()
    plant_nonce = f"harness-planted-{secrets.token_hex(16)}"
    plant = backend.exec_file(
        _PROBE_CHILD, stdin=json.dumps({"plant": plant_nonce}).encode(), timeout_s=timeout_s
    )
    planted = plant.exit_status == 0 and plant.stdout == f"planted {plant_nonce}".encode()
    sibling = _Sibling(backend, timeout_s)
    t.sibling_pid = sibling.pid()
    sigurg: list[int] = []
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGURG, lambda s, f: sigurg.append(s)) if main_thread else None
    try:
        with _Watch() as watch, _Creator(t):
            watch.watched["sibling"] = t.sibling_pid
            if t.zygote_pid is not None:
                watch.watched["zygote"] = t.zygote_pid
            try:
                run: RunResult = backend.exec_file(
                    _PROBE_CHILD,
                    stdin=t.job(),
                    timeout_s=timeout_s,
                    cwd=t.cwd,
                    env_source=env_source,
                    on_exit=lambda pid: left_behind.extend(_session_members(pid)),
                    on_start=watch.start,
                )
            except SandboxZygoteError as e:
                # The child killed its zygote (and so itself): judge what it wrote before.
                partial = getattr(e, "partial", None)
                if partial is None:
                    raise
                run = partial
        time.sleep(0.05)  # a signal already pending runs its handler by now
    finally:
        if main_thread:
            signal.signal(signal.SIGURG, previous)
    changed_limits = sorted(k for k, v in _own_limits().items() if parent_limits.get(k) != v)
    for name in changed_limits:  # put the parent back as it was
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(getattr(resource, name), parent_limits[name])
    priority_now = _priority(os.getpid())
    if priority_now != parent_priority and parent_priority is not None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, os.getpid(), parent_priority)
    sibling_run = sibling.result()
    time.sleep(0.05)  # anything the child left to outlive it has had time to show itself
    leader = watch.leader
    outlived = [] if leader is None else _session_members(leader, include_zombies=False)
    zygote_alive = t.zygote_pid is None or _alive(t.zygote_pid)
    zygote_state = _zygote_state(t.zygote_pid, child_env(os.environ))
    decoy_status = t.decoy.poll()
    output = (run.stdout + b"\n" + run.stderr).decode("latin-1")
    try:
        report = json.loads(run.stdout)
        attempts: dict[str, str] = report["attempts"] if report.get("done") is True else {}
        seen_by: dict[str, str] = {k: str(v) for k, v in dict(report.get("seen", {})).items()}
    except (ValueError, TypeError, AttributeError, KeyError):
        attempts, seen_by = {}, {}
    complete = set(PROBE_NAMES) - {n for n, p in t.creates.items() if p is None} <= set(attempts)

    results: list[ProbeResult] = []

    def judge(
        name: str,
        target: str,
        breached: str | None,
        held: str,
        *,
        applicable: bool = True,
        why_not: str = "this machine has no such target",
        inconclusive: str | None = None,
    ) -> None:
        saw = attempts.get(name, "no report")
        if not applicable:
            verdict, truth = ProbeVerdict.NOT_APPLICABLE, why_not
        elif inconclusive is not None and not breached:
            verdict, truth = ProbeVerdict.INCONCLUSIVE, inconclusive
        elif breached:
            verdict, truth = ProbeVerdict.ALLOWED, breached
        elif not complete:
            verdict = ProbeVerdict.INCONCLUSIVE
            truth = f"the probe child did not finish (exit status {run.exit_status})"
        else:
            verdict, truth = ProbeVerdict.DENIED, held
        results.append(
            ProbeResult(
                name=name, target=target, verdict=verdict, ground_truth=truth, child_saw=saw
            )
        )

    def count(what: str, n: int) -> str | None:
        return f"{n} {what} arrived at the parent's listener" if n else None

    nothing_arrived = "nothing arrived at the parent's listener"
    judge(
        "tcp_loopback",
        f"127.0.0.1:{t.tcp.getsockname()[1]}/tcp",
        count("connection(s)", _drain_stream(t.tcp)),
        nothing_arrived,
    )
    judge(
        "udp_loopback",
        f"127.0.0.1:{t.udp.getsockname()[1]}/udp",
        count("datagram(s)", _drain_datagrams(t.udp)),
        nothing_arrived,
    )
    judge(
        "unix_socket_path",
        t.unix_path,
        count("connection(s)", _drain_stream(t.unix)),
        nothing_arrived,
    )
    judge(
        "unix_socket_abstract",
        "@" + t.abstract_name,
        count("connection(s)", _drain_stream(t.abstract)),
        nothing_arrived,
    )
    for name in ("write_cwd", "write_tmp", "write_var_tmp", "write_dev_shm", "write_store"):
        path = t.creates[name]
        made = path is not None and os.path.lexists(path)
        judge(
            name,
            str(path) if path is not None else _SYSTEM_WRITE_DIRS.get(name, ""),
            f"{path} was created" if made else None,
            "no file appeared",
            applicable=path is not None,
        )
    for name, path in t.victims.items():
        changed = _diff(before[name], _snapshot(path))
        judge(
            name,
            str(path),
            f"the victim changed: {changed}" if changed else None,
            "the victim is unchanged (content, mode, mtime, xattrs)",
            applicable=name != "victim_xattr" or t.xattr_supported,
        )
    nothing_leaked = "no secret in the child's stdout or stderr"
    leaked = [name for name, value in t.secrets.items() if value in output]
    judge(
        "credential_env",
        ", ".join(_PLANTED_ENV),
        f"the child's output holds {', '.join(leaked)}" if leaked else None,
        nothing_leaked,
    )
    parent_entries = _parent_environ_entries(child_env(env_source))
    leaks = [e.split("=", 1)[0] for e in parent_entries if e in output]
    if t.decoy_secret in output:
        leaks.append(f"pid {t.decoy.pid}'s HARNESS_PROBE_DECOY_CREDENTIAL")
    judge(
        "parent_environ",
        f"/proc/{os.getpid()}/environ, /proc/{t.decoy.pid}/environ",
        f"the child's output holds {', '.join(leaks)}" if leaks else None,
        nothing_leaked,
        applicable=t.environ_readable(),
    )
    judge(
        "credential_file",
        str(t.credential_file),
        "the child's output holds the file's secret" if t.file_secret in output else None,
        nothing_leaked,
    )
    judge(
        "signal_other",
        f"pid {t.decoy.pid} (same user)",
        f"it died with status {decoy_status}" if decoy_status is not None else None,
        "the process is still alive",
    )
    spawned = [f"{pid}:{name}" for pid, name in sorted(watch.others.items())]
    seen = sorted(set(left_behind) | set(spawned))
    judge(
        "spawn_subprocess",
        "exec and fork",
        f"in its session: {', '.join(seen)}" if seen else None,
        "no other process in the child's session while it ran or after",
    )
    judge(
        "prlimit_parent",
        f"pid {os.getpid()} (the parent) RLIMIT_RTTIME",
        f"the parent's limits changed: {', '.join(changed_limits)}" if changed_limits else None,
        "the parent's limits are unchanged",
    )
    victim_limits_now = _proc_limits(t.limits_victim.pid)
    judge(
        "prlimit_victim",
        f"pid {t.limits_victim.pid} (a victim) RLIMIT_NOFILE",
        "the victim's /proc limits changed" if victim_limits_now != victim_limits else None,
        "the victim's /proc limits are unchanged",
    )
    judge(
        "setpriority_parent",
        f"pid {os.getpid()} (the parent)",
        f"the parent's nice value went from {parent_priority} to {priority_now}"
        if priority_now != parent_priority
        else None,
        "the parent's nice value is unchanged",
    )
    victim_priority_now = _priority(t.limits_victim.pid)
    judge(
        "setpriority_victim",
        f"pid {t.limits_victim.pid} (a victim)",
        f"the victim's nice value went from {victim_priority} to {victim_priority_now}"
        if victim_priority_now != victim_priority
        else None,
        "the victim's nice value is unchanged",
    )
    judge(
        "sigio_parent",
        f"pid {os.getpid()} (the parent), SIGURG by F_SETOWN/FIOSETOWN",
        f"{len(sigurg)} SIGURG reached the parent" if sigurg else None,
        "no SIGURG reached the parent",
        applicable=main_thread,
        why_not="only the main thread can catch the signal",
    )
    sigio_status = t.sigio_victim.poll()
    judge(
        "sigio_victim",
        f"pid {t.sigio_victim.pid} (a victim), SIGKILL by F_SETOWN/FIOSETOWN",
        f"it died with status {sigio_status}" if sigio_status is not None else None,
        "the victim is still alive",
    )
    sysv_why = "this machine offers no SysV IPC to the parent"
    nonce_seen = "the child's output holds the {} nonce"
    shm = t.sysv.shm_breach() if t.sysv.ready else None
    if t.sysv.ready and t.sysv.shm_secret.decode() in output:
        shm = nonce_seen.format("segment's")
    judge(
        "sysv_shm",
        f"SysV segment {t.sysv.shm_id} (the parent's, 0600): read, overwrite, remove",
        shm,
        "the segment is there, unchanged, and its nonce is not in the child's output",
        applicable=t.sysv.ready,
        why_not=sysv_why,
    )
    msg = t.sysv.msg_breach() if t.sysv.ready else None
    if t.sysv.ready and t.sysv.msg_secret.decode() in output:
        msg = nonce_seen.format("queued message's")
    judge(
        "sysv_msg",
        f"SysV queue {t.sysv.msg_id} (the parent's, 0600): receive, remove",
        msg,
        "the message is still queued and its nonce is not in the child's output",
        applicable=t.sysv.ready,
        why_not=sysv_why,
    )
    judge(
        "sysv_sem",
        f"SysV semaphore {t.sysv.sem_id} (the parent's, 0600): set, remove",
        t.sysv.sem_breach() if t.sysv.ready else None,
        f"the semaphore is there with its value {_SEM_VALUE}",
        applicable=t.sysv.ready,
        why_not=sysv_why,
    )
    watched_seen = [name for name in t.watch_names if name in output]
    for name, how in (("inotify_watch", "inotify"), ("fanotify_watch", "fanotify")):
        # A name the report files under the other mechanism alone is that one's; any other
        # name in the output counts against both (never denied for what a child could do).
        other = seen_by.get("fanotify_watch" if name == "inotify_watch" else "inotify_watch", "")
        mine = seen_by.get(name, "")
        against = [n for n in watched_seen if n in mine or n not in other]
        judge(
            name,
            f"{t.watched} ({how}), {len(t.watch_names)} secret names created while it ran",
            f"the child's output holds {len(against)} of the secret names" if against else None,
            "no name created in the directory is in the child's output",
            applicable=t.watch_control,
            why_not="inotify does not report to the parent itself here",
            inconclusive=None if t.watch_names else "no name was created while the child ran",
        )
    judge(
        "memfd_huge",
        "2 GiB written into memfds",
        f"shared memory grew by {watch.max_shmem_growth >> 20} MiB while it ran"
        if watch.max_shmem_growth >= _GIB
        else None,
        f"shared memory grew by at most {max(watch.max_shmem_growth, 0) >> 20} MiB",
    )
    judge(
        "memory_2gib",
        "2 GiB of memory filled",
        f"its peak resident memory was {run.max_rss_bytes >> 20} MiB"
        if run.max_rss_bytes >= 2 * _GIB
        else None,
        f"its peak resident memory was {run.max_rss_bytes >> 20} MiB",
    )
    limits = info.limits or {}
    judge(
        "threads_300",
        f"{_THREADS_TARGET} threads (cap {limits.get('tasks')})",
        f"it had {watch.max_threads} threads at once"
        if watch.max_threads >= _THREADS_TARGET
        else None,
        f"it had at most {watch.max_threads} threads at once",
        applicable=limits.get("tasks") is not None,
        why_not=f"task cap {NO_TASK_CAP}",
    )
    judge(
        "earlier_call_state",
        "an earlier call's environment, module state, memory and open pipe",
        "the child's output holds the earlier call's nonce" if plant_nonce in output else None,
        "nothing of the earlier call in the child's environment, memory or descriptors",
        inconclusive=None if planted else f"the planting call did not plant ({plant.exit_status})",
    )
    sibling_ok = sibling_run is not None and (
        sibling_run.exit_status == 0 and sibling_run.stdout == _SIBLING_DONE
    )
    sibling_traced = watch.traced.get("sibling")
    sibling_killed = sibling_run is not None and sibling_run.exit_status < 0
    judge(
        "signal_sibling",
        f"pid {t.sibling_pid} (a concurrent call), SIGKILL and ptrace",
        f"the sibling was killed ({_sibling_summary(sibling_run)})"
        if sibling_killed
        else f"the sibling was traced by pid {sibling_traced}"
        if sibling_traced is not None
        else None,
        "the sibling call finished normally and was never traced",
        inconclusive=None
        if sibling_ok
        else f"the sibling call did not run as planned ({_sibling_summary(sibling_run)})",
    )
    zygote_traced = watch.traced.get("zygote")
    judge(
        "signal_zygote",
        f"pid {t.zygote_pid} (the zygote), SIGKILL and ptrace",
        "the zygote is gone"
        if not zygote_alive
        else f"the zygote was traced by pid {zygote_traced}"
        if zygote_traced is not None
        else None,
        "the zygote is alive and was never traced",
        applicable=t.zygote_pid is not None,
        why_not="no zygote: this backend spawns every child",
    )
    judge(
        "outlive_reply",
        "clone(CLONE_PARENT) and fork, then reply",
        f"alive after the reply: {', '.join(outlived)}" if outlived else None,
        "no process of the call's session (a clone(CLONE_PARENT) sibling stays in it) was "
        "left after its reply",
    )
    judge(
        "zygote_state",
        f"/proc/{t.zygote_pid}/environ and /proc/{t.zygote_pid}/fd",
        zygote_state[1],
        "the zygote's environment is the allowlist and its descriptors are /dev/null, sockets "
        "and pidfds only",
        applicable=zygote_state[0],
        why_not="no zygote, or its /proc files are not readable by this user",
    )
    return ProbeReport(
        backend=info,
        positive_control=control,
        probes=tuple(results),
        child_exit_status=run.exit_status,
    )


def _rows(report: ProbeReport) -> Iterator[tuple[str, str, str, str, str]]:
    for p in (report.positive_control, *report.probes):
        yield (p.name, p.verdict.value, p.target, p.ground_truth, p.child_saw)


def render_table(report: ProbeReport, *, width: int = 60) -> str:
    """The report as a plain-text table, one row per probe, positive control first."""
    head = ("probe", "verdict", "target", "ground truth", "child saw")

    def clip(text: str) -> str:
        return text if len(text) <= width else text[: width - 3] + "..."

    rows = [head, *((a, b, clip(c), clip(d), clip(e)) for a, b, c, d, e in _rows(report))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
