"""Policy reason codes: why a termination policy other than the bare verifier decided as it did.

The verifier's own codes (``harness.ect.ReasonCode``) say why a certificate fails; these say
which rule of which policy fired, so every recorded decision carries a reason, and a critic's
deterministic fast-path decision can never be mistaken for a model judgement. Wire strings are
stable: never rename or reuse one (a test pins the set and checks that no value collides with
a verifier code).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["PolicyReason"]


class PolicyReason(StrEnum):
    """Why a policy decided; the prefix names the policy (or rule) that emitted it."""

    # Completion token.
    TOKEN_DONE = "TOKEN_DONE"  # noqa: S105 - a reason code, not a secret
    TOKEN_ABSENT = "TOKEN_ABSENT"  # noqa: S105 - a reason code, not a secret
    # Self-check.
    SELF_CHECK_APPROVED = "SELF_CHECK_APPROVED"
    SELF_CHECK_NOT_APPROVED = "SELF_CHECK_NOT_APPROVED"
    # Frozen permissive heuristic.
    HEURISTIC_ACCEPTED = "HEURISTIC_ACCEPTED"
    HEURISTIC_NO_FINAL_RESPONSE = "HEURISTIC_NO_FINAL_RESPONSE"
    HEURISTIC_SHORT_RESPONSE = "HEURISTIC_SHORT_RESPONSE"
    HEURISTIC_NO_PRIOR_CALL = "HEURISTIC_NO_PRIOR_CALL"
    # Critic core: deterministic fast paths (not model judgements).
    CRITIC_FAST_REPEATED_CALLS = "CRITIC_FAST_REPEATED_CALLS"
    CRITIC_FAST_COMPLETION_SIGNAL = "CRITIC_FAST_COMPLETION_SIGNAL"
    # A model critic's verdict (critic core's model path, full-trace critic).
    CRITIC_MODEL_COMPLETE = "CRITIC_MODEL_COMPLETE"
    CRITIC_MODEL_CONTINUE = "CRITIC_MODEL_CONTINUE"
    CRITIC_MODEL_STUCK = "CRITIC_MODEL_STUCK"
    # A model call that produced no usable verdict: both map to continue.
    PROVIDER_FAILURE = "PROVIDER_FAILURE"
    PARSE_FAILURE = "PARSE_FAILURE"
    # Controller: the one recovery attempt it grants before accepting stuck.
    CONTROLLER_RECOVERY_ATTEMPT = "CONTROLLER_RECOVERY_ATTEMPT"
    # Postcondition oracle (non-deployable reference).
    ORACLE_MATCH = "ORACLE_MATCH"
    ORACLE_NO_ANSWER = "ORACLE_NO_ANSWER"
    ORACLE_MISMATCH = "ORACLE_MISMATCH"
    # ECT's recovery check, applied after the verifier returned continue.
    RECOVERY_AVAILABLE = "RECOVERY_AVAILABLE"
    RECOVERY_UNAVAILABLE = "RECOVERY_UNAVAILABLE"
    RECOVERY_CHECK_ABLATED = "RECOVERY_CHECK_ABLATED"
