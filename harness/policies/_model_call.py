"""Asking a model critic: the critic view of a snapshot, one provider call, the mapped verdict.

Shared by the critic core's model path and the full-trace critic. The critic view is built from
the blinded ``SnapshotView`` only (task brief, the agent's answer, the trace); a step's
``status`` is the transport envelope's status, which is what an agent loop sees of a call - a
nested error under transport success is visible only in the response body, which only the
full-trace critic's view carries. A provider failure or an unparseable verdict maps to
``continue`` and is recorded as such, with the attempts it spent.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from harness.ect.model import Verdict
from harness.policies.decision import DecisionSource, PolicyDecision, attempt_id, view_digest
from harness.policies.reasons import PolicyReason
from harness.policies.view import SnapshotView
from harness.providers.attempts import Audit
from harness.providers.critic import (
    CriticDecision,
    CriticView,
    TaskBrief,
    TraceStep,
    critic_view,
    verdict,
)
from harness.providers.protocol import Provider, ProviderRequest

__all__ = ["ask_critic", "cell_id_for", "critic_view_of"]

_MODEL_VERDICT: Final = {
    CriticDecision.COMPLETE: (Verdict.COMPLETE, PolicyReason.CRITIC_MODEL_COMPLETE),
    CriticDecision.CONTINUE: (Verdict.CONTINUE, PolicyReason.CRITIC_MODEL_CONTINUE),
    CriticDecision.STUCK: (Verdict.STUCK, PolicyReason.CRITIC_MODEL_STUCK),
}


def _transport_status(response: Any) -> str:
    ok = isinstance(response, dict) and response.get("status") == "ok"
    return "ok" if ok else "error"


def critic_view_of(view: SnapshotView, *, full_trace: bool) -> CriticView:
    """The critic's view of a snapshot: task brief, answer, trace summary (and full trace)."""
    steps = tuple(
        TraceStep(
            index=index,
            tool=call.tool_id,
            arguments=dict(call.args),
            status="ok" if _transport_status(call.response) == "ok" else "error",
            response=call.response if full_trace else None,
        )
        for index, call in enumerate(view.trace)
    )
    brief = TaskBrief(
        task_id=view.task_id,
        question=view.question,
        required_slots=tuple(view.descriptor.required_slots),
    )
    return critic_view(brief, view.answer, steps, full_trace=full_trace)


def cell_id_for(view: SnapshotView) -> str:
    """A cell id for a model call on ``view``: the task id and a prefix of the view digest."""
    return f"{view.task_id}/{view_digest(view).removeprefix('blake3:')[:16]}"


async def ask_critic(provider: Provider, audit: Audit, request: ProviderRequest) -> PolicyDecision:
    """Send ``request`` and map the result to a decision (failures map to continue)."""
    result = await provider.generate(request, audit)
    ids = tuple(attempt_id(record) for record in result.attempts)
    if result.output is None:
        kind = "unknown" if result.failure is None else result.failure.value
        return PolicyDecision(
            decision=Verdict.CONTINUE,
            reason_codes=(PolicyReason.PROVIDER_FAILURE.value,),
            source=DecisionSource.MODEL,
            attempt_ids=ids,
            feedback=f"The critic could not be consulted ({kind}); keep working.",
        )
    try:
        parsed = verdict(result)
    except msgspec.ValidationError as e:
        return PolicyDecision(
            decision=Verdict.CONTINUE,
            reason_codes=(PolicyReason.PARSE_FAILURE.value,),
            source=DecisionSource.MODEL,
            attempt_ids=ids,
            feedback=f"The critic's verdict was unreadable ({e}); keep working.",
        )
    assert parsed is not None  # output is present, so verdict() parsed it or raised
    decision, reason = _MODEL_VERDICT[parsed.decision]
    return PolicyDecision(
        decision=decision,
        reason_codes=(reason.value,),
        source=DecisionSource.MODEL,
        attempt_ids=ids,
        feedback=parsed.reason,
    )
