"""The single writer of a run store: blobs, the attempt journal, cell commits.

Commit protocol (one cell): write the whole record line with one call and fsync the log; then
replace HEAD atomically (temp file, fsync, rename, directory fsync). A record is acknowledged
only when ``commit_cell`` returns. Attempts are journaled and fsynced before and after each
provider call, so a process that dies between a provider call and its cell's commit leaves
evidence; resume reports those orphaned attempts and binds them into the next record.

A store is created in a private sibling directory and published with one rename, so a store
directory either holds a genesis record and HEAD or does not exist. One writer at a time holds
the exclusive lock. A failed write or fsync stops the writer for good (never retried).

This module does not decide what a result or an attempt means; callers may pass msgspec types
to refuse unknown fields at commit. Creating a store lives in ``_create``, verifying and
repairing one for resume in ``_repair``, checking what a value or schedule may be in
``_values``, the staged attempts of concurrent cells (``staging.log``: staging them, and
checking a dead session's) in ``_staging``, whose ``Staging`` the writer owns; verification in
``scan``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, NamedTuple

import msgspec

from harness.canonical import Domain, NonCanonicalError, canonical_bytes, digest_bytes, is_digest
from harness.errors import (
    AttemptStateError,
    CommitOrderError,
    DurabilityError,
    RecordInvalidError,
    StoreError,
    TamperError,
    UnsafeFileError,
    WriterStoppedError,
)
from harness.log import get_logger
from harness.safeio import read_regular
from harness.store._create import WriterState, create_store
from harness.store._files import (
    BLOBS,
    DIRECTORIES,
    HEAD,
    HEAD_TMP,
    JOURNAL,
    LIMITS,
    MAX_BLOB,
    RECORDS,
    WRITER_LOCK,
    Durable,
    FileOps,
    WriterLock,
    blob_name,
    encode_line,
)
from harness.store._journal import RangeEntry, bind_range, orphans_of
from harness.store._model import (
    BeginEntry,
    CellRecord,
    EndEntry,
    Head,
    JournalEntry,
    JournalPos,
    OrphanedAttempt,
    SessionEntry,
    VerifyStatus,
)
from harness.store._repair import repair_for_resume
from harness.store._staging import StagedAttempt, Staging
from harness.store._values import environment_object, json_object, parse_schedule
from harness.store.scan import require_store

__all__ = ["Resumed", "RunStore"]

_log: Final = get_logger("harness.store")
_APPEND: Final = os.O_WRONLY | os.O_APPEND
_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY


# --- the writer -------------------------------------------------------------------------------


class Resumed(NamedTuple):
    """What ``RunStore.open_for_resume`` returns."""

    writer: RunStore
    next_row_index: int
    orphaned_attempts: tuple[OrphanedAttempt, ...]


class RunStore:
    """The one writer of a run store. Create with ``create`` or ``open_for_resume``.

    Not thread-safe: one task drives it. After a ``DurabilityError`` every call raises
    ``WriterStoppedError``; the process should stop and a new one resume.
    """

    def __init__(
        self,
        root: Path,
        lock: WriterLock,
        durable: Durable,
        state: WriterState,
        *,
        result_type: type[Any] | None,
        attempt_type: type[Any] | None,
    ) -> None:
        self._root = root
        self._lock = lock
        self._durable = durable
        self._rows = state.rows
        self._row_digests = state.row_digests
        self._lock_digest = state.lock_digest
        self._schedule_digest = state.schedule_digest
        self._identity = state.identity
        self._records = state.records
        self._head = state.head
        self._range = list(state.journal)
        self._journal_count = state.journal_count
        self._journal_head = state.journal_head
        self._blobs = set(state.blobs)
        self._open: set[int] = set()
        # The digest of this writer's session entry: the chain position its staged lines name.
        self._session = state.journal_head
        self._result_type = result_type
        self._attempt_type = attempt_type
        self._stopped: DurabilityError | None = None
        self._closed = False
        self._head_path = root / HEAD
        self._head_tmp = root / HEAD_TMP
        self._fds: list[int] = []
        try:
            # The directory the user named may be a link; nothing inside it is followed.
            try:
                self._dir_fd = os.open(root, _DIRECTORY | os.O_CLOEXEC)
            except OSError as e:
                raise DurabilityError(f"cannot open store {root}: {e.strerror}") from e
            self._fds.append(self._dir_fd)
            self._records_fd = self._open_fd(RECORDS, _APPEND, RECORDS)
            self._journal_fd = self._open_fd(JOURNAL, _APPEND, JOURNAL)
            self._blobs_fd = self._open_fd(BLOBS, _DIRECTORY, "the blob directory")
        except BaseException:
            self._close_files()
            raise
        self._staging = Staging(durable, self._dir_fd, self._rows, self._stop)

    def _open_fd(self, name: str, flags: int, what: str) -> int:
        fd = self._durable.open(name, flags, what, dir_fd=self._dir_fd)
        self._fds.append(fd)
        return fd

    # --- opening ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        root: str | os.PathLike[str],
        lock_bytes: bytes,
        schedule_rows: Sequence[Mapping[str, Any]],
        *,
        result_type: type[Any] | None = None,
        attempt_type: type[Any] | None = None,
        ops: FileOps | None = None,
        identity: Mapping[str, Any] | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> RunStore:
        """Create a new store bound to ``lock_bytes`` and ``schedule_rows``; return its writer.

        The store appears at ``root`` in one rename, with genesis and HEAD durable.

        Args:
            root: the run directory; must not exist, or be an empty directory.
            lock_bytes: the study lock, copied byte for byte (opaque to the store).
            schedule_rows: the canonical schedule, one JSON object per cell, in run order.
            result_type: optional msgspec type each cell result must match (unknown fields
                are refused when the type forbids them).
            attempt_type: optional msgspec type each audit-group entry must match.
            ops: file operations (tests inject failures here).
            identity: the run's identity, a plain JSON object genesis binds (default empty).
            environment: what produces this session (interpreter, platform, dependencies), a
                plain JSON object genesis records (default: none recorded).

        Raises:
            StoreExistsError: ``root`` exists and is not an empty directory.
            RecordInvalidError: the lock is empty or a schedule row is not plain JSON.
            WriterLockedError: another process is creating the same store.
            DurabilityError: a write or fsync failed (nothing is published).
        """
        root = Path(root)
        made = create_store(
            root,
            lock_bytes,
            schedule_rows,
            ops=ops,
            identity=identity,
            environment=environment,
        )
        try:
            writer = cls(
                root,
                made.lock,
                made.durable,
                made.state,
                result_type=result_type,
                attempt_type=attempt_type,
            )
        except BaseException:
            made.lock.release()
            shutil.rmtree(made.partial, ignore_errors=True)
            raise
        _log.info("store.create", store=str(root), rows=len(made.state.rows), head=made.state.head)
        return writer

    @classmethod
    def open_for_resume(
        cls,
        root: str | os.PathLike[str],
        lock_bytes: bytes,
        schedule_rows: Sequence[Mapping[str, Any]],
        *,
        result_type: type[Any] | None = None,
        attempt_type: type[Any] | None = None,
        ops: FileOps | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> Resumed:
        """Verify the store, repair a torn tail, and return a writer at the next schedule row.

        Only a verified contiguous prefix of this schedule, bound to this lock, is accepted.
        ``environment`` (what produces this session) is recorded in the session's journal entry.
        A torn final record (or journal entry) is cut and kept under ``evidence/``; a HEAD
        one record behind is advanced. Attempts journaled by a dead writer are returned and
        bound into the next record.

        Raises:
            StoreNotFoundError: no store at ``root``.
            WriterLockedError: another process holds the store (the holder is named).
            TamperError: verification found something no crash explains.
            StoreFinalizedError: the store is sealed by a manifest.
            LockMismatchError: the store is bound to a different lock.
            ScheduleMismatchError: the store is bound to a different schedule.
            DurabilityError: a repair write or fsync failed.
        """
        root = Path(root)
        schedule, sched = parse_schedule(schedule_rows)
        produced = environment_object(environment)
        require_store(root)
        lock = WriterLock.acquire(root / WRITER_LOCK, root)
        try:
            resumed = cls._resume(
                root,
                lock,
                Durable(ops or FileOps()),
                schedule.rows,
                sched,
                lock_bytes,
                result_type=result_type,
                attempt_type=attempt_type,
                environment=produced,
            )
        except OSError as e:
            # Repairs (evidence, leftovers) outside the FileOps seam: still never a traceback.
            lock.release()
            raise DurabilityError(f"cannot repair store {root}: {e}") from e
        except BaseException:
            lock.release()
            raise
        return resumed

    @classmethod
    def _resume(
        cls,
        root: Path,
        lock: WriterLock,
        durable: Durable,
        rows: list[dict[str, Any]],
        sched: bytes,
        lock_bytes: bytes,
        *,
        result_type: type[Any] | None,
        attempt_type: type[Any] | None,
        environment: dict[str, Any] | msgspec.UnsetType,
    ) -> Resumed:
        repaired = repair_for_resume(root, durable, rows, sched, lock_bytes)
        state, report, orphans = repaired.state, repaired.report, repaired.orphans
        records = state.records
        writer = cls(root, lock, durable, state, result_type=result_type, attempt_type=attempt_type)
        try:
            if writer._migrate_staging(repaired.last_session, repaired.since_session):
                orphans = orphans_of(writer._range)
            writer._append_journal(
                SessionEntry(
                    seq=writer._journal_count,
                    prev=writer._journal_head,
                    records=records,
                    environment=environment,
                )
            )
            writer._session = writer._journal_head
        except BaseException:
            writer._close_files()
            raise
        _log.info(
            "store.resume",
            store=str(root),
            records=records,
            next_row=records - 1,
            repaired=str(report.code) if report.status is VerifyStatus.TORN else None,
        )
        if orphans:
            _log.warning(
                "store.orphaned_attempts",
                store=str(root),
                count=len(orphans),
                begin_seqs=[orphan.begin_seq for orphan in orphans],
            )
        return Resumed(writer, records - 1, orphans)

    # --- notes beside the evidence -----------------------------------------------------------

    def append_note(self, name: str, data: bytes) -> None:
        """Append ``data`` to the note file ``name`` in the store directory (e.g. ``run.log``).

        Written through the store's directory descriptor, without following a link, and never
        into a file with another hard link; not hashed and not fsynced: a note can change no
        result. ``name`` must be a plain name the store itself does not use.

        Raises:
            StoreError: ``name`` is a store file's name or not a plain file name.
            TamperError: the note file is a link, hard-linked, or not a regular file.
            DurabilityError: the write failed.
        """
        if name in LIMITS or name in DIRECTORIES or not name or "/" in name or name[0] == ".":
            raise StoreError(f"{name!r} is not a note file name of a store")
        self._durable.append_note(name, data, self._dir_fd)

    # --- state --------------------------------------------------------------------------------

    @property
    def root(self) -> Path:
        """The run directory."""
        return self._root

    @property
    def next_row_index(self) -> int:
        """The schedule row the next ``commit_cell`` must carry."""
        return self._records - 1

    @property
    def records(self) -> int:
        """Records committed (genesis included)."""
        return self._records

    @property
    def head(self) -> str:
        """Hash of the last committed record."""
        return self._head

    @property
    def lock_digest(self) -> str:
        """The lock digest genesis binds."""
        return self._lock_digest

    @property
    def schedule_digest(self) -> str:
        """The schedule digest genesis binds."""
        return self._schedule_digest

    @property
    def identity(self) -> dict[str, Any]:
        """The run identity genesis binds (a copy)."""
        return dict(self._identity)

    @property
    def schedule_rows(self) -> int:
        """Rows in the bound schedule."""
        return len(self._rows)

    def _guard(self) -> None:
        if self._closed:
            raise StoreError(f"the writer of {self._root} is closed")
        if self._stopped is not None:
            raise WriterStoppedError(
                f"the writer of {self._root} stopped after a durability failure "
                f"({self._stopped}); resume the store in a new process"
            )

    def _stop(self, error: DurabilityError) -> None:
        self._stopped = error
        _log.error("store.writer_stopped", store=str(self._root), error=str(error))

    def _known_blobs(self, blobs: Sequence[str], what: str) -> tuple[str, ...]:
        if isinstance(blobs, str):
            raise RecordInvalidError(f"{what}: blobs must be a list of digests, not a string")
        for blob in blobs:
            if not is_digest(blob):
                raise RecordInvalidError(f"{what}: {blob!r} is not a blob digest")
            if blob not in self._blobs:
                raise RecordInvalidError(f"{what}: blob {blob} was never stored (put_blob first)")
        return tuple(sorted(set(blobs)))

    def refuse(self, holds_key: Callable[[bytes], bool]) -> None:
        """Never write bytes ``holds_key`` finds the run's API key in: such a write raises
        ``KeyInStoreError`` with nothing of it written, and the writer stops. A backstop behind
        redaction at the source, for a run that holds a key."""
        self._durable.refuse = holds_key

    # --- blobs and journal --------------------------------------------------------------------

    def put_blob(self, data: bytes | bytearray | memoryview) -> str:
        """Store ``data`` content-addressed (temp, fsync, rename, directory fsync).

        Returns:
            The blob digest ``blake3:<hex>`` (``Domain.BLOB``); storing it again is a no-op.

        Raises:
            RecordInvalidError: ``data`` is not bytes, or is larger than ``MAX_BLOB`` (the
                bound every reader enforces: such a blob would make the store unreadable);
                nothing is written.
            TamperError: a blob file with this name exists but holds other bytes.
            DurabilityError: a write or fsync failed (the writer stops).
        """
        self._guard()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise RecordInvalidError(f"a blob must be bytes, got {type(data).__name__}")
        size = memoryview(data).nbytes
        if size > MAX_BLOB:
            raise RecordInvalidError(
                f"a blob of {size} bytes is over the store's bound of {MAX_BLOB}; nothing written"
            )
        raw = bytes(data)
        digest = digest_bytes(Domain.BLOB, raw)
        if digest in self._blobs:
            return digest
        name = blob_name(digest)
        try:
            existing: bytes | None = read_regular(
                name, MAX_BLOB, dir_fd=self._blobs_fd, what=f"blob {name[:12]}..."
            )
        except FileNotFoundError:
            existing = None
        except UnsafeFileError as e:
            raise TamperError(f"{e} in {self._root}; the store is refused") from e
        except OSError as e:
            raise StoreError(f"cannot read blob {name[:12]}... in {self._root}: {e}") from e
        if existing is not None:
            if digest_bytes(Domain.BLOB, existing) != digest:
                raise TamperError(f"blob {name[:12]}... in {self._root} is corrupt")
            self._blobs.add(digest)
            return digest
        tmp = f".tmp-{name}"
        try:
            self._durable.check(raw, "a blob")  # before its temporary file exists
            fd = self._durable.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a blob", dir_fd=self._blobs_fd
            )
            try:
                self._durable.write_all(fd, raw, "a blob")
                self._durable.fsync(fd, "a blob")
            finally:
                self._durable.close(fd)
            self._durable.rename(tmp, name, dir_fd=self._blobs_fd)
            self._durable.fsync(self._blobs_fd, f"directory {BLOBS}")
        except DurabilityError as e:
            self._stop(e)
            raise
        self._blobs.add(digest)
        return digest

    def _append_journal(self, entry: JournalEntry, *, sync: bool = True) -> None:
        line, digest = encode_line(Domain.JOURNAL_ENTRY, canonical_bytes(entry))
        try:
            self._durable.write_all(self._journal_fd, line, JOURNAL)
            if sync:
                self._durable.fsync(self._journal_fd, JOURNAL)
        except DurabilityError as e:
            self._stop(e)
            raise
        self._range.append(RangeEntry(digest, entry))
        self._journal_count += 1
        self._journal_head = digest

    def journal_begin(self, attempt: Mapping[str, Any] | msgspec.Struct) -> int:
        """Journal (and fsync) a provider attempt before the call is made.

        Returns:
            The attempt key (the entry's journal sequence number) for ``journal_end``.

        Raises:
            RecordInvalidError: ``attempt`` is not a plain JSON object.
            DurabilityError: the append or fsync failed (the writer stops).
        """
        self._guard()
        obj = json_object(attempt, "attempt")
        key = self._journal_count
        self._append_journal(BeginEntry(seq=key, prev=self._journal_head, attempt=obj))
        self._open.add(key)
        return key

    def journal_end(
        self,
        key: int,
        outcome: Mapping[str, Any] | msgspec.Struct,
        *,
        blobs: Sequence[str] = (),
    ) -> None:
        """Journal (and fsync) the outcome of attempt ``key`` and the blobs it produced.

        Raises:
            AttemptStateError: ``key`` was not begun by this writer or is already ended.
            RecordInvalidError: ``outcome`` is not plain JSON, or a blob was never stored.
            DurabilityError: the append or fsync failed (the writer stops).
        """
        self._guard()
        if key not in self._open:
            raise AttemptStateError(
                f"attempt {key} is not open in this writer (never begun here, or already ended)"
            )
        obj = json_object(outcome, "outcome")
        known = self._known_blobs(blobs, "journal_end")
        self._append_journal(
            EndEntry(
                seq=self._journal_count,
                prev=self._journal_head,
                begin_seq=key,
                outcome=obj,
                blobs=known,
            )
        )
        self._open.discard(key)

    # --- commit -------------------------------------------------------------------------------

    def commit_cell(
        self,
        row_index: int,
        result: Mapping[str, Any] | msgspec.Struct,
        audit_group: Sequence[Mapping[str, Any] | msgspec.Struct],
        *,
        blobs: Sequence[str] = (),
    ) -> str:
        """Commit one completed cell; return the record hash once it and HEAD are durable.

        The record binds the schedule row and its digest, the result, the audit group, the
        blobs (those given plus those the cell's journaled attempts reference), the journal
        position, every attempt journaled since the previous record (orphans included), and
        the previous record's hash.

        Raises:
            CommitOrderError: ``row_index`` is not the next schedule row.
            AttemptStateError: an attempt this writer began is not ended.
            RecordInvalidError: non-finite number, unknown field, non-JSON value, or an
                unknown blob.
            DurabilityError: a write or fsync failed (the writer stops; nothing is retried).
        """
        self._guard()
        expected = self._records - 1
        if isinstance(row_index, bool) or not isinstance(row_index, int):
            raise CommitOrderError(f"row index must be an integer, got {row_index!r}")
        if expected >= len(self._rows):
            raise CommitOrderError(
                f"all {len(self._rows)} schedule rows are committed; row {row_index} has no place"
            )
        if row_index != expected:
            raise CommitOrderError(
                f"cell for schedule row {row_index} is out of order: the next row is {expected} "
                "(rows are never skipped, repeated or reordered)"
            )
        if self._open:
            raise AttemptStateError(
                f"attempt(s) {sorted(self._open)} begun but not ended; end them before "
                f"committing row {row_index}"
            )
        result_obj = json_object(result, "result", self._result_type)
        if isinstance(audit_group, (str, bytes, Mapping)) or not isinstance(audit_group, Sequence):
            raise RecordInvalidError("the audit group must be a list of attempt objects")
        audit = tuple(
            json_object(item, f"audit[{index}]", self._attempt_type)
            for index, item in enumerate(audit_group)
        )
        extra = self._known_blobs(blobs, "commit_cell")
        binding = bind_range(self._range)
        if isinstance(binding, str):  # the writer only appends consistent ranges
            raise StoreError(f"internal journal inconsistency in {self._root}: {binding}")
        record = CellRecord(
            seq=self._records,
            prev=self._head,
            row_index=row_index,
            row=self._rows[row_index],
            row_digest=self._row_digests[row_index],
            result=result_obj,
            audit=audit,
            blobs=tuple(sorted(set(extra) | binding.end_blobs)),
            journal=JournalPos(count=self._journal_count, head=self._journal_head),
            attempts=binding.attempts,
        )
        try:
            body = canonical_bytes(record)
        except NonCanonicalError as e:
            raise RecordInvalidError(f"row {row_index}: {e}") from e
        line, digest = encode_line(Domain.STORE_RECORD, body)
        try:
            self._durable.write_all(self._records_fd, line, RECORDS)
            self._durable.fsync(self._records_fd, RECORDS)
            head = canonical_bytes(Head(count=self._records + 1, head=digest))
            self._durable.replace(
                self._head_path,
                self._head_tmp,
                encode_line(Domain.STORE_HEAD, head)[0],
                self._dir_fd,
            )
        except DurabilityError as e:
            self._stop(e)
            raise
        self._records += 1
        self._head = digest
        self._range = []
        return digest

    # --- staged attempts (concurrent cells; the staging itself is ``_staging.Staging``) -------

    def stage_begin(self, attempt: Mapping[str, Any] | msgspec.Struct, *, row: int) -> int:
        """Stage (and fsync) an attempt of the cell of schedule row ``row``, which is not
        committed yet.

        The attempt goes into ``staging.log`` now and into the journal when its cell commits
        (``commit_staged``), so the journal and the records are those of a sequential run.

        Returns:
            The staging key for ``stage_end`` and ``commit_staged``.

        Raises:
            RecordInvalidError: ``attempt`` is not plain JSON, ``row`` is committed or not in
                the schedule, or the attempt names another cell than the row's.
            DurabilityError: the write or fsync failed (the writer stops).
        """
        self._guard()
        obj = json_object(attempt, "attempt")
        assert self._session is not None  # a writer's journal starts with its session entry
        return self._staging.begin(obj, row=row, next_row=self._records - 1, session=self._session)

    def stage_end(
        self,
        key: int,
        outcome: Mapping[str, Any] | msgspec.Struct,
        *,
        blobs: Sequence[str] = (),
    ) -> None:
        """Stage (and fsync) how staged attempt ``key`` ended."""
        self._guard()
        self._staging.require_open(key)
        obj = json_object(outcome, "outcome")
        self._staging.end(key, obj, self._known_blobs(blobs, "stage_end"))

    def commit_staged(
        self,
        row_index: int,
        result: Mapping[str, Any] | msgspec.Struct,
        audit_group: Sequence[Mapping[str, Any] | msgspec.Struct],
        keys: Sequence[int],
        *,
        blobs: Sequence[str] = (),
    ) -> str:
        """Journal the staged attempts ``keys`` in order (one fsync), then ``commit_cell``.

        Raises:
            AttemptStateError: a key is unknown or listed twice, or its attempt has not ended
                (nothing is journaled).
            (and whatever ``commit_cell`` raises)
        """
        self._guard()
        self._staging.take(keys, self._journal_staged)
        return self.commit_cell(row_index, result, audit_group, blobs=blobs)

    def _append_staged(self, staged: Sequence[StagedAttempt]) -> None:
        """Append a begin entry, and an end entry when it ended, per staged attempt; no fsync."""
        for attempt in staged:
            begin = self._journal_count
            self._append_journal(
                BeginEntry(seq=begin, prev=self._journal_head, attempt=attempt.attempt),
                sync=False,
            )
            if attempt.outcome is not None:
                self._append_journal(
                    EndEntry(
                        seq=self._journal_count,
                        prev=self._journal_head,
                        begin_seq=begin,
                        outcome=attempt.outcome,
                        blobs=attempt.blobs,
                    ),
                    sync=False,
                )

    def _journal_staged(self, staged: Sequence[StagedAttempt]) -> None:
        """Journal a committing cell's staged attempts with one fsync."""
        self._append_staged(staged)
        try:
            self._durable.fsync(self._journal_fd, JOURNAL)
        except DurabilityError as e:
            self._stop(e)
            raise

    def _migrate_staging(
        self, session: str | None, since_session: Sequence[Mapping[str, Any]]
    ) -> int:
        """Move the attempts a dead session staged for cells it did not commit, and the journal
        lacks, into the journal (before the new session entry, so they bind as orphaned);
        return how many. Every line is checked first (``_staging``). The staging file is then
        removed.

        Raises:
            TamperError: a staged line contradicts the chain.
        """
        todo = self._staging.left_by_dead_session(
            session=session,
            next_row=self._records - 1,
            blobs=self._blobs,
            journaled=since_session,
            where=str(self._root),
        )
        if todo is None:
            return 0
        self._append_staged(todo)
        self._durable.fsync(self._journal_fd, JOURNAL)
        self._staging.remove_file()
        return len(todo)

    # --- closing ------------------------------------------------------------------------------

    def _close_files(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                continue

    def close(self) -> None:
        """Close the files and release the writer lock (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._staging.close(keep=self._stopped is not None)
        self._close_files()
        self._lock.release()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
