"""Typed results of one sandboxed child: a tool call's outcome and a raw run's bytes.

A failed call is a value, not an exception: the V2 loop records it (and maps it to a failed tool
call) instead of unwinding. ``bool(result)`` is true only for :attr:`Outcome.OK`.
This module holds types only; it spawns nothing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

__all__ = ["BackendInfo", "Outcome", "RunResult", "ToolCallResult"]


class Outcome(StrEnum):
    """How a sandboxed tool call ended. Wire strings are stable."""

    OK = "ok"
    """The worker replied with the tool's response."""
    TOOL_ERROR = "tool_error"
    """The worker replied that the tool failed (exception, unknown catalog, unencodable reply)."""
    TIMEOUT = "timeout"
    """No complete reply within the wall-clock limit; the child's process group was killed."""
    DIED = "died"
    """The child exited non-zero or was killed by a signal without a reply."""
    GARBAGE = "garbage"
    """The child exited 0 but stdout was not exactly one reply object of the worker's shape."""
    TOO_LARGE = "too_large"
    """Stdout exceeded the reply size limit; the child's process group was killed."""
    REQUEST_TOO_LARGE = "request_too_large"
    """The request exceeded the stdin size limit; no child was started."""
    CONFINE_FAILED = "confine_failed"
    """The child could not confine itself and did not run the tool."""
    RESOURCE_LIMIT = "resource_limit"
    """The call hit a per-call resource cap (memory, tasks, file size, CPU time, open files)."""
    KILLED = "killed"
    """The child was killed by a signal the harness did not send and no cap explains: the host
    interfered, not the tool (the V2 loop retries once, then stops the run)."""


class ToolCallResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one sandboxed tool call.

    Attributes:
        outcome: how the call ended.
        response: the tool's parsed response when ``outcome`` is OK, else None.
        error: one sentence saying what went wrong; empty when OK.
        exit_status: the child's exit status (negative: killed by that signal); None when no
            child was started.
        elapsed_s: wall time from spawn to reap, in seconds (a measurement, never hashed).
        stdout_bytes: how many stdout bytes were read (at most the limit plus one chunk).
        stderr_tail: the last bytes of the child's stderr, decoded leniently, for diagnosis.
    """

    outcome: Outcome
    response: Any = None
    error: str = ""
    exit_status: int | None
    elapsed_s: float
    stdout_bytes: int = 0
    stderr_tail: str = ""

    def __bool__(self) -> bool:
        return self.outcome is Outcome.OK


class RunResult(msgspec.Struct, frozen=True, kw_only=True):
    """The raw result of one sandboxed child (``sandbox exec`` and the probes).

    Attributes:
        exit_status: as ``Popen.returncode`` (negative: killed by that signal).
        stdout: the bytes read from stdout (cut at the limit when ``stdout_overflow``).
        stderr: the last bytes of stderr.
        timed_out: the wall-clock limit passed; the process group was killed.
        stdout_overflow: stdout passed the limit; the process group was killed.
        elapsed_s: wall time from spawn to reap, in seconds.
        cpu_s: user + system CPU time of the child and what it waited for (``wait4``).
        max_rss_bytes: the largest resident set of the child or what it waited for.
        stopped: the child (or the call's pid 1) was seen stopped or traced while the call ran
            (a SIGSTOP the harness never sends); its process group was killed at once.
    """

    exit_status: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    stdout_overflow: bool
    elapsed_s: float
    cpu_s: float = 0.0
    max_rss_bytes: int = 0
    stopped: bool = False


class BackendInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend is: logged with every run and recorded beside its results.

    Attributes:
        backend: ``linux`` or ``seatbelt``.
        tier: the confinement tier in force (Linux: a tier name of the policy; macOS: ``seatbelt``).
        landlock_abi: the kernel's Landlock ABI version (Linux), None on macOS.
        profile_path: the pinned policy or profile file.
        profile_digest: ``blake3:<hex>`` of that file's bytes (``Domain.SANDBOX_PROFILE``).
        interpreter: the resolved interpreter the child runs.
        tool_code: the resolved ``harness`` package directory the child may read.
        limits: the per-call resource caps in force (None: a cap this tier cannot hold).
        scopes: how each Landlock scope the policy asks for is held (``landlock`` or
            ``seccomp``), Linux only.
        mode: how each call's child comes to be: ``zygote`` (Linux: forked by the zygote,
            then confined by itself) or ``spawn`` (a fresh interpreter per call; macOS always).
        task_cap: how a call's threads and processes are capped, in words; a tier that holds
            no cap says so plainly here (Linux), None where not stated (macOS).
    """

    backend: str
    tier: str
    landlock_abi: int | None
    profile_path: str
    profile_digest: str
    interpreter: str
    tool_code: str
    limits: dict[str, int | None] | None = None
    scopes: dict[str, str] | None = None
    mode: str = "spawn"
    task_cap: str | None = None
