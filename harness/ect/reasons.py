"""Reason codes: the closed, stable vocabulary of why a certificate does not license ``complete``.

Wire strings are part of the public contract: never rename or reuse one (a test pins the set).
Each code belongs to exactly one family, named by its prefix, in the order of Algorithm 1.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = ["FAMILY_ORDER", "ReasonFamily", "ReasonCode", "family_of"]


class ReasonFamily(StrEnum):
    """Check families in the order Algorithm 1 applies them."""

    ADAPTER = "ADAPTER"
    BINDING = "BINDING"
    COVERAGE = "COVERAGE"
    EVIDENCE = "EVIDENCE"
    SCOPE = "SCOPE"
    TRANSFORM = "TRANSFORM"
    REPLAY = "REPLAY"
    INTERNAL = "INTERNAL"


FAMILY_ORDER: Final = tuple(ReasonFamily)


class ReasonCode(StrEnum):
    """Why a certificate fails; the family is the prefix before the first underscore."""

    # Algorithm 1, lines 1-2: inputs unusable or not bound to the trusted descriptor.
    ADAPTER_DESCRIPTOR_MALFORMED = "ADAPTER_DESCRIPTOR_MALFORMED"
    ADAPTER_REQUIREMENTS_MALFORMED = "ADAPTER_REQUIREMENTS_MALFORMED"
    ADAPTER_LEDGER_MALFORMED = "ADAPTER_LEDGER_MALFORMED"
    ADAPTER_CERTIFICATE_MALFORMED = "ADAPTER_CERTIFICATE_MALFORMED"
    ADAPTER_CERTIFICATE_MISSING = "ADAPTER_CERTIFICATE_MISSING"
    # The agent's reported answer (optional input) is not a JSON object of slot -> value.
    ADAPTER_ANSWER_MALFORMED = "ADAPTER_ANSWER_MALFORMED"
    ADAPTER_INPUT_TOO_LARGE = "ADAPTER_INPUT_TOO_LARGE"
    ADAPTER_CONTRACT_MISMATCH = "ADAPTER_CONTRACT_MISMATCH"
    ADAPTER_DESCRIPTOR_DIGEST_MISMATCH = "ADAPTER_DESCRIPTOR_DIGEST_MISMATCH"
    # Algorithm 1, lines 4-5.
    BINDING_TASK_ID_MISMATCH = "BINDING_TASK_ID_MISMATCH"
    BINDING_LEDGER_TASK_MISMATCH = "BINDING_LEDGER_TASK_MISMATCH"
    BINDING_LEDGER_DIGEST_MISMATCH = "BINDING_LEDGER_DIGEST_MISMATCH"
    # Algorithm 1, lines 7-8.
    COVERAGE_DUPLICATE_RECEIPT_ID = "COVERAGE_DUPLICATE_RECEIPT_ID"
    COVERAGE_CONFLICTING_RECEIPT_ID = "COVERAGE_CONFLICTING_RECEIPT_ID"
    # Two receipts of one call, one response and one value path disagree (value, value hash,
    # scope, status or any other field): the ledger contradicts itself.
    COVERAGE_CONFLICTING_RECEIPTS = "COVERAGE_CONFLICTING_RECEIPTS"
    COVERAGE_NO_CLAIMS = "COVERAGE_NO_CLAIMS"
    COVERAGE_MISSING_SLOT = "COVERAGE_MISSING_SLOT"
    COVERAGE_EXTRA_SLOT = "COVERAGE_EXTRA_SLOT"
    COVERAGE_DUPLICATE_SLOT = "COVERAGE_DUPLICATE_SLOT"
    # The reported answer names a slot the certificate does not claim, or omits one it does.
    COVERAGE_ANSWER_SLOT = "COVERAGE_ANSWER_SLOT"
    # Algorithm 1, lines 11-12 (reference: the receipt exists and is this task's;
    # outcome: it succeeded and was validated).
    EVIDENCE_EMPTY = "EVIDENCE_EMPTY"
    EVIDENCE_DUPLICATE_CITATION = "EVIDENCE_DUPLICATE_CITATION"
    EVIDENCE_RECEIPT_ABSENT = "EVIDENCE_RECEIPT_ABSENT"
    EVIDENCE_FOREIGN_TASK = "EVIDENCE_FOREIGN_TASK"
    EVIDENCE_VALUE_HASH_MISMATCH = "EVIDENCE_VALUE_HASH_MISMATCH"
    EVIDENCE_UNSUCCESSFUL = "EVIDENCE_UNSUCCESSFUL"
    EVIDENCE_UNVALIDATED = "EVIDENCE_UNVALIDATED"
    # Algorithm 1, lines 14-15.
    SCOPE_CARDINALITY = "SCOPE_CARDINALITY"
    SCOPE_ENTITY = "SCOPE_ENTITY"
    SCOPE_ATTRIBUTE = "SCOPE_ATTRIBUTE"
    SCOPE_LEVEL = "SCOPE_LEVEL"
    SCOPE_DATE = "SCOPE_DATE"
    SCOPE_DUPLICATE = "SCOPE_DUPLICATE"
    # The receipt's value path: from a tool the contract allows for the slot, at its path.
    SCOPE_TOOL = "SCOPE_TOOL"
    SCOPE_SOURCE_PATH = "SCOPE_SOURCE_PATH"
    # Algorithm 1, lines 17-18.
    TRANSFORM_NOT_ALLOWED = "TRANSFORM_NOT_ALLOWED"
    TRANSFORM_PARAMS_MISMATCH = "TRANSFORM_PARAMS_MISMATCH"
    # Algorithm 1, lines 20-21.
    REPLAY_EVIDENCE_UNAVAILABLE = "REPLAY_EVIDENCE_UNAVAILABLE"
    REPLAY_ARITY = "REPLAY_ARITY"
    REPLAY_TYPE_ERROR = "REPLAY_TYPE_ERROR"
    REPLAY_NULL_INPUT = "REPLAY_NULL_INPUT"
    REPLAY_NOT_ALL_NULL = "REPLAY_NOT_ALL_NULL"
    REPLAY_UNDEFINED = "REPLAY_UNDEFINED"
    REPLAY_NULL_NOT_ALLOWED = "REPLAY_NULL_NOT_ALLOWED"
    REPLAY_VALUE_MISMATCH = "REPLAY_VALUE_MISMATCH"
    # The reported answer's value for a slot differs from the certified (replayed) value.
    REPLAY_ANSWER_MISMATCH = "REPLAY_ANSWER_MISMATCH"
    # Any exception inside the verifier: fail closed.
    INTERNAL_ERROR = "INTERNAL_ERROR"

    @property
    def family(self) -> ReasonFamily:
        """The check family this code belongs to."""
        return family_of(self)


def family_of(code: ReasonCode) -> ReasonFamily:
    """Return the family of ``code`` (its prefix before the first underscore)."""
    return ReasonFamily(code.value.split("_", 1)[0])
