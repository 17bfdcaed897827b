"""The Linux zygote: one clean, pre-initialised process that forks a fresh child per tool call.

Started once per backend (spawned by the harness, never forked from it) as
``<interpreter> -I -S -B _zygote.py --socket N --confine <tier as JSON>``, with an environment
of the allowlist only, ``/dev/null`` on its standard streams, no descriptor but its control
socket, and not dumpable. It imports what every call needs (the tool worker, the catalog, the
confinement module, ``ctypes``, ``json``, ``resource``) and then only waits. It never reads a
request, never runs tool code and never confines itself: it holds nothing a child could use.

Each call gets a child of its own, forked fresh and used once. The zygote forks the next
call's child ahead of its call: the child closes every descriptor but ``/dev/null`` on 0-2
and a socket of its own, starts a session of its own, and confines itself with the tier
(``worker.confine`` with ``--parent <zygote pid>``: the same steps and self-checks as a spawned
child) before it waits on that socket for its call. For a call the harness sends one message
on the control socket: a small JSON header (the child's environment, working directory and,
for ``sandbox exec``, the file's name) and the call's descriptors: a per-call control socket,
the child's stdin, stdout and stderr and, for ``sandbox exec``, the open file. The zygote
passes the header and the child's descriptors to the waiting child, which puts them in place,
closes its socket and runs the worker (the call, or the file) and exits. A child whose
confinement failed says so on the call's stderr and runs nothing (exit 121).

On the per-call socket the zygote says ``{"pid": N}`` once the child has the call and
``{"exited": true}`` once it has ended (it stays unreaped, so its pid and process group
cannot be reused); the harness may send ``kill`` (SIGKILL to the child's process group) at
any time and ``reap`` once, answered with the exit status and the CPU time and peak memory
``wait4`` reports (``auto`` instead asks for that answer right after ``exited``, when the
harness takes no look at the ended child first). With a pid namespace the call runs as pid 1
and the child's waiting original reports pid 1's end (status, CPU time, peak memory) before
its own exit tears the namespaces down; that report is the answer. A per-call socket closed
early means kill and reap. When the harness goes away (the control socket reaches end of
file) the zygote kills every child's group and exits. Children die with the zygote
(``PR_SET_PDEATHSIG``, checked).

Standard library only: it runs under ``python -I -S``. It decides nothing about outcomes: the
harness judges every call exactly as it judges a spawned child.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_PR_SET_DUMPABLE = 4
_MAX_HEADER = 1 << 20
_MAX_FDS = 5
_EXIT_CHILD_SETUP = 121  # as worker.EXIT_CONFINE_FAILED: the child ran nothing
_CALL_EVENTS = ("report", "exit", "ctl")  # events a finished call ignores (stale in a round)


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _send(sock: socket.socket, obj: dict[str, Any]) -> None:
    # An error means the harness gave up on this call: kill and reap follow from the closed socket.
    with contextlib.suppress(OSError):
        sock.send(json.dumps(obj, separators=(",", ":")).encode())


def _waiting_child(sock_fd: int, worker: Any, policy_json: str, zygote: int) -> None:
    """A fresh child: confine itself, wait for its one call, run it, exit. Never returns."""
    status = _EXIT_CHILD_SETUP
    try:
        # Nothing of the zygote's but /dev/null on 0-2 and this call's socket on 3.
        os.dup2(sock_fd, 3)
        os.closerange(4, 1 << 20)
        os.setsid()
        why = worker.confine(_root(), policy_json, zygote, report_fd=3)
        sock = socket.socket(fileno=3)
        message, fds, _, _ = socket.recv_fds(sock, _MAX_HEADER, _MAX_FDS)
        if not message or len(fds) not in (3, 4):
            os._exit(status)  # the zygote is gone, or let this child go unused
        header = json.loads(message)
        # fds: stdin, stdout, stderr[, the file to run]
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        sock.detach()
        run_file = len(fds) == 4
        if run_file:
            os.dup2(fds[3], 3)
            os.closerange(4, 1 << 20)
        else:
            os.closerange(3, 1 << 20)
        os.chdir(header["cwd"])
        os.environ.clear()
        os.environ.update(header["env"])
        if why is not None:
            os.write(2, f"{why}\n".encode())
            os._exit(status)  # confined or not, it runs nothing
        argv = ["--run-fd", "3", "--run-name", str(header["run_name"])] if run_file else []
        status = _run_worker(worker, argv, run_file=run_file)
    except BaseException as e:  # noqa: BLE001 - a child must end here, whatever happened
        with contextlib.suppress(OSError):
            os.write(2, f"sandbox: zygote child setup failed: {type(e).__name__}: {e}\n".encode())
    finally:
        os._exit(status)


class _Waiting:
    """A child forked and confining itself (or confined) ahead of the call it will run."""

    def __init__(self, control: socket.socket, worker: Any, policy_json: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            control.close()
            _waiting_child(theirs.fileno(), worker, policy_json, os.getppid())
        theirs.close()
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.sock = ours


def _run_worker(worker: Any, argv: list[str], *, run_file: bool) -> int:
    """Run the worker as its ``__main__`` block does and return the exit status."""
    if not run_file:
        status = int(worker.entry(argv))
        sys.stdout.flush()
        sys.stderr.flush()
        return status
    # ``sandbox exec``: the file ends as a Python program does (SystemExit, a traceback, atexit).
    try:
        status = int(worker.entry(argv))
    except SystemExit as e:
        code = e.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code & 0xFF
        else:
            sys.stderr.write(f"{code}\n")
            status = 1
    except BaseException:  # noqa: BLE001 - the program's uncaught exception, as Python shows it
        import traceback

        traceback.print_exc()
        status = 1
    if "atexit" in sys.modules:
        sys.modules["atexit"]._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return status


class _Call:
    def __init__(self, ctl: socket.socket, pid: int, pidfd: int, report: socket.socket) -> None:
        self.ctl = ctl
        self.pid = pid
        self.pidfd: int | None = pidfd
        self.report: socket.socket | None = report
        self.reported: dict[str, Any] | None = None
        self.exited = False
        self.auto = False
        self.finished = False

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


class _Zygote:
    """The zygote's state and one handler per event its selector reports.

    Events: the control socket (a new call, or end of file: the harness went away), a waiting
    child's pidfd (``waiting``: it died before its call), and per call its control socket
    (``ctl``: ``kill``, ``auto``, ``reap`` or close), its pidfd (``exit``), its child's report
    socket (``report``: pid 1's end in a pid namespace), then ``reap`` (the waiting original
    is gone) and ``drain`` (the harness closed its end of the call's socket).
    """

    def __init__(self, control: socket.socket, worker: Any, policy_json: str) -> None:
        self.control = control
        self.worker = worker
        self.policy_json = policy_json
        self.calls: dict[int, _Call] = {}
        self.sel = selectors.DefaultSelector()
        self.sel.register(control, selectors.EVENT_READ, None)
        self.waiting: list[_Waiting] = []
        self.assigned: dict[int, _Waiting] = {}
        # Children whose end was reported before their exit: reaped once they are gone.
        self.ending: dict[int, int] = {}

    # --- children ---------------------------------------------------------------------------

    def prepare_next(self) -> None:
        """Fork the next call's child now, so it confines itself before its call arrives."""
        child = _Waiting(self.control, self.worker, self.policy_json)
        self.waiting.append(child)
        self.sel.register(child.pidfd, selectors.EVENT_READ, ("waiting", child))

    def drop(self, child: _Waiting) -> None:
        self.sel.unregister(child.pidfd)
        os.close(child.pidfd)
        child.sock.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child.pid, 0)

    def assign(self, message: bytes, fds: list[int]) -> int:
        """Hand the call to a waiting child (a fresh one if it died); its pid."""
        for _ in range(2):
            if not self.waiting:
                self.prepare_next()
            child = self.waiting.pop(0)
            try:
                socket.send_fds(child.sock, [message], fds)
            except OSError:
                child.sock.close()
                os.kill(child.pid, signal.SIGKILL)
                drop_pidfd = child.pidfd
                self.sel.unregister(drop_pidfd)
                os.close(drop_pidfd)
                os.waitpid(child.pid, 0)
                continue
            self.sel.unregister(child.pidfd)
            self.assigned[child.pid] = child
            return child.pid
        return 0

    # --- a call's end -----------------------------------------------------------------------

    def ended(self, call: _Call) -> None:
        if not call.exited:
            call.exited = True
            _send(call.ctl, {"exited": True})
            if call.auto:
                self.done(call)

    def done(self, call: _Call) -> None:
        if call.finished:
            return
        call.finished = True
        key_fd = call.ctl.fileno()
        self.finish(call)
        self.calls.pop(key_fd, None)
        if not self.waiting:
            # The next call's child confines itself now, not while this call ran beside it.
            self.prepare_next()

    def finish(self, call: _Call) -> None:
        """Kill what is left of the call's group, report how it ended, forget the call.

        With a pid namespace the waiting original reported pid 1's end before its own exit
        (which tears the namespaces down): that report is the answer, and the original is
        reaped when it is gone. Otherwise the child is reaped here and ``wait4`` answers.
        """
        call.kill()
        if call.report is not None:
            self.sel.unregister(call.report)
            call.report.close()
            call.report = None
        if call.reported is not None and call.pidfd is not None:
            _send(call.ctl, call.reported)
            self.sel.modify(call.pidfd, selectors.EVENT_READ, ("reap", call))
            self.ending[call.pid] = call.pidfd
        else:
            _, wait_status, usage = os.wait4(call.pid, 0)
            _send(
                call.ctl,
                call.reported
                or {
                    "status": os.waitstatus_to_exitcode(wait_status),
                    "cpu_s": usage.ru_utime + usage.ru_stime,
                    "max_rss_kib": usage.ru_maxrss,
                },
            )
            if call.pidfd is not None:
                self.sel.unregister(call.pidfd)
                os.close(call.pidfd)
        # Closed only once the harness closed its end: closing a socket with a request still
        # unread (a late ``kill``) would reset it before the harness read the answer.
        self.sel.modify(call.ctl, selectors.EVENT_READ, ("drain", call))

    # --- events -----------------------------------------------------------------------------

    def on_control(self) -> bool:
        """A message on the control socket: start its call. False: the harness went away
        (every child's group is killed)."""
        try:
            message, fds, _, _ = socket.recv_fds(self.control, _MAX_HEADER, _MAX_FDS)
        except OSError:
            message, fds = b"", []
        if not message:
            for call in list(self.calls.values()):
                call.kill()
            for child in self.waiting:
                os.kill(child.pid, signal.SIGKILL)
            return False
        if len(fds) not in (4, 5):
            for fd in fds:
                os.close(fd)
            return True
        ctl = socket.socket(fileno=fds[0])
        pid = self.assign(message, fds[1:])
        for fd in fds[1:]:
            os.close(fd)
        if not pid:
            ctl.close()  # the harness sees the call's socket close: no child
            return True
        child = self.assigned.pop(pid)
        call = _Call(ctl, pid, child.pidfd, child.sock)
        self.calls[ctl.fileno()] = call
        self.sel.register(ctl, selectors.EVENT_READ, ("ctl", call))
        self.sel.register(child.pidfd, selectors.EVENT_READ, ("exit", call))
        self.sel.register(child.sock, selectors.EVENT_READ, ("report", call))
        _send(ctl, {"pid": pid})
        return True

    def on_waiting(self, child: _Waiting) -> None:
        """A child died before its call (killed from outside): fork its successor only when
        a call needs one. (An event of this round may be stale: the child was given a call
        earlier in the same round.)"""
        if child in self.waiting:
            self.waiting.remove(child)
            self.drop(child)

    def on_drain(self, call: _Call) -> None:
        """Close a finished call's socket once the harness closed its end."""
        try:
            closed = call.ctl.recv(64) == b""
        except BlockingIOError:
            closed = False
        except OSError:
            closed = True
        if closed:
            self.sel.unregister(call.ctl)
            call.ctl.close()

    def on_reap(self, call: _Call) -> None:
        """The waiting original of a reported call is gone: reap it."""
        assert call.pidfd is not None  # registered for ``reap`` only with its pidfd open
        self.sel.unregister(call.pidfd)
        os.close(call.pidfd)
        self.ending.pop(call.pid, None)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(call.pid, 0)

    def on_report(self, call: _Call) -> None:
        """The waiting original reports pid 1's end (status, CPU time, peak memory)."""
        try:
            words = call.report.recv(256).split() if call.report is not None else []
        except OSError:
            words = []
        if call.report is not None:
            self.sel.unregister(call.report)
            call.report.close()
            call.report = None
        if len(words) == 3:
            call.reported = {
                "status": int(words[0]),
                "cpu_s": float(words[1]),
                "max_rss_kib": int(words[2]),
            }
            self.ended(call)

    def on_exit(self, call: _Call) -> None:
        """The call's child has exited (it stays unreaped until the call is done)."""
        if call.reported is None and call.report is not None:
            # Gone without a report: its exit status is the answer.
            self.sel.unregister(call.report)
            call.report.close()
            call.report = None
        assert call.pidfd is not None  # its pidfd is registered for ``exit`` while open
        self.sel.unregister(call.pidfd)
        os.close(call.pidfd)
        call.pidfd = None
        self.ended(call)

    def on_request(self, call: _Call) -> None:
        """A request on the call's socket: ``kill``, ``auto``, ``reap``, or its close."""
        try:
            request = call.ctl.recv(64)
        except OSError:
            request = b""
        if request == b"kill":
            call.kill()
        elif request == b"auto":
            # No look at the ended child is wanted: reap it as soon as it has ended.
            call.auto = True
            if call.exited:
                self.done(call)
        elif request in (b"reap", b""):
            self.done(call)

    def serve(self) -> int:
        """Dispatch events until the harness closes the control socket."""
        handlers: dict[str, Callable[[Any], None]] = {
            "waiting": self.on_waiting,
            "drain": self.on_drain,
            "reap": self.on_reap,
            "report": self.on_report,
            "exit": self.on_exit,
            "ctl": self.on_request,
        }
        _send(self.control, {"ready": True, "pid": os.getpid()})
        self.prepare_next()
        while True:
            for key, _ in self.sel.select():
                if key.data is None:
                    if not self.on_control():
                        return 0
                    continue
                kind, item = key.data
                if kind in _CALL_EVENTS and item.finished:
                    continue  # a stale event of this round: an earlier one finished the call
                handlers[kind](item)


def main(argv: list[str]) -> int:
    """Serve calls until the harness closes the control socket."""
    if len(argv) != 4 or argv[0] != "--socket" or argv[2] != "--confine":
        sys.stderr.write("zygote: usage: _zygote.py --socket N --confine POLICY_JSON\n")
        return 2
    control = socket.socket(fileno=int(argv[1]))
    policy_json = argv[3]
    root = _root()
    sys.path.insert(0, root)
    import ctypes

    from harness.tools import catalog, worker  # noqa: F401 - every child needs them

    worker.load_confine(root).confine_child(worker.parse_policy(policy_json))
    libc = ctypes.CDLL(None, use_errno=True)
    # Not dumpable: no process of the same user can ptrace it or read its /proc files.
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _send(control, {"error": "PR_SET_DUMPABLE failed"})
        return 1
    return _Zygote(control, worker, policy_json).serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
