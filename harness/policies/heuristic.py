"""The frozen permissive heuristic: a long enough final response after at least one tool call.

Production agent loops often fall back on a rule of this shape when no explicit signal is
given: if the agent answers in text (instead of calling another tool), the text is not trivially
short, and some tool was called first, accept it. The rule is frozen here with its constants;
it is not claimed to be source-equivalent to any particular production fallback. It reads the
message length, whether the turn is a final response, and the number of calls - nothing about
evidence or values.
"""

from __future__ import annotations

from typing import Final

from harness.ect.model import Verdict
from harness.policies.decision import DecisionSource, PolicyDecision
from harness.policies.reasons import PolicyReason
from harness.policies.signals import has_final_response
from harness.policies.view import SnapshotView

__all__ = ["MIN_PRIOR_CALLS", "MIN_RESPONSE_CHARS", "PermissiveHeuristic"]

MIN_RESPONSE_CHARS: Final = 40
"""A final response shorter than this (after stripping whitespace) is not accepted."""
MIN_PRIOR_CALLS: Final = 1
"""At least this many tool calls must precede the final response."""


class PermissiveHeuristic:
    """Complete iff final response, >= 40 characters of message, >= 1 prior call."""

    @property
    def name(self) -> str:
        """``heuristic``."""
        return "heuristic"

    def decide(self, view: SnapshotView) -> PolicyDecision:
        """Apply the frozen rule; every failed condition is named."""
        reasons = []
        if not has_final_response(view):
            reasons.append(PolicyReason.HEURISTIC_NO_FINAL_RESPONSE)
        if len(view.message.strip()) < MIN_RESPONSE_CHARS:
            reasons.append(PolicyReason.HEURISTIC_SHORT_RESPONSE)
        if len(view.trace) < MIN_PRIOR_CALLS:
            reasons.append(PolicyReason.HEURISTIC_NO_PRIOR_CALL)
        if reasons:
            return PolicyDecision(
                decision=Verdict.CONTINUE,
                reason_codes=tuple(r.value for r in reasons),
                source=DecisionSource.RULE,
                feedback="Give a final answer after calling the tools you need.",
            )
        return PolicyDecision(
            decision=Verdict.COMPLETE,
            reason_codes=(PolicyReason.HEURISTIC_ACCEPTED.value,),
            source=DecisionSource.RULE,
        )
