"""Provider attempts: one record per attempt, a write-ahead journal hook, a blob sink.

Every attempt a provider makes is journaled *before* it is sent (``AttemptJournal.begin`` with an
``AttemptIntent``) and *after* it ends (``AttemptJournal.end`` with the ``AttemptRecord``), so a
crash between the two leaves a visible begun-but-unended attempt: a spent call can never hide.
Raw request and response bytes go to a content-addressed ``BlobSink`` first; the record holds
their addresses and BLAKE3 hashes, so certificate scoring can later be replayed offline from the
stored responses.

The run store implements both protocols durably; ``MemoryJournal`` and ``MemoryBlobSink`` are
complete in-memory implementations (they enforce the begin/end pairing and verify addresses).
Records carry no credential: providers redact it from every byte and string before recording.
Latency is audit data measured with a monotonic clock; it is never part of a compared digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, Protocol

import msgspec

from harness.canonical import Domain, digest_bytes
from harness.providers.config import PriceTable, config_digest
from harness.providers.kinds import AttemptStatus, FailureKind, ProviderName, Role

if TYPE_CHECKING:
    from harness.providers.protocol import ProviderRequest

__all__ = [
    "Audit",
    "AttemptIntent",
    "AttemptJournal",
    "AttemptRecord",
    "BlobSink",
    "MemoryBlobSink",
    "MemoryJournal",
    "Usage",
    "detail_line",
    "estimate_cost",
    "memory_audit",
    "schema_detail",
]

_DETAIL_MAX: Final = 500


class AttemptIntent(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What is about to be sent: journaled before the attempt starts."""

    schema_version: Literal[1] = 1
    provider: ProviderName
    simulated: bool
    model: str
    role: Role
    cell_id: str
    prompt_id: str
    attempt_index: int
    retry_reason: FailureKind | None
    request_hash: str
    config_digest: str

    @classmethod
    def of(
        cls,
        request: ProviderRequest,
        *,
        provider: ProviderName,
        simulated: bool,
        model: str,
        attempt_index: int = 0,
        retry_reason: FailureKind | None = None,
    ) -> AttemptIntent:
        """The intent of sending ``request`` (attempt ``attempt_index``) to ``model``."""
        return cls(
            provider=provider,
            simulated=simulated,
            model=model,
            role=request.role,
            cell_id=request.cell_id,
            prompt_id=request.prompt_id,
            attempt_index=attempt_index,
            retry_reason=retry_reason,
            request_hash=request.digest(),
            config_digest=config_digest(request.config),
        )

    def ended(
        self,
        *,
        base_url: str | None,
        request_body_hash: str | None,
        request_blob: str | None,
        status: AttemptStatus,
        failure_kind: FailureKind | None,
        failure_detail: str | None,
        http_status: int | None,
        response_hash: str | None,
        response_blob: str | None,
        response_bytes: int,
        response_complete: bool,
        redacted: bool,
        finish_reason: str | None,
        model_version: str | None,
        response_id: str | None,
        usage: Usage,
        latency_ms: float,
        price: PriceTable,
        cost_usd: float | None,
    ) -> AttemptRecord:
        """The record of this attempt: what was journaled as begun, and how it ended."""
        return AttemptRecord(
            provider=self.provider,
            simulated=self.simulated,
            model=self.model,
            base_url=base_url,
            role=self.role,
            cell_id=self.cell_id,
            prompt_id=self.prompt_id,
            config_digest=self.config_digest,
            attempt_index=self.attempt_index,
            retry_reason=self.retry_reason,
            request_hash=self.request_hash,
            request_body_hash=request_body_hash,
            request_blob=request_blob,
            status=status,
            failure_kind=failure_kind,
            failure_detail=failure_detail,
            http_status=http_status,
            response_hash=response_hash,
            response_blob=response_blob,
            response_bytes=response_bytes,
            response_complete=response_complete,
            redacted=redacted,
            finish_reason=finish_reason,
            model_version=model_version,
            response_id=response_id,
            usage=usage,
            latency_ms=latency_ms,
            price=price,
            cost_usd=cost_usd,
        )


class Usage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Token counts as reported by the provider (simulated: a deterministic estimate)."""

    prompt_tokens: int | None
    output_tokens: int | None
    thought_tokens: int | None


class AttemptRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The audit row of one attempt.

    Attributes:
        request_hash: digest (``provider.request.v1``) of the canonical ProviderRequest; the
            identical retry has the same one.
        request_body_hash: digest of the exact request body bytes sent on the wire, or None
            when nothing was sent (simulated provider).
        request_blob / response_blob: content addresses returned by the BlobSink.
        response_hash: digest (``provider.response.v1``) of the stored response bytes.
        response_complete: False when the bytes are a partial body cut off by the transport.
        redacted: True when the credential was found in a stored byte string and masked.
        latency_ms: wall time of the attempt (monotonic clock); 0.0 for the simulated provider.
        cost_usd: estimate from ``price`` and the token counts; None when tokens are unknown.
    """

    schema_version: Literal[1] = 1
    provider: ProviderName
    simulated: bool
    model: str
    base_url: str | None
    role: Role
    cell_id: str
    prompt_id: str
    config_digest: str
    attempt_index: int
    retry_reason: FailureKind | None
    request_hash: str
    request_body_hash: str | None
    request_blob: str | None
    status: AttemptStatus
    failure_kind: FailureKind | None
    failure_detail: str | None
    http_status: int | None
    response_hash: str | None
    response_blob: str | None
    response_bytes: int
    response_complete: bool
    redacted: bool
    finish_reason: str | None
    model_version: str | None
    response_id: str | None
    usage: Usage
    latency_ms: float
    price: PriceTable
    cost_usd: float | None

    def intent(self) -> AttemptIntent:
        """The intent this attempt was journaled with before it was sent."""
        return AttemptIntent(
            provider=self.provider,
            simulated=self.simulated,
            model=self.model,
            role=self.role,
            cell_id=self.cell_id,
            prompt_id=self.prompt_id,
            attempt_index=self.attempt_index,
            retry_reason=self.retry_reason,
            request_hash=self.request_hash,
            config_digest=self.config_digest,
        )


def detail_line(text: str) -> str:
    """``text`` as a record's failure detail: on one line, at most 500 characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _DETAIL_MAX else flat[: _DETAIL_MAX - 3] + "..."


def schema_detail(findings: Sequence[str]) -> str:
    """The failure detail of a schema mismatch: its first five findings."""
    return "; ".join(findings[:5])


def estimate_cost(price: PriceTable, usage: Usage) -> float | None:
    """Cost in ``price.currency`` (thought tokens billed as output); None if tokens or the
    prices are unknown."""
    if not price.priced or (usage.prompt_tokens is None and usage.output_tokens is None):
        return None
    billed_in = usage.prompt_tokens or 0
    billed_out = (usage.output_tokens or 0) + (usage.thought_tokens or 0)
    return (billed_in * price.input_per_million + billed_out * price.output_per_million) / 1e6


class BlobSink(Protocol):
    """Content-addressed storage for raw request/response bytes."""

    def put(self, data: bytes) -> str:
        """Store ``data`` (idempotently) and return its content address."""
        ...


class AttemptJournal(Protocol):
    """Write-ahead hook around every attempt."""

    def begin(self, intent: AttemptIntent) -> None:
        """Record that an attempt is about to be sent. Must be durable before returning."""
        ...

    def end(self, record: AttemptRecord) -> None:
        """Record how the attempt ended (after its blobs were stored)."""
        ...


@dataclass(frozen=True)
class Audit:
    """Where a provider call writes its audit: the journal and the blob sink."""

    journal: AttemptJournal
    blobs: BlobSink


class MemoryBlobSink:
    """An in-memory BlobSink; addresses are ``blake3:<hex>`` under domain ``store.blob.v1``."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        """Store ``data`` and return its address."""
        address = digest_bytes(Domain.BLOB, data)
        self._blobs[address] = bytes(data)
        return address

    def get(self, address: str) -> bytes:
        """The bytes stored under ``address`` (KeyError if absent)."""
        return self._blobs[address]

    def all(self) -> dict[str, bytes]:
        """A copy of every stored blob by address."""
        return dict(self._blobs)


@dataclass
class MemoryJournal:
    """An in-memory AttemptJournal that enforces the write-ahead discipline.

    ``end`` is accepted only for a begun, not yet ended attempt with the same identity (cell,
    role, attempt index, request hash); anything else is misuse and raises ValueError.
    """

    entries: list[AttemptIntent | AttemptRecord] = field(default_factory=list)
    _open: dict[tuple[str, str, int, str], AttemptIntent] = field(default_factory=dict)

    @staticmethod
    def _key(item: AttemptIntent | AttemptRecord) -> tuple[str, str, int, str]:
        return (item.cell_id, item.role.value, item.attempt_index, item.request_hash)

    def begin(self, intent: AttemptIntent) -> None:
        """Open an attempt."""
        key = self._key(intent)
        if key in self._open:
            raise ValueError(f"attempt {key} begun twice")
        self._open[key] = intent
        self.entries.append(intent)

    def end(self, record: AttemptRecord) -> None:
        """Close a begun attempt."""
        key = self._key(record)
        if self._open.pop(key, None) is None:
            raise ValueError(f"attempt {key} ended without a begin")
        self.entries.append(record)

    @property
    def open_attempts(self) -> list[AttemptIntent]:
        """Attempts begun and not ended (after a crash: calls whose outcome is unknown)."""
        return list(self._open.values())

    @property
    def records(self) -> list[AttemptRecord]:
        """The ended attempts, in order."""
        return [e for e in self.entries if isinstance(e, AttemptRecord)]


def memory_audit() -> tuple[Audit, MemoryJournal, MemoryBlobSink]:
    """A fresh in-memory audit and its two parts (for tests and dry runs)."""
    journal = MemoryJournal()
    blobs = MemoryBlobSink()
    return Audit(journal=journal, blobs=blobs), journal, blobs
