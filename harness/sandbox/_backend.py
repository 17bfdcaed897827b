"""What every sandbox backend shares: one tool call in, one typed result out.

A backend knows how to build the child's command line (``_argv``); everything else, the
request's shape and size, the child's environment, limits, timeout, and the reading of the
reply, is here, so macOS and Linux judge a reply the same way. Calls are independent and
blocking: the V2 loop runs them with ``trio.to_thread.run_sync``, several at once if it likes.

This module does not confine anything itself and does not pick a backend (``_open`` does).
"""

from __future__ import annotations

import os
import signal
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

    @abstractmethod
    def describe(self) -> BackendInfo:
        """Backend name, tier, Landlock ABI and the pinned profile's digest."""

    @abstractmethod
    def _argv(self, run_file: Path | None) -> list[str]:
        """The child's full command line (``run_file``: run that file instead of a tool call)."""

    def argv(self, run_file: Path | None = None) -> list[str]:
        """The command line a tool call (or ``sandbox exec`` of ``run_file``) runs."""
        return self._argv(run_file)

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
        run = self._run(self._argv(None), data, timeout_s=timeout_s, env_source=env_source)
        return _judge(
            run,
            timeout_s=timeout_s,
            limit=self.limits.max_response_bytes,
            confine_failed=self.confine_failed_statuses,
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
    ) -> RunResult:
        """Run the Python file ``path`` under exactly this backend's confinement.

        Args:
            path: the file; the child may read it (and the tool code), nothing else of yours.
            stdin: bytes for the child's stdin.
            timeout_s: wall-clock limit.
            cwd: the child's working directory (default ``/``).
            env_source: as for :meth:`call`.
            on_exit: see :func:`harness.sandbox._runner.run_child`.

        Raises:
            SandboxError: when ``path`` is not a readable file or the child cannot start.
        """
        resolved = path.resolve()
        if not resolved.is_file():
            raise SandboxError(f"{str(path)!r} is not a file")
        return self._run(
            self._argv(resolved),
            stdin,
            timeout_s=timeout_s,
            env_source=env_source,
            cwd=cwd,
            on_exit=on_exit,
        )

    def _run(
        self,
        argv: list[str],
        stdin: bytes,
        *,
        timeout_s: float,
        env_source: Mapping[str, str] | None,
        cwd: Path | None = None,
        on_exit: Callable[[int], None] | None = None,
    ) -> RunResult:
        return run_child(
            argv,
            stdin=stdin,
            env=child_env(os.environ if env_source is None else env_source),
            cwd=str(cwd) if cwd is not None else "/",
            timeout_s=timeout_s,
            max_stdout=self.limits.max_response_bytes,
            max_stderr=self.limits.max_stderr_bytes,
            on_exit=on_exit,
        )


def _judge(
    run: RunResult, *, timeout_s: float, limit: int, confine_failed: frozenset[int]
) -> ToolCallResult:
    """Classify a finished child: only a clean exit with one well-formed reply is accepted."""
    common: dict[str, Any] = {
        "exit_status": run.exit_status,
        "elapsed_s": run.elapsed_s,
        "stdout_bytes": len(run.stdout),
        "stderr_tail": run.stderr.decode("utf-8", "replace"),
    }
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
            outcome=Outcome.TOOL_ERROR,
            error=f"{reply.error.kind}: {reply.error.message}",
            **common,
        )
    return ToolCallResult(
        outcome=Outcome.GARBAGE,
        error="the reply's ok flag contradicts its response/error fields",
        **common,
    )
