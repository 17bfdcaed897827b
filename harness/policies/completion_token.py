"""Completion-token policy: ``complete`` iff the agent's message carries the word DONE.

The weakest common stopping signal: the agent says it is done. Nothing else is read.
"""

from __future__ import annotations

from typing import Final

from harness.ect.model import Verdict
from harness.policies.decision import DecisionSource, PolicyDecision
from harness.policies.reasons import PolicyReason
from harness.policies.signals import carries_completion_token
from harness.policies.view import SnapshotView

__all__ = ["CompletionToken"]

_DONE: Final = PolicyDecision(
    decision=Verdict.COMPLETE,
    reason_codes=(PolicyReason.TOKEN_DONE.value,),
    source=DecisionSource.RULE,
)
_ABSENT: Final = PolicyDecision(
    decision=Verdict.CONTINUE,
    reason_codes=(PolicyReason.TOKEN_ABSENT.value,),
    source=DecisionSource.RULE,
    feedback="Say DONE when the task is finished.",
)


class CompletionToken:
    """Complete iff the message carries DONE; otherwise continue."""

    @property
    def name(self) -> str:
        """``completion_token``."""
        return "completion_token"

    def decide(self, view: SnapshotView) -> PolicyDecision:
        """Decide on the agent's message alone."""
        return _DONE if carries_completion_token(view.message) else _ABSENT
