"""Self-check policy: ``complete`` iff the agent's own checklist line says APPROVED.

Self-verification as a stopping signal: the agent reviews its own work and writes a
``Self-check: ... APPROVED`` line. The policy trusts that line and reads nothing else.
"""

from __future__ import annotations

from typing import Final

from harness.ect.model import Verdict
from harness.policies.decision import DecisionSource, PolicyDecision
from harness.policies.reasons import PolicyReason
from harness.policies.signals import self_check_approved
from harness.policies.view import SnapshotView

__all__ = ["SelfCheck"]

_APPROVED: Final = PolicyDecision(
    decision=Verdict.COMPLETE,
    reason_codes=(PolicyReason.SELF_CHECK_APPROVED.value,),
    source=DecisionSource.RULE,
)
_NOT_APPROVED: Final = PolicyDecision(
    decision=Verdict.CONTINUE,
    reason_codes=(PolicyReason.SELF_CHECK_NOT_APPROVED.value,),
    source=DecisionSource.RULE,
    feedback="Check your work and end with a self-check line that says APPROVED.",
)


class SelfCheck:
    """Complete iff a self-check line of the message says APPROVED; otherwise continue."""

    @property
    def name(self) -> str:
        """``self_check``."""
        return "self_check"

    def decide(self, view: SnapshotView) -> PolicyDecision:
        """Decide on the agent's checklist line alone."""
        return _APPROVED if self_check_approved(view.message) else _NOT_APPROVED
