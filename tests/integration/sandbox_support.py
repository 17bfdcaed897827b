"""Helpers for the sandbox tests: temporary project copies and deliberately weakened policies.

A test that needs a misbehaving tool or a broken worker copies the real ``harness`` package and
``sandbox_profiles`` to a temporary root and changes the copy; the real tree is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.sandbox import default_linux_policy_path, default_project_root

FIXTURE_CATALOG = Path(__file__).resolve().parent / "sandbox_fixture_catalog.py"


def project_copy(
    dest: Path,
    *,
    catalog: Path | None = None,
    worker_text: str | None = None,
) -> Path:
    """Copy the project's ``harness`` and ``sandbox_profiles`` to ``dest``; return ``dest``.

    Args:
        dest: an empty or missing directory.
        catalog: a file installed as ``harness/tools/catalog.py`` in the copy.
        worker_text: replaces ``harness/tools/worker.py`` in the copy.
    """
    root = default_project_root()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root / "harness", dest / "harness", ignore=ignore)
    shutil.copytree(root / "sandbox_profiles", dest / "sandbox_profiles", ignore=ignore)
    if catalog is not None:
        shutil.copyfile(catalog, dest / "harness" / "tools" / "catalog.py")
    if worker_text is not None:
        (dest / "harness" / "tools" / "worker.py").write_text(worker_text)
    return dest


def weakened_policy(dest: Path, mutate: Callable[[dict[str, Any]], None]) -> Path:
    """Write the pinned Linux policy, changed by ``mutate``, to ``dest/policy.json``."""
    policy = json.loads(default_linux_policy_path().read_text())
    mutate(policy)
    path = dest / "policy.json"
    path.write_text(json.dumps(policy, indent=2))
    return path


def tier(policy: dict[str, Any], name: str) -> dict[str, Any]:
    """The tier called ``name`` in a policy dict."""
    found: dict[str, Any] = next(t for t in policy["tiers"] if t["name"] == name)
    return found


def _stdout_is_a_pipe(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/fd/1").startswith("pipe:")
    except OSError:
        return False


def _proc_children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def busy_zygote_children(zygote: int) -> list[int]:
    """The zygote's children that run a call now (not the one waiting for its call).

    A waiting child still has the zygote's /dev/null as stdout; a busy one (or, with a pid
    namespace, its pid 1) writes to the call's pipe. Reads /proc of processes that are not
    dumpable: root only.
    """
    return [
        child
        for child in _proc_children(zygote)
        if _stdout_is_a_pipe(child) or any(_stdout_is_a_pipe(g) for g in _proc_children(child))
    ]


def host_makes_task_cgroups() -> bool:
    """Whether this host lets the harness make a per-call task cgroup (``_cgroup``): then a
    tier without a user namespace caps a call's tasks too."""
    from harness.sandbox._cgroup import TaskCgroup

    made = TaskCgroup.make(4)
    if made is None:
        return False
    made.close()
    return True
