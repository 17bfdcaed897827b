"""The macOS backend: ``sandbox-exec`` with the pinned deny-default Seatbelt profile.

The child is confined from outside, before the interpreter starts:
``/usr/bin/sandbox-exec -p <profile> -D NAME=value ... -- <interpreter> -I -S -B worker.py``.
Project paths reach the profile only as ``-D`` parameters, resolved to real paths. Exit status
71 (``sandbox_apply`` refused, e.g. when already inside a sandbox) is a confinement failure.

This module only builds the command line; opening, proving and probing are shared with Linux.
It cannot run on Linux; its shape is checked by ``_sbpl`` and its command line by unit tests.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from harness.sandbox._backend import ChildBackend, Limits
from harness.sandbox._result import BackendInfo
from harness.tools import worker

__all__ = ["SANDBOX_EXEC", "SEATBELT_REFUSED_STATUS", "SeatbeltBackend"]

SANDBOX_EXEC: Final = "/usr/bin/sandbox-exec"
SEATBELT_REFUSED_STATUS: Final = 71


class SeatbeltBackend(ChildBackend):
    """Tool calls confined by ``sandbox-exec`` and ``sandbox_profiles/tool-worker.sb``."""

    confine_failed_statuses = frozenset({SEATBELT_REFUSED_STATUS, worker.EXIT_CONFINE_FAILED})

    def __init__(
        self,
        *,
        profile_text: str,
        profile_path: str,
        profile_digest: str,
        interpreter: Path,
        project_root: Path,
        limits: Limits,
    ) -> None:
        super().__init__(interpreter=interpreter, project_root=project_root, limits=limits)
        self.profile_text = profile_text
        self.profile_path = profile_path
        self.profile_digest = profile_digest

    def _argv(self, run_fd: int | None, run_name: str) -> list[str]:
        params = {
            "INTERPRETER_PREFIX": str(self.interpreter.parent.parent),
            "TOOL_CODE": str(self.tool_code),
            # ``sandbox exec`` hands its file over open (``--run-fd``): the child reads no path
            # of it, so the worker itself stands in for the parameter.
            "RUN_FILE": str(self.worker_path),
        }
        argv = [SANDBOX_EXEC, "-p", self.profile_text]
        for name, value in params.items():
            argv += ["-D", f"{name}={value}"]
        argv += ["--", *self._bare_argv(), "--parent", str(os.getpid())]
        if run_fd is not None:
            argv += ["--run-fd", str(run_fd), "--run-name", run_name]
        return argv

    def describe(self) -> BackendInfo:
        """Backend ``seatbelt``, tier ``seatbelt``, no Landlock, and the profile digest."""
        return BackendInfo(
            backend="seatbelt",
            tier="seatbelt",
            landlock_abi=None,
            profile_path=self.profile_path,
            profile_digest=self.profile_digest,
            interpreter=str(self.interpreter),
            tool_code=str(self.tool_code),
        )
