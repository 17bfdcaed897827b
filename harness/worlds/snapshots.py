"""Snapshots: the state of an agent at a termination decision, and the clean one per task.

A snapshot holds what a termination policy may look at - the task descriptor and trusted
contract, the question, the tool trace, the ledger the trusted adapter built from it, the
agent's certificate (None when it made no completion proposal), its structured answer, its
terminal message, and the recovery state - plus what scores it: the fault id, the split and the
gold decision. ``Snapshot.view()`` drops the scoring fields for blinded policies.

The clean snapshot of a task (fault ``C0``) is a naive agent that did everything right: it made
the planned calls, cites exactly the planned receipts with the contract's transforms, claims
the oracle answer, and ends with a DONE line and an APPROVED self-check. Fault operators
(``harness.faults``) derive every other snapshot from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from harness.canonical import Domain, digest
from harness.ect.model import (
    Certificate,
    Claim,
    Ledger,
    Receipt,
    Requirements,
    TaskDescriptor,
    descriptor_digest,
    ledger_digest,
)
from harness.policies.view import RecoveryState, SnapshotView
from harness.tools.adapter import ToolCall, build_ledger
from harness.tools.catalog import call_tool
from harness.worlds.tasks import CallSpec, Task
from harness.worlds.world import Split

__all__ = [
    "FAULT_IDS",
    "CLEAN",
    "FaultId",
    "GoldDecision",
    "RecoveryState",
    "Snapshot",
    "SnapshotView",
    "answer_message",
    "call_id",
    "certificate_for",
    "clean_snapshot",
    "clean_trace",
    "find_support",
    "run_calls",
    "snapshot_digest",
    "snapshot_id",
    "stagnation_message",
]

FaultId = Literal["C0", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "U1", "U2", "U3", "T1"]
FAULT_IDS: Final[tuple[FaultId, ...]] = (
    "C0", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "U1", "U2", "U3", "T1",
)  # fmt: skip
CLEAN: Final[FaultId] = "C0"
GoldDecision = Literal["complete", "continue"]

DONE_LINE: Final = "DONE"
SELF_CHECK_LINE: Final = (
    "Self-check: every required value was retrieved and computed; the answer is complete. APPROVED"
)


class _Data(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the snapshot value types."""


class Snapshot(_Data, frozen=True, kw_only=True):
    """One benchmark snapshot: the agent state at a termination decision and its gold label.

    ``answer`` is the agent's proposed answer (slot -> value, the values its certificate
    claims); None when it proposed no completion. ``gold_decision`` is the permitted terminal
    decision: ``complete`` for the clean snapshot and the T1 challenge (its certified answer is
    the oracle's, cited from a valid receipt), ``continue`` for every fault F1-F8 and U1-U3 (for
    F8, stopping as ``stuck`` is also wrong: a recovery is available).
    """

    schema_version: Literal[1] = 1
    snapshot_id: str
    task_id: str
    fault: FaultId
    split: Split
    gold_decision: GoldDecision
    question: str
    descriptor: TaskDescriptor
    requirements: Requirements
    trace: tuple[ToolCall, ...]
    ledger: Ledger
    certificate: Certificate | None
    answer: dict[str, Any] | None
    message: str
    recovery: RecoveryState

    def view(self) -> SnapshotView:
        """The blinded view a policy decides on."""
        return SnapshotView(
            task_id=self.task_id,
            question=self.question,
            descriptor=self.descriptor,
            requirements=self.requirements,
            trace=self.trace,
            ledger=self.ledger,
            certificate=self.certificate,
            answer=self.answer,
            message=self.message,
            recovery=self.recovery,
        )


def snapshot_id(task_id: str, fault: FaultId) -> str:
    """``<task id>.<fault>``, e.g. ``w03-top_k.F2``."""
    return f"{task_id}.{fault}"


def snapshot_digest(snapshot: Snapshot) -> str:
    """The pinned digest of a snapshot."""
    return digest(Domain.SNAPSHOT, snapshot)


def call_id(number: int) -> str:
    """The id of the ``number``-th call of a trace (``c01``, ``c02``, ...)."""
    return f"c{number:02d}"


def run_calls(
    world: Mapping[str, Any], specs: Iterable[CallSpec], *, first: int = 1
) -> tuple[ToolCall, ...]:
    """Call each tool against the plain ``world`` and record the calls, numbered from ``first``."""
    return tuple(
        ToolCall(
            call_id=call_id(number),
            tool_id=spec.tool_id,
            args=dict(spec.args),
            response=call_tool(world, spec.tool_id, spec.args),
        )
        for number, spec in enumerate(specs, start=first)
    )


def clean_trace(task: Task, world: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    """The discovery calls, then one call per distinct planned evidence request, in plan order."""
    specs: dict[bytes, CallSpec] = {}
    for spec in (*task.discovery, *(i.call for p in task.plan for i in p.evidence)):
        specs.setdefault(msgspec.json.encode(spec, order="sorted"), spec)
    return run_calls(world, specs.values())


def _usable(receipt: Receipt) -> bool:
    return receipt.exec_status == "ok" and receipt.validation == "validated"


def find_support(task: Task, ledger: Ledger) -> dict[str, tuple[str, ...]] | None:
    """Per slot, the ids of successful, validated receipts with exactly the planned scopes.

    For each planned evidence item the earliest such receipt is taken (there is no recency
    rule). Returns None when some planned scope has no usable receipt.
    """
    by_scope: dict[tuple[str, str, str, str | None], str] = {}
    for receipt in ledger.receipts:
        if _usable(receipt):
            s = receipt.scope
            by_scope.setdefault((s.entity, s.attribute, s.level, s.date), receipt.receipt_id)
    support: dict[str, tuple[str, ...]] = {}
    for plan in task.plan:
        ids = []
        for item in plan.evidence:
            s = item.scope
            rid = by_scope.get((s.entity, s.attribute, s.level, s.date))
            if rid is None:
                return None
            ids.append(rid)
        support[plan.slot] = tuple(ids)
    return support


def certificate_for(task: Task, ledger: Ledger, claims: Sequence[Claim]) -> Certificate:
    """A certificate bound to ``task``'s descriptor and the current ``ledger``."""
    return Certificate(
        task_id=task.task_id,
        descriptor_digest=descriptor_digest(task.descriptor),
        ledger_digest=ledger_digest(ledger.receipts),
        claims=tuple(claims),
    )


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def answer_message(task_id: str, answer: Mapping[str, Any], slots: Sequence[str]) -> str:
    """A naive agent's terminal message: the answer (if any), DONE, an APPROVED self-check."""
    lines = [f"Task {task_id}: all required data were retrieved and the task is finished."]
    shown = [slot for slot in slots if slot in answer]
    if shown:
        lines.append("Answer:")
        lines.extend(f"- {slot}: {_show(answer[slot])}" for slot in shown)
    lines += [DONE_LINE, SELF_CHECK_LINE]
    return "\n".join(lines)


def stagnation_message(call: CallSpec, error_code: str) -> str:
    """The message of an agent about to repeat a failing call (no DONE, no self-check)."""
    return (
        f"{call.tool_id} {_show(call.args)} failed again ({error_code}). "
        f"Calling {call.tool_id} with the same arguments once more."
    )


def clean_snapshot(task: Task, world: Mapping[str, Any]) -> Snapshot:
    """The supported clean snapshot (``C0``) of ``task`` against the plain ``world``."""
    trace = clean_trace(task, world)
    ledger = build_ledger(task.task_id, trace)
    support = find_support(task, ledger)
    if support is None:  # the plan's own calls always observe the planned scopes
        raise AssertionError(f"clean trace of {task.task_id} lacks planned evidence")
    claims = [
        Claim(
            slot=plan.slot,
            value=task.gold[plan.slot],
            evidence=support[plan.slot],
            transform=plan.transform,
        )
        for plan in task.plan
    ]
    answer = {claim.slot: claim.value for claim in claims}
    return Snapshot(
        snapshot_id=snapshot_id(task.task_id, CLEAN),
        task_id=task.task_id,
        fault=CLEAN,
        split=task.split,
        gold_decision="complete",
        question=task.question,
        descriptor=task.descriptor,
        requirements=task.requirements,
        trace=trace,
        ledger=ledger,
        certificate=certificate_for(task, ledger, claims),
        answer=answer,
        message=answer_message(task.task_id, answer, task.descriptor.required_slots),
        recovery=RecoveryState(),
    )
