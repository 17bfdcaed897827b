"""What each party of the closed loop sees: the planner's view and the policy's snapshot view.

Both are built from the trajectory's own state only (task, trace, ledger built by the trusted
adapter, the planner's proposal, this cell's history) and are blinded: nothing here reads the
schedule row's fault, the checkpoint kind, the split or gold, and the planner view's keys are
checked by the provider request (``check_blinded``).

The *recovery locator* fills the snapshot view's ``RecoveryState`` for ECT's recovery check:
the trailing identical failing request (if any) and a recovery - the catalog call that observes
the first scope the trusted contract requires and the ledger lacks - offered only while the
budget still allows a call and a later decision. It reads the contract, the ledger and the
budget; never gold.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from harness.ect.model import Certificate, Ledger, Requirements, TaskDescriptor
from harness.policies import PolicyDecision
from harness.providers.planner import (
    PlannerBudget,
    PlannerCall,
    PlannerDraft,
    PlannerFeedback,
    PlannerReceipt,
    PlannerScope,
    PlannerTask,
    PlannerTool,
    PlannerTurn,
    PlannerView,
)
from harness.studies.v2.checkpoints import Draft
from harness.tools.adapter import ToolCall, response_ok
from harness.tools.catalog import catalog
from harness.worlds.snapshots import RecoveryState, SnapshotView
from harness.worlds.tasks import CallSpec, Task

__all__ = [
    "TOOLS",
    "call_error",
    "call_for_scope",
    "call_ok",
    "feedback_of",
    "planner_view",
    "recovery_state",
    "snapshot_view",
]

TOOLS: Final[tuple[PlannerTool, ...]] = tuple(
    PlannerTool(tool_id=t["tool_id"], description=t["description"], args=t["args"])
    for t in catalog()["tools"]
)
"""The tool catalog as the planner sees it (ids, descriptions, argument schemas)."""

_VERIFIER_PREFIXES: Final = (
    "ADAPTER_",
    "BINDING_",
    "COVERAGE_",
    "EVIDENCE_",
    "SCOPE_",
    "TRANSFORM_",
    "REPLAY_",
    "INTERNAL_",
)


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def call_ok(call: ToolCall) -> bool:
    """True when the call succeeded by the trusted adapter's rule (``response_ok``)."""
    return response_ok(call.tool_id, call.response)


def call_error(call: ToolCall) -> str | None:
    """The error code of a failed call (nested first, then transport), or None."""
    for holder in (_field(call.response, "body"), call.response):
        code = _field(_field(holder, "error"), "code")
        if isinstance(code, str):
            return code
    return None if call_ok(call) else "error"


def call_for_scope(entity: str, attribute: str, date: str | None) -> CallSpec | None:
    """The catalog call that observes one scope (None when no tool observes it)."""
    if attribute == "children":
        return CallSpec(tool_id="list_children", args={"entity": entity})
    if date is None:
        return None
    return CallSpec(
        tool_id="get_metric", args={"entity": entity, "metric": attribute, "period": date}
    )


def _usable_keys(ledger: Ledger) -> set[tuple[str, str, str, str | None]]:
    return {
        (r.scope.entity, r.scope.attribute, r.scope.level, r.scope.date)
        for r in ledger.receipts
        if r.exec_status == "ok" and r.validation == "validated"
    }


def recovery_state(
    trace: Sequence[ToolCall],
    requirements: Requirements,
    ledger: Ledger,
    *,
    tool_calls_left: int,
    decisions_left: int,
) -> RecoveryState:
    """The recovery locator (see the module docstring)."""
    repeated: CallSpec | None = None
    repeats = 0
    last_error: str | None = None
    if trace and not call_ok(trace[-1]):
        last = trace[-1]
        request = (last.tool_id, json.dumps(last.args, sort_keys=True))
        for call in reversed(trace):
            if (call.tool_id, json.dumps(call.args, sort_keys=True)) != request or call_ok(call):
                break
            repeats += 1
        repeated = CallSpec(tool_id=last.tool_id, args=dict(last.args))
        last_error = call_error(last)
    recovery: CallSpec | None = None
    if tool_calls_left > 0 and decisions_left > 0:
        have = _usable_keys(ledger)
        for slot in requirements.slots:
            rule = slot.scope
            for key in itertools.product(rule.entities, rule.attributes, rule.levels, rule.dates):
                if key not in have:
                    recovery = call_for_scope(key[0], key[1], key[3])
                    if recovery is not None:
                        break
            if recovery is not None:
                break
    return RecoveryState(
        repeated_call=repeated, repeats=repeats, last_error=last_error, recovery=recovery
    )


def snapshot_view(
    task: Task,
    trace: tuple[ToolCall, ...],
    ledger: Ledger,
    *,
    certificate: Certificate | None,
    answer: dict[str, Any] | None,
    message: str,
    recovery: RecoveryState,
) -> SnapshotView:
    """The blinded view a termination policy decides a proposal on."""
    return SnapshotView(
        task_id=task.task_id,
        question=task.question,
        descriptor=task.descriptor,
        requirements=task.requirements,
        trace=trace,
        ledger=ledger,
        certificate=certificate,
        answer=answer,
        message=message,
        recovery=recovery,
    )


def feedback_of(decision: PolicyDecision) -> PlannerFeedback:
    """What the planner is told when a proposal is not accepted: the policy's text, and its
    verifier reason codes (only ECT has those; critics' own codes are not feedback)."""
    codes = tuple(c for c in decision.reason_codes if c.startswith(_VERIFIER_PREFIXES))
    stuck = decision.decision.value == "stuck"
    return PlannerFeedback(
        verdict="stuck" if stuck else "continue", reason_codes=codes, message=decision.feedback
    )


def _draft(draft: Draft | None) -> PlannerDraft | None:
    if draft is None:
        return None
    claims = None if draft.claims is None else tuple(msgspec.to_builtins(c) for c in draft.claims)
    return PlannerDraft(message=draft.message, answer=draft.answer, claims=claims)


def planner_view(
    task: Task,
    descriptor_digest: str,
    trace: Sequence[ToolCall],
    ledger: Ledger,
    ledger_digest: str,
    *,
    budget: PlannerBudget,
    history: Sequence[PlannerTurn],
    draft: Draft | None,
) -> PlannerView:
    """The planner's view at one decision (see ``harness.providers.planner``)."""
    descriptor: TaskDescriptor = task.descriptor
    return PlannerView(
        task=PlannerTask(
            task_id=task.task_id,
            question=task.question,
            required_slots=tuple(descriptor.required_slots),
            descriptor=msgspec.to_builtins(descriptor),
            contract=msgspec.to_builtins(task.requirements),
        ),
        tools=TOOLS,
        calls=tuple(
            PlannerCall(
                call_id=c.call_id,
                tool_id=c.tool_id,
                args=dict(c.args),
                status="ok" if call_ok(c) else "error",
                error_code=None if call_ok(c) else call_error(c),
            )
            for c in trace
        ),
        receipts=tuple(
            PlannerReceipt(
                receipt_id=r.receipt_id,
                call_id=r.call_id,
                tool_id=r.tool_id,
                source_path=r.source_path,
                scope=PlannerScope(
                    entity=r.scope.entity,
                    attribute=r.scope.attribute,
                    level=r.scope.level,
                    date=r.scope.date,
                ),
                value=r.value,
                exec_status=r.exec_status,
                validation=r.validation,
            )
            for r in ledger.receipts
        ),
        descriptor_digest=descriptor_digest,
        ledger_digest=ledger_digest,
        budget=budget,
        history=tuple(history),
        draft=_draft(draft),
    )
