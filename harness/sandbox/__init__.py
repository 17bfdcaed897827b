"""Sandboxed tool calls: every synthetic tool call runs in a fresh, deny-default child.

``open_backend()`` picks and proves the backend for this machine (Linux: each call's child is
forked by a zygote and confines itself with a tier of ``sandbox_profiles/linux-tool-worker.json``;
macOS: one ``sandbox-exec`` child per call with ``sandbox_profiles/tool-worker.sb``) or raises
``SandboxUnavailableError``. ``backend.close()`` stops a zygote. A backend's
``call(request, timeout_s=...)`` returns a :class:`ToolCallResult`; ``describe()`` says what it
is; ``run_probes(backend)`` tries to break out and judges by ground truth in the parent.

The child side (``_confine.py``, ``harness/tools/worker.py``) is standard library only and is
never imported through this package.
"""

from __future__ import annotations

from harness.sandbox._backend import ChildBackend, Limits
from harness.sandbox._linux import LinuxBackend, kernel_landlock_abi
from harness.sandbox._open import default_project_root, open_backend, self_test
from harness.sandbox._policy import (
    LoadedPolicy,
    default_linux_policy_path,
    default_seatbelt_profile_path,
    load_linux_policy,
    profile_digest,
)
from harness.sandbox._probes import ProbeReport, ProbeResult, ProbeVerdict, render_table, run_probes
from harness.sandbox._result import BackendInfo, Outcome, RunResult, ToolCallResult
from harness.sandbox._sbpl import check_profile
from harness.sandbox._seatbelt import SeatbeltBackend

__all__ = [
    "BackendInfo",
    "ChildBackend",
    "Limits",
    "LinuxBackend",
    "LoadedPolicy",
    "Outcome",
    "ProbeReport",
    "ProbeResult",
    "RunResult",
    "SeatbeltBackend",
    "ToolCallResult",
    "ProbeVerdict",
    "check_profile",
    "default_linux_policy_path",
    "default_project_root",
    "default_seatbelt_profile_path",
    "kernel_landlock_abi",
    "load_linux_policy",
    "open_backend",
    "profile_digest",
    "render_table",
    "run_probes",
    "self_test",
]
