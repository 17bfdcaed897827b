"""Read-only access: verify a store, read it back verified, and preflight's store check.

Nothing here takes the writer lock or writes; a store being written may look torn for a moment.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from harness.canonical import Domain, digest_bytes, is_digest
from harness.errors import StoreError, StoreNotFoundError, TamperError
from harness.store._files import BLOBS, MANIFEST, WRITER_LOCK, WriterLock, blob_name
from harness.store._journal import orphans_of
from harness.store._model import (
    CellRecord,
    GenesisRecord,
    JournalEntry,
    Manifest,
    OrphanedAttempt,
    StoreCheck,
    StoreState,
    VerifyReport,
    VerifyStatus,
)
from harness.store._scan import scan

__all__ = ["StoreView", "check_store_for_run", "read_blob", "read_store", "verify_store"]


def verify_store(root: str | os.PathLike[str]) -> VerifyReport:
    """Verify the store at ``root`` from its stored bytes; never writes.

    Returns:
        The report: status ok/torn/tamper, the longest valid prefix, and one precise reason.

    Raises:
        StoreNotFoundError: ``root`` holds no store.
    """
    return scan(Path(root)).report


class StoreView(msgspec.Struct, frozen=True, kw_only=True):
    """A store read back through verification: only the valid prefix is exposed."""

    report: VerifyReport
    genesis: GenesisRecord | None
    cells: tuple[CellRecord, ...]
    journal: tuple[JournalEntry, ...]
    pending_attempts: tuple[OrphanedAttempt, ...]
    manifest: Manifest | None


def read_store(root: str | os.PathLike[str]) -> StoreView:
    """Verify and read the store at ``root``; the caller judges ``view.report``.

    Raises:
        StoreNotFoundError: ``root`` holds no store.
    """
    found = scan(Path(root))
    return StoreView(
        report=found.report,
        genesis=found.genesis,
        cells=tuple(found.cell_records()),
        journal=tuple(item.entry for item in found.journal),
        pending_attempts=orphans_of(found.pending),
        manifest=found.manifest,
    )


def read_blob(root: str | os.PathLike[str], digest: str) -> bytes:
    """Return the blob ``digest`` after checking its bytes hash to it.

    Raises:
        StoreError: ``digest`` is malformed or the blob is missing.
        TamperError: the blob's bytes do not hash to ``digest``.
    """
    if not is_digest(digest):
        raise StoreError(f"{digest!r} is not a blob digest")
    path = Path(root) / BLOBS / blob_name(digest)
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise StoreError(f"blob {digest} is not in {root}") from e
    if digest_bytes(Domain.BLOB, data) != digest:
        raise TamperError(f"blob {digest} in {root} does not hash to its name")
    return data


def check_store_for_run(
    root: str | os.PathLike[str], *, lock_digest: str, schedule_digest: str
) -> StoreCheck:
    """Preflight: is ``root`` new, or a verified prefix bound to this lock and schedule?

    Returns:
        ``StoreCheck``: state new or prefix (truthy) or unusable (falsy), and one line why.
    """
    root = Path(root)
    if not root.exists() or (root.is_dir() and not any(root.iterdir())):
        return StoreCheck(state=StoreState.NEW, cells=0, reason=f"{root}: new store")
    try:
        found = scan(root)
    except StoreNotFoundError as e:
        return StoreCheck(state=StoreState.UNUSABLE, cells=0, reason=str(e))
    report = found.report
    if report.status is VerifyStatus.TAMPER:
        return _unusable(f"{root} fails verification ({report.code}): {report.reason}")
    if (root / MANIFEST).exists():
        return _unusable(f"{root} is finalized; it takes no more records")
    if report.lock_digest != lock_digest:
        return _unusable(f"{root} is bound to lock {report.lock_digest}, not {lock_digest}")
    if report.schedule_digest != schedule_digest:
        return _unusable(
            f"{root} is bound to schedule {report.schedule_digest}, not {schedule_digest}"
        )
    holder = WriterLock.holder(root / WRITER_LOCK)
    if holder is not None:
        return _unusable(f"store {root} is held by another writer: {holder}")
    repair = "" if report.status is VerifyStatus.OK else f"; resume repairs {report.code}"
    return StoreCheck(
        state=StoreState.PREFIX,
        cells=report.cells,
        reason=(
            f"{root}: verified prefix of {report.cells}/{report.schedule_rows} cells bound to "
            f"this lock and schedule{repair}"
        ),
    )


def _unusable(reason: str) -> StoreCheck:
    return StoreCheck(state=StoreState.UNUSABLE, cells=0, reason=reason)
