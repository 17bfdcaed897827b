"""Write snapshots as folders of JSON files that ``harness verify`` accepts as they are.

One folder per snapshot, named by its id (``w03-top_k.F2``), holding ``descriptor.json``,
``requirements.json``, ``ledger.json``, ``certificate.json`` (absent when the agent made no
completion proposal), ``message.json`` (``{"text": ...}``, the agent's terminal message) and
``gold.json`` (``{"decision", "fault", "split"}``).

Everything is written into a temporary sibling directory first and renamed into place at the
end, so a failed export leaves no partial output.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from harness.errors import InputError
from harness.worlds.snapshots import Snapshot

__all__ = ["export_snapshots", "snapshot_files"]


def _pretty(obj: Any) -> bytes:
    return msgspec.json.format(msgspec.json.encode(obj, order="sorted"), indent=2) + b"\n"


def snapshot_files(snapshot: Snapshot) -> dict[str, bytes]:
    """File name -> bytes of one snapshot's folder."""
    files = {
        "descriptor.json": _pretty(snapshot.descriptor),
        "requirements.json": _pretty(snapshot.requirements),
        "ledger.json": _pretty(snapshot.ledger),
        "message.json": _pretty({"text": snapshot.message}),
        "gold.json": _pretty(
            {
                "decision": snapshot.gold_decision,
                "fault": snapshot.fault,
                "split": snapshot.split,
            }
        ),
    }
    if snapshot.certificate is not None:
        files["certificate.json"] = _pretty(snapshot.certificate)
    return files


def export_snapshots(snapshots: Iterable[Snapshot], out: Path) -> int:
    """Write one folder per snapshot under ``out`` (created; must be absent or empty).

    Returns:
        The number of snapshot folders written.

    Raises:
        InputError: when ``out`` exists and is not an empty directory, or cannot be written.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"output directory {str(out)!r} exists and is not empty")
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as e:
        raise InputError(f"cannot write under {str(parent)!r}: {e.strerror}") from e
    try:
        count = 0
        for snapshot in snapshots:
            folder = staging / snapshot.snapshot_id
            folder.mkdir()
            for name, data in snapshot_files(snapshot).items():
                (folder / name).write_bytes(data)
            count += 1
        staging.chmod(0o755)  # mkdtemp makes it private; the export is ordinary output
        os.replace(staging, out)
    except OSError as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise InputError(f"cannot export snapshots to {str(out)!r}: {e.strerror}") from e
    return count
