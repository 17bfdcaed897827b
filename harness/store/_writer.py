"""The single writer of a run store: create, resume, blobs, the attempt journal, cell commits.

Commit protocol (one cell): write the whole record line with one call and fsync the log; then
replace HEAD atomically (temp file, fsync, rename, directory fsync). A record is acknowledged
only when ``commit_cell`` returns. Attempts are journaled and fsynced before and after each
provider call, so a process that dies between a provider call and its cell's commit leaves
evidence; resume reports those orphaned attempts and binds them into the next record.

A store is created in a private sibling directory and published with one rename, so a store
directory either holds a genesis record and HEAD or does not exist. One writer at a time holds
the exclusive lock. A failed write or fsync stops the writer for good (never retried).

This module does not decide what a result or an attempt means; callers may pass msgspec types
to refuse unknown fields at commit. Verification lives in ``_scan``.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
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
    LockMismatchError,
    RecordInvalidError,
    ScheduleMismatchError,
    StoreError,
    StoreExistsError,
    StoreFinalizedError,
    TamperError,
    UnsafeFileError,
    WriterLockedError,
    WriterStoppedError,
)
from harness.log import get_logger
from harness.safeio import open_dir, read_regular
from harness.store._files import (
    BLOBS,
    DIRECTORIES,
    EVIDENCE,
    HEAD,
    HEAD_TMP,
    JOURNAL,
    LIMITS,
    LOCK_COPY,
    MANIFEST,
    MANIFEST_TMP,
    MAX_BLOB,
    RECORDS,
    SCHEDULE_COPY,
    WRITER_LOCK,
    Durable,
    FileOps,
    WriterLock,
    blob_name,
    encode_line,
    partial_prefix,
)
from harness.store._journal import RangeEntry, bind_range, orphans_of
from harness.store._model import (
    BeginEntry,
    CellRecord,
    EndEntry,
    GenesisRecord,
    Head,
    JournalEntry,
    JournalPos,
    OrphanedAttempt,
    SessionEntry,
    VerifyStatus,
)
from harness.store._scan import require_store, scan
from harness.store._scan_inputs import ScheduleRows, split_schedule
from harness.store._staging import begin_line, check_cell, end_line, staged_to_journal

__all__ = [
    "Resumed",
    "RunStore",
    "lock_digest",
    "row_digest",
    "schedule_bytes",
    "schedule_digest",
]

_log: Final = get_logger("harness.store")
_APPEND: Final = os.O_WRONLY | os.O_APPEND
STAGING: Final = "staging.log"
"""Attempts of cells that are not the next to commit (concurrent runs): one JSON line each,
fsynced before the call is sent; moved into the journal in schedule order when their cell
commits, or as orphaned attempts of a dead session on resume (only those of uncommitted cells
the journal lacks, after ``_staging`` checked every line). Outside the chain."""
_MAX_STAGING: Final = 1 << 30
_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY
_JSON: Final = msgspec.json.Decoder()


# --- JSON values and the schedule -------------------------------------------------------------


def _check_json(value: object, what: str, path: str) -> None:
    """Refuse anything that is not plain JSON: non-str keys, NaN/inf, other types."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RecordInvalidError(f"{what}: non-finite number {value!r} at `{path}`")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise RecordInvalidError(f"{what}: non-string key {key!r} at `{path}`")
            _check_json(item, what, f"{path}.{key}")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(item, what, f"{path}[{index}]")
        return
    raise RecordInvalidError(f"{what}: {type(value).__name__} at `{path}` is not a JSON value")


def _json_object(value: object, what: str, schema: type[Any] | None = None) -> dict[str, Any]:
    """Return ``value`` as a plain JSON object, refusing non-JSON values and unknown fields.

    Fast path: encode canonically and decode again; an object that survives unchanged is plain
    JSON. Anything else (NaN, a non-string key, bytes, a set...) is walked to name its path.

    Raises:
        RecordInvalidError: ``value`` is not a JSON object, holds a non-finite number or a
            non-JSON value, or (with ``schema``) does not match it, e.g. an unknown field.
    """
    if isinstance(value, msgspec.Struct):
        value = msgspec.to_builtins(value)
    if not isinstance(value, Mapping):
        raise RecordInvalidError(f"{what} must be a JSON object, got {type(value).__name__}")
    obj = dict(value)
    try:
        same = _JSON.decode(canonical_bytes(obj)) == obj
    except NonCanonicalError as e:
        _check_json(obj, what, "$")
        raise RecordInvalidError(f"{what}: {e}") from e
    if not same:
        _check_json(obj, what, "$")  # raises, unless only tuples became lists
    if schema is not None:
        try:
            msgspec.convert(obj, schema, strict=True)
        except msgspec.ValidationError as e:
            raise RecordInvalidError(f"{what}: {e}") from e
    return obj


def _schedule(rows: object) -> tuple[ScheduleRows, bytes]:
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise RecordInvalidError("the schedule must be a sequence of row objects")
    if not rows:
        raise RecordInvalidError("the schedule has no rows")
    objects = [_json_object(row, f"schedule row {index}") for index, row in enumerate(rows)]
    data = canonical_bytes(objects)
    split = split_schedule(data)  # the rows and row digests exactly as verification derives them
    if isinstance(split, str):  # canonical bytes of a non-empty list of objects always split
        raise RecordInvalidError(f"the schedule {split}")
    return split, data


def schedule_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Canonical bytes of a schedule (a JSON array of row objects), as the store keeps them.

    Raises:
        RecordInvalidError: a row is not a JSON object or holds a non-JSON value.
    """
    return _schedule(rows)[1]


def schedule_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """Digest of a schedule under ``Domain.SCHEDULE``: what genesis binds."""
    return digest_bytes(Domain.SCHEDULE, schedule_bytes(rows))


def row_digest(row: Mapping[str, Any]) -> str:
    """Digest of one schedule row under ``Domain.SCHEDULE_ROW``: what each cell record binds."""
    return digest_bytes(Domain.SCHEDULE_ROW, canonical_bytes(_json_object(row, "schedule row")))


def lock_digest(lock: bytes) -> str:
    """Digest of the study lock's bytes under ``Domain.LOCK``: what genesis binds."""
    return digest_bytes(Domain.LOCK, lock)


# --- the writer -------------------------------------------------------------------------------


class Resumed(NamedTuple):
    """What ``RunStore.open_for_resume`` returns."""

    writer: RunStore
    next_row_index: int
    orphaned_attempts: tuple[OrphanedAttempt, ...]


class _State(NamedTuple):
    rows: list[dict[str, Any]]
    row_digests: list[str]
    lock_digest: str
    schedule_digest: str
    records: int
    head: str
    journal: list[RangeEntry]
    journal_count: int
    journal_head: str | None
    blobs: set[str]
    identity: dict[str, Any]


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
        state: _State,
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
        self._staged: dict[int, list[Any]] = {}
        self._staging_fd: int | None = None
        self._staged_count = 0
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
        schedule, sched = _schedule(schedule_rows)
        bound = _json_object(dict(identity or {}), "identity")
        produced: dict[str, Any] | msgspec.UnsetType = (
            msgspec.UNSET if environment is None else _json_object(dict(environment), "environment")
        )
        if not lock_bytes:
            raise RecordInvalidError("the study lock is empty")
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise StoreExistsError(f"{root} already exists; resume it instead of creating it")
        parent = root.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _clear_stale_partials(parent, root.name)
            partial = Path(tempfile.mkdtemp(prefix=partial_prefix(root.name), dir=parent))
        except OSError as e:
            raise StoreError(f"cannot create store {root}: {e.strerror or e}") from e
        lock = WriterLock.acquire(partial / WRITER_LOCK, root)
        durable = Durable(ops or FileOps())
        try:
            genesis = GenesisRecord(
                seq=0,
                prev=None,
                lock_digest=lock_digest(lock_bytes),
                schedule_digest=digest_bytes(Domain.SCHEDULE, sched),
                schedule_rows=len(schedule.rows),
                identity=bound,
                environment=produced,
            )
            record_line, record_hash = encode_line(Domain.STORE_RECORD, canonical_bytes(genesis))
            session = SessionEntry(seq=0, prev=None, records=1)
            entry_line, entry_hash = encode_line(Domain.JOURNAL_ENTRY, canonical_bytes(session))
            head_line, _ = encode_line(
                Domain.STORE_HEAD, canonical_bytes(Head(count=1, head=record_hash))
            )
            durable.write_new(partial / LOCK_COPY, lock_bytes)
            durable.write_new(partial / SCHEDULE_COPY, sched)
            durable.write_new(partial / RECORDS, record_line)
            durable.write_new(partial / JOURNAL, entry_line)
            durable.write_new(partial / HEAD, head_line)
            try:
                (partial / BLOBS).mkdir()
            except OSError as e:
                raise DurabilityError(f"cannot create {BLOBS}/ in {root}: {e.strerror}") from e
            durable.fsync_dir(partial / BLOBS)
            durable.fsync_dir(partial)
            try:
                durable.rename(partial, root)
            except DurabilityError as e:
                if root.exists():
                    raise StoreExistsError(f"{root} appeared while it was being created") from e
                raise
            durable.fsync_dir(parent)
            state = _State(
                rows=schedule.rows,
                row_digests=schedule.row_digests,
                lock_digest=genesis.lock_digest,
                schedule_digest=genesis.schedule_digest,
                records=1,
                head=record_hash,
                journal=[RangeEntry(entry_hash, session)],
                journal_count=1,
                journal_head=entry_hash,
                blobs=set(),
                identity=bound,
            )
            writer = cls(
                root,
                lock,
                durable,
                state,
                result_type=result_type,
                attempt_type=attempt_type,
            )
        except BaseException:
            lock.release()
            shutil.rmtree(partial, ignore_errors=True)
            raise
        _log.info("store.create", store=str(root), rows=len(schedule.rows), head=record_hash)
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
        schedule, sched = _schedule(schedule_rows)
        produced: dict[str, Any] | msgspec.UnsetType = (
            msgspec.UNSET if environment is None else _json_object(dict(environment), "environment")
        )
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
        state = _State(
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
        writer = cls(root, lock, durable, state, result_type=result_type, attempt_type=attempt_type)
        try:
            if writer._migrate_staging(last_session, since_session):
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
        obj = _json_object(attempt, "attempt")
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
        obj = _json_object(outcome, "outcome")
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
        result_obj = _json_object(result, "result", self._result_type)
        if isinstance(audit_group, (str, bytes, Mapping)) or not isinstance(audit_group, Sequence):
            raise RecordInvalidError("the audit group must be a list of attempt objects")
        audit = tuple(
            _json_object(item, f"audit[{index}]", self._attempt_type)
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

    # --- staged attempts (concurrent cells) -----------------------------------------------------

    def _stage(self, line: dict[str, Any]) -> None:
        if self._staging_fd is None:
            self._staging_fd = self._open_fd(STAGING, _APPEND | os.O_CREAT, STAGING)
        try:
            self._durable.write_all(self._staging_fd, canonical_bytes(line) + b"\n", STAGING)
            self._durable.fsync(self._staging_fd, STAGING)
        except DurabilityError as e:
            self._stop(e)
            raise

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
        """
        self._guard()
        obj = _json_object(attempt, "attempt")
        if isinstance(row, bool) or not (self._records - 1 <= row < len(self._rows)):
            raise RecordInvalidError(f"staged attempt for row {row!r}, not an uncommitted row")
        mismatch = check_cell(self._rows[row], obj)
        if mismatch is not None:
            raise RecordInvalidError(f"staged attempt for row {row} {mismatch}")
        assert self._session is not None  # a writer's journal starts with its session entry
        key = self._staged_count
        self._staged_count += 1
        self._stage(begin_line(key, self._session, row, obj))
        self._staged[key] = [obj, None, ()]
        return key

    def stage_end(
        self,
        key: int,
        outcome: Mapping[str, Any] | msgspec.Struct,
        *,
        blobs: Sequence[str] = (),
    ) -> None:
        """Stage (and fsync) how staged attempt ``key`` ended."""
        self._guard()
        entry = self._staged.get(key)
        if entry is None or entry[1] is not None:
            raise AttemptStateError(f"staged attempt {key} is not open in this writer")
        obj = _json_object(outcome, "outcome")
        known = self._known_blobs(blobs, "stage_end")
        self._stage(end_line(key, obj, known))
        entry[1], entry[2] = obj, known

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
            AttemptStateError: a key is unknown or its attempt has not ended.
            (and whatever ``commit_cell`` raises)
        """
        self._guard()
        staged = []
        for key in keys:
            entry = self._staged.get(key)
            if entry is None or entry[1] is None:
                raise AttemptStateError(f"staged attempt {key} is unknown or not ended")
            staged.append(entry)
        for obj, outcome, known in staged:
            begin = self._journal_count
            self._append_journal(
                BeginEntry(seq=begin, prev=self._journal_head, attempt=obj), sync=False
            )
            self._append_journal(
                EndEntry(
                    seq=self._journal_count,
                    prev=self._journal_head,
                    begin_seq=begin,
                    outcome=outcome,
                    blobs=known,
                ),
                sync=False,
            )
        if staged:
            try:
                self._durable.fsync(self._journal_fd, JOURNAL)
            except DurabilityError as e:
                self._stop(e)
                raise
        for key in keys:
            del self._staged[key]
        return self.commit_cell(row_index, result, audit_group, blobs=blobs)

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
        try:
            data = read_regular(STAGING, _MAX_STAGING, dir_fd=self._dir_fd, what=STAGING)
        except FileNotFoundError:
            return 0
        except UnsafeFileError as e:
            raise TamperError(f"{e} in {self._root}; the store is refused") from e
        todo = staged_to_journal(
            data,
            session=session,
            rows=self._rows,
            next_row=self._records - 1,
            blobs=self._blobs,
            journaled=since_session,
            where=str(self._root),
        )
        for staged in todo:
            begin = self._journal_count
            self._append_journal(
                BeginEntry(seq=begin, prev=self._journal_head, attempt=staged.attempt),
                sync=False,
            )
            if staged.outcome is not None:
                self._append_journal(
                    EndEntry(
                        seq=self._journal_count,
                        prev=self._journal_head,
                        begin_seq=begin,
                        outcome=staged.outcome,
                        blobs=staged.blobs,
                    ),
                    sync=False,
                )
        self._durable.fsync(self._journal_fd, JOURNAL)
        os.unlink(STAGING, dir_fd=self._dir_fd)
        self._durable.fsync(self._dir_fd, "the store directory")
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
        if self._staging_fd is not None and not self._staged and self._stopped is None:
            # Every staged attempt is in the journal now: the staging file holds nothing new.
            with contextlib.suppress(OSError):
                os.unlink(STAGING, dir_fd=self._dir_fd)
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


# --- helpers ----------------------------------------------------------------------------------


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


def _clear_stale_partials(parent: Path, name: str) -> None:
    """Remove partial directories of earlier interrupted creates (their lock is free)."""
    for partial in parent.glob(f"{partial_prefix(name)}*"):
        try:
            lock = WriterLock.acquire(partial / WRITER_LOCK, partial)
        except (WriterLockedError, StoreError):
            continue  # another creator is at work, or it vanished meanwhile
        try:
            shutil.rmtree(partial, ignore_errors=True)
        finally:
            lock.release()
