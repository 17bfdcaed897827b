"""The pure ECT core: typed contract, ledger and certificate; closed transforms; the verifier.

Nothing in this package performs I/O, reads a clock or the environment, or starts a process. It
imports nothing of the project except ``harness.canonical``, the pure leaf that owns encoding and
digest domains.
"""

from harness.ect.boundary import MAX_INPUT_BYTES, BoundaryError, check_json, decode, verify_json
from harness.ect.model import (
    Certificate,
    Claim,
    ClaimResult,
    Decision,
    Finding,
    Ledger,
    Receipt,
    Requirements,
    Scope,
    ScopeRule,
    SlotRequirement,
    Source,
    TaskDescriptor,
    Verdict,
    descriptor_digest,
    ledger_digest,
    receipt_digest,
    value_hash,
)
from harness.ect.reasons import ReasonCode, ReasonFamily, family_of
from harness.ect.transforms import OPS, Transform, replay, values_match
from harness.ect.verifier import ALL_CHECKS, Check, check_of, verify

__all__ = [
    "ALL_CHECKS",
    "MAX_INPUT_BYTES",
    "OPS",
    "BoundaryError",
    "Certificate",
    "Check",
    "Claim",
    "ClaimResult",
    "Decision",
    "ReasonFamily",
    "Finding",
    "Ledger",
    "ReasonCode",
    "Receipt",
    "Requirements",
    "Scope",
    "ScopeRule",
    "SlotRequirement",
    "Source",
    "TaskDescriptor",
    "Transform",
    "Verdict",
    "check_json",
    "check_of",
    "decode",
    "descriptor_digest",
    "family_of",
    "ledger_digest",
    "receipt_digest",
    "replay",
    "value_hash",
    "values_match",
    "verify",
    "verify_json",
]
