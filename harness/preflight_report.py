"""The preflight report: one verdict per check, the digests it judged, and how it is stored.

This module is the one home of the report's schema. The ``preflight`` package produces reports
(and re-exports these names); the V2 study keeps one in its run store; the audit lists every
stored one. The schema lives in the harness so that the harness can store and read reports
without importing ``preflight``, which judges the harness and is not part of it.

A report holds no wall clock, absolute path, user, host or secret: paths appear as given when
relative, else by their last component, so a report kept in a store can be exported as is.
It is stored as one content-addressed blob in the run store (``record_preflight``) whose
digest the run binds into the next cell record it commits; ``decode_report`` recognises such
a blob again (the audit lists every one found).

This module defines data, its encoding and its storage only; ``preflight`` runs the checks.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal

import msgspec

from harness.canonical import canonical_bytes
from harness.errors import PreflightFailedError
from harness.store import RunStore

__all__ = [
    "REPORT_SCHEMA",
    "PreflightCheck",
    "CheckName",
    "PreflightReport",
    "decode_report",
    "encode_report",
    "record_preflight",
]

REPORT_SCHEMA: Final = "harness.preflight-report.v1"


class CheckName(StrEnum):
    """The preflight checks, in the order they run. Wire strings are stable."""

    LOCK = "lock"
    SCHEDULE = "schedule"
    STORE = "store"
    CREDENTIAL = "credential"
    GENERATION_CONFIG = "generation_config"
    SANDBOX = "sandbox"
    # One authenticated request that spends no tokens (a real provider's model metadata).
    PROVIDER = "provider"


class PreflightCheck(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One check's verdict and one line saying why."""

    name: CheckName
    ok: bool
    detail: str

    def line(self) -> str:
        """``ok   lock: ...`` or ``FAIL lock: ...``."""
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name.value}: {self.detail}"


class PreflightReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What preflight found. ``bool(report)`` and ``report.ok`` are true only when all passed.

    Attributes:
        schema: the report's schema tag (identifies a stored report blob).
        lock_digest: digest of the lock file's bytes (what a store's genesis binds), if read.
        schedule_digest: the schedule's store digest, if read.
        schedule_rows: rows in that schedule (0 when unread).
        config_digest: digest of the generation config the run will use.
        provider: simulated or gemini (the selection, when one could be made).
        credential_source: file or env for gemini; None for the simulated provider.
        store_state: new, prefix or unusable.
        store_cells: cells already committed in a verified prefix.
        sandbox_backend: backend and tier that ran the probes, e.g. ``linux/userns``.
        sandbox_profile_digest: digest of the policy or profile the backend runs.
        checks: every check in ``CheckName`` order.
    """

    schema: Literal["harness.preflight-report.v1"] = REPORT_SCHEMA
    lock_digest: str | None
    schedule_digest: str | None
    schedule_rows: int
    config_digest: str | None
    provider: str | None
    credential_source: str | None
    store_state: str
    store_cells: int
    sandbox_backend: str | None
    sandbox_profile_digest: str | None
    checks: tuple[PreflightCheck, ...]

    @property
    def ok(self) -> bool:
        """True when every check passed (and there is at least one)."""
        return bool(self.checks) and all(check.ok for check in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def failures(self) -> list[str]:
        """One line per failed check: ``<check>: <why>``."""
        return [f"{c.name.value}: {c.detail}" for c in self.checks if not c.ok]

    def lines(self) -> list[str]:
        """One line per check, passed or failed."""
        return [check.line() for check in self.checks]

    def require(self) -> None:
        """Raise unless every check passed.

        Raises:
            PreflightFailedError: naming every failed check, on one line.
        """
        failed = self.failures()
        if failed:
            raise PreflightFailedError(
                f"preflight failed ({len(failed)} check{'s' if len(failed) > 1 else ''}), "
                f"the run is blocked: {'; '.join(failed)}"
            )


def encode_report(report: PreflightReport) -> bytes:
    """Canonical bytes of the report (what ``record_preflight`` stores)."""
    return canonical_bytes(report)


def decode_report(data: bytes) -> PreflightReport | None:
    """The report held by ``data``, or None when the bytes are not a preflight report."""
    try:
        return msgspec.json.decode(data, type=PreflightReport)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def record_preflight(writer: RunStore, report: PreflightReport) -> str:
    """Keep ``report`` in the store as a blob; return its digest.

    The caller binds the digest into the next cell it commits
    (``writer.commit_cell(..., blobs=[digest])``), so the record chain pins the report the
    session ran under. A session that dies before its first commit leaves the blob in the
    store, unbound, where the audit still finds it.

    Raises:
        DurabilityError: the blob could not be written durably.
    """
    return writer.put_blob(encode_report(report))
