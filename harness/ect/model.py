"""Typed contract, evidence and certificate, and the digests that bind them.

Every Struct that can arrive from outside is frozen, keyword-only and refuses unknown fields, so
a certificate with an extra field fails at decode rather than being silently trimmed. Invariants
live in ``__post_init__`` (msgspec reports them with a JSON path).

This module defines data and digests only; it does not verify anything (see ``verifier``).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal

import msgspec

from harness.canonical import Domain, digest, digest_each
from harness.ect.reasons import ReasonCode
from harness.ect.transforms import Transform

__all__ = [
    "Certificate",
    "Claim",
    "ClaimResult",
    "Decision",
    "Finding",
    "Ledger",
    "Receipt",
    "Requirements",
    "Scope",
    "ScopeRule",
    "SlotRequirement",
    "Source",
    "TaskDescriptor",
    "Verdict",
    "descriptor_digest",
    "ledger_digest",
    "receipt_digest",
    "value_hash",
]

# Bounds keep a hostile input from costing unbounded work; they are generous for real tasks.
MAX_SLOTS = 256
MAX_EVIDENCE = 4096
MAX_RECEIPTS = 100_000

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Digest = Annotated[str, msgspec.Meta(pattern="^blake3:[0-9a-f]{64}$")]
Tolerance = Annotated[float, msgspec.Meta(ge=0.0, le=1e300)]
SourcePath = Annotated[str, msgspec.Meta(max_length=1024)]


class _Boundary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every type that crosses the untrusted boundary."""


def _unique(values: Iterable[object], what: str) -> None:
    items = list(values)
    if len(set(items)) != len(items):
        raise ValueError(f"{what} must not repeat")


class TaskDescriptor(_Boundary, frozen=True, kw_only=True):
    """The frozen identity of a task; its digest is the descriptor digest."""

    schema_version: Literal[1] = 1
    task_id: Id
    family: Id
    world_id: Id
    params: dict[str, Any]
    required_slots: Annotated[tuple[Id, ...], msgspec.Meta(min_length=1, max_length=MAX_SLOTS)]

    def __post_init__(self) -> None:
        _unique(self.required_slots, "required_slots")


class Source(_Boundary, frozen=True, kw_only=True):
    """Where a cited value may come from: a tool, and the JSON pointer of the value in its
    response (compared exactly; the trusted adapter records the same pointer)."""

    tool_id: Id
    source_path: SourcePath


class ScopeRule(_Boundary, frozen=True, kw_only=True):
    """Allowed scope of the receipts a slot may cite. A null date must be listed to be allowed.

    ``sources`` are the (tool, value path) pairs a cited receipt may come from: the paper's
    receipt check includes the value path, so a receipt from another tool, or carrying a value
    read from elsewhere in a response, is out of scope.
    """

    entities: Annotated[tuple[Id, ...], msgspec.Meta(min_length=1)]
    attributes: Annotated[tuple[Id, ...], msgspec.Meta(min_length=1)]
    levels: Annotated[tuple[Id, ...], msgspec.Meta(min_length=1)]
    dates: Annotated[tuple[Id | None, ...], msgspec.Meta(min_length=1)]
    sources: Annotated[tuple[Source, ...], msgspec.Meta(min_length=1, max_length=256)]

    def __post_init__(self) -> None:
        _unique(self.entities, "entities")
        _unique(self.attributes, "attributes")
        _unique(self.levels, "levels")
        _unique(self.dates, "dates")
        _unique(((s.tool_id, s.source_path) for s in self.sources), "sources")


class SlotRequirement(_Boundary, frozen=True, kw_only=True):
    """What one required answer slot must be backed by."""

    slot: Id
    transforms: Annotated[tuple[Transform, ...], msgspec.Meta(min_length=1, max_length=64)]
    scope: ScopeRule
    min_evidence: Annotated[int, msgspec.Meta(ge=1, le=MAX_EVIDENCE)]
    max_evidence: Annotated[int, msgspec.Meta(ge=1, le=MAX_EVIDENCE)]
    nullable: bool
    abs_tol: Tolerance = 0.0
    rel_tol: Tolerance = 0.0

    def __post_init__(self) -> None:
        if self.min_evidence > self.max_evidence:
            raise ValueError("min_evidence exceeds max_evidence")


class Requirements(_Boundary, frozen=True, kw_only=True):
    """The trusted contract R_t: never authored by the agent."""

    schema_version: Literal[1] = 1
    task_id: Id
    descriptor_digest: Digest
    slots: Annotated[tuple[SlotRequirement, ...], msgspec.Meta(min_length=1, max_length=MAX_SLOTS)]

    def __post_init__(self) -> None:
        _unique((s.slot for s in self.slots), "slot names")


class Scope(_Boundary, frozen=True, kw_only=True):
    """Structured scope of one receipt value."""

    entity: Id
    attribute: Id
    level: Id
    date: Id | None


class Receipt(_Boundary, frozen=True, kw_only=True):
    """One value observed in one tool response, as the trusted adapter recorded it."""

    receipt_id: Id
    task_id: Id
    call_id: Id
    tool_id: Id
    args_hash: Digest
    response_hash: Digest
    source_path: SourcePath
    value: Any
    value_hash: Digest
    exec_status: Literal["ok", "error"]
    validation: Literal["validated", "unvalidated"]
    scope: Scope


class Ledger(_Boundary, frozen=True, kw_only=True):
    """The receipts of one trace. Its digest ignores receipt order."""

    schema_version: Literal[1] = 1
    task_id: Id
    receipts: Annotated[tuple[Receipt, ...], msgspec.Meta(max_length=MAX_RECEIPTS)]


class Claim(_Boundary, frozen=True, kw_only=True):
    """One certified answer slot: (slot, value, evidence receipt ids, transform)."""

    slot: Id
    value: Any
    evidence: Annotated[tuple[Id, ...], msgspec.Meta(max_length=MAX_EVIDENCE)]
    transform: Transform


class Certificate(_Boundary, frozen=True, kw_only=True):
    """The untrusted completion proposal."""

    schema_version: Literal[1] = 1
    task_id: Id
    descriptor_digest: Digest
    ledger_digest: Digest
    claims: Annotated[tuple[Claim, ...], msgspec.Meta(max_length=MAX_SLOTS)]


class Verdict(StrEnum):
    """Terminal decisions. The verifier returns only COMPLETE or CONTINUE; STUCK is a
    controller decision that needs a separate recovery-availability rule."""

    COMPLETE = "complete"
    CONTINUE = "continue"
    STUCK = "stuck"


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One failed check: reason, where (a JSON path), expected and got."""

    code: ReasonCode
    path: str
    expected: str | None = None
    got: str | None = None


class ClaimResult(msgspec.Struct, frozen=True, kw_only=True):
    """Per-claim outcome: the codes raised against ``$.claims[index]``."""

    index: int
    slot: str
    passed: bool
    codes: tuple[ReasonCode, ...]


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """A verdict with every failing reason code (sorted, unique) and the findings behind them.

    ``answer_checked`` says whether the decision covers the agent's reported answer: False when
    no answer was passed, so a ``complete`` then licenses the certificate only, not whatever
    answer the run reports.
    """

    decision: Verdict
    reason_codes: tuple[ReasonCode, ...] = ()
    findings: tuple[Finding, ...] = ()
    claims: tuple[ClaimResult, ...] = ()
    answer_checked: bool = False

    def __bool__(self) -> bool:
        return self.decision is Verdict.COMPLETE


def descriptor_digest(descriptor: TaskDescriptor) -> str:
    """The descriptor digest certificates must copy."""
    return digest(Domain.DESCRIPTOR, descriptor)


def receipt_digest(receipt: Receipt) -> str:
    """Digest of one receipt's canonical bytes."""
    return digest(Domain.RECEIPT, receipt)


def ledger_digest(receipts: Iterable[Receipt]) -> str:
    """Order-independent ledger digest: the digest of the sorted receipt digests."""
    return digest(Domain.LEDGER, sorted(digest_each(Domain.RECEIPT, tuple(receipts))))


def value_hash(value: Any) -> str:
    """The value hash a receipt carries for its value."""
    return digest(Domain.VALUE, value)
