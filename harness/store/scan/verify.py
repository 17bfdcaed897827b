"""Verification of a run directory: the longest valid prefix and one precise reason.

Every hash is recomputed over the bytes as stored (never over a re-encoding). Checked, in order
(one module each): the lock and schedule copies (``scan.inputs``), the blobs (``scan.blobs``),
the attempt journal (``scan.journal``: chain, sequence, attempt order), the record log and HEAD
(``scan.records``: chain, sequence, genesis binding, schedule rows, journal ranges, attempt
bindings, blob references), the journal entries not yet bound to a record, and the manifest
when present (``scan.manifest``). This module reads the files and runs those checks in order.

Classification (the protocol: a record is fsynced before HEAD is replaced):

* torn (recoverable): bad bytes after the last record HEAD claims, with no correctly hashed
  line among them; or one complete record HEAD does not yet claim; or bad bytes after the last
  journal entry no record binds.
* tamper: anything else, e.g. HEAD claiming a record that does not verify, a bad record
  followed by a good one, a correctly hashed record that breaks the chain, a corrupt blob.

Reading: every file is opened relative to the store directory's descriptor without following a
link, and must be a regular file of the directory's owner within its size bound before a byte of
it is read; a link, a special file or an oversized file anywhere in the store is tamper
(``UNSAFE_FILE``). The files a writer changes are read in the order that makes a consistent view
(MANIFEST, HEAD, records, journal, then the blob listing); while a live writer holds the lock,
the view ends where HEAD did and the verdict is ``in_progress`` unless the view itself fails.

Scanning never writes. Repairs (cutting a torn tail) are the writer's, under the writer lock.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness.errors import StoreError, StoreNotFoundError, UnsafeFileError
from harness.safeio import file_kind, open_dir
from harness.store._files import (
    DIRECTORIES,
    EVIDENCE,
    HEAD,
    JOURNAL,
    LIMITS,
    MANIFEST,
    RECORDS,
    WRITER_LOCK,
    WriterLock,
    partial_prefix,
)
from harness.store._model import BeginEntry, VerifyCode, VerifyReport, VerifyStatus
from harness.store.scan.blobs import check_blobs
from harness.store.scan.head import classify, head_of
from harness.store.scan.inputs import check_copies
from harness.store.scan.journal import check_journal, check_pending
from harness.store.scan.manifest import check_store_manifest, expected_manifest
from harness.store.scan.records import check_records
from harness.store.scan.state import Fault, Pass, Scan

__all__ = ["Fault", "Scan", "expected_manifest", "require_store", "scan"]


def _entries(p: Pass) -> None:
    """Refuse a store holding a link or a special file, at its top level or in a folder.

    Names the store does not know are left alone (they are not evidence), unless they are
    links or special files: nothing in a store directory may point elsewhere.
    """
    with os.scandir(p.dir_fd) as found:
        for entry in found:
            _entry_type(p, entry, entry.name)
            if entry.name == EVIDENCE and entry.is_dir(follow_symlinks=False):
                try:
                    fd = open_dir(EVIDENCE, dir_fd=p.dir_fd, follow=False)
                except (OSError, UnsafeFileError):
                    continue  # vanished, or swapped meanwhile: the type check named it
                try:
                    with os.scandir(fd) as inner:
                        for item in inner:
                            _entry_type(p, item, f"{EVIDENCE}/{item.name}", folder=True)
                finally:
                    os.close(fd)


def _entry_type(p: Pass, entry: os.DirEntry[str], where: str, *, folder: bool = False) -> None:
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        p.found_tamper(VerifyCode.UNSAFE_FILE, f"{where} is a symbolic link; refused")
    elif stat.S_ISDIR(mode):
        if folder or entry.name in LIMITS:
            p.found_tamper(VerifyCode.UNSAFE_FILE, f"{where} is a directory, not a file")
    elif not stat.S_ISREG(mode):
        p.found_tamper(VerifyCode.UNSAFE_FILE, f"{where} is {file_kind(mode)}; refused")
    elif entry.name in DIRECTORIES and not folder:
        p.found_tamper(VerifyCode.UNSAFE_FILE, f"{where} is a file, not a directory")


def _snapshot(p: Pass) -> None:
    """Read what changes while a writer works, in the order that bounds a consistent view.

    The writer appends a journal entry before the record that binds it, fsyncs a record
    before HEAD claims it, and stores a blob before any entry references it. Reading the
    manifest, HEAD, the record log and the journal in that order (and listing blobs after)
    gives a view in which everything HEAD claims is present with all it binds.
    """
    p.files[MANIFEST] = p.read(MANIFEST)
    head = p.read(HEAD)
    if p.live:
        # A live writer reuses the previous HEAD's file for the next one after an atomic
        # swap: a read that overlaps that rewrite can see a mix. Read again until stable.
        for _ in range(20):
            if head is None or head_of(head) is not None:
                break
            head = p.read(HEAD)
    p.files[HEAD] = head
    p.files[RECORDS] = p.read(RECORDS)
    p.files[JOURNAL] = p.read(JOURNAL)


def _report(p: Pass, writer: str | None) -> VerifyReport:
    s = p.s
    cells = max(s.records - 1, 0)
    if p.tamper is not None:
        status, fault = VerifyStatus.TAMPER, p.tamper
    elif writer is not None:
        # A crash state seen while a writer works is that writer's append in flight.
        status, fault = (
            VerifyStatus.IN_PROGRESS,
            Fault(
                VerifyCode.IN_PROGRESS,
                f"held by a live writer ({writer}); {s.records} records ({cells} cells) "
                "verified up to what HEAD had committed when the read began",
            ),
        )
    elif p.torn is not None:
        status, fault = VerifyStatus.TORN, p.torn
    elif p.manifest_digest is None:
        status, fault = (
            VerifyStatus.OK,
            Fault(
                VerifyCode.NOT_FINALIZED,
                f"{s.records} records ({cells} cells) verified; not finalized (no "
                f"{MANIFEST}): nothing pins this store's end",
            ),
        )
    else:
        status, fault = (
            VerifyStatus.OK,
            Fault(VerifyCode.OK, f"{s.records} records ({cells} cells) verified, finalized"),
        )
    genesis = s.genesis
    return VerifyReport(
        status=status,
        code=fault.code,
        reason=fault.reason,
        records=s.records,
        cells=cells,
        head=s.record_hashes[-1] if s.record_hashes else None,
        head_claimed=None if p.head is None else p.head.count,
        torn_bytes=s.records_size - s.records_end,
        journal_entries=p.journal_valid,
        journal_torn_bytes=s.journal_size - s.journal_end,
        pending_attempts=sum(1 for item in s.pending if isinstance(item.entry, BeginEntry)),
        lock_digest=None if genesis is None else genesis.lock_digest,
        schedule_digest=None if genesis is None else genesis.schedule_digest,
        schedule_rows=0 if genesis is None else genesis.schedule_rows,
        manifest_digest=p.manifest_digest if status is VerifyStatus.OK else None,
        writer=writer,
    )


def require_store(root: Path) -> None:
    """Raise unless ``root`` is a directory holding a store (checked before taking any lock).

    Raises:
        StoreNotFoundError: ``root`` is missing, not a directory, or holds no store files.
    """
    if not root.is_dir() or not any(root.iterdir()):
        prefix = partial_prefix(root.name)
        if root.parent.is_dir() and any(p.name.startswith(prefix) for p in root.parent.iterdir()):
            raise StoreNotFoundError(
                f"no store at {root}: the run creating it was cut short before the store "
                "existed (no cell and no attempt were recorded); start that run again"
            )
    if not root.is_dir():
        raise StoreNotFoundError(f"no store at {root}")
    if not any(os.path.lexists(root / name) for name in (RECORDS, HEAD)):
        raise StoreNotFoundError(f"{root} is not a run store (no {RECORDS} and no {HEAD})")


def scan(root: Path, *, fast: bool = True, held: bool = False) -> Scan:
    """Verify the run directory ``root``; never writes.

    Every file is opened relative to the store directory's descriptor without following a
    link, checked to be a regular file owned by the directory's owner and within its size
    bound, and only then read. While a writer holds the store, the view is bounded by what
    HEAD had committed when the read began and the verdict is ``in progress`` unless that
    view itself fails (tamper).

    Args:
        root: the run directory.
        fast: let an intact journal entry or cell record skip its decode into the model type
            (``scan.journal``, ``scan.records``); False decodes every one, the reference
            the fast path must agree with exactly.
        held: the caller holds the writer lock (resume, finalize): no writer can be at work,
            and a crash state is reported as such for the caller to repair.

    Raises:
        StoreNotFoundError: ``root`` is not a directory holding a store.
        StoreError: a store file cannot be read (permissions, I/O error).
    """
    root = Path(root)
    require_store(root)
    try:
        dir_fd = open_dir(root, follow=True)
    except (OSError, UnsafeFileError) as e:
        raise StoreNotFoundError(f"no store at {root}: {e}") from e
    try:
        owner = os.fstat(dir_fd).st_uid
        writer = None if held else WriterLock.holder(Path(WRITER_LOCK), dir_fd=dir_fd)
        found = _scan_once(root, dir_fd, owner, writer, fast)
        if not held and writer is None and found.report.status is not VerifyStatus.OK:
            # A writer that started during the read may have changed what was read: if one
            # holds the store now, read again as a live store.
            writer = WriterLock.holder(Path(WRITER_LOCK), dir_fd=dir_fd)
            if writer is not None:
                found = _scan_once(root, dir_fd, owner, writer, fast)
        return found
    finally:
        os.close(dir_fd)


def _scan_once(root: Path, dir_fd: int, owner: int, writer: str | None, fast: bool) -> Scan:
    p = Pass(root, dir_fd, owner, live=writer is not None, fast=fast)
    try:
        _entries(p)
        _snapshot(p)
        check_copies(p)
        check_blobs(p)
        check_journal(p)
        data, semantic, why = check_records(p)
        classify(p, data, semantic, why)
        check_pending(p)
        check_store_manifest(p)
    except OSError as e:
        where = e.filename or root
        raise StoreError(f"cannot read store {root}: {where}: {e.strerror or e}") from e
    p.s.report = _report(p, writer)
    return p.s
