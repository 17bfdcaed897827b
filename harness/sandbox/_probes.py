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
from collections.abc import Callable, Iterator
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from harness.errors import SandboxProbeError, SandboxZygoteError
from harness.log import get_logger
from harness.sandbox._backend import ChildBackend
from harness.sandbox._open import self_test
from harness.sandbox._policy import NO_TASK_CAP
from harness.sandbox._result import BackendInfo, RunResult
from harness.sandbox._runner import child_env

__all__ = [
    "PROBES",
    "PROBE_NAMES",
    "ProbeFinding",
    "Observed",
    "Probe",
    "ProbeReport",
    "ProbeResult",
    "ProbeVerdict",
    "child_report",
    "finished",
    "judge",
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
_VICTIMS: Final = (
    "victim_modify",
    "victim_truncate",
    "victim_chmod",
    "victim_utime",
    "victim_xattr",
    "victim_unlink",
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


def _alive(pid: int) -> bool:
    state = _status_fields(pid).get("State", "")
    return bool(state) and not state.startswith(("Z", "X"))


def _read_zygote_state(pid: int | None, allowed_env: dict[str, str]) -> tuple[bool, str | None]:
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


def _probe(
    backend: ChildBackend,
    t: _Targets,
    info: BackendInfo,
    control: ProbeResult,
    timeout_s: float,
) -> ProbeReport:
    """Run the probe child, observe every target, then judge each row of ``PROBES``."""
    observed = _observe(backend, t, info, timeout_s)
    return ProbeReport(
        backend=info,
        positive_control=control,
        probes=tuple(judge(probe, observed) for probe in PROBES),
        child_exit_status=observed.exit_status,
    )


# --- observing: everything the judges need, read by the parent ----------------------------------


class Observed(msgspec.Struct, frozen=True, kw_only=True):
    """What the parent observed of one probe run, as plain values: the judges' only input.

    The parent read it itself, before the probe child ran and after it ended (listeners
    drained, files compared, processes and ``/proc`` read, the child's output kept to be
    searched for every secret). The child's own report (``attempts``) is shown beside a verdict
    and decides none; ``seen_by`` only tells which watch a leaked name counts against.
    """

    exit_status: int
    output: str
    """The child's stdout and stderr (latin-1), searched for every secret and nonce."""
    attempts: dict[str, str]
    """The child's report of each attempt (empty when its report is missing or malformed)."""
    seen_by: dict[str, str]
    """What the child's report says each watch saw (to tell inotify's names from fanotify's)."""
    complete: bool
    """The child reported every probe it was given: it ran to the end."""
    tcp_port: int
    tcp_arrived: int
    udp_port: int
    udp_arrived: int
    unix_path: str
    unix_arrived: int
    abstract_name: str
    abstract_arrived: int
    creates: dict[str, str | None]
    """Each write probe's target path (None: this user cannot write in that directory)."""
    created: tuple[str, ...]
    """The write probes whose target path exists after the run."""
    victims: dict[str, str]
    victim_changes: dict[str, str]
    """How each victim file changed (``_diff``; empty when unchanged)."""
    xattr_supported: bool
    secrets: dict[str, str]
    parent_pid: int
    parent_entries: tuple[str, ...]
    decoy_pid: int
    decoy_secret: str
    decoy_status: int | None
    environ_readable: bool
    credential_file: str
    file_secret: str
    left_behind: tuple[str, ...]
    """Processes of the child's session when it exited (``pid:comm``)."""
    spawned: tuple[str, ...]
    """Processes the watch saw in its session while it ran, but the child and its own pid 1."""
    changed_limits: tuple[str, ...]
    limits_victim_pid: int
    victim_limits_before: str
    victim_limits_after: str
    parent_priority: int | None
    parent_priority_after: int | None
    victim_priority: int | None
    victim_priority_after: int | None
    sigurg: int
    main_thread: bool
    sigio_victim_pid: int
    sigio_status: int | None
    sysv_ready: bool
    shm_id: int
    msg_id: int
    sem_id: int
    shm_breach: str | None
    msg_breach: str | None
    sem_breach: str | None
    shm_secret: str
    msg_secret: str
    watched_dir: str
    watch_names: tuple[str, ...]
    watch_control: bool
    max_shmem_growth: int
    max_rss_bytes: int
    max_threads: int
    task_cap: int | None
    plant_nonce: str
    planted: bool
    plant_exit_status: int
    sibling_pid: int
    sibling: RunResult | None
    sibling_traced: str | None
    zygote_pid: int | None
    zygote_alive: bool
    zygote_traced: str | None
    outlived: tuple[str, ...]
    zygote_readable: bool
    zygote_breach: str | None


class _ChildRun(NamedTuple):
    run: RunResult
    watch: _Watch
    left_behind: list[str]
    sigurg: int
    main_thread: bool


def _run_child(
    backend: ChildBackend, t: _Targets, env_source: dict[str, str], timeout_s: float
) -> _ChildRun:
    """The probe child, watched from outside, while SIGURG to the parent is counted."""
    left_behind: list[str] = []
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
    return _ChildRun(run, watch, left_behind, len(sigurg), main_thread)


def _restore_parent(
    limits: dict[str, tuple[int, int]], priority: int | None
) -> tuple[list[str], int | None]:
    """The parent's limits that changed and its priority now; both put back as they were."""
    changed = sorted(k for k, v in _own_limits().items() if limits.get(k) != v)
    for name in changed:
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(getattr(resource, name), limits[name])
    now = _priority(os.getpid())
    if now != priority and priority is not None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, os.getpid(), priority)
    return changed, now


def child_report(stdout: bytes) -> tuple[dict[str, str], dict[str, str]]:
    """The probe child's report: (what each attempt got, what each watch saw).

    Empty attempts unless stdout is one JSON object marked ``done`` (a child that did not
    finish, or wrote anything else, reported nothing).
    """
    try:
        report = json.loads(stdout)
        attempts: dict[str, str] = report["attempts"] if report.get("done") is True else {}
        seen_by: dict[str, str] = {k: str(v) for k, v in dict(report.get("seen", {})).items()}
    except (ValueError, TypeError, AttributeError, KeyError):
        return {}, {}
    return attempts, seen_by


def finished(attempts: dict[str, str], skipped: frozenset[str]) -> bool:
    """Whether the child reported every probe it was given (``skipped``: writes with no target)."""
    return set(PROBE_NAMES) - skipped <= set(attempts)


def _observe(backend: ChildBackend, t: _Targets, info: BackendInfo, timeout_s: float) -> Observed:
    """Plant, start the sibling, run the probe child, then read every target's state."""
    before = {name: _snapshot(path) for name, path in t.victims.items()}
    env_source = dict(os.environ) | t.secrets
    parent_limits = _own_limits()
    parent_priority = _priority(os.getpid())
    victim_limits = _proc_limits(t.limits_victim.pid)
    victim_priority = _priority(t.limits_victim.pid)
    t.zygote_pid = backend.zygote_pid()
    plant_nonce = f"harness-planted-{secrets.token_hex(16)}"
    plant = backend.exec_file(
        _PROBE_CHILD, stdin=json.dumps({"plant": plant_nonce}).encode(), timeout_s=timeout_s
    )
    sibling = _Sibling(backend, timeout_s)
    t.sibling_pid = sibling.pid()
    child = _run_child(backend, t, env_source, timeout_s)
    run, watch = child.run, child.watch
    changed_limits, priority_now = _restore_parent(parent_limits, parent_priority)
    sibling_run = sibling.result()
    time.sleep(0.05)  # anything the child left to outlive it has had time to show itself
    leader = watch.leader
    outlived = [] if leader is None else _session_members(leader, include_zombies=False)
    zygote_alive = t.zygote_pid is None or _alive(t.zygote_pid)
    zygote_readable, zygote_breach = _read_zygote_state(t.zygote_pid, child_env(os.environ))
    decoy_status = t.decoy.poll()
    attempts, seen_by = child_report(run.stdout)
    skipped = frozenset(n for n, p in t.creates.items() if p is None)
    sysv = t.sysv
    return Observed(
        exit_status=run.exit_status,
        output=(run.stdout + b"\n" + run.stderr).decode("latin-1"),
        attempts=attempts,
        seen_by=seen_by,
        complete=finished(attempts, skipped),
        tcp_port=t.tcp.getsockname()[1],
        tcp_arrived=_drain_stream(t.tcp),
        udp_port=t.udp.getsockname()[1],
        udp_arrived=_drain_datagrams(t.udp),
        unix_path=t.unix_path,
        unix_arrived=_drain_stream(t.unix),
        abstract_name=t.abstract_name,
        abstract_arrived=_drain_stream(t.abstract),
        creates={n: None if p is None else str(p) for n, p in t.creates.items()},
        created=tuple(n for n, p in t.creates.items() if p is not None and os.path.lexists(p)),
        victims={n: str(p) for n, p in t.victims.items()},
        victim_changes={n: _diff(before[n], _snapshot(p)) for n, p in t.victims.items()},
        xattr_supported=t.xattr_supported,
        secrets=dict(t.secrets),
        parent_pid=os.getpid(),
        parent_entries=tuple(_parent_environ_entries(child_env(env_source))),
        decoy_pid=t.decoy.pid,
        decoy_secret=t.decoy_secret,
        decoy_status=decoy_status,
        environ_readable=t.environ_readable(),
        credential_file=str(t.credential_file),
        file_secret=t.file_secret,
        left_behind=tuple(child.left_behind),
        spawned=tuple(f"{pid}:{name}" for pid, name in sorted(watch.others.items())),
        changed_limits=tuple(changed_limits),
        limits_victim_pid=t.limits_victim.pid,
        victim_limits_before=victim_limits,
        victim_limits_after=_proc_limits(t.limits_victim.pid),
        parent_priority=parent_priority,
        parent_priority_after=priority_now,
        victim_priority=victim_priority,
        victim_priority_after=_priority(t.limits_victim.pid),
        sigurg=child.sigurg,
        main_thread=child.main_thread,
        sigio_victim_pid=t.sigio_victim.pid,
        sigio_status=t.sigio_victim.poll(),
        sysv_ready=sysv.ready,
        shm_id=sysv.shm_id,
        msg_id=sysv.msg_id,
        sem_id=sysv.sem_id,
        shm_breach=sysv.shm_breach() if sysv.ready else None,
        msg_breach=sysv.msg_breach() if sysv.ready else None,
        sem_breach=sysv.sem_breach() if sysv.ready else None,
        shm_secret=sysv.shm_secret.decode(),
        msg_secret=sysv.msg_secret.decode(),
        watched_dir=str(t.watched),
        watch_names=tuple(t.watch_names),
        watch_control=t.watch_control,
        max_shmem_growth=watch.max_shmem_growth,
        max_rss_bytes=run.max_rss_bytes,
        max_threads=watch.max_threads,
        task_cap=(info.limits or {}).get("tasks"),
        plant_nonce=plant_nonce,
        planted=plant.exit_status == 0 and plant.stdout == f"planted {plant_nonce}".encode(),
        plant_exit_status=plant.exit_status,
        sibling_pid=t.sibling_pid,
        sibling=sibling_run,
        sibling_traced=watch.traced.get("sibling"),
        zygote_pid=t.zygote_pid,
        zygote_alive=zygote_alive,
        zygote_traced=watch.traced.get("zygote"),
        outlived=tuple(outlived),
        zygote_readable=zygote_readable,
        zygote_breach=zygote_breach,
    )


# --- judging: one pure function per probe ---------------------------------------------------------


class ProbeFinding(NamedTuple):
    """A judge's reading of the observation for one probe; ``judge`` turns it into a verdict.

    ``breach`` is what got through (None: nothing did), ``held`` the ground truth when nothing
    did; ``applicable`` is false when this machine has no such target (``why_not`` says why);
    ``inconclusive`` says why nothing can be concluded when nothing got through.
    """

    target: str
    breach: str | None
    held: str
    applicable: bool = True
    why_not: str = "this machine has no such target"
    inconclusive: str | None = None


Judge = Callable[[Observed], ProbeFinding]


class Probe(NamedTuple):
    """One row of ``PROBES``: the probe's name, what the child attempts, and its judge.

    Every probe is attempted by the one confined probe child (``_probe_child.py``); the
    positive control runs before it, the planting call before it and the sibling call beside
    it. ``optional`` probes may be "not applicable" on a machine without the target.
    """

    name: str
    attempt: str
    judge: Judge
    optional: bool = False


def judge(probe: Probe, observed: Observed) -> ProbeResult:
    """The verdict of ``probe`` on ``observed``.

    Not applicable when the target is missing; allowed when anything got through; otherwise
    inconclusive when the judge says so or the child did not finish; otherwise denied.
    """
    finding = probe.judge(observed)
    if not finding.applicable:
        verdict, truth = ProbeVerdict.NOT_APPLICABLE, finding.why_not
    elif finding.inconclusive is not None and not finding.breach:
        verdict, truth = ProbeVerdict.INCONCLUSIVE, finding.inconclusive
    elif finding.breach:
        verdict, truth = ProbeVerdict.ALLOWED, finding.breach
    elif not observed.complete:
        verdict = ProbeVerdict.INCONCLUSIVE
        truth = f"the probe child did not finish (exit status {observed.exit_status})"
    else:
        verdict, truth = ProbeVerdict.DENIED, finding.held
    return ProbeResult(
        name=probe.name,
        target=finding.target,
        verdict=verdict,
        ground_truth=truth,
        child_saw=observed.attempts.get(probe.name, "no report"),
    )


_NOTHING_ARRIVED: Final = "nothing arrived at the parent's listener"
_NOTHING_LEAKED: Final = "no secret in the child's stdout or stderr"
_NO_SYSV: Final = "this machine offers no SysV IPC to the parent"
_NONCE_SEEN: Final = "the child's output holds the {} nonce"


def _arrived(what: str, n: int) -> str | None:
    return f"{n} {what} arrived at the parent's listener" if n else None


def _tcp_loopback(o: Observed) -> ProbeFinding:
    target = f"127.0.0.1:{o.tcp_port}/tcp"
    return ProbeFinding(target, _arrived("connection(s)", o.tcp_arrived), _NOTHING_ARRIVED)


def _udp_loopback(o: Observed) -> ProbeFinding:
    target = f"127.0.0.1:{o.udp_port}/udp"
    return ProbeFinding(target, _arrived("datagram(s)", o.udp_arrived), _NOTHING_ARRIVED)


def _unix_socket_path(o: Observed) -> ProbeFinding:
    return ProbeFinding(o.unix_path, _arrived("connection(s)", o.unix_arrived), _NOTHING_ARRIVED)


def _unix_socket_abstract(o: Observed) -> ProbeFinding:
    target = "@" + o.abstract_name
    return ProbeFinding(target, _arrived("connection(s)", o.abstract_arrived), _NOTHING_ARRIVED)


def _write(name: str, o: Observed) -> ProbeFinding:
    path = o.creates[name]
    made = path is not None and name in o.created
    return ProbeFinding(
        path if path is not None else _SYSTEM_WRITE_DIRS.get(name, ""),
        f"{path} was created" if made else None,
        "no file appeared",
        applicable=path is not None,
    )


def _victim(name: str, o: Observed) -> ProbeFinding:
    changed = o.victim_changes[name]
    return ProbeFinding(
        o.victims[name],
        f"the victim changed: {changed}" if changed else None,
        "the victim is unchanged (content, mode, mtime, xattrs)",
        applicable=name != "victim_xattr" or o.xattr_supported,
    )


def _credential_env(o: Observed) -> ProbeFinding:
    leaked = [name for name, value in o.secrets.items() if value in o.output]
    return ProbeFinding(
        ", ".join(_PLANTED_ENV),
        f"the child's output holds {', '.join(leaked)}" if leaked else None,
        _NOTHING_LEAKED,
    )


def _parent_environ(o: Observed) -> ProbeFinding:
    leaks = [e.split("=", 1)[0] for e in o.parent_entries if e in o.output]
    if o.decoy_secret in o.output:
        leaks.append(f"pid {o.decoy_pid}'s HARNESS_PROBE_DECOY_CREDENTIAL")
    return ProbeFinding(
        f"/proc/{o.parent_pid}/environ, /proc/{o.decoy_pid}/environ",
        f"the child's output holds {', '.join(leaks)}" if leaks else None,
        _NOTHING_LEAKED,
        applicable=o.environ_readable,
    )


def _credential_file(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        o.credential_file,
        "the child's output holds the file's secret" if o.file_secret in o.output else None,
        _NOTHING_LEAKED,
    )


def _signal_other(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        f"pid {o.decoy_pid} (same user)",
        f"it died with status {o.decoy_status}" if o.decoy_status is not None else None,
        "the process is still alive",
    )


def _spawn_subprocess(o: Observed) -> ProbeFinding:
    seen = sorted(set(o.left_behind) | set(o.spawned))
    return ProbeFinding(
        "exec and fork",
        f"in its session: {', '.join(seen)}" if seen else None,
        "no other process in the child's session while it ran or after",
    )


def _prlimit_parent(o: Observed) -> ProbeFinding:
    changed = o.changed_limits
    return ProbeFinding(
        f"pid {o.parent_pid} (the parent) RLIMIT_RTTIME",
        f"the parent's limits changed: {', '.join(changed)}" if changed else None,
        "the parent's limits are unchanged",
    )


def _prlimit_victim(o: Observed) -> ProbeFinding:
    changed = o.victim_limits_after != o.victim_limits_before
    return ProbeFinding(
        f"pid {o.limits_victim_pid} (a victim) RLIMIT_NOFILE",
        "the victim's /proc limits changed" if changed else None,
        "the victim's /proc limits are unchanged",
    )


def _setpriority_parent(o: Observed) -> ProbeFinding:
    before, after = o.parent_priority, o.parent_priority_after
    return ProbeFinding(
        f"pid {o.parent_pid} (the parent)",
        f"the parent's nice value went from {before} to {after}" if after != before else None,
        "the parent's nice value is unchanged",
    )


def _setpriority_victim(o: Observed) -> ProbeFinding:
    before, after = o.victim_priority, o.victim_priority_after
    return ProbeFinding(
        f"pid {o.limits_victim_pid} (a victim)",
        f"the victim's nice value went from {before} to {after}" if after != before else None,
        "the victim's nice value is unchanged",
    )


def _sigio_parent(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        f"pid {o.parent_pid} (the parent), SIGURG by F_SETOWN/FIOSETOWN",
        f"{o.sigurg} SIGURG reached the parent" if o.sigurg else None,
        "no SIGURG reached the parent",
        applicable=o.main_thread,
        why_not="only the main thread can catch the signal",
    )


def _sigio_victim(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        f"pid {o.sigio_victim_pid} (a victim), SIGKILL by F_SETOWN/FIOSETOWN",
        f"it died with status {o.sigio_status}" if o.sigio_status is not None else None,
        "the victim is still alive",
    )


def _sysv_shm(o: Observed) -> ProbeFinding:
    breach = o.shm_breach
    if o.sysv_ready and o.shm_secret in o.output:
        breach = _NONCE_SEEN.format("segment's")
    return ProbeFinding(
        f"SysV segment {o.shm_id} (the parent's, 0600): read, overwrite, remove",
        breach,
        "the segment is there, unchanged, and its nonce is not in the child's output",
        applicable=o.sysv_ready,
        why_not=_NO_SYSV,
    )


def _sysv_msg(o: Observed) -> ProbeFinding:
    breach = o.msg_breach
    if o.sysv_ready and o.msg_secret in o.output:
        breach = _NONCE_SEEN.format("queued message's")
    return ProbeFinding(
        f"SysV queue {o.msg_id} (the parent's, 0600): receive, remove",
        breach,
        "the message is still queued and its nonce is not in the child's output",
        applicable=o.sysv_ready,
        why_not=_NO_SYSV,
    )


def _sysv_sem(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        f"SysV semaphore {o.sem_id} (the parent's, 0600): set, remove",
        o.sem_breach,
        f"the semaphore is there with its value {_SEM_VALUE}",
        applicable=o.sysv_ready,
        why_not=_NO_SYSV,
    )


def _watch_names(name: str, how: str, other: str, o: Observed) -> ProbeFinding:
    # A name the report files under the other mechanism alone is that one's; any other name
    # in the output counts against both (never denied for what a child could do).
    theirs, mine = o.seen_by.get(other, ""), o.seen_by.get(name, "")
    against = [n for n in o.watch_names if n in o.output and (n in mine or n not in theirs)]
    return ProbeFinding(
        f"{o.watched_dir} ({how}), {len(o.watch_names)} secret names created while it ran",
        f"the child's output holds {len(against)} of the secret names" if against else None,
        "no name created in the directory is in the child's output",
        applicable=o.watch_control,
        why_not="inotify does not report to the parent itself here",
        inconclusive=None if o.watch_names else "no name was created while the child ran",
    )


def _memfd_huge(o: Observed) -> ProbeFinding:
    grew = o.max_shmem_growth
    return ProbeFinding(
        "2 GiB written into memfds",
        f"shared memory grew by {grew >> 20} MiB while it ran" if grew >= _GIB else None,
        f"shared memory grew by at most {max(grew, 0) >> 20} MiB",
    )


def _memory_2gib(o: Observed) -> ProbeFinding:
    peak = f"its peak resident memory was {o.max_rss_bytes >> 20} MiB"
    return ProbeFinding(
        "2 GiB of memory filled", peak if o.max_rss_bytes >= 2 * _GIB else None, peak
    )


def _threads_300(o: Observed) -> ProbeFinding:
    most = o.max_threads
    return ProbeFinding(
        f"{_THREADS_TARGET} threads (cap {o.task_cap})",
        f"it had {most} threads at once" if most >= _THREADS_TARGET else None,
        f"it had at most {most} threads at once",
        applicable=o.task_cap is not None,
        why_not=f"task cap {NO_TASK_CAP}",
    )


def _earlier_call_state(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        "an earlier call's environment, module state, memory and open pipe",
        "the child's output holds the earlier call's nonce" if o.plant_nonce in o.output else None,
        "nothing of the earlier call in the child's environment, memory or descriptors",
        inconclusive=None
        if o.planted
        else f"the planting call did not plant ({o.plant_exit_status})",
    )


def _sibling_summary(run: RunResult | None) -> str:
    if run is None:
        return "it did not run"
    return f"exit status {run.exit_status}, stdout {run.stdout[:60]!r}"


def _signal_sibling(o: Observed) -> ProbeFinding:
    run = o.sibling
    ran_as_planned = run is not None and run.exit_status == 0 and run.stdout == _SIBLING_DONE
    if run is not None and run.exit_status < 0:
        breach: str | None = f"the sibling was killed ({_sibling_summary(run)})"
    elif o.sibling_traced is not None:
        breach = f"the sibling was traced by pid {o.sibling_traced}"
    else:
        breach = None
    return ProbeFinding(
        f"pid {o.sibling_pid} (a concurrent call), SIGKILL and ptrace",
        breach,
        "the sibling call finished normally and was never traced",
        inconclusive=None
        if ran_as_planned
        else f"the sibling call did not run as planned ({_sibling_summary(run)})",
    )


def _signal_zygote(o: Observed) -> ProbeFinding:
    if not o.zygote_alive:
        breach: str | None = "the zygote is gone"
    elif o.zygote_traced is not None:
        breach = f"the zygote was traced by pid {o.zygote_traced}"
    else:
        breach = None
    return ProbeFinding(
        f"pid {o.zygote_pid} (the zygote), SIGKILL and ptrace",
        breach,
        "the zygote is alive and was never traced",
        applicable=o.zygote_pid is not None,
        why_not="no zygote: this backend spawns every child",
    )


def _outlive_reply(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        "clone(CLONE_PARENT) and fork, then reply",
        f"alive after the reply: {', '.join(o.outlived)}" if o.outlived else None,
        "no process of the call's session (a clone(CLONE_PARENT) sibling stays in it) was "
        "left after its reply",
    )


def _zygote_state(o: Observed) -> ProbeFinding:
    return ProbeFinding(
        f"/proc/{o.zygote_pid}/environ and /proc/{o.zygote_pid}/fd",
        o.zygote_breach,
        "the zygote's environment is the allowlist and its descriptors are /dev/null, sockets "
        "and pidfds only",
        applicable=o.zygote_readable,
        why_not="no zygote, or its /proc files are not readable by this user",
    )


# --- the table ------------------------------------------------------------------------------------

PROBES: Final = (
    Probe("tcp_loopback", "connect to the parent's TCP listener on 127.0.0.1", _tcp_loopback),
    Probe("udp_loopback", "send a datagram to the parent's UDP socket on 127.0.0.1", _udp_loopback),
    Probe("unix_socket_path", "connect to the parent's Unix socket by path", _unix_socket_path),
    Probe(
        "unix_socket_abstract",
        "connect to the parent's abstract Unix socket by name",
        _unix_socket_abstract,
    ),
    Probe("write_cwd", "create a file in its working directory", partial(_write, "write_cwd")),
    Probe("write_tmp", "create a file in /tmp", partial(_write, "write_tmp")),
    Probe(
        "write_var_tmp",
        "create a file in /var/tmp",
        partial(_write, "write_var_tmp"),
        optional=True,
    ),
    Probe(
        "write_dev_shm",
        "create a file in /dev/shm",
        partial(_write, "write_dev_shm"),
        optional=True,
    ),
    Probe("write_store", "create a file in the store directory", partial(_write, "write_store")),
    Probe("victim_modify", "write into a victim file", partial(_victim, "victim_modify")),
    Probe("victim_truncate", "truncate a victim file", partial(_victim, "victim_truncate")),
    Probe("victim_chmod", "chmod a victim file", partial(_victim, "victim_chmod")),
    Probe("victim_utime", "set a victim file's times", partial(_victim, "victim_utime")),
    Probe(
        "victim_xattr",
        "set a user extended attribute on a victim file",
        partial(_victim, "victim_xattr"),
        optional=True,
    ),
    Probe("victim_unlink", "unlink a victim file", partial(_victim, "victim_unlink")),
    Probe(
        "credential_env",
        "read the credentials planted in the environment it was offered (/proc/self/environ)",
        _credential_env,
    ),
    Probe(
        "parent_environ",
        "read the environment of its parent and of another process of the same user",
        _parent_environ,
        optional=True,
    ),
    Probe("credential_file", "read a credential file of the parent's", _credential_file),
    Probe("signal_other", "signal another process of the same user", _signal_other),
    Probe("spawn_subprocess", "exec a subprocess and fork", _spawn_subprocess),
    Probe("prlimit_parent", "change the parent's RLIMIT_RTTIME (prlimit)", _prlimit_parent),
    Probe("prlimit_victim", "change a victim process's RLIMIT_NOFILE (prlimit)", _prlimit_victim),
    Probe("setpriority_parent", "change the parent's nice value", _setpriority_parent),
    Probe("setpriority_victim", "change a victim process's nice value", _setpriority_victim),
    Probe(
        "sigio_parent",
        "make I/O signal the parent (F_SETOWN/FIOSETOWN with F_SETSIG SIGURG)",
        _sigio_parent,
        optional=True,
    ),
    Probe(
        "sigio_victim",
        "make I/O kill a victim process (F_SETOWN/FIOSETOWN with F_SETSIG SIGKILL)",
        _sigio_victim,
    ),
    Probe(
        "sysv_shm",
        "read, overwrite and remove the parent's SysV segment, by id",
        _sysv_shm,
        optional=True,
    ),
    Probe(
        "sysv_msg",
        "take the parent's queued SysV message and remove the queue, by id",
        _sysv_msg,
        optional=True,
    ),
    Probe(
        "sysv_sem",
        "reset and remove the parent's SysV semaphore, by id",
        _sysv_sem,
        optional=True,
    ),
    Probe(
        "inotify_watch",
        "watch a directory it cannot list with inotify while the parent creates secret names",
        partial(_watch_names, "inotify_watch", "inotify", "fanotify_watch"),
        optional=True,
    ),
    Probe(
        "fanotify_watch",
        "watch a directory it cannot list with fanotify while the parent creates secret names",
        partial(_watch_names, "fanotify_watch", "fanotify", "inotify_watch"),
        optional=True,
    ),
    Probe("memfd_huge", "write 2 GiB into memfds", _memfd_huge),
    Probe("memory_2gib", "fill 2 GiB of memory", _memory_2gib),
    Probe("threads_300", f"start {_THREADS_TARGET} threads", _threads_300, optional=True),
    Probe(
        "earlier_call_state",
        "find what an earlier call planted (environment, module state, memory, an open pipe)",
        _earlier_call_state,
    ),
    Probe(
        "signal_sibling",
        "kill or ptrace a concurrent call through the same backend",
        _signal_sibling,
    ),
    Probe("signal_zygote", "kill or ptrace the zygote", _signal_zygote, optional=True),
    Probe(
        "outlive_reply",
        "leave a process alive after its reply (clone(CLONE_PARENT), fork)",
        _outlive_reply,
    ),
    Probe(
        "zygote_state",
        "nothing: the parent reads the zygote's environment and descriptors from outside",
        _zygote_state,
        optional=True,
    ),
)
PROBE_NAMES: Final = tuple(probe.name for probe in PROBES)
# Targets a machine may lack; each is judged "not applicable" only when the parent's own control
# shows it cannot be reached at all (e.g. /proc/PID/environ where there is no /proc).
# ``sigio_parent`` needs a signal handler, which only the main thread can install;
# ``threads_300`` is not applicable to a tier that holds no task cap (``describe``: tasks null).
_OPTIONAL: Final = frozenset(probe.name for probe in PROBES if probe.optional)


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
