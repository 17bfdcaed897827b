"""What every sandbox backend shares: one tool call in, one typed result out.

A backend knows how to build the child's command line (``_argv``); everything else, the
request's shape and size, the child's environment, limits, timeout, and the reading of the
reply, is here, so macOS and Linux judge a reply the same way. Calls are independent and
blocking: the V2 loop runs them with ``trio.to_thread.run_sync``, several at once if it likes.

This module does not confine anything itself and does not pick a backend (``_open`` does).
"""

from __future__ import annotations

import errno
import os
import signal
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.canonical import NonCanonicalError, canonical_bytes
from harness.errors import SandboxError, SandboxRequestError
from harness.sandbox._result import BackendInfo, Outcome, RunResult, ToolCallResult
from harness.sandbox._runner import child_env, run_child
from harness.tools import worker

__all__ = ["ChildBackend", "Limits", "resolve_interpreter"]

_REQUEST_KEYS: Final = frozenset({"tool_id", "args", "world"})


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Size limits of one call. The request limit cannot exceed what the worker accepts."""

    max_request_bytes: int = worker.MAX_REQUEST_BYTES
    max_response_bytes: int = 8 * 1024 * 1024
    max_stderr_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        if not 0 < self.max_request_bytes <= worker.MAX_REQUEST_BYTES:
            raise ValueError(
                f"max_request_bytes must be in 1..{worker.MAX_REQUEST_BYTES}, "
                f"got {self.max_request_bytes}"
            )
        if self.max_response_bytes <= 0 or self.max_stderr_bytes <= 0:
            raise ValueError("response and stderr limits must be positive")


class _WorkerError(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    kind: str
    message: str


class _WorkerReply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    ok: bool
    response: Any = msgspec.UNSET
    error: _WorkerError | msgspec.UnsetType = msgspec.UNSET


_REPLY_DECODER: Final = msgspec.json.Decoder(_WorkerReply)


def resolve_interpreter(interpreter: str | os.PathLike[str]) -> Path:
    """Resolve ``interpreter`` to the real binary a child runs.

    A symlink is followed; a script (a version-manager shim, which would fork and exec another
    interpreter) is refused, as is anything that is not an executable file.

    Raises:
        SandboxError: when the path is not an executable binary.
    """
    path = Path(interpreter).resolve()
    try:
        with path.open("rb") as f:
            head = f.read(2)
    except OSError as e:
        raise SandboxError(f"cannot read the interpreter {str(path)!r}: {e.strerror}") from e
    if head == b"#!":
        raise SandboxError(f"the interpreter {str(path)!r} is a script (a shim?), not a binary")
    if not os.access(path, os.X_OK):
        raise SandboxError(f"the interpreter {str(path)!r} is not executable")
    return path


def _describe_exit(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""


class ChildBackend(ABC):
    """A sandbox backend: every call runs in a fresh confined child.

    Subclasses provide :meth:`_argv` (the confined command line) and :meth:`describe`.
    """

    #: Exit statuses meaning "the child could not confine itself" (it then ran nothing).
    confine_failed_statuses: frozenset[int] = frozenset({worker.EXIT_CONFINE_FAILED})

    def __init__(self, *, interpreter: Path, project_root: Path, limits: Limits) -> None:
        self.interpreter = interpreter
        self.project_root = project_root
        self.tool_code = project_root / "harness"
        self.worker_path = self.tool_code / "tools" / "worker.py"
        self.limits = limits

    def zygote_pid(self) -> int | None:
        """The pid of the process that forks every call's child, or None when each is spawned."""
        return None

    def close(self) -> None:  # noqa: B027 - a spawning backend holds nothing between calls
        """Release what the backend holds between calls (nothing, for a spawning backend)."""

    @abstractmethod
    def describe(self) -> BackendInfo:
        """Backend name, tier, Landlock ABI and the pinned profile's digest."""

    @abstractmethod
    def _argv(self, run_fd: int | None, run_name: str) -> list[str]:
        """The child's full command line (``run_fd``: run the file open there, not a tool call)."""

    def argv(self, run_fd: int | None = None, run_name: str = "") -> list[str]:
        """The command line of a tool call (or of ``sandbox exec`` of the file at ``run_fd``)."""
        return self._argv(run_fd, run_name)

    def cpu_cap_s(self) -> float | None:
        """The per-call CPU time cap in seconds, or None when the backend sets none."""
        limits = self.describe().limits
        cap = None if limits is None else limits.get("cpu_seconds")
        return None if cap is None else float(cap)

    def memory_cap_bytes(self) -> int | None:
        """The per-call address-space cap in bytes, or None when the backend sets none."""
        limits = self.describe().limits
        return None if limits is None else limits.get("address_space_bytes")

    def _bare_argv(self) -> list[str]:
        return [str(self.interpreter), "-I", "-S", "-B", str(self.worker_path)]

    def call(
        self,
        request: Mapping[str, Any],
        *,
        timeout_s: float,
        env_source: Mapping[str, str] | None = None,
    ) -> ToolCallResult:
        """Run one tool call in a fresh confined child and return its typed outcome.

        Args:
            request: ``{"tool_id": str, "args": ..., "world": ...}``, JSON values only.
            timeout_s: wall-clock limit for the whole child, spawn to exit.
            env_source: the environment the child's allowlisted variables are taken from
                (default: this process's); nothing outside the allowlist is passed on.

        Returns:
            OK with the parsed response, or a failure outcome with one sentence saying why.

        Raises:
            SandboxRequestError: when the request is not of the required shape or not
                canonically encodable (NaN, infinity, non-JSON types).
            SandboxError: when the child cannot be started at all.
        """
        if set(request) != _REQUEST_KEYS:
            raise SandboxRequestError(
                f"a tool request needs exactly the keys {sorted(_REQUEST_KEYS)}"
            )
        if not isinstance(request["tool_id"], str) or not request["tool_id"]:
            raise SandboxRequestError("a tool request's tool_id must be a non-empty string")
        try:
            data = canonical_bytes(dict(request))
        except NonCanonicalError as e:
            raise SandboxRequestError(f"the tool request cannot be encoded: {e}") from e
        if len(data) > self.limits.max_request_bytes:
            return ToolCallResult(
                outcome=Outcome.REQUEST_TOO_LARGE,
                error=(
                    f"request is {len(data)} bytes, over the limit of "
                    f"{self.limits.max_request_bytes}; no child was started"
                ),
                exit_status=None,
                elapsed_s=0.0,
            )
        run = self._run(
            self._argv(None, ""), data, timeout_s=timeout_s, env_source=env_source, run_fd=None
        )
        return _judge(
            run,
            timeout_s=timeout_s,
            limit=self.limits.max_response_bytes,
            confine_failed=self.confine_failed_statuses,
            cpu_cap_s=self.cpu_cap_s(),
            memory_cap=self.memory_cap_bytes(),
        )

    def exec_file(
        self,
        path: Path,
        *,
        stdin: bytes = b"",
        timeout_s: float,
        cwd: Path | None = None,
        env_source: Mapping[str, str] | None = None,
        on_exit: Callable[[int], None] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> RunResult:
        """Run the Python file ``path`` under exactly this backend's confinement.

        ``path`` is opened once, here, without following a final symlink, and must be a regular
        file; the child gets the open descriptor and never resolves the path itself, so
        swapping the path afterwards changes nothing, and no sandbox rule names it.

        Args:
            path: the file; the child reads it through the descriptor, nothing else of yours.
            stdin: bytes for the child's stdin.
            timeout_s: wall-clock limit.
            cwd: the child's working directory (default ``/``).
            env_source: as for :meth:`call`.
            on_exit: see :func:`harness.sandbox._runner.run_child`.
            on_start: see :func:`harness.sandbox._runner.run_child`.

        Raises:
            SandboxError: when ``path`` is not a readable regular file (a symlink, a directory,
                a FIFO, a device) or the child cannot start.
        """
        fd = open_run_file(path)
        try:
            return self._run(
                self._argv(fd, str(path)),
                stdin,
                timeout_s=timeout_s,
                env_source=env_source,
                cwd=cwd,
                on_exit=on_exit,
                pass_fds=(fd,),
                on_start=on_start,
                run_fd=fd,
                run_name=str(path),
            )
        finally:
            os.close(fd)

    def _run(
        self,
        argv: list[str],
        stdin: bytes,
        *,
        timeout_s: float,
        env_source: Mapping[str, str] | None,
        cwd: Path | None = None,
        on_exit: Callable[[int], None] | None = None,
        pass_fds: tuple[int, ...] = (),
        on_start: Callable[[int], None] | None = None,
        run_fd: int | None = None,
        run_name: str = "",
    ) -> RunResult:
        """Run one child: spawned with ``argv`` here (a backend with a zygote overrides this)."""
        del run_fd, run_name  # on the command line already, for a spawned child
        return run_child(
            argv,
            stdin=stdin,
            env=child_env(os.environ if env_source is None else env_source),
            cwd=str(cwd) if cwd is not None else "/",
            timeout_s=timeout_s,
            max_stdout=self.limits.max_response_bytes,
            max_stderr=self.limits.max_stderr_bytes,
            on_exit=on_exit,
            pass_fds=pass_fds,
            on_start=on_start,
        )


def open_run_file(path: Path) -> int:
    """Open ``path`` once for reading: no final symlink, no blocking open, a regular file only.

    Raises:
        SandboxError: when it cannot be opened or is not a regular file.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SandboxError(f"{str(path)!r} is a symbolic link; name the file itself") from e
        raise SandboxError(f"cannot open {str(path)!r}: {e.strerror}") from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SandboxError(f"{str(path)!r} is not a regular file")
    os.set_blocking(fd, True)
    return fd


# Signals an allocation failure under the address-space cap can end in (a C-level abort).
_ALLOCATION_SIGNALS: Final = frozenset({signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS})
_CPU_SLACK_S: Final = 0.05
# The CPU time wait4 reports falls short of what the kernel's CPU limit timer counted when it
# fired (measured here on a loaded virtual machine: 0.81-0.97 s for a 1 s cap). A signal from
# outside reaches a call that used half its cap only if the call spins that long.
_CPU_SLACK_SHARE: Final = 0.5


def _cap_explains(
    run: RunResult, sig: int, *, cpu_cap_s: float | None, memory_cap: int | None
) -> str | None:
    """Why a death by ``sig`` is the call's own resource cap, or None when no cap explains it.

    SIGXCPU and SIGKILL are the CPU cap's only when the child used (nearly: wait4 reports less
    than the kernel's limit timer counted) the cap's CPU time: the same signal sent from outside
    earlier is a kill. SIGXFSZ is never the file size cap's: a child
    can write no regular file (only ``/dev/null`` and its pipes, which the cap does not cover).
    """
    if (
        cpu_cap_s is not None
        and sig in (signal.SIGXCPU, signal.SIGKILL)
        and run.cpu_s >= cpu_cap_s - max(_CPU_SLACK_S, _CPU_SLACK_SHARE * cpu_cap_s)
    ):
        return f"the child used {run.cpu_s:.1f} s of CPU, its cap is {cpu_cap_s:g} s"
    if sig in _ALLOCATION_SIGNALS and memory_cap is not None:
        text = run.stderr.decode("utf-8", "replace")
        if "MemoryError" in text or "Cannot allocate memory" in text:
            return "the child could not allocate memory under its cap"
    return None


def _judge(
    run: RunResult,
    *,
    timeout_s: float,
    limit: int,
    confine_failed: frozenset[int],
    cpu_cap_s: float | None = None,
    memory_cap: int | None = None,
) -> ToolCallResult:
    """Classify a finished child: only a clean exit with one well-formed reply is accepted.

    A death by a signal the harness did not send (it sends SIGKILL only at the timeout and the
    reply limit) is RESOURCE_LIMIT when the call's own cap explains it, else KILLED; so is a
    child seen stopped (SIGSTOP, SIGTSTP, a tracer), which the harness ended at once.
    """
    common: dict[str, Any] = {
        "exit_status": run.exit_status,
        "elapsed_s": run.elapsed_s,
        "stdout_bytes": len(run.stdout),
        "stderr_tail": run.stderr.decode("utf-8", "replace"),
    }
    if run.stopped:
        return ToolCallResult(
            outcome=Outcome.KILLED,
            error="the child was stopped by a signal the harness did not send; its process "
            "group was killed",
            **common,
        )
    if run.timed_out:
        return ToolCallResult(
            outcome=Outcome.TIMEOUT,
            error=f"no complete reply within {timeout_s:g} s; its process group was killed",
            **common,
        )
    if run.stdout_overflow:
        return ToolCallResult(
            outcome=Outcome.TOO_LARGE,
            error=f"the reply passed the limit of {limit} bytes; its process group was killed",
            **common,
        )
    if run.exit_status in confine_failed:
        return ToolCallResult(
            outcome=Outcome.CONFINE_FAILED,
            error=_last_line(run.stderr) or "the child could not confine itself",
            **common,
        )
    if run.exit_status == worker.EXIT_RESOURCE:
        return ToolCallResult(
            outcome=Outcome.RESOURCE_LIMIT,
            error=_last_line(run.stderr) or "the child passed a resource cap",
            **common,
        )
    if run.exit_status < 0:
        sig = -run.exit_status
        why = _cap_explains(run, sig, cpu_cap_s=cpu_cap_s, memory_cap=memory_cap)
        if why is not None:
            return ToolCallResult(outcome=Outcome.RESOURCE_LIMIT, error=why, **common)
        return ToolCallResult(
            outcome=Outcome.KILLED,
            error=f"the child {_describe_exit(run.exit_status)}, a signal the harness did not send",
            **common,
        )
    if run.exit_status != 0:
        detail = _last_line(run.stderr)
        return ToolCallResult(
            outcome=Outcome.DIED,
            error=f"the child {_describe_exit(run.exit_status)}"
            + (f": {detail}" if detail else ""),
            **common,
        )
    try:
        reply = _REPLY_DECODER.decode(run.stdout)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        return ToolCallResult(
            outcome=Outcome.GARBAGE,
            error=f"stdout is not one reply object of the worker's shape: {e}",
            **common,
        )
    if reply.ok and reply.response is not msgspec.UNSET and reply.error is msgspec.UNSET:
        return ToolCallResult(outcome=Outcome.OK, response=reply.response, **common)
    if not reply.ok and reply.error is not msgspec.UNSET and reply.response is msgspec.UNSET:
        return ToolCallResult(
            outcome=Outcome.RESOURCE_LIMIT
            if reply.error.kind == worker.RESOURCE_LIMIT_KIND
            else Outcome.TOOL_ERROR,
            error=f"{reply.error.kind}: {reply.error.message}",
            **common,
        )
    return ToolCallResult(
        outcome=Outcome.GARBAGE,
        error="the reply's ok flag contradicts its response/error fields",
        **common,
    )
