"""The simulated critic: a permissive reviewer, deterministic from its stream.

It reads the critic view (task, the agent's answer, the trace summary; the full trace when
present adds nothing it uses) and judges the way a lenient reviewer does:

1. no answer at all (null, empty string, empty object or list): ``continue``;
2. the last ``stuck_after_failures`` tool calls all failed: ``stuck`` with probability
   ``stuck_rate``;
3. otherwise ``continue`` with probability ``continue_rate``, naming a required slot to check;
4. otherwise ``complete``.

It never looks at evidence, receipts or values: that is what makes it permissive, and what the
study measures it against. Parameters come from ``config.simulated.critic``; every draw comes
from the stream it is handed.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from harness.errors import SimulatedViewError
from harness.providers.critic import CriticDecision, CriticView
from harness.providers.protocol import ProviderRequest
from harness.streams import KeyedStream

__all__ = ["PermissiveCritic"]

_CONTINUE_REASONS: Final = (
    "The value given for {slot} is not clearly backed by the tool results; check it.",
    "The answer for {slot} may be incomplete; confirm it with another lookup.",
    "It is not evident how {slot} was obtained; verify it before stopping.",
)


def _is_empty(answer: Any) -> bool:
    return answer is None or answer == "" or answer == {} or answer == []


class PermissiveCritic:
    """Role behaviour for ``critic`` (see the module docstring)."""

    @property
    def name(self) -> str:
        """``permissive-critic.v1``."""
        return "permissive-critic.v1"

    def respond(self, request: ProviderRequest, stream: KeyedStream) -> dict[str, Any]:
        """Judge the answer in ``request.view``.

        Raises:
            SimulatedViewError: when the view is not a critic view.
        """
        try:
            view = msgspec.convert(request.view, CriticView)
        except msgspec.ValidationError as e:
            raise SimulatedViewError(f"{self.name} cannot read the view: {e}") from e
        params = request.config.simulated.critic
        summary = view.trace_summary
        if _is_empty(view.answer):
            decision, reason = CriticDecision.CONTINUE, "No final answer was given."
        elif summary.trailing_failures >= params.stuck_after_failures and stream.below(
            "stuck", params.stuck_rate
        ):
            decision = CriticDecision.STUCK
            reason = (
                f"The last {summary.trailing_failures} tool calls failed; "
                "further progress looks unlikely."
            )
        elif stream.below("continue", params.continue_rate):
            slots = view.task.required_slots or ("the answer",)
            template = stream.choice("continue-reason", _CONTINUE_REASONS)
            decision = CriticDecision.CONTINUE
            reason = template.format(slot=stream.choice("continue-slot", slots))
        else:
            decision, reason = CriticDecision.COMPLETE, "The answer addresses the question."
        return {"decision": decision.value, "reason": reason}
