"""A per-call task cap through a cgroup, for a tier without a user namespace of its own.

``RLIMIT_NPROC`` counts one call alone only inside a user namespace of its own (the ``userns``
tier); elsewhere it counts every process of the user. Where the harness can make a cgroup with
the ``pids`` controller (cgroup v1's ``pids`` hierarchy, or cgroup v2 with ``pids`` delegated to
the harness's own cgroup), a backend makes one directory for its calls and each call's child
makes a cgroup of its own in it before it confines itself (``_confine``: ``pids.max`` = the
policy's ``tasks``, then it moves itself in), so a call can never have more tasks than the cap.
The harness removes a call's cgroup once the child is reaped, and the directory when the
backend closes. Where none can be made, the tier holds no task cap and says so (``describe``,
``probe``: ``NO_TASK_CAP``).

This module makes and removes directories; it never moves a process.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path
from typing import Final

from harness.log import get_logger

__all__ = ["TaskCgroup"]

_log: Final = get_logger("harness.sandbox")


def _pids_dir() -> Path | None:
    """This process's own cgroup directory in a hierarchy with the ``pids`` controller."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v1 = v2 = None
    for line in own:
        hierarchy, controllers, where = line.split(":", 2)
        if "pids" in controllers.split(","):
            v1 = where
        elif hierarchy == "0" and not controllers:
            v2 = where
    for line in mounts:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        root, point = fields[3], fields[4]
        fstype, *rest = line.split(" - ", 1)[1].split()
        options = rest[1].split(",") if len(rest) > 1 else []
        path: str | None = None
        if fstype == "cgroup" and "pids" in options:
            path = v1
        elif fstype == "cgroup2" and v1 is None:
            path = v2
        if path is None or not (path == root or path.startswith(root.rstrip("/") + "/")):
            continue
        found = Path(point) / path[len(root) :].lstrip("/")
        if fstype == "cgroup2":
            try:
                delegated = "pids" in (found / "cgroup.subtree_control").read_text().split()
            except OSError:
                delegated = False
            if not delegated:
                continue
        return found
    return None


_PREFIX: Final = "harness-sandbox-"


def _sweep_stale(parent: Path) -> None:
    """Remove the empty directories a harness killed outright (SIGKILL) left behind.

    Only those named for a process that no longer exists, and only what is empty: a cgroup
    that still holds a process cannot be removed, and a live harness's is never touched.
    """
    try:
        entries = [e for e in parent.iterdir() if e.name.startswith(_PREFIX) and e.is_dir()]
    except OSError:
        return
    for entry in entries:
        owner = entry.name[len(_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        TaskCgroup(entry, 0).close(wait_s=0.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


class TaskCgroup:
    """The directory a backend's calls make their cgroups in, each capped at ``tasks``."""

    def __init__(self, base: Path, tasks: int) -> None:
        self.base = base
        self.tasks = tasks

    @classmethod
    def make(cls, tasks: int) -> TaskCgroup | None:
        """Make the directory and prove a call's cgroup can be made and capped in it.

        Returns:
            The directory, or None when this host lets the harness make no such cgroup.
        """
        parent = _pids_dir()
        if parent is None:
            return None
        _sweep_stale(parent)
        base = parent / f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            base.mkdir(mode=0o755)
        except OSError as e:
            _log.info("sandbox.no_task_cgroup", parent=str(parent), reason=e.strerror)
            return None
        made = cls(base, tasks)
        trial = base / "trial"
        try:
            trial.mkdir(mode=0o755)
            (trial / "pids.max").write_text(str(tasks))
            capped = (trial / "pids.max").read_text().strip() == str(tasks)
        except OSError as e:
            _log.info("sandbox.no_task_cgroup", parent=str(parent), reason=e.strerror)
            capped = False
        with contextlib.suppress(OSError):
            trial.rmdir()
        if not capped:
            made.close()
            return None
        return made

    def release(self, pid: int) -> None:
        """Remove the cgroup of the call whose child ``pid`` was reaped (if it made one)."""
        with contextlib.suppress(OSError):
            (self.base / str(pid)).rmdir()

    def sweep(self, wait_s: float = 1.0) -> None:
        """Remove every call's cgroup left (a waiting child killed with its zygote is gone a
        moment later: retried for up to ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        while True:
            left = []
            with contextlib.suppress(OSError):
                for entry in self.base.iterdir():
                    if entry.is_dir():
                        try:
                            entry.rmdir()
                        except OSError:
                            left.append(entry.name)
            if not left or time.monotonic() >= deadline:
                return
            time.sleep(0.01)

    def close(self, wait_s: float = 1.0) -> None:
        """Remove every call's cgroup left and the directory itself."""
        self.sweep(wait_s)
        with contextlib.suppress(OSError):
            self.base.rmdir()
