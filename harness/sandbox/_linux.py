"""The Linux backend: the child confines itself with one tier of the pinned policy.

The command line is ``<interpreter> -I -S -B <worker.py> --confine <tier as JSON>``; the
worker applies the tier (``_confine.py``) before it reads stdin. Opening the backend proves a
tier by running a real child through it: the first tier of the policy whose child confines
itself, passes its self-check and answers the echo control is the one used. Whether the walls
actually hold is for the probes (``run_probes``) to show.

This module does not run probes and does not decide what a tier contains (the policy does).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.sandbox import _confine
from harness.sandbox._backend import ChildBackend, Limits
from harness.sandbox._policy import LoadedPolicy, instantiate_tier
from harness.sandbox._result import BackendInfo

__all__ = ["LinuxBackend", "kernel_landlock_abi"]


def kernel_landlock_abi() -> int:
    """The running kernel's Landlock ABI version (0: unavailable)."""
    return _confine.landlock_abi()


class LinuxBackend(ChildBackend):
    """Tool calls confined by one tier of the Linux policy."""

    def __init__(
        self,
        *,
        loaded: LoadedPolicy,
        tier: str,
        interpreter: Path,
        project_root: Path,
        limits: Limits,
        landlock_abi: int,
    ) -> None:
        super().__init__(interpreter=interpreter, project_root=project_root, limits=limits)
        self.loaded = loaded
        self.tier = tier
        self.landlock_abi = landlock_abi
        self._prefix = str(interpreter.parent.parent)
        # Built once: the same bytes for every call (they are part of what a run used).
        self._policy_json = self._tier_json(())

    def _tier_json(self, extra_read: tuple[str, ...]) -> str:
        tier = instantiate_tier(
            self.loaded.policy,
            self.tier,
            interpreter_prefix=self._prefix,
            tool_code=str(self.tool_code),
            extra_read=extra_read,
        )
        return json.dumps(tier, sort_keys=True, separators=(",", ":"))

    def _argv(self, run_file: Path | None) -> list[str]:
        if run_file is None:
            return [*self._bare_argv(), "--confine", self._policy_json]
        policy = self._tier_json((str(run_file),))
        return [*self._bare_argv(), "--confine", policy, "--run", str(run_file)]

    def describe(self) -> BackendInfo:
        """Backend ``linux``, the tier in force, the Landlock ABI and the policy digest."""
        return BackendInfo(
            backend="linux",
            tier=self.tier,
            landlock_abi=self.landlock_abi,
            profile_path=self.loaded.path,
            profile_digest=self.loaded.digest,
            interpreter=str(self.interpreter),
            tool_code=str(self.tool_code),
        )
