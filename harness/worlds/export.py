"""Write snapshots as folders of JSON files that ``harness verify`` accepts as they are.

One folder per snapshot, named by its id (``w03-top_k.F2``), holding ``descriptor.json``,
``requirements.json``, ``ledger.json``, ``certificate.json`` (absent when the agent made no
completion proposal), ``message.json`` (``{"text": ...}``, the agent's terminal message) and
``gold.json`` (``{"decision", "fault", "split"}``).

The folders appear with one rename (``harness.safeio.publish_dir``), so a failed export leaves
no partial output.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from harness.errors import InputError
from harness.safeio import publish_dir
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
    count = 0

    def files() -> Iterator[tuple[str, bytes]]:
        nonlocal count
        for snapshot in snapshots:
            for name, data in snapshot_files(snapshot).items():
                yield f"{snapshot.snapshot_id}/{name}", data
            count += 1

    try:
        publish_dir(out, files())
    except OSError as e:
        raise InputError(f"cannot export snapshots to {str(out)!r}: {e.strerror}") from e
    return count
