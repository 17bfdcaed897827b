"""Spawn one child, feed its stdin, read its stdout and stderr within limits, and reap it.

The child gets an explicit environment, no inherited descriptor but its three pipes (``close_fds``)
and those named in ``pass_fds``, and a session of its own, so its process group is exactly what it
started. The wall-clock limit and the stdout limit both end in ``SIGKILL`` to the whole process
group. The child's exit is observed without reaping it (``waitid(WNOWAIT)``), so its pid, and with
it the process group id, cannot be reused while an ``on_exit`` hook looks at it and while stragglers
are killed; only then is it reaped.

This module neither builds the command line nor interprets the output.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from harness.errors import SandboxError
from harness.sandbox._result import RunResult

__all__ = ["CHILD_ENV_ALLOWLIST", "child_env", "process_state", "pump", "run_child", "stopped"]

_CHUNK: Final = 65536
_POLL_S: Final = 0.0005
# How often a running call is checked for having been stopped (one /proc read per process).
_STOP_CHECK_S: Final = 0.1
_STOPPED_STATES: Final = frozenset({"T", "t"})

# Inherited only so an interpreter that needs it can start; nothing else of the parent's
# environment (credentials, HOME, proxies) reaches a child.
CHILD_ENV_ALLOWLIST: Final = ("LD_LIBRARY_PATH",)
_CHILD_ENV_FIXED: Final = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def child_env(source: Mapping[str, str]) -> dict[str, str]:
    """The environment a child gets: fixed values plus the allowlisted names from ``source``."""
    env = dict(_CHILD_ENV_FIXED)
    for name in CHILD_ENV_ALLOWLIST:
        if name in source:
            env[name] = source[name]
    return env


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` in ``/proc/PID/stat`` (None when gone or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    end = data.rfind(b")")
    return data[end + 2 : end + 3].decode("ascii", "replace") or None


def stopped(pid: int) -> bool:
    """True when ``pid`` or a child of it (a call's pid 1) is stopped or traced.

    The harness never stops a child: a stop is another process's signal (SIGSTOP, SIGTSTP) or a
    tracer. Without /proc (macOS) nothing is seen and this is False.
    """
    pids = [pid]
    children = f"/proc/{pid}/task/{pid}/children"
    with contextlib.suppress(OSError, ValueError), open(children, "rb") as f:
        pids += [int(child) for child in f.read().split()]
    return any(process_state(p) in _STOPPED_STATES for p in pids)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    """True once ``pid`` has exited; leaves it unreaped (a zombie keeps its pid and group)."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
    return info is not None


def _wait_exit(pid: int, pidfd: int | None, deadline: float) -> bool:
    """Wait until ``pid`` exits or ``deadline`` passes; True when it exited."""
    if pidfd is not None:
        with selectors.DefaultSelector() as sel:
            sel.register(pidfd, selectors.EVENT_READ)
            sel.select(max(deadline - time.monotonic(), 0.0))
        return _exited(pid)
    while not _exited(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def run_child(
    argv: Sequence[str],
    *,
    stdin: bytes,
    env: Mapping[str, str],
    cwd: str,
    timeout_s: float,
    max_stdout: int,
    max_stderr: int,
    on_exit: Callable[[int], None] | None = None,
    pass_fds: Sequence[int] = (),
    on_start: Callable[[int], None] | None = None,
) -> RunResult:
    """Run ``argv`` once and return what it did.

    Args:
        argv: the full command line (the first item an absolute path).
        stdin: bytes written to the child's stdin, which is then closed.
        env: the child's whole environment.
        cwd: the child's working directory.
        timeout_s: wall-clock limit from spawn; past it the process group is killed.
        max_stdout: stdout bytes accepted; one more and the process group is killed.
        max_stderr: how many trailing stderr bytes are kept.
        on_exit: called with the child's pid after it exited and before its process group is
            killed and it is reaped (the probes look for processes it left behind).
        pass_fds: descriptors the child inherits under the same numbers (nothing else is).
        on_start: called with the child's pid right after it was started (the probes watch
            it from outside while it runs); it must not block.

    Raises:
        SandboxError: when the child cannot be started at all.
    """
    if timeout_s <= 0:
        raise SandboxError(f"timeout must be positive, got {timeout_s}")
    start = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            close_fds=True,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
        )
    except OSError as e:
        raise SandboxError(f"cannot start the sandbox child {argv[0]!r}: {e}") from e
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    pid = proc.pid
    if on_start is not None:
        on_start(pid)
    pidfd: int | None = None
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
    in_fd, out_fd, err_fd = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
    out, err, timed_out, overflow, was_stopped = pump(
        in_fd,
        out_fd,
        err_fd,
        stdin,
        deadline=deadline,
        max_stdout=max_stdout,
        max_stderr=max_stderr,
        exit_fd=pidfd,
        close_stdin=proc.stdin.close,
        watch_pid=pid,
    )
    if timed_out or overflow or was_stopped:
        _kill_group(pid)
    if not _wait_exit(pid, pidfd, deadline):
        timed_out = True
        _kill_group(pid)
        _wait_exit(pid, pidfd, time.monotonic() + 10.0)
    if on_exit is not None:
        on_exit(pid)
    _kill_group(pid)  # stragglers in its group; the unreaped leader keeps the id from reuse
    # Reaped here, not by ``proc.wait()``: ``wait4`` also says what CPU time and memory the
    # child (and whatever it waited for itself) used, which tells a cap from a kill.
    _, wait_status, usage = os.wait4(pid, 0)
    status = os.waitstatus_to_exitcode(wait_status)
    proc.returncode = status
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    if pidfd is not None:
        os.close(pidfd)
    return RunResult(
        exit_status=status,
        stdout=bytes(out[: max_stdout + 1]),
        stderr=bytes(err),
        timed_out=timed_out,
        stdout_overflow=overflow,
        elapsed_s=time.perf_counter() - start,
        stopped=was_stopped,
        cpu_s=usage.ru_utime + usage.ru_stime,
        # Linux counts ru_maxrss in KiB, macOS in bytes.
        max_rss_bytes=usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024),
    )


def pump(  # noqa: C901 - one poll loop over stdin, stdout, stderr and the deadline
    in_fd: int,
    out_fd: int,
    err_fd: int,
    stdin: bytes,
    *,
    deadline: float,
    max_stdout: int,
    max_stderr: int,
    exit_fd: int | None,
    close_stdin: Callable[[], None],
    watch_pid: int | None = None,
) -> tuple[bytearray, bytearray, bool, bool, bool]:
    """Feed stdin and read stdout and stderr until both close, the child ends or a limit passes.

    ``exit_fd`` becoming readable means the child is gone: what it wrote is in the pipes then,
    and descendants that still hold them open must not keep the call waiting. ``watch_pid``,
    when given, is checked every ``_STOP_CHECK_S``: a stopped child ends the pump at once.

    Returns:
        stdout, the tail of stderr, whether the deadline passed, whether stdout overflowed,
        whether the watched child was seen stopped.
    """
    for fd in (in_fd, out_fd, err_fd):
        os.set_blocking(fd, False)
    out = bytearray()
    err = bytearray()
    pending = memoryview(stdin)
    timed_out = overflow = was_stopped = False
    next_check = time.monotonic() + _STOP_CHECK_S
    sel = selectors.DefaultSelector()
    try:
        if pending:
            sel.register(in_fd, selectors.EVENT_WRITE)
        else:
            close_stdin()
        sel.register(out_fd, selectors.EVENT_READ)
        sel.register(err_fd, selectors.EVENT_READ)
        if exit_fd is not None:
            sel.register(exit_fd, selectors.EVENT_READ)
        open_pipes = {out_fd, err_fd}

        def drain(fd: int) -> bool:
            """Read what ``fd`` has now; True when stdout passed its limit."""
            while True:
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    return False
                if not chunk:
                    sel.unregister(fd)
                    open_pipes.discard(fd)
                    return False
                if fd == out_fd:
                    out.extend(chunk)
                    if len(out) > max_stdout:
                        return True
                else:
                    err.extend(chunk)
                    del err[:-max_stderr]

        while open_pipes and not overflow:
            now = time.monotonic()
            remaining = deadline - now
            if watch_pid is not None and (now >= next_check or remaining <= 0):
                next_check = now + _STOP_CHECK_S
                if stopped(watch_pid):
                    was_stopped = True
                    break
            if remaining <= 0:
                timed_out = True
                break
            wait = remaining if watch_pid is None else min(remaining, _STOP_CHECK_S)
            for key, _ in sel.select(wait):
                fd = int(key.fd)
                if fd == in_fd:
                    try:
                        written = os.write(in_fd, pending[:_CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        written = len(pending)  # the child stopped reading: its reply decides
                    pending = pending[written:]
                    if not pending:
                        sel.unregister(in_fd)
                        close_stdin()
                elif fd == exit_fd:
                    sel.unregister(exit_fd)
                    for pipe in tuple(open_pipes):
                        overflow = overflow or drain(pipe)
                    open_pipes.clear()
                    break
                elif drain(fd):
                    overflow = True
                    break
    finally:
        sel.close()
    return out, err, timed_out, overflow, was_stopped
