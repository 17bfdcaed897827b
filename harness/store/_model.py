"""The store's typed bodies: records, HEAD, journal entries, manifest, and verification verdicts.

Everything read back from disk is decoded into these frozen Structs with unknown fields refused,
so a body that gained a field fails verification instead of being trimmed. Bodies carry no wall
clock, host or path: the same inputs give the same bytes.

This module defines data only. Writing is ``_writer``; checking is ``scan``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

import msgspec

__all__ = [
    "AttemptRef",
    "BeginEntry",
    "CellRecord",
    "EndEntry",
    "GenesisRecord",
    "Head",
    "JournalEntry",
    "JournalPos",
    "StoreManifest",
    "OrphanedAttempt",
    "Record",
    "SessionEntry",
    "StoreCheck",
    "StoreState",
    "VerifyCode",
    "VerifyReport",
    "VerifyStatus",
]

Digest = Annotated[str, msgspec.Meta(pattern="^blake3:[0-9a-f]{64}$")]
Count = Annotated[int, msgspec.Meta(ge=0)]
JsonObject = dict[str, Any]


class _Body(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind"
):
    """Base of every tagged body stored on disk."""


class _Plain(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every untagged body stored on disk."""


# --- record log -------------------------------------------------------------------------------


class JournalPos(_Plain, frozen=True, kw_only=True):
    """A position in the attempt journal: how many entries, and the hash of the last one."""

    count: Count
    head: Digest | None


class AttemptRef(_Plain, frozen=True, kw_only=True):
    """One journaled provider attempt bound into a record.

    ``orphaned`` is true when the attempt was begun by an earlier writer session that died
    before committing its cell; such an attempt may have no end entry.
    """

    begin_seq: Count
    begin_hash: Digest
    end_seq: Count | None
    end_hash: Digest | None
    orphaned: bool


class GenesisRecord(_Body, tag="genesis", frozen=True, kw_only=True):
    """Record 0: binds the study lock, the canonical schedule the run must follow, and the
    run's identity (opaque to the store: the study puts there what else shapes its results,
    e.g. the provider, model, endpoint and generation config; never a credential)."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: Digest | None
    lock_digest: Digest
    schedule_digest: Digest
    schedule_rows: Annotated[int, msgspec.Meta(ge=1)]
    identity: JsonObject = msgspec.field(default_factory=dict)
    # What produced the first session (interpreter, platform, dependency versions): opaque to
    # the store like the identity. Absent (not null) in stores written before it was recorded.
    environment: JsonObject | msgspec.UnsetType = msgspec.UNSET


class CellRecord(_Body, tag="cell", frozen=True, kw_only=True):
    """One completed cell: its schedule row, result, audit group and bound journal attempts."""

    schema_version: Literal[1] = 1
    seq: Annotated[int, msgspec.Meta(ge=1)]
    prev: Digest
    row_index: Count
    row: JsonObject
    row_digest: Digest
    result: JsonObject
    audit: tuple[JsonObject, ...]
    blobs: tuple[Digest, ...]
    journal: JournalPos
    attempts: tuple[AttemptRef, ...]


Record = GenesisRecord | CellRecord


class Head(_Plain, frozen=True, kw_only=True):
    """The separately kept head: record count and the last record's hash."""

    schema_version: Literal[1] = 1
    count: Annotated[int, msgspec.Meta(ge=1)]
    head: Digest


# --- attempt journal --------------------------------------------------------------------------


class SessionEntry(_Body, tag="session", frozen=True, kw_only=True):
    """Written when a writer opens the store; ``records`` is the record count it found.

    A resume's entry carries the environment of that session (the first session's is in
    genesis); absent in the first session's entry and in stores written before it was recorded.
    """

    schema_version: Literal[1] = 1
    seq: Count
    prev: Digest | None
    records: Annotated[int, msgspec.Meta(ge=1)]
    environment: JsonObject | msgspec.UnsetType = msgspec.UNSET


class BeginEntry(_Body, tag="begin", frozen=True, kw_only=True):
    """Journaled (and fsynced) before a provider call; ``seq`` is the attempt's key."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: Digest | None
    attempt: JsonObject


class EndEntry(_Body, tag="end", frozen=True, kw_only=True):
    """Journaled after a provider call: its outcome and the blobs holding raw responses."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: Digest | None
    begin_seq: Count
    outcome: JsonObject
    blobs: tuple[Digest, ...]


JournalEntry = SessionEntry | BeginEntry | EndEntry


class OrphanedAttempt(_Plain, frozen=True, kw_only=True):
    """An attempt journaled by a writer that died before committing its cell."""

    begin_seq: Count
    attempt: JsonObject
    outcome: JsonObject | None
    blobs: tuple[Digest, ...]


# --- manifest ---------------------------------------------------------------------------------


class StoreManifest(_Plain, frozen=True, kw_only=True):
    """The final seal: pins the head and every count, so a removed tail is detectable."""

    schema_version: Literal[1] = 1
    lock_digest: Digest
    schedule_digest: Digest
    schedule_rows: Count
    records: Count
    cells: Count
    audit_groups: Count
    head: Digest
    journal: JournalPos
    attempts: Count
    orphaned_attempts: Count
    unbound_attempts: tuple[Count, ...]
    blobs: Count


# --- verification -----------------------------------------------------------------------------


class VerifyStatus(StrEnum):
    """ok: intact. torn: a crash state resume repairs. tamper: no crash explains it.

    in_progress: a live writer holds the store; what HEAD had committed when the read began
    verifies (a crash state in it is the writer's append in flight, not a fault).
    """

    OK = "ok"
    TORN = "torn"
    TAMPER = "tamper"
    IN_PROGRESS = "in_progress"


class VerifyCode(StrEnum):
    """Why verification stopped. Stable wire strings: never rename or reuse one."""

    OK = "OK"
    # Recoverable crash states (status torn).
    RECORDS_TORN_TAIL = "RECORDS_TORN_TAIL"
    HEAD_LAGS = "HEAD_LAGS"
    JOURNAL_TORN_TAIL = "JOURNAL_TORN_TAIL"
    # Tamper: copies of the run's inputs.
    LOCK_COPY_MISSING = "LOCK_COPY_MISSING"
    LOCK_COPY_MISMATCH = "LOCK_COPY_MISMATCH"
    SCHEDULE_COPY_MISSING = "SCHEDULE_COPY_MISSING"
    SCHEDULE_COPY_MALFORMED = "SCHEDULE_COPY_MALFORMED"
    SCHEDULE_COPY_MISMATCH = "SCHEDULE_COPY_MISMATCH"
    # Tamper: the record log.
    RECORDS_MISSING = "RECORDS_MISSING"
    RECORD_MALFORMED = "RECORD_MALFORMED"
    RECORD_HASH_MISMATCH = "RECORD_HASH_MISMATCH"
    RECORD_BODY_INVALID = "RECORD_BODY_INVALID"
    RECORD_KIND = "RECORD_KIND"
    RECORD_SEQ = "RECORD_SEQ"
    RECORD_PREV = "RECORD_PREV"
    ROW_OUT_OF_RANGE = "ROW_OUT_OF_RANGE"
    ROW_INDEX = "ROW_INDEX"
    ROW_MISMATCH = "ROW_MISMATCH"
    RECORD_JOURNAL = "RECORD_JOURNAL"
    RECORD_ATTEMPTS = "RECORD_ATTEMPTS"
    RECORD_BLOBS = "RECORD_BLOBS"
    DATA_AFTER_BAD_RECORD = "DATA_AFTER_BAD_RECORD"
    # Tamper: HEAD.
    HEAD_MISSING = "HEAD_MISSING"
    HEAD_MALFORMED = "HEAD_MALFORMED"
    HEAD_AHEAD = "HEAD_AHEAD"
    HEAD_BEHIND = "HEAD_BEHIND"
    HEAD_HASH_MISMATCH = "HEAD_HASH_MISMATCH"
    # Tamper: the attempt journal.
    JOURNAL_MISSING = "JOURNAL_MISSING"
    JOURNAL_MALFORMED = "JOURNAL_MALFORMED"
    JOURNAL_HASH_MISMATCH = "JOURNAL_HASH_MISMATCH"
    JOURNAL_BODY_INVALID = "JOURNAL_BODY_INVALID"
    JOURNAL_SEQ = "JOURNAL_SEQ"
    JOURNAL_PREV = "JOURNAL_PREV"
    JOURNAL_ATTEMPT = "JOURNAL_ATTEMPT"
    JOURNAL_SESSION = "JOURNAL_SESSION"
    JOURNAL_BLOBS = "JOURNAL_BLOBS"
    JOURNAL_DATA_AFTER_BAD_ENTRY = "JOURNAL_DATA_AFTER_BAD_ENTRY"
    # Tamper: blobs.
    BLOB_CORRUPT = "BLOB_CORRUPT"
    # Tamper: manifest.
    MANIFEST_MALFORMED = "MANIFEST_MALFORMED"
    MANIFEST_HASH_MISMATCH = "MANIFEST_HASH_MISMATCH"
    MANIFEST_MISMATCH = "MANIFEST_MISMATCH"
    FINALIZED_TAIL = "FINALIZED_TAIL"
    # Tamper: a link, a special file, a foreign or oversized file where a store file belongs.
    UNSAFE_FILE = "UNSAFE_FILE"
    # Status ok, yet not sealed: an intact prefix no manifest pins (anything may follow it).
    NOT_FINALIZED = "NOT_FINALIZED"
    # Status in_progress: a live writer holds the store.
    IN_PROGRESS = "IN_PROGRESS"


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``verify_store`` found. True only when the status is ok.

    Attributes:
        status: ok, torn (a crash state resume repairs) or tamper (resume refused).
        code: the reason verification stopped (``OK`` when intact).
        reason: one line naming where and why.
        records: length of the longest valid contiguous prefix, genesis included.
        cells: completed cells in that prefix.
        head: hash of the last valid record (None when even genesis fails).
        head_claimed: record count HEAD claims (None when HEAD is unreadable).
        torn_bytes: bytes of the record log after the valid prefix.
        journal_entries: valid journal entries.
        journal_torn_bytes: bytes of the journal after its valid entries.
        pending_attempts: journaled attempts not yet bound to any record (orphans after a crash).
        lock_digest: the lock digest genesis binds (None when genesis fails).
        schedule_digest: the schedule digest genesis binds (None when genesis fails).
        schedule_rows: rows of the bound schedule (0 when genesis fails).
        manifest_digest: the manifest's own digest when a valid manifest is present.
        writer: who holds the store's writer lock (pid and host) when the read began or
            ended, or None.
    """

    status: VerifyStatus
    code: VerifyCode
    reason: str
    records: int
    cells: int
    head: str | None
    head_claimed: int | None
    torn_bytes: int
    journal_entries: int
    journal_torn_bytes: int
    pending_attempts: int
    lock_digest: str | None
    schedule_digest: str | None
    schedule_rows: int
    manifest_digest: str | None
    writer: str | None = None

    def __bool__(self) -> bool:
        return self.status is VerifyStatus.OK

    @property
    def finalized(self) -> bool:
        """True when a valid manifest seals the store."""
        return self.manifest_digest is not None


class StoreState(StrEnum):
    """What a store directory is, as preflight sees it."""

    NEW = "new"
    PREFIX = "prefix"
    UNUSABLE = "unusable"


class StoreCheck(msgspec.Struct, frozen=True, kw_only=True):
    """Preflight's answer: may a run start or resume on this directory, and why not."""

    state: StoreState
    cells: int
    reason: str

    def __bool__(self) -> bool:
        return self.state is not StoreState.UNUSABLE
