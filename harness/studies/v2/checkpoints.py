"""The two checkpoints each V2 task starts from: supported clean, and recoverably incomplete.

A checkpoint is the agent's state when the closed loop takes over: the tool calls it has made
(the trace), the draft it had (its last message, and any answer and certificate claims it had
drafted), and - for the gold judge only, never shown to the planner - which required evidence
scopes lack a successful, validated receipt and which planned calls would supply them.

- **clean**: the task's clean trace (every planned call made); no draft. A valid certificate
  can be built from it, so the right move is to certify and stop.
- **incomplete**: derived from the fault assigned to the task. The trace lacks valid evidence
  for at least one required scope, and the planned calls that supply it fit in the tool
  budget, so the right move is to fetch it first. The target is the fault operators' target
  (the first dated metric item of the first slot) unless said otherwise:

  ====  =========================================================  ==========================
  id    trace                                                      draft (from the fault op)
  ====  =========================================================  ==========================
  F1    clean trace without the target call                        no claims, DONE (false
                                                                   completion)
  F2    the target call asked for another entity (F2's trace)      F2's certificate
  F3    the target call's response is a nested error (F3's trace)  F3's certificate
  F4    the target call asked for an outside period (F4's trace)   F4's certificate
  F5    clean trace without the last slot's first dated call       F5's (last slot dropped)
  F6    clean trace without the target call                        F6's (a value altered)
  F7    clean trace without the target call                        the clean certificate,
                                                                   citing the absent call
  F8    the target call malformed and repeated, failing (F8's)     none; stagnation message
  U1    clean trace without the target call                        U1's (transform drifted)
  U2    clean trace without the call of the receipt U2 drops       U2's (one receipt fewer)
  U3    U3's trace without the in-window call it replaced          U3's (out-of-window cite)
  T1    T1's trace (conflicting revision) without the first        T1's certificate
        dated call of another scope
  ====  =========================================================  ==========================

Calls keep their ids when others are removed, and the loop numbers new calls after the highest
id of the clean trace, so a drafted citation of a removed call never becomes a real receipt.
This module derives data; it performs no I/O and runs no sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from harness.ect.model import Claim, Ledger, Scope
from harness.errors import CheckpointError, FaultNotApplicableError
from harness.faults import apply_fault
from harness.studies.v2.judge import missing_evidence
from harness.studies.v2.outcomes import CheckpointKind
from harness.tools.adapter import ToolCall, build_ledger
from harness.worlds.snapshots import FaultId, Snapshot, clean_snapshot
from harness.worlds.tasks import CallSpec, EvidenceItem, Task

__all__ = [
    "Checkpoint",
    "Draft",
    "build_checkpoints",
    "call_number",
]

_CALL_PREFIX: Final = "c"


class Draft(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The agent's own state at the checkpoint (shown to the planner)."""

    message: str
    answer: dict[str, Any] | None = None
    claims: tuple[Claim, ...] | None = None


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where one trajectory starts.

    Attributes:
        task_id: the task.
        kind: clean or incomplete.
        fault: the fault the checkpoint derives from (``C0`` for clean).
        trace: the calls made so far (the planner sees them and their receipts).
        draft: the agent's draft, or None.
        first_new_call: the number the loop gives the first call it makes (``c<NN>``).
        missing: judge-side - required scopes with no successful, validated receipt.
        recovery: judge-side - the planned calls that supply ``missing``.
    """

    task_id: str
    kind: CheckpointKind
    fault: FaultId
    trace: tuple[ToolCall, ...]
    draft: Draft | None
    first_new_call: int
    missing: tuple[Scope, ...]
    recovery: tuple[CallSpec, ...]


def call_number(call_id: str) -> int:
    """The number in a call id ``c<NN>`` (0 for an id of another form)."""
    digits = call_id[len(_CALL_PREFIX) :]
    return int(digits) if call_id.startswith(_CALL_PREFIX) and digits.isdigit() else 0


def _planned(task: Task) -> list[EvidenceItem]:
    """Every planned evidence item, one per distinct scope, in plan order."""
    seen: dict[tuple[str, str, str, str | None], EvidenceItem] = {}
    for plan in task.plan:
        for item in plan.evidence:
            s = item.scope
            seen.setdefault((s.entity, s.attribute, s.level, s.date), item)
    return list(seen.values())


def _dated_metric(items: Sequence[EvidenceItem]) -> list[EvidenceItem]:
    return [i for i in items if i.call.tool_id == "get_metric" and i.scope.date is not None]


def _target(task: Task) -> EvidenceItem:
    """The fault operators' target: the first dated metric item of the first slot on."""
    for plan in task.plan:
        found = _dated_metric(plan.evidence)
        if found:
            return found[0]
    raise CheckpointError(f"task {task.task_id} plans no dated metric value")


def _last_slot_target(task: Task) -> EvidenceItem:
    found = _dated_metric(task.plan[-1].evidence)
    return found[0] if found else _target(task)


def _other_target(task: Task, first: EvidenceItem) -> EvidenceItem:
    for item in _dated_metric(_planned(task)):
        if item.scope != first.scope:
            return item
    raise CheckpointError(f"task {task.task_id} plans a single dated metric value")


def _without(trace: Sequence[ToolCall], call: CallSpec) -> tuple[ToolCall, ...]:
    kept = tuple(c for c in trace if not (c.tool_id == call.tool_id and c.args == call.args))
    if len(kept) == len(trace):
        raise CheckpointError(f"the trace has no call {call.tool_id} {call.args}")
    return kept


def _without_receipt_call(
    trace: Sequence[ToolCall], ledger: Ledger, rid: str
) -> tuple[ToolCall, ...]:
    receipt = next((r for r in ledger.receipts if r.receipt_id == rid), None)
    if receipt is None:
        raise CheckpointError(f"no receipt {rid} to remove")
    return tuple(c for c in trace if c.call_id != receipt.call_id)


def _draft(snapshot: Snapshot) -> Draft:
    claims = None if snapshot.certificate is None else snapshot.certificate.claims
    return Draft(message=snapshot.message, answer=snapshot.answer, claims=claims)


def _replaced(clean: Snapshot, faulty: Snapshot) -> str:
    """The receipt id a fault's certificate stopped citing (U2, U3)."""
    assert clean.certificate is not None
    assert faulty.certificate is not None
    for before, after in zip(clean.certificate.claims, faulty.certificate.claims, strict=True):
        gone = [rid for rid in before.evidence if rid not in after.evidence]
        if gone:
            return gone[0]
    raise CheckpointError(f"{faulty.snapshot_id} cites every receipt the clean one does")


def _incomplete_trace(
    fault: FaultId, task: Task, clean: Snapshot, faulty: Snapshot
) -> tuple[tuple[ToolCall, ...], Draft]:
    target = _target(task)
    if fault in ("F1", "F6", "U1"):
        return _without(clean.trace, target.call), _draft(faulty)
    if fault == "F7":
        return _without(clean.trace, target.call), _draft(clean)
    if fault in ("F2", "F3", "F4", "F8"):
        return faulty.trace, _draft(faulty)
    if fault == "F5":
        return _without(clean.trace, _last_slot_target(task).call), _draft(faulty)
    if fault == "U2":
        trace = _without_receipt_call(clean.trace, clean.ledger, _replaced(clean, faulty))
        return trace, _draft(faulty)
    if fault == "U3":
        trace = _without_receipt_call(faulty.trace, faulty.ledger, _replaced(clean, faulty))
        return trace, _draft(faulty)
    if fault == "T1":
        return _without(faulty.trace, _other_target(task, target).call), _draft(faulty)
    raise CheckpointError(f"no incomplete checkpoint is defined for fault {fault!r}")


def build_checkpoints(
    task: Task, world: Mapping[str, Any], fault: FaultId, *, tool_budget: int
) -> tuple[Checkpoint, Checkpoint]:
    """The clean and the incomplete checkpoint of ``task`` (``fault`` drives the latter).

    Raises:
        CheckpointError: the fault does not apply to the task, or the incomplete checkpoint
            would not be recoverably incomplete (nothing missing, or more planned calls
            missing than ``tool_budget``).
    """
    clean = clean_snapshot(task, world)
    try:
        faulty = apply_fault(fault, clean, task, world)
    except FaultNotApplicableError as e:
        raise CheckpointError(f"fault {fault} cannot be assigned to {task.task_id}: {e}") from e
    trace, draft = _incomplete_trace(fault, task, clean, faulty)
    first_new = 1 + max(call_number(c.call_id) for c in (*clean.trace, *faulty.trace))
    missing, recovery = missing_evidence(task, build_ledger(task.task_id, trace))
    if not missing or len(recovery) > tool_budget:
        raise CheckpointError(
            f"the {fault} checkpoint of {task.task_id} is not recoverably incomplete "
            f"({len(missing)} scopes missing, {len(recovery)} calls to recover them)"
        )
    clean_missing, _ = missing_evidence(task, clean.ledger)
    if clean_missing:
        raise CheckpointError(f"the clean trace of {task.task_id} lacks planned evidence")
    return (
        Checkpoint(
            task_id=task.task_id,
            kind="clean",
            fault="C0",
            trace=clean.trace,
            draft=None,
            first_new_call=first_new,
            missing=(),
            recovery=(),
        ),
        Checkpoint(
            task_id=task.task_id,
            kind="incomplete",
            fault=fault,
            trace=trace,
            draft=draft,
            first_new_call=first_new,
            missing=missing,
            recovery=recovery,
        ),
    )
