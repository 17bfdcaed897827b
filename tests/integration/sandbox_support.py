"""Helpers for the sandbox tests: temporary project copies and deliberately weakened policies.

A test that needs a misbehaving tool or a broken worker copies the real ``harness`` package and
``sandbox_profiles`` to a temporary root and changes the copy; the real tree is never touched.
"""

from __future__ import annotations

import json
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
