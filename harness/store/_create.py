"""Creating a run store: built in a private sibling directory, published with one rename.

A store directory either holds a genesis record and HEAD or does not exist: every file is
written and fsynced in a partial directory (named by ``partial_prefix``) under the writer lock,
then the directory is renamed into place and its parent fsynced. Partial directories of earlier
interrupted creates whose lock is free are removed first.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import (
    DurabilityError,
    RecordInvalidError,
    StoreError,
    StoreExistsError,
    WriterLockedError,
)
from harness.store._files import (
    BLOBS,
    HEAD,
    JOURNAL,
    LOCK_COPY,
    RECORDS,
    SCHEDULE_COPY,
    WRITER_LOCK,
    Durable,
    FileOps,
    WriterLock,
    encode_line,
    partial_prefix,
)
from harness.store._journal import RangeEntry
from harness.store._model import GenesisRecord, Head, SessionEntry
from harness.store._values import environment_object, json_object, lock_digest, parse_schedule

__all__ = ["Created", "WriterState", "create_store"]


class WriterState(NamedTuple):
    """What a writer starts from: made by ``create_store``, rebuilt from the files on resume."""

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


class Created(NamedTuple):
    """A store just published at its root, its writer lock held (``partial`` no longer exists
    unless the publishing rename failed)."""

    partial: Path
    lock: WriterLock
    durable: Durable
    state: WriterState


def create_store(
    root: Path,
    lock_bytes: bytes,
    schedule_rows: Sequence[Mapping[str, Any]],
    *,
    ops: FileOps | None,
    identity: Mapping[str, Any] | None,
    environment: Mapping[str, Any] | None,
) -> Created:
    """Write genesis, HEAD, the session entry and the lock and schedule copies, and publish
    the store at ``root``; the caller opens the writer and releases the lock if that fails.

    Raises:
        StoreExistsError: ``root`` exists and is not an empty directory.
        RecordInvalidError: the lock is empty or a schedule row is not plain JSON.
        WriterLockedError: another process is creating the same store.
        DurabilityError: a write or fsync failed (nothing is published).
    """
    schedule, sched = parse_schedule(schedule_rows)
    bound = json_object(dict(identity or {}), "identity")
    produced = environment_object(environment)
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
        state = WriterState(
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
    except BaseException:
        lock.release()
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return Created(partial, lock, durable, state)


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
