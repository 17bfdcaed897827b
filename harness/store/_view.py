"""Read-only access: verify a store, read it back verified, and preflight's store check.

Nothing here takes the writer lock or writes. A store a live writer holds is read as a snapshot
bounded by what HEAD had committed when the read began, and reported ``in_progress``.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from harness.canonical import Domain, digest_bytes, is_digest
from harness.errors import StoreError, StoreNotFoundError, TamperError, UnsafeFileError
from harness.safeio import open_dir, read_regular
from harness.store._files import BLOBS, MANIFEST, MAX_BLOB, WRITER_LOCK, WriterLock, blob_name
from harness.store._journal import orphans_of
from harness.store._model import (
    CellRecord,
    GenesisRecord,
    JournalEntry,
    OrphanedAttempt,
    StoreCheck,
    StoreManifest,
    StoreState,
    VerifyReport,
    VerifyStatus,
)
from harness.store.scan import scan

__all__ = [
    "SealedView",
    "StoreView",
    "check_store_for_run",
    "read_blob",
    "read_sealed",
    "read_store",
    "verify_store",
]


def verify_store(root: str | os.PathLike[str]) -> VerifyReport:
    """Verify the store at ``root`` from its stored bytes; never writes.

    Returns:
        The report: status ok/torn/tamper, the longest valid prefix, and one precise reason.

    Raises:
        StoreNotFoundError: ``root`` holds no store.
    """
    return scan(Path(root)).report


class SealedView(msgspec.Struct, frozen=True, kw_only=True):
    """A verification report and the very MANIFEST bytes it verified, from one read.

    What signing and signature checks work on: the bytes signed or checked are the bytes the
    chain was checked against, never a second read a swapped file could answer.
    """

    report: VerifyReport
    manifest: bytes | None
    """The verified MANIFEST bytes; None unless the report is ok and finalized."""


def read_sealed(root: str | os.PathLike[str]) -> SealedView:
    """Verify the store at ``root`` and keep the MANIFEST bytes that verification read.

    Raises:
        StoreNotFoundError: ``root`` holds no store.
    """
    found = scan(Path(root))
    report = found.report
    sealed = report.status is VerifyStatus.OK and report.manifest_digest is not None
    return SealedView(report=report, manifest=found.manifest_bytes if sealed else None)


class StoreView(msgspec.Struct, frozen=True, kw_only=True):
    """A store read back through verification: only the valid prefix is exposed."""

    report: VerifyReport
    genesis: GenesisRecord | None
    cells: tuple[CellRecord, ...]
    journal: tuple[JournalEntry, ...]
    pending_attempts: tuple[OrphanedAttempt, ...]
    manifest: StoreManifest | None

    @property
    def pilot(self) -> dict[str, object] | None:
        """The pilot label the genesis identity binds (``identity.pilot``), or None: a store
        of the whole study (see docs/store.md, "Pilot stores")."""
        label = None if self.genesis is None else self.genesis.identity.get("pilot")
        return label if isinstance(label, dict) else None


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
    try:
        dir_fd = open_dir(Path(root) / BLOBS, follow=False)
        try:
            data = read_regular(blob_name(digest), MAX_BLOB, dir_fd=dir_fd, what=f"blob {digest}")
        finally:
            os.close(dir_fd)
    except FileNotFoundError as e:
        raise StoreError(f"blob {digest} is not in {root}") from e
    except UnsafeFileError as e:
        raise TamperError(f"{e} in {root}; refused") from e
    except OSError as e:
        raise StoreError(f"cannot read blob {digest} in {root}: {e.strerror or e}") from e
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
        # No path in the reason: preflight keeps it in the store, where the same inputs must
        # give the same bytes wherever the store lives.
        return StoreCheck(state=StoreState.NEW, cells=0, reason="new store")
    # A second writer is refused with the holder's name before anything is verified.
    holder = WriterLock.holder(root / WRITER_LOCK) if root.is_dir() else None
    if holder is not None:
        return _unusable(f"store {root} is held by another writer: {holder}")
    try:
        found = scan(root)
    except StoreNotFoundError as e:
        return StoreCheck(state=StoreState.UNUSABLE, cells=0, reason=str(e))
    report = found.report
    if report.status is VerifyStatus.IN_PROGRESS:
        return _unusable(f"store {root} is held by another writer: {report.writer}")
    if report.status is VerifyStatus.TAMPER:
        return _unusable(f"{root} fails verification ({report.code}): {report.reason}")
    if report.finalized or os.path.lexists(root / MANIFEST):
        return _unusable(f"{root} is finalized; it takes no more records")
    if report.lock_digest != lock_digest:
        return _unusable(f"{root} is bound to lock {report.lock_digest}, not {lock_digest}")
    pilot = None if found.genesis is None else found.genesis.identity.get("pilot")
    if report.schedule_digest != schedule_digest and pilot is None:
        # A pilot binds a subset of the schedule; the run re-selects that subset from this
        # schedule and opening the store refuses it unless the digests agree.
        return _unusable(
            f"{root} is bound to schedule {report.schedule_digest}, not {schedule_digest}"
        )
    repair = "" if report.status is VerifyStatus.OK else f"; resume repairs {report.code}"
    return StoreCheck(
        state=StoreState.PREFIX,
        cells=report.cells,
        reason=(
            f"verified prefix of {report.cells}/{report.schedule_rows} cells bound to "
            f"this lock and schedule{repair}"
        ),
    )


def _unusable(reason: str) -> StoreCheck:
    return StoreCheck(state=StoreState.UNUSABLE, cells=0, reason=reason)
