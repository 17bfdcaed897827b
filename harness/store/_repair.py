"""Resuming a run store: verify it, refuse what no crash explains, repair what a crash left.

Only a verified contiguous prefix of the given schedule, bound to the given lock, is resumed. A
torn final record or journal entry is cut and its bytes kept under ``evidence/``; a HEAD one
record behind is advanced after the record it claims is written anew; temporary files an
interrupted replace or blob put left are removed. Every name is resolved relative to the
store's directory descriptor without following a link. The writer (``_writer``) then binds
the dead session's orphaned and staged attempts and appends its own session entry.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final, NamedTuple

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import (
    DurabilityError,
    LockMismatchError,
    ScheduleMismatchError,
    StoreFinalizedError,
    TamperError,
    UnsafeFileError,
)
from harness.log import get_logger
from harness.safeio import open_dir, read_regular
from harness.store._create import WriterState
from harness.store._files import (
    BLOBS,
    EVIDENCE,
    HEAD,
    HEAD_TMP,
    JOURNAL,
    LIMITS,
    MANIFEST,
    MANIFEST_TMP,
    RECORDS,
    Durable,
    encode_line,
)
from harness.store._journal import orphans_of
from harness.store._model import (
    BeginEntry,
    Head,
    OrphanedAttempt,
    SessionEntry,
    VerifyReport,
    VerifyStatus,
)
from harness.store._values import lock_digest
from harness.store.scan import scan

__all__ = ["Repaired", "repair_for_resume"]

_log: Final = get_logger("harness.store")
_APPEND: Final = os.O_WRONLY | os.O_APPEND
_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY


class Repaired(NamedTuple):
    """A verified, repaired store ready for its next writer."""

    state: WriterState
    report: VerifyReport
    orphans: tuple[OrphanedAttempt, ...]
    last_session: str | None
    """The digest of the journal's last session entry (the dead session's)."""
    since_session: list[dict[str, Any]]
    """The attempts the dead session journaled: what it staged may already be among them."""


def repair_for_resume(
    root: Path,
    durable: Durable,
    rows: list[dict[str, Any]],
    sched: bytes,
    lock_bytes: bytes,
) -> Repaired:
    """Verify the store at ``root`` (its writer lock held), check it is bound to this lock and
    schedule, and repair a torn tail, a lagging HEAD and leftover temporary files.

    Raises:
        TamperError: verification found something no crash explains.
        StoreFinalizedError: the store is sealed by a manifest.
        LockMismatchError: the store is bound to a different lock.
        ScheduleMismatchError: the store is bound to a different schedule.
        DurabilityError: a repair write or fsync failed.
        OSError: a repair outside the ``FileOps`` seam failed.
    """
    found = scan(root, held=True)
    report = found.report
    if report.status is VerifyStatus.TAMPER:
        raise TamperError(
            f"store {root} fails verification ({report.code}): {report.reason}; resume refused"
        )
    if (root / MANIFEST).exists():
        raise StoreFinalizedError(f"store {root} is finalized; it takes no more records")
    genesis = found.genesis
    if genesis is None:  # a torn or ok report always has a verified genesis
        raise TamperError(f"store {root} has no verified genesis record")
    given_lock = lock_digest(lock_bytes)
    if given_lock != genesis.lock_digest:
        raise LockMismatchError(
            f"store {root} is bound to lock {genesis.lock_digest}, not {given_lock}"
        )
    given_schedule = digest_bytes(Domain.SCHEDULE, sched)
    if given_schedule != genesis.schedule_digest:
        raise ScheduleMismatchError(
            f"store {root} is bound to schedule {genesis.schedule_digest} "
            f"({genesis.schedule_rows} rows), not {given_schedule} ({len(rows)} rows)"
        )
    if found.records_end < found.records_size:
        _cut_tail(durable, root, RECORDS, found.records_end)
    records = found.records
    head = found.record_hashes[-1]
    if found.head_lags:
        _rewrite_last_record(durable, root, found.record_starts[-1], found.records_end)
        _replace_head(durable, root, records, head)
        _log.warning("store.head_advanced", store=str(root), records=records)
    if found.journal_end < found.journal_size:
        _cut_tail(durable, root, JOURNAL, found.journal_end)
    _remove_leftovers(durable, root)
    pending = found.pending
    orphans = orphans_of(pending)
    # The dead session's own journal entries: what it staged may already be among them.
    last_session: str | None = None
    since_session: list[dict[str, Any]] = []
    for item in reversed(found.journal):
        if isinstance(item.entry, SessionEntry):
            last_session = item.digest
            break
        if isinstance(item.entry, BeginEntry):
            since_session.append(item.entry.attempt)
    since_session.reverse()
    state = WriterState(
        rows=rows,
        row_digests=found.row_digests,  # the given schedule's: its digest is genesis's
        lock_digest=genesis.lock_digest,
        schedule_digest=genesis.schedule_digest,
        records=records,
        head=head,
        journal=pending,
        journal_count=len(found.journal),
        journal_head=found.journal[-1].digest if found.journal else None,
        blobs=found.blobs,
        identity=dict(genesis.identity),
    )
    return Repaired(state, report, orphans, last_session, since_session)


def _replace_head(durable: Durable, root: Path, count: int, head: str) -> None:
    line, _ = encode_line(Domain.STORE_HEAD, canonical_bytes(Head(count=count, head=head)))
    durable.replace(root / HEAD, root / HEAD_TMP, line)


def _root_fd(root: Path) -> int:
    try:
        return os.open(root, _DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise DurabilityError(f"cannot open store {root}: {e.strerror}") from e


def _read_store_file(root_fd: int, name: str) -> bytes:
    try:
        return read_regular(name, LIMITS[name], dir_fd=root_fd, what=name)
    except UnsafeFileError as e:
        raise TamperError(f"{e}; the store is refused") from e


def _rewrite_last_record(durable: Durable, root: Path, start: int, end: int) -> None:
    """Write the record HEAD does not claim yet again, and fsync it.

    Its first fsync may have failed (the writer then stopped); after a failed fsync the page
    cache can hold bytes the disk does not, so the bytes are written anew before HEAD claims
    them. A crash here leaves a torn tail: the record was never acknowledged.
    """
    root_fd = _root_fd(root)
    try:
        line = _read_store_file(root_fd, RECORDS)[start:end]
        fd = durable.open(RECORDS, _APPEND, RECORDS, dir_fd=root_fd)
        try:
            durable.truncate(fd, start, RECORDS)
            durable.fsync(fd, RECORDS)
            durable.write_all(fd, line, RECORDS)
            durable.fsync(fd, RECORDS)
        finally:
            durable.close(fd)
    finally:
        os.close(root_fd)


def _cut_tail(durable: Durable, root: Path, name: str, keep: int) -> None:
    """Move the bytes after ``keep`` to ``evidence/`` (durably), then cut the file there.

    Every name is resolved relative to the store's descriptor without following a link: a
    planted ``evidence`` link cannot direct the torn bytes anywhere else.
    """
    root_fd = _root_fd(root)
    try:
        tail = _read_store_file(root_fd, name)[keep:]
        created = False
        try:
            os.mkdir(EVIDENCE, 0o755, dir_fd=root_fd)
            created = True
        except FileExistsError:
            pass
        try:
            evidence_fd = open_dir(EVIDENCE, dir_fd=root_fd, follow=False)
        except UnsafeFileError as e:
            raise TamperError(f"{e}; the store is refused") from e
        try:
            target = f"{name}.torn-at-{keep}"
            suffix = 1
            while _exists(target, evidence_fd):
                target = f"{name}.torn-at-{keep}.{suffix}"
                suffix += 1
            fd = durable.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, target, dir_fd=evidence_fd
            )
            try:
                durable.write_all(fd, tail, target)
                durable.fsync(fd, target)
            finally:
                durable.close(fd)
            durable.fsync(evidence_fd, f"directory {EVIDENCE}")
        finally:
            os.close(evidence_fd)
        if created:
            durable.fsync(root_fd, "the store directory")
        fd = durable.open(name, os.O_WRONLY, name, dir_fd=root_fd)
        try:
            durable.truncate(fd, keep, name)
            durable.fsync(fd, name)
        finally:
            durable.close(fd)
    finally:
        os.close(root_fd)
    _log.warning(
        "store.torn_tail_cut",
        store=str(root),
        file=name,
        offset=keep,
        bytes=len(tail),
        evidence=f"{EVIDENCE}/{target}",
    )


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _remove_leftovers(durable: Durable, root: Path) -> None:
    """Remove temp files an interrupted replace or blob put left; none is ever referenced.

    Unlinking removes a name, never what a link points to; the blob folder is opened without
    following a link.
    """
    root_fd = _root_fd(root)
    try:
        removed = False
        for name in (HEAD_TMP, MANIFEST_TMP):
            if _exists(name, root_fd):
                os.unlink(name, dir_fd=root_fd)
                removed = True
        if removed:
            durable.fsync(root_fd, "the store directory")
        try:
            blobs_fd = open_dir(BLOBS, dir_fd=root_fd, follow=False)
        except FileNotFoundError:
            return
        except UnsafeFileError as e:
            raise TamperError(f"{e}; the store is refused") from e
        try:
            stale = [name for name in os.listdir(blobs_fd) if name.startswith(".tmp-")]
            for name in stale:
                os.unlink(name, dir_fd=blobs_fd)
            if stale:
                durable.fsync(blobs_fd, f"directory {BLOBS}")
        finally:
            os.close(blobs_fd)
    finally:
        os.close(root_fd)
