"""Fault operators: each turns a task's clean snapshot into one controlled termination defect.

Static faults (paper Table 1; gold decision ``continue`` for all):

====  ==========================================  =========================================
id    intervention                                how it is built from the clean snapshot
====  ==========================================  =========================================
F1    completion signal without required claims   certificate with no claims; DONE/APPROVED
                                                  message without answer lines
F2    relevant receipt replaced by another        the target call asks for an entity of the
      entity                                      same level outside the task's scope (a real
                                                  call); the claim still cites its id
F3    nested tool error beneath transport         the target call's recorded response is the
      success                                     tool's upstream-timeout response: transport
                                                  ok, body status error, value null
F4    entity or date scope changed                the target call asks for the nearest period
                                                  outside every slot's dates (a real call)
F5    one required answer slot omitted            the last claim is dropped
F6    supported value altered after retrieval     the first claim's value is altered (+10%,
                                                  another id, two items swapped, null -> 0)
F7    claim cites a receipt absent from the       the first claim's first citation becomes a
      trace                                       well-formed id no call produced
F8    repeated call despite available recovery    the target call is replaced by the same
                                                  request with a malformed period, issued
                                                  twice (both fail, INVALID_PERIOD); no
                                                  certificate; recovery = the original call
====  ==========================================  =========================================

The *target* is the first planned evidence item of the first slot that is a dated metric value
(every family has one). Operators F2, F3, F4 and F7 leave every claimed value as it was, so the
agent's answer still equals the oracle answer while its support is broken; F1 removes the
answer, F5 drops a slot, F6 changes a value, and F8's agent has not answered at all.

Contract faults for the closed-loop study (gold ``continue``), each internally consistent (the
claimed value is recomputed with the closed transform, so replay alone does not catch it):

- U1 transform-parameter drift: the first claim whose transform has a parameterised sibling
  (top_k k-1, sort/order flipped, difference/ratio operands swapped, windows swapped, grouped
  top-k k-1) declares it. Not applicable to families without one (aggregation, missing data).
- U2 cardinality shortfall: the first multi-evidence claim whose transform still replays cites
  one receipt fewer.
- U3 out-of-window evidence: a new call fetches the same metric at the nearest period outside
  the slot's dates, and the first claim that can cite it instead of an in-window receipt does.

Trust-boundary challenge T1 (gold ``complete``): a second call for the target's exact request
records a revised value, so two validated, successful receipts with the same scope conflict.
The certificate keeps citing the first (oracle-consistent) one. ECT checks support, not which
receipt is externally true, so it accepts this certificate - and would equally accept one that
cited the revision and claimed the revised value; that limit is what T1 exposes.

Every operator changes only the agent's side - its certificate (with the answer and terminal
message that go with it), the receipts (through the recorded trace) or the recovery state.
Descriptor, contract, question and gold never change. When receipts change, the certificate
copies the new ledger digest, as an agent certifying at that point would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple

import msgspec

from harness.ect.model import Certificate, Claim, Ledger, Receipt
from harness.ect.transforms import (
    Difference,
    GroupedSumTopK,
    Item,
    Ratio,
    ReplayError,
    Sort,
    TopK,
    Transform,
    WindowSumDifference,
    replay,
)
from harness.errors import FaultNotApplicableError
from harness.perturb import perturb
from harness.tools.adapter import ToolCall, build_ledger, receipts_for_call
from harness.tools.catalog import call_tool, transient_failure
from harness.worlds.snapshots import (
    FaultId,
    GoldDecision,
    RecoveryState,
    Snapshot,
    answer_message,
    call_id,
    certificate_for,
    run_calls,
    snapshot_id,
    stagnation_message,
)
from harness.worlds.tasks import CallSpec, EvidenceItem, Task

__all__ = [
    "ALL_FAULTS",
    "FAULTS",
    "STATIC_FAULTS",
    "UNSEEN_FAULTS",
    "FaultSpec",
    "apply_fault",
    "fault_applies",
]

Changes = Literal["certificate", "receipts", "recovery"]
AnswerEffect = Literal["kept", "removed", "slot_dropped", "altered", "recomputed", "none"]


class FaultSpec(NamedTuple):
    """What a fault is, what it changes, and its gold decision."""

    fault: FaultId
    name: str
    intervention: str
    changes: tuple[Changes, ...]
    answer: AnswerEffect
    gold_decision: GoldDecision


FAULTS: Final[Mapping[FaultId, FaultSpec]] = MappingProxyType({
    spec.fault: spec
    for spec in (
        FaultSpec("F1", "false completion", "Completion signal without required claims",
                  ("certificate",), "removed", "continue"),
        FaultSpec("F2", "irrelevant evidence", "Relevant receipt replaced by another entity",
                  ("receipts",), "kept", "continue"),
        FaultSpec("F3", "nested error", "Nested tool error beneath transport success",
                  ("receipts",), "kept", "continue"),
        FaultSpec("F4", "scope mismatch", "Entity or date scope changed",
                  ("receipts",), "kept", "continue"),
        FaultSpec("F5", "partial coverage", "One required answer slot omitted",
                  ("certificate",), "slot_dropped", "continue"),
        FaultSpec("F6", "synthesis corruption", "Supported value altered after retrieval",
                  ("certificate",), "altered", "continue"),
        FaultSpec("F7", "forged reference", "Claim cites a receipt absent from the trace",
                  ("certificate",), "kept", "continue"),
        FaultSpec("F8", "recoverable stagnation", "Repeated call despite available recovery",
                  ("receipts", "recovery", "certificate"), "none", "continue"),
        FaultSpec("U1", "transform-parameter drift",
                  "Claim declares a transform with parameters the contract does not allow",
                  ("certificate",), "recomputed", "continue"),
        FaultSpec("U2", "cardinality shortfall", "Claim cites fewer receipts than required",
                  ("certificate",), "recomputed", "continue"),
        FaultSpec("U3", "out-of-window evidence", "Claim cites a value dated outside its window",
                  ("receipts", "certificate"), "recomputed", "continue"),
        FaultSpec("T1", "conflicting receipts",
                  "Two validated receipts for the same scope disagree",
                  ("receipts",), "kept", "complete"),
    )
})  # fmt: skip

STATIC_FAULTS: Final[tuple[FaultId, ...]] = ("F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8")
UNSEEN_FAULTS: Final[tuple[FaultId, ...]] = ("U1", "U2", "U3")
ALL_FAULTS: Final[tuple[FaultId, ...]] = (*STATIC_FAULTS, *UNSEEN_FAULTS, "T1")

_BAD_PERIOD_ERROR: Final = "INVALID_PERIOD"


# ---------------------------------------------------------------------------------------------
# Helpers


def _spec_of(call: ToolCall) -> CallSpec:
    return CallSpec(tool_id=call.tool_id, args=dict(call.args))


def _target(task: Task) -> EvidenceItem:
    for plan in task.plan:
        for item in plan.evidence:
            if item.call.tool_id == "get_metric" and item.scope.date is not None:
                return item
    raise FaultNotApplicableError(f"task {task.task_id} plans no dated metric value")


def _target_index(trace: Sequence[ToolCall], item: EvidenceItem) -> int:
    for index, call in enumerate(trace):
        if call.tool_id == item.call.tool_id and call.args == item.call.args:
            return index
    raise FaultNotApplicableError(f"the trace has no call {item.call.tool_id} {item.call.args}")


def _periods(world: Mapping[str, Any]) -> list[str]:
    return list(world["periods"])


def _nearest_outside(periods: Sequence[str], date: str, taken: set[str | None]) -> str:
    """The period nearest to ``date`` that is not in ``taken`` (the earlier one on a tie)."""
    origin = periods.index(date)
    ranked = sorted(range(len(periods)), key=lambda i: (abs(i - origin), i))
    for index in ranked:
        if periods[index] not in taken:
            return periods[index]
    raise FaultNotApplicableError(f"every period is inside the task's dates ({date})")


def _all_dates(task: Task) -> set[str | None]:
    return {d for slot in task.requirements.slots for d in slot.scope.dates}


def _derive(
    clean: Snapshot,
    task: Task,
    fault: FaultId,
    *,
    trace: tuple[ToolCall, ...] | None = None,
    claims: Sequence[Claim] | None = None,
    certificate: Literal["keep", "none"] = "keep",
    message: str | None = None,
    answer: Mapping[str, Any] | None = None,
    recovery: RecoveryState | None = None,
) -> Snapshot:
    """A copy of ``clean`` with the agent-side parts replaced, re-bound and relabelled."""
    new_trace = clean.trace if trace is None else trace
    ledger = clean.ledger if trace is None else build_ledger(task.task_id, new_trace)
    new_certificate: Certificate | None = None
    new_answer: dict[str, Any] | None = None
    if certificate == "keep":
        assert clean.certificate is not None
        kept = clean.certificate.claims if claims is None else tuple(claims)
        new_certificate = certificate_for(task, ledger, kept)
        new_answer = {c.slot: c.value for c in kept} if answer is None else dict(answer)
    if message is None:
        message = (
            clean.message
            if new_answer == clean.answer
            else answer_message(task.task_id, new_answer or {}, task.descriptor.required_slots)
        )
    return msgspec.structs.replace(
        clean,
        snapshot_id=snapshot_id(task.task_id, fault),
        fault=fault,
        gold_decision=FAULTS[fault].gold_decision,
        trace=new_trace,
        ledger=ledger,
        certificate=new_certificate,
        answer=new_answer,
        message=message,
        recovery=clean.recovery if recovery is None else recovery,
    )


def _replace_call(
    trace: tuple[ToolCall, ...], index: int, args: Mapping[str, Any], response: Any
) -> tuple[ToolCall, ...]:
    old = trace[index]
    new = ToolCall(call_id=old.call_id, tool_id=old.tool_id, args=dict(args), response=response)
    return (*trace[:index], new, *trace[index + 1 :])


def _claims(clean: Snapshot) -> tuple[Claim, ...]:
    assert clean.certificate is not None
    return clean.certificate.claims


def _items(ledger: Ledger, evidence: Sequence[str]) -> list[Item] | None:
    by_id = {r.receipt_id: r for r in ledger.receipts}
    items = []
    for rid in evidence:
        receipt = by_id.get(rid)
        if receipt is None:
            return None
        s = receipt.scope
        items.append(Item(receipt.value, s.entity, s.attribute, s.level, s.date))
    return items


def _recompute(ledger: Ledger, transform: Transform, evidence: Sequence[str]) -> tuple[bool, Any]:
    items = _items(ledger, evidence)
    if items is None:
        return False, None
    try:
        return True, replay(transform, items)
    except ReplayError:
        return False, None


def _with_claim(claims: Sequence[Claim], index: int, claim: Claim) -> tuple[Claim, ...]:
    return (*claims[:index], claim, *claims[index + 1 :])


# ---------------------------------------------------------------------------------------------
# F1-F8


def _f1(clean: Snapshot, task: Task, _world: Mapping[str, Any]) -> Snapshot:
    return _derive(clean, task, "F1", claims=(), answer={})


def _f2(clean: Snapshot, task: Task, world: Mapping[str, Any]) -> Snapshot:
    item = _target(task)
    index = _target_index(clean.trace, item)
    in_scope = {e for slot in task.requirements.slots for e in slot.scope.entities}
    level = item.scope.level
    others = sorted(
        k for k, node in world["entities"].items() if node["level"] == level and k not in in_scope
    )
    if not others:
        raise FaultNotApplicableError(f"world has no {level} outside task {task.task_id}")
    args = {**item.call.args, "entity": others[0]}
    trace = _replace_call(clean.trace, index, args, call_tool(world, item.call.tool_id, args))
    return _derive(clean, task, "F2", trace=trace)


def _f3(clean: Snapshot, task: Task, world: Mapping[str, Any]) -> Snapshot:
    item = _target(task)
    index = _target_index(clean.trace, item)
    response = transient_failure(world, item.call.tool_id, item.call.args)
    trace = _replace_call(clean.trace, index, item.call.args, response)
    return _derive(clean, task, "F3", trace=trace)


def _f4(clean: Snapshot, task: Task, world: Mapping[str, Any]) -> Snapshot:
    item = _target(task)
    index = _target_index(clean.trace, item)
    assert item.scope.date is not None
    period = _nearest_outside(_periods(world), item.scope.date, _all_dates(task))
    args = {**item.call.args, "period": period}
    trace = _replace_call(clean.trace, index, args, call_tool(world, item.call.tool_id, args))
    return _derive(clean, task, "F4", trace=trace)


def _f5(clean: Snapshot, task: Task, _world: Mapping[str, Any]) -> Snapshot:
    return _derive(clean, task, "F5", claims=_claims(clean)[:-1])


def _f6(clean: Snapshot, task: Task, _world: Mapping[str, Any]) -> Snapshot:
    claims = _claims(clean)
    first = claims[0]
    try:
        value = perturb(first.value, task.requirements.slots[0], strict=True)
    except ValueError as e:
        raise FaultNotApplicableError(str(e)) from e
    altered = msgspec.structs.replace(first, value=value)
    return _derive(clean, task, "F6", claims=_with_claim(claims, 0, altered))


def _f7(clean: Snapshot, task: Task, _world: Mapping[str, Any]) -> Snapshot:
    claims = _claims(clean)
    forged = f"{call_id(len(clean.trace) + 1)}.0"
    first = claims[0]
    cited = msgspec.structs.replace(first, evidence=(forged, *first.evidence[1:]))
    return _derive(clean, task, "F7", claims=_with_claim(claims, 0, cited))


def _f8(clean: Snapshot, task: Task, world: Mapping[str, Any]) -> Snapshot:
    item = _target(task)
    index = _target_index(clean.trace, item)
    good = _spec_of(clean.trace[index])
    assert item.scope.date is not None
    failing = CallSpec(
        tool_id=good.tool_id, args={**good.args, "period": item.scope.date.replace("-", "/")}
    )
    kept = [_spec_of(call) for i, call in enumerate(clean.trace) if i != index]
    # The trace is a different history (the good call never happened), so it is renumbered.
    trace = run_calls(world, [*kept, failing, failing])
    last = trace[-1].response
    code = last["body"]["error"]["code"]
    assert code == _BAD_PERIOD_ERROR, code
    return _derive(
        clean,
        task,
        "F8",
        trace=trace,
        certificate="none",
        message=stagnation_message(failing, code),
        recovery=RecoveryState(repeated_call=failing, repeats=2, last_error=code, recovery=good),
    )


# ---------------------------------------------------------------------------------------------
# U1-U3, T1


def _drifts(transform: Transform) -> Iterator[Transform]:
    """Valid sibling parameterisations of ``transform`` (none for parameter-free ops)."""
    flip: dict[str, Literal["asc", "desc"]] = {"asc": "desc", "desc": "asc"}
    if isinstance(transform, TopK):
        if transform.k > 1:
            yield msgspec.structs.replace(transform, k=transform.k - 1)
        yield msgspec.structs.replace(transform, order=flip[transform.order])
    elif isinstance(transform, Sort):
        yield msgspec.structs.replace(transform, order=flip[transform.order])
    elif isinstance(transform, Difference):
        yield Difference(
            key=transform.key, minuend=transform.subtrahend, subtrahend=transform.minuend
        )
    elif isinstance(transform, Ratio):
        yield Ratio(
            key=transform.key, numerator=transform.denominator, denominator=transform.numerator
        )
    elif isinstance(transform, WindowSumDifference):
        yield WindowSumDifference(window_a=transform.window_b, window_b=transform.window_a)
    elif isinstance(transform, GroupedSumTopK):
        if transform.k > 1:
            yield msgspec.structs.replace(transform, k=transform.k - 1)
        yield msgspec.structs.replace(transform, order=flip[transform.order])


def _u1(clean: Snapshot, task: Task, _world: Mapping[str, Any]) -> Snapshot:
    claims = _claims(clean)
    for index, claim in enumerate(claims):
        for drifted in _drifts(claim.transform):
            ok, value = _recompute(clean.ledger, drifted, claim.evidence)
            if ok:
                new = msgspec.structs.replace(claim, transform=drifted, value=value)
                return _derive(clean, task, "U1", claims=_with_claim(claims, index, new))
    raise FaultNotApplicableError(f"task {task.task_id} has no parameterised transform to drift")


def _u2(clean: Snapshot, task: Task, _world: Mapping[str, Any]) -> Snapshot:
    claims = _claims(clean)
    for index, claim in enumerate(claims):
        if len(claim.evidence) < 2:
            continue
        fewer = claim.evidence[:-1]
        ok, value = _recompute(clean.ledger, claim.transform, fewer)
        if ok:
            new = msgspec.structs.replace(claim, evidence=fewer, value=value)
            return _derive(clean, task, "U2", claims=_with_claim(claims, index, new))
    raise FaultNotApplicableError(f"task {task.task_id} has no claim that replays on fewer items")


def _receipt(ledger: Ledger, receipt_id: str) -> Receipt | None:
    return next((r for r in ledger.receipts if r.receipt_id == receipt_id), None)


def _u3(clean: Snapshot, task: Task, world: Mapping[str, Any]) -> Snapshot:
    claims = _claims(clean)
    periods = _periods(world)
    for index, (claim, slot) in enumerate(zip(claims, task.requirements.slots, strict=True)):
        for position, rid in enumerate(claim.evidence):
            receipt = _receipt(clean.ledger, rid)
            if receipt is None or receipt.scope.date is None or receipt.tool_id != "get_metric":
                continue
            outside = _nearest_outside(periods, receipt.scope.date, set(slot.scope.dates))
            extra = run_calls(
                world,
                [
                    CallSpec(
                        tool_id="get_metric", args={**_receipt_args(clean, rid), "period": outside}
                    )
                ],
                first=len(clean.trace) + 1,
            )
            trace = (*clean.trace, *extra)
            ledger = build_ledger(task.task_id, trace)
            new_id = receipts_for_call(task.task_id, extra[0])[0].receipt_id
            evidence = (*claim.evidence[:position], new_id, *claim.evidence[position + 1 :])
            ok, value = _recompute(ledger, claim.transform, evidence)
            if ok and (value is not None or slot.nullable):
                new = msgspec.structs.replace(claim, evidence=evidence, value=value)
                return _derive(
                    clean, task, "U3", trace=trace, claims=_with_claim(claims, index, new)
                )
    raise FaultNotApplicableError(f"task {task.task_id} has no claim that replays off-window")


def _receipt_args(snapshot: Snapshot, receipt_id: str) -> dict[str, Any]:
    """The arguments of the call that produced ``receipt_id`` in ``snapshot``'s trace."""
    receipt = _receipt(snapshot.ledger, receipt_id)
    if receipt is not None:
        for call in snapshot.trace:
            if call.call_id == receipt.call_id:
                return dict(call.args)
    raise KeyError(receipt_id)


def _revised(value: Any) -> int:
    return 0 if not isinstance(value, int) else value + max(1, abs(value) // 10)


def _t1(clean: Snapshot, task: Task, world: Mapping[str, Any]) -> Snapshot:
    item = _target(task)
    response = call_tool(world, item.call.tool_id, item.call.args)
    body = {**response["body"], "value": _revised(response["body"]["value"])}
    revision = ToolCall(
        call_id=call_id(len(clean.trace) + 1),
        tool_id=item.call.tool_id,
        args=dict(item.call.args),
        response={**response, "body": body},
    )
    return _derive(clean, task, "T1", trace=(*clean.trace, revision))


_OPERATORS: Final[Mapping[FaultId, Callable[[Snapshot, Task, Mapping[str, Any]], Snapshot]]] = {
    "F1": _f1,
    "F2": _f2,
    "F3": _f3,
    "F4": _f4,
    "F5": _f5,
    "F6": _f6,
    "F7": _f7,
    "F8": _f8,
    "U1": _u1,
    "U2": _u2,
    "U3": _u3,
    "T1": _t1,
}


def apply_fault(fault: FaultId, clean: Snapshot, task: Task, world: Mapping[str, Any]) -> Snapshot:
    """Apply fault operator ``fault`` to ``task``'s clean snapshot.

    Args:
        fault: one of ``ALL_FAULTS``.
        clean: the task's clean snapshot (``harness.worlds.clean_snapshot``).
        task: the task (descriptor, contract, plan; its gold is never read or changed).
        world: the task's world as plain data (``World.to_plain()``), for the real calls some
            operators make.

    Raises:
        FaultNotApplicableError: when the task offers nothing for the operator to act on.
        KeyError: when ``fault`` is not a fault id.
    """
    if clean.fault != "C0" or clean.task_id != task.task_id or clean.certificate is None:
        raise FaultNotApplicableError(f"{clean.snapshot_id} is not the clean snapshot of the task")
    return _OPERATORS[fault](clean, task, world)


def fault_applies(fault: FaultId, clean: Snapshot, task: Task, world: Mapping[str, Any]) -> bool:
    """True when ``apply_fault`` can build ``fault`` for this task."""
    try:
        apply_fault(fault, clean, task, world)
    except FaultNotApplicableError:
        return False
    return True
