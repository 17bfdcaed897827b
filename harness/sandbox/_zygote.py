"""The Linux zygote: one clean, pre-initialised process that forks a fresh child per tool call.

Started once per backend (spawned by the harness, never forked from it) as
``<interpreter> -I -S -B _zygote.py --socket N --confine <tier as JSON>``, with an environment
of the allowlist only, ``/dev/null`` on its standard streams, no descriptor but its control
socket, and not dumpable. It imports what every call needs (the tool worker, the catalog, the
confinement module, ``ctypes``, ``json``, ``resource``) and then only waits. It never reads a
request, never runs tool code and never confines itself: it holds nothing a child could use.

For each call the harness sends one message on the control socket: a small JSON header (the
child's environment, working directory and, for ``sandbox exec``, the file's name) and the
descriptors of the call: a per-call control socket, the child's stdin, stdout and stderr and,
for ``sandbox exec``, the open file. The zygote forks; the child puts those descriptors in
place, closes every other one, starts a session of its own, and runs exactly what a spawned
child runs (``worker.main`` with ``--parent <zygote pid> --confine <tier>``): it confines itself
with the same tier and the same self-checks before it reads stdin, and exits after its reply.

On the per-call socket the zygote says ``{"pid": N}`` once the child is forked and
``{"exited": true}`` once it has ended (it stays unreaped, so its pid and process group
cannot be reused); the harness may send ``kill`` (SIGKILL to the child's process group) at
any time and ``reap`` once, answered with the exit status and the CPU time and peak memory
``wait4`` reports. A per-call socket closed early means kill and reap. When the harness goes
away (the control socket reaches end of file) the zygote kills every child's group and exits.
Children die with the zygote (``PR_SET_PDEATHSIG``, checked).

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
    from typing import Any

_PR_SET_DUMPABLE = 4
_MAX_HEADER = 1 << 20
_MAX_FDS = 5
_EXIT_CHILD_SETUP = 121  # as worker.EXIT_CONFINE_FAILED: the child ran nothing


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _send(sock: socket.socket, obj: dict[str, Any]) -> None:
    # An error means the harness gave up on this call: kill and reap follow from the closed socket.
    with contextlib.suppress(OSError):
        sock.send(json.dumps(obj, separators=(",", ":")).encode())


def _child(
    header: dict[str, Any], fds: list[int], worker: Any, policy_json: str, zygote: int
) -> None:
    """The forked child: its descriptors in place, all else closed, then the worker; no return."""
    status = _EXIT_CHILD_SETUP
    try:
        # fds: per-call socket, stdin, stdout, stderr[, the file to run]
        for target, fd in enumerate(fds[1:4]):
            os.dup2(fd, target)
        argv = ["--parent", str(zygote), "--confine", policy_json]
        if len(fds) == 5:
            os.dup2(fds[4], 3)
            os.closerange(4, 1 << 20)
            argv += ["--run-fd", "3", "--run-name", str(header["run_name"])]
        else:
            os.closerange(3, 1 << 20)
        os.setsid()
        os.chdir(header["cwd"])
        os.environ.clear()
        os.environ.update(header["env"])
        status = _run_worker(worker, argv, run_file=len(fds) == 5)
    except BaseException as e:  # noqa: BLE001 - a child must end here, whatever happened
        with contextlib.suppress(OSError):
            os.write(2, f"sandbox: zygote child setup failed: {type(e).__name__}: {e}\n".encode())
    finally:
        os._exit(status)


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
    def __init__(self, ctl: socket.socket, pid: int, pidfd: int) -> None:
        self.ctl = ctl
        self.pid = pid
        self.pidfd: int | None = pidfd

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


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

    worker.load_confine(root).prepare(worker.parse_policy(policy_json))
    libc = ctypes.CDLL(None, use_errno=True)
    # Not dumpable: no process of the same user can ptrace it or read its /proc files.
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _send(control, {"error": "PR_SET_DUMPABLE failed"})
        return 1
    zygote = os.getpid()
    calls: dict[int, _Call] = {}
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ, None)
    _send(control, {"ready": True, "pid": zygote})

    def finish(call: _Call) -> None:
        """Kill what is left of the call's group, reap the child, report, forget the call."""
        call.kill()
        _, wait_status, usage = os.wait4(call.pid, 0)
        _send(
            call.ctl,
            {
                "status": os.waitstatus_to_exitcode(wait_status),
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "max_rss_kib": usage.ru_maxrss,
            },
        )
        if call.pidfd is not None:
            sel.unregister(call.pidfd)
            os.close(call.pidfd)
        sel.unregister(call.ctl)
        call.ctl.close()

    while True:
        for key, _ in sel.select():
            data = key.data
            if data is None:
                try:
                    message, fds, _, _ = socket.recv_fds(control, _MAX_HEADER, _MAX_FDS)
                except OSError:
                    message, fds = b"", []
                if not message:
                    for call in list(calls.values()):
                        call.kill()
                    return 0
                if len(fds) not in (4, 5):
                    for fd in fds:
                        os.close(fd)
                    continue
                header = json.loads(message)
                pid = os.fork()
                if pid == 0:
                    control.close()
                    _child(header, fds, worker, policy_json, zygote)
                ctl = socket.socket(fileno=fds[0])
                for fd in fds[1:]:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                call = _Call(ctl, pid, pidfd)
                calls[ctl.fileno()] = call
                sel.register(ctl, selectors.EVENT_READ, ("ctl", call))
                sel.register(pidfd, selectors.EVENT_READ, ("exit", call))
                _send(ctl, {"pid": pid})
                continue
            kind, call = data
            if kind == "exit":
                sel.unregister(call.pidfd)
                os.close(call.pidfd)
                call.pidfd = None
                _send(call.ctl, {"exited": True})
                continue
            try:
                request = call.ctl.recv(64)
            except OSError:
                request = b""
            if request == b"kill":
                call.kill()
            elif request in (b"reap", b""):
                key_fd = call.ctl.fileno()
                finish(call)
                calls.pop(key_fd, None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
