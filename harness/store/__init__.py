"""The append-only, BLAKE3 hash-chained run store.

One directory per run: a record log (one ``<BLAKE3 hex> <canonical JSON>`` line per record), a
separately kept HEAD, a write-ahead provider-attempt journal, content-addressed blobs, byte
copies of the study lock and the canonical schedule, and at the end a manifest. A genesis
record binds the lock and schedule digests; each completed cell appends one record binding its
schedule row, result, provider-attempt audit group and the previous record's hash.

Writing: ``RunStore.create`` / ``RunStore.open_for_resume`` (single writer, exclusive lock).
Reading: ``verify_store``, ``read_sealed`` (a report with the MANIFEST bytes it verified),
``read_store``, ``read_blob``, ``check_store_for_run`` (preflight).
Sealing: ``finalize_store``; anchors kept elsewhere: ``require_manifest`` (the published
manifest digest), ``sign_manifest`` / ``verify_signature`` (an SSH signature over it).
The store does not know what a schedule row, result or attempt
means; the studies define those and may pass msgspec types to refuse unknown fields.
"""

from harness.store._anchor import (
    SIGNATURE_NAMESPACE,
    require_manifest,
    sign_manifest,
    verify_signature,
)
from harness.store._files import FileOps
from harness.store._model import (
    AttemptRef,
    BeginEntry,
    CellRecord,
    EndEntry,
    GenesisRecord,
    Head,
    JournalEntry,
    JournalPos,
    OrphanedAttempt,
    Record,
    SessionEntry,
    StoreCheck,
    StoreManifest,
    StoreState,
    VerifyCode,
    VerifyReport,
    VerifyStatus,
)
from harness.store._seal import finalize_store
from harness.store._values import lock_digest, row_digest, schedule_bytes, schedule_digest
from harness.store._view import (
    SealedView,
    StoreView,
    check_store_for_run,
    read_blob,
    read_sealed,
    read_store,
    verify_store,
)
from harness.store._writer import Resumed, RunStore

__all__ = [
    "SIGNATURE_NAMESPACE",
    "AttemptRef",
    "BeginEntry",
    "CellRecord",
    "EndEntry",
    "FileOps",
    "GenesisRecord",
    "Head",
    "JournalEntry",
    "JournalPos",
    "StoreManifest",
    "OrphanedAttempt",
    "Record",
    "Resumed",
    "RunStore",
    "SealedView",
    "SessionEntry",
    "StoreCheck",
    "StoreState",
    "StoreView",
    "VerifyCode",
    "VerifyReport",
    "VerifyStatus",
    "check_store_for_run",
    "finalize_store",
    "lock_digest",
    "read_blob",
    "read_sealed",
    "read_store",
    "require_manifest",
    "row_digest",
    "schedule_bytes",
    "schedule_digest",
    "sign_manifest",
    "verify_signature",
    "verify_store",
]
