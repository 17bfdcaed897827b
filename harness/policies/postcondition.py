"""The postcondition oracle: a NON-DEPLOYABLE reference that compares the answer with gold.

It is the only policy that sees oracle answers. It gets them separately, at construction, as a
map from task id to gold answer; the snapshot view it decides on is the same blinded view every
other policy gets. ``complete`` iff the agent offers an answer whose slots are exactly the
task's required slots and each value equals the gold value within the contract's tolerance
for that slot. It checks the final answer only - never the evidence behind it - which is why
an answer that is right by luck, with broken support, passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from harness.ect.model import Verdict
from harness.ect.transforms import values_match
from harness.policies.decision import DecisionSource, PolicyDecision
from harness.policies.reasons import PolicyReason
from harness.policies.view import SnapshotView

__all__ = ["PostconditionOracle"]


class PostconditionOracle:
    """Non-deployable reference: complete iff the answer equals gold (see the module docstring).

    Args:
        gold: task id -> that task's gold answer (slot -> value).
    """

    def __init__(self, gold: Mapping[str, Mapping[str, Any]]) -> None:
        self._gold = MappingProxyType({task: dict(answer) for task, answer in gold.items()})

    @property
    def name(self) -> str:
        """``postcondition_oracle``."""
        return "postcondition_oracle"

    def decide(self, view: SnapshotView) -> PolicyDecision:
        """Compare the proposed answer with gold.

        Raises:
            KeyError: when no gold answer was supplied for ``view.task_id`` (misuse).
        """
        gold = self._gold[view.task_id]
        answer = view.answer
        if answer is None:
            return self._continue(PolicyReason.ORACLE_NO_ANSWER)
        tolerance = {s.slot: (s.abs_tol, s.rel_tol) for s in view.requirements.slots}
        if answer.keys() != gold.keys() or not all(
            values_match(answer[slot], gold[slot], *tolerance.get(slot, (0.0, 0.0)))
            for slot in gold
        ):
            return self._continue(PolicyReason.ORACLE_MISMATCH)
        return PolicyDecision(
            decision=Verdict.COMPLETE,
            reason_codes=(PolicyReason.ORACLE_MATCH.value,),
            source=DecisionSource.REFERENCE,
        )

    @staticmethod
    def _continue(reason: PolicyReason) -> PolicyDecision:
        return PolicyDecision(
            decision=Verdict.CONTINUE,
            reason_codes=(reason.value,),
            source=DecisionSource.REFERENCE,
            feedback="The answer does not match the expected postcondition.",
        )
