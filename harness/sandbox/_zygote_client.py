"""The harness side of the Linux zygote (``_zygote.py``): start it once, run calls through it.

:class:`Zygote` spawns the zygote (``subprocess``, which execs a fresh interpreter: the zygote
is never a fork of this threaded process) with the allowlisted environment only, ``/dev/null``
on its standard streams and no descriptor but one end of a ``SOCK_SEQPACKET`` pair, and waits
for it to say it is ready. :meth:`Zygote.run` then does what ``run_child`` does for a spawned
child: three fresh pipes, stdin fed, stdout and stderr read within their limits, ``SIGKILL`` to
the child's whole process group at the timeout or the reply limit, ``on_exit`` while the child
is still unreaped, and the exit status, CPU time and peak memory of ``wait4``; only the fork,
the kill and the reap happen in the zygote, which is the child's parent. Calls may run from
several threads at once: each has its own per-call socket.

When the zygote is gone (killed, crashed) a call raises :class:`ZygoteDiedError`; the backend
fails closed, or falls back to spawning only when the policy says so.
This module neither builds the tier nor judges a reply.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.errors import SandboxError, SandboxZygoteError
from harness.sandbox._result import RunResult
from harness.sandbox._runner import process_state, pump, stopped

__all__ = ["Zygote", "ZygoteDiedError"]

_READY_TIMEOUT_S: Final = 20.0
_REPLY_TIMEOUT_S: Final = 30.0


class ZygoteDiedError(SandboxZygoteError):
    """The zygote is gone (or never became ready): no call can run through it.

    ``partial`` holds what the call's child wrote before the zygote (and so the child) died,
    for the probes to judge; a tool call never uses it.
    """

    partial: RunResult | None = None


def _recv_json(sock: socket.socket, timeout_s: float, what: str) -> dict[str, Any]:
    sock.settimeout(timeout_s)
    try:
        data = sock.recv(1 << 16)
    except TimeoutError as e:
        raise ZygoteDiedError(
            f"the sandbox zygote did not answer ({what}) in {timeout_s:g} s"
        ) from e
    except OSError as e:
        raise ZygoteDiedError(f"the sandbox zygote is gone ({what}): {e}") from e
    if not data:
        raise ZygoteDiedError(f"the sandbox zygote is gone ({what})")
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ZygoteDiedError(f"the sandbox zygote answered garbage ({what})")
    return value


def _left(deadline: float) -> float:
    """Seconds until ``deadline``, never zero (a zero socket timeout would mean non-blocking)."""
    return max(deadline - time.monotonic(), 0.001)


def _shut_down(sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        sock.close()
    try:
        proc.wait(timeout=10.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Zygote:
    """One running zygote for one tier (its policy JSON), serving calls until :meth:`close`."""

    def __init__(
        self, *, interpreter: Path, script: Path, policy_json: str, env: Mapping[str, str]
    ) -> None:
        """Spawn the zygote and wait until it is ready.

        Raises:
            ZygoteDiedError: when it cannot start or does not become ready.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        try:
            self._proc = subprocess.Popen(
                [
                    str(interpreter),
                    "-I",
                    "-S",
                    "-B",
                    str(script),
                    "--socket",
                    str(theirs.fileno()),
                    "--confine",
                    policy_json,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=dict(env),
                cwd="/",
                close_fds=True,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except OSError as e:
            ours.close()
            raise ZygoteDiedError(f"cannot start the sandbox zygote: {e}") from e
        finally:
            theirs.close()
        self._sock = ours
        # A backend dropped without close() still ends its zygote (end of file on the socket).
        self._finalizer = weakref.finalize(self, _shut_down, ours, self._proc)
        try:
            hello = _recv_json(ours, _READY_TIMEOUT_S, "start")
        except (ZygoteDiedError, ValueError) as e:
            self.close()
            status = self._proc.returncode
            why = f"it exited with status {status}" if status is not None else str(e)
            raise ZygoteDiedError(f"the sandbox zygote did not start: {why}") from e
        if hello.get("ready") is not True or hello.get("pid") != self._proc.pid:
            self.close()
            raise ZygoteDiedError(f"the sandbox zygote did not start: {hello.get('error', hello)}")
        self.pid: int = self._proc.pid

    def alive(self) -> bool:
        """True while the zygote process runs."""
        return self._proc.poll() is None

    def close(self) -> None:
        """Close the control socket (the zygote kills its children and exits) and reap it."""
        self._finalizer()

    def run(
        self,
        *,
        stdin: bytes,
        env: Mapping[str, str],
        cwd: str,
        timeout_s: float,
        max_stdout: int,
        max_stderr: int,
        on_exit: Callable[[int], None] | None = None,
        run_fd: int | None = None,
        run_name: str = "",
        on_start: Callable[[int], None] | None = None,
    ) -> RunResult:
        """Run one child forked by the zygote; the same contract as ``run_child``.

        Raises:
            ZygoteDiedError: when the zygote is gone before the child's end was reported.
            SandboxError: when the timeout is not positive.
        """
        if timeout_s <= 0:
            raise SandboxError(f"timeout must be positive, got {timeout_s}")
        start = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        ctl, ctl_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        theirs = [ctl_theirs.fileno(), in_r, out_w, err_w]
        if run_fd is not None:
            theirs.append(run_fd)
        header = json.dumps({"env": dict(env), "cwd": cwd, "run_name": run_name}).encode()
        # Each descriptor is closed exactly once: other threads reuse the numbers at once.
        stdin_open = [True]

        def close_stdin() -> None:
            if stdin_open[0]:
                stdin_open[0] = False
                os.close(in_w)

        try:
            try:
                with self._lock:
                    socket.send_fds(self._sock, [header], theirs)
            except OSError as e:
                raise ZygoteDiedError(f"the sandbox zygote is gone (send): {e}") from e
            finally:
                ctl_theirs.close()
                for fd in (in_r, out_w, err_w):
                    os.close(fd)
            return self._converse(
                ctl,
                in_w,
                out_r,
                err_r,
                stdin,
                start=start,
                deadline=deadline,
                max_stdout=max_stdout,
                max_stderr=max_stderr,
                on_exit=on_exit,
                on_start=on_start,
                close_stdin=close_stdin,
            )
        finally:
            ctl.close()
            close_stdin()
            os.close(out_r)
            os.close(err_r)

    def _converse(
        self,
        ctl: socket.socket,
        in_w: int,
        out_r: int,
        err_r: int,
        stdin: bytes,
        *,
        start: float,
        deadline: float,
        max_stdout: int,
        max_stderr: int,
        on_exit: Callable[[int], None] | None,
        on_start: Callable[[int], None] | None,
        close_stdin: Callable[[], None],
    ) -> RunResult:
        # The fork is answered within the call's own time or the zygote has stopped answering:
        # a call must never start late and be judged on what is left of its deadline.
        try:
            forked = _recv_json(ctl, min(_REPLY_TIMEOUT_S, _left(deadline)), "fork")
        except ZygoteDiedError as e:
            raise self._unresponsive(e) from e
        pid = forked.get("pid")
        if not isinstance(pid, int):
            raise ZygoteDiedError("the sandbox zygote did not fork the call's child")
        if on_start is not None:
            on_start(pid)
        if on_exit is None:
            self._send(ctl, b"auto")  # nothing to look at before the reap: one round trip less
        out, err, timed_out, overflow, was_stopped = pump(
            in_w,
            out_r,
            err_r,
            stdin,
            deadline=deadline,
            max_stdout=max_stdout,
            max_stderr=max_stderr,
            exit_fd=ctl.fileno(),
            close_stdin=close_stdin,
            watch_pid=pid,
        )
        close_stdin()
        if timed_out or overflow or was_stopped:
            self._kill(ctl)
        try:
            result = self._finish(ctl, pid, out, err, timed_out, overflow, start, deadline, on_exit)
        except ZygoteDiedError as e:
            e.partial = RunResult(
                exit_status=-9,
                stdout=bytes(out[: max_stdout + 1]),
                stderr=bytes(err),
                timed_out=timed_out,
                stdout_overflow=overflow,
                elapsed_s=time.perf_counter() - start,
            )
            raise
        return msgspec.structs.replace(result, stopped=True) if was_stopped else result

    def _unresponsive(self, cause: ZygoteDiedError) -> ZygoteDiedError:
        """The zygote did not answer in time: kill it and fail closed, as if it had died.

        A zygote stopped (SIGSTOP) or hung for a while would otherwise come back and let calls
        run late, judged on what is left of their time.
        """
        if not self.alive():
            return cause
        state = process_state(self.pid)
        with contextlib.suppress(OSError):
            self._proc.kill()
        return ZygoteDiedError(
            f"the sandbox zygote stopped answering ({cause}; process state {state}); it was killed"
        )

    def _finish(
        self,
        ctl: socket.socket,
        pid: int,
        out: bytearray,
        err: bytearray,
        timed_out: bool,
        overflow: bool,
        start: float,
        deadline: float,
        on_exit: Callable[[int], None] | None,
    ) -> RunResult:
        try:
            ended = _recv_json(ctl, _left(deadline), "exit")
        except ZygoteDiedError as e:
            if not self.alive():
                raise
            if stopped(self.pid):
                # Not the call's time running out: the zygote cannot answer.
                raise self._unresponsive(e) from e
            timed_out = True
            self._kill(ctl)
            try:
                ended = _recv_json(ctl, 10.0, "exit after kill")
            except ZygoteDiedError as again:
                raise self._unresponsive(again) from again
        if ended.get("exited") is not True:
            raise ZygoteDiedError(f"the sandbox zygote said {ended!r}, not that the child ended")
        if on_exit is not None:
            on_exit(pid)
            self._send(ctl, b"reap")
        reaped = _recv_json(ctl, _REPLY_TIMEOUT_S, "reap")
        return RunResult(
            exit_status=int(reaped["status"]),
            stdout=bytes(out),
            stderr=bytes(err),
            timed_out=timed_out,
            stdout_overflow=overflow,
            elapsed_s=time.perf_counter() - start,
            cpu_s=float(reaped["cpu_s"]),
            max_rss_bytes=int(reaped["max_rss_kib"]) * 1024,
        )

    @staticmethod
    def _send(ctl: socket.socket, request: bytes) -> None:
        try:
            ctl.send(request)
        except OSError as e:
            raise ZygoteDiedError(f"the sandbox zygote is gone ({request.decode()}): {e}") from e

    @staticmethod
    def _kill(ctl: socket.socket) -> None:
        with contextlib.suppress(OSError):
            ctl.send(b"kill")
