"""The controller: the critic core inside its enclosing loop, with one-attempt stuck recovery.

The critic core alone stops an agent as ``stuck`` the first time it sees repeated identical
calls (or its model says stuck). The controller that encloses it grants exactly one recovery
attempt per cell first: the first ``stuck`` verdict is turned into ``continue`` with a recovery
prompt (``CONTROLLER_RECOVERY_ATTEMPT``, source ``controller``); any later ``stuck`` verdict in
the same cell stands. ``complete`` and ``continue`` verdicts of the core pass through unchanged.

Interface for an agent loop (the V2 closed loop): create one ``Controller`` per cell, wrapping a
fresh ``CriticCore`` built with the cell's seed and id; call ``await controller.decide(view)``
at every decision point; on ``continue`` hand ``decision.feedback`` to the planner. The object
holds the per-cell state (``recovery_attempts_used``), so it must not be shared across cells.
The static study does not run this arm (the paper's critic-core row excludes the recovery).
"""

from __future__ import annotations

from typing import Final

from harness.ect.model import Verdict
from harness.policies.critic_core import CriticCore
from harness.policies.decision import DecisionSource, PolicyDecision
from harness.policies.reasons import PolicyReason
from harness.policies.view import SnapshotView

__all__ = ["RECOVERY_ATTEMPTS", "Controller"]

RECOVERY_ATTEMPTS: Final = 1
"""How many stuck verdicts per cell are turned into a recovery attempt."""


class Controller:
    """Critic core plus one-attempt stuck recovery (one instance per cell)."""

    def __init__(self, core: CriticCore) -> None:
        self._core = core
        self._used = 0

    @property
    def name(self) -> str:
        """``controller``."""
        return "controller"

    @property
    def recovery_attempts_used(self) -> int:
        """How many recovery attempts this cell has been granted so far (0 or 1)."""
        return self._used

    async def decide(self, view: SnapshotView) -> PolicyDecision:
        """The core's decision, except that the cell's first ``stuck`` becomes a recovery try."""
        decided = await self._core.decide(view)
        if decided.decision is not Verdict.STUCK or self._used >= RECOVERY_ATTEMPTS:
            return decided
        self._used += 1
        hint = f" ({decided.feedback})" if decided.feedback else ""
        return PolicyDecision(
            decision=Verdict.CONTINUE,
            reason_codes=(*decided.reason_codes, PolicyReason.CONTROLLER_RECOVERY_ATTEMPT.value),
            source=DecisionSource.CONTROLLER,
            attempt_ids=decided.attempt_ids,
            feedback="You appear to be stuck"
            + hint
            + ". Try one different approach - another tool or other arguments - before "
            "giving up.",
        )
