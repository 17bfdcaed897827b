"""The Linux backend: the child confines itself with one tier of the pinned policy.

The command line is ``<interpreter> -I -S -B <worker.py> --parent <pid> --confine <tier as JSON>``
(``sandbox exec`` adds ``--run-fd N --run-name NAME``: the file is handed over open, never named by
path, so no Landlock rule is added for it); the worker applies the tier (``_confine.py``) before it
reads stdin. Opening the backend proves a tier by running a real child through it: the first tier of
the policy whose child confines itself, passes its self-check and answers the echo control is the
one used. Whether the walls actually hold is for the probes (``run_probes``) to show.

This module does not run probes and does not decide what a tier contains (the policy does).
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from harness.log import get_logger
from harness.sandbox import _confine
from harness.sandbox._backend import ChildBackend, Limits
from harness.sandbox._cgroup import TaskCgroup
from harness.sandbox._policy import NO_TASK_CAP, LoadedPolicy, instantiate_tier
from harness.sandbox._result import BackendInfo, RunResult
from harness.sandbox._runner import child_env
from harness.sandbox._zygote_client import Zygote, ZygoteDiedError

__all__ = ["LinuxBackend", "compile_seccomp_for_child", "kernel_landlock_abi"]

# Stand-ins for the child's pid in the compiled filter: above any pid the kernel hands out
# (pid_max <= 2**22) and unlike any syscall number, architecture tag or flag in the program.
_PID_SENTINELS: Final = (0x7FFF_FF11, 0x7FFF_FF22)
_log = get_logger("harness.sandbox")


def compile_seccomp_for_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Compile the policy's seccomp rules once, for every child of a backend.

    The program is compiled twice with two different pid stand-ins and must differ exactly at
    the instructions holding them, so patching the stand-in in the child can change nothing
    else.

    Raises:
        _confine.ConfineError: when libseccomp is missing or a rule cannot be compiled, or the
            stand-in is not where (and only where) the pid comparisons are.
    """
    first, second = (_confine.compile_seccomp(spec, pid=s) for s in _PID_SENTINELS)
    if _confine.patch_pid(first, _PID_SENTINELS[0], 1) != _confine.patch_pid(
        second, _PID_SENTINELS[1], 1
    ) or (spec["signal_only_self"] and first == second):
        raise _confine.ConfineError("the compiled seccomp program's pid comparisons are ambiguous")
    return {
        "bpf": first.hex(),
        "pid_sentinel": _PID_SENTINELS[0],
        "denies_socket": "socket" in spec["deny"],
    }


def kernel_landlock_abi() -> int:
    """The running kernel's Landlock ABI version (0: unavailable)."""
    return _confine.landlock_abi()


def _run_reversed(steps: list[Callable[[], None]]) -> None:
    """A dropped backend's clean-up, last registered first."""
    for step in reversed(steps):
        step()


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
        self._seccomp: dict[str, Any] | None = None
        self._zygote: Zygote | None = None
        tier_spec = instantiate_tier(
            loaded.policy, tier, interpreter_prefix=self._prefix, tool_code=str(self.tool_code)
        )
        self._cgroup: TaskCgroup | None = None
        self._on_drop: list[Callable[[], None]] = []
        weakref.finalize(self, _run_reversed, self._on_drop)
        if tier_spec["limits"]["tasks"] is None:
            # No user namespace of its own: a cgroup per call caps its tasks, where one can be
            # made; otherwise the tier says it has no task cap.
            self._cgroup = TaskCgroup.make(loaded.policy.limits.tasks)
            if self._cgroup is not None:
                # Dropped without close(): the zygote (registered later) goes first, so its
                # waiting child has left its cgroup when the directory is removed.
                self._on_drop.append(self._cgroup.close)
                tier_spec = instantiate_tier(
                    loaded.policy,
                    tier,
                    interpreter_prefix=self._prefix,
                    tool_code=str(self.tool_code),
                    task_cgroup=str(self._cgroup.base),
                )
        landlock = tier_spec["landlock"]
        if landlock is not None:
            missing = _confine.missing_scopes(landlock_abi, landlock)
            if missing:
                raise _confine.ConfineError(
                    f"Landlock ABI {landlock_abi} has no {' or '.join(missing)} scope and the "
                    "policy's seccomp filter does not close the hole"
                )
        if tier_spec["seccomp"] is not None:
            self._seccomp = compile_seccomp_for_child(tier_spec["seccomp"])
        self._limits: dict[str, int | None] = {
            k: v for k, v in tier_spec["limits"].items() if k != "task_cgroup"
        }
        if self._cgroup is not None:
            self._limits["tasks"] = self._cgroup.tasks
        self._scopes: dict[str, str] = {}
        if landlock is not None:
            for name in landlock["scopes"]:
                self._scopes[name] = "landlock" if landlock_abi >= 6 else "seccomp"
        tier_spec["seccomp"] = self._seccomp
        # Built once: the same bytes for every call (they are part of what a run used).
        self._policy_json = json.dumps(tier_spec, sort_keys=True, separators=(",", ":"))

    @property
    def mode(self) -> str:
        """``zygote`` while calls are forked by the zygote, else ``spawn``."""
        return "zygote" if self._zygote is not None else "spawn"

    def zygote_pid(self) -> int | None:
        """The zygote's pid while calls are forked by it."""
        return None if self._zygote is None else self._zygote.pid

    def start_zygote(self) -> None:
        """Start this tier's zygote; from now on every call's child is forked by it.

        Raises:
            SandboxZygoteError: when the zygote cannot start or become ready.
        """
        if self._zygote is None:
            self._zygote = Zygote(
                interpreter=self.interpreter,
                script=self.tool_code / "sandbox" / "_zygote.py",
                policy_json=self._policy_json,
                env=child_env(os.environ),
            )
            self._on_drop.append(self._zygote.close)

    def close(self) -> None:
        """Stop the zygote, if any (its children die with it); later calls spawn.

        The calls' task cgroups left behind (a waiting child killed with its zygote) go too;
        the directory itself stays while later calls may spawn, and goes with the backend.
        """
        zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()
        if self._cgroup is not None:
            self._cgroup.sweep()

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
        if self._cgroup is None:
            return self._run_child(
                argv,
                stdin,
                timeout_s=timeout_s,
                env_source=env_source,
                cwd=cwd,
                on_exit=on_exit,
                pass_fds=pass_fds,
                on_start=on_start,
                run_fd=run_fd,
                run_name=run_name,
            )
        started: list[int] = []

        def record(pid: int) -> None:
            started.append(pid)
            if on_start is not None:
                on_start(pid)

        try:
            return self._run_child(
                argv,
                stdin,
                timeout_s=timeout_s,
                env_source=env_source,
                cwd=cwd,
                on_exit=on_exit,
                pass_fds=pass_fds,
                on_start=record,
                run_fd=run_fd,
                run_name=run_name,
            )
        finally:
            for pid in started:  # reaped by now: its cgroup is empty
                self._cgroup.release(pid)

    def _run_child(
        self,
        argv: list[str],
        stdin: bytes,
        *,
        timeout_s: float,
        env_source: Mapping[str, str] | None,
        cwd: Path | None,
        on_exit: Callable[[int], None] | None,
        pass_fds: tuple[int, ...],
        on_start: Callable[[int], None] | None,
        run_fd: int | None,
        run_name: str,
    ) -> RunResult:
        zygote = self._zygote
        if zygote is not None:
            try:
                return zygote.run(
                    stdin=stdin,
                    env=child_env(os.environ if env_source is None else env_source),
                    cwd=str(cwd) if cwd is not None else "/",
                    timeout_s=timeout_s,
                    max_stdout=self.limits.max_response_bytes,
                    max_stderr=self.limits.max_stderr_bytes,
                    on_exit=on_exit,
                    run_fd=run_fd,
                    run_name=run_name,
                    on_start=on_start,
                )
            except ZygoteDiedError as e:
                if self.loaded.policy.zygote_fallback != "spawn":
                    stopped = ZygoteDiedError(
                        f"{e}; the policy allows no fallback, so no tool call runs "
                        "(`harness v2 resume` continues a stopped run)"
                    )
                    stopped.partial = e.partial
                    raise stopped from e
                _log.warning("sandbox.zygote_fallback", reason=str(e), fallback="spawn")
                self._zygote = None
                zygote.close()
        return super()._run(
            argv,
            stdin,
            timeout_s=timeout_s,
            env_source=env_source,
            cwd=cwd,
            on_exit=on_exit,
            pass_fds=pass_fds,
            on_start=on_start,
        )

    def _argv(self, run_fd: int | None, run_name: str) -> list[str]:
        # The parent's pid is read per call: the child dies with the process that started it.
        argv = [*self._bare_argv(), "--parent", str(os.getpid()), "--confine", self._policy_json]
        if run_fd is not None:
            argv += ["--run-fd", str(run_fd), "--run-name", run_name]
        return argv

    def _task_cap(self) -> str:
        if self._cgroup is not None:
            where = self._cgroup.base
            return f"{self._cgroup.tasks} (pids.max of a cgroup of the call's own under {where})"
        if self._limits["tasks"] is None:
            return NO_TASK_CAP
        return f"{self._limits['tasks']} (RLIMIT_NPROC in the call's own user namespace)"

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
            limits=dict(self._limits),
            scopes=dict(self._scopes),
            mode=self.mode,
            task_cap=self._task_cap(),
        )
