"""What a refused model reads: every reason code with its JSON path, and the evidence missing.

The text is built from the verifier's findings and the trusted contract only (no gold answer
exists here to leak). Per slot that is not yet supported it names the sources, scope and count
the contract asks for, and the receipt ids already in the ledger that fit them, so the model can
gather what is missing or cite what it has. The text is bounded (``MAX_FEEDBACK_CHARS``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

import msgspec

from harness.ect.model import Decision, Receipt, Requirements, ScopeRule, SlotRequirement, Verdict
from harness.ect.reasons import ReasonCode

__all__ = ["MAX_FEEDBACK_CHARS", "feedback_text", "in_scope", "instructions"]

MAX_FEEDBACK_CHARS: Final = 8000
_MAX_FINDINGS: Final = 40
_MAX_IDS: Final = 24
_ANSWER_CODES: Final = frozenset(
    {ReasonCode.COVERAGE_ANSWER_SLOT, ReasonCode.REPLAY_ANSWER_MISMATCH}
)


def in_scope(rule: ScopeRule, receipt: Receipt) -> bool:
    """Whether ``receipt`` is a usable citation under ``rule`` (source, scope, outcome)."""
    s = receipt.scope
    return (
        receipt.exec_status == "ok"
        and receipt.validation == "validated"
        and any(
            src.tool_id == receipt.tool_id and src.source_path == receipt.source_path
            for src in rule.sources
        )
        and s.entity in rule.entities
        and s.attribute in rule.attributes
        and s.level in rule.levels
        and s.date in rule.dates
    )


def _short(values: Sequence[object], limit: int = 12) -> str:
    shown = ", ".join("null" if v is None else str(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _need(slot: SlotRequirement, receipts: Sequence[Receipt]) -> str:
    rule = slot.scope
    count = (
        str(slot.min_evidence)
        if slot.min_evidence == slot.max_evidence
        else f"{slot.min_evidence}..{slot.max_evidence}"
    )
    sources = "; ".join(f"{s.tool_id} {s.source_path or '(whole result)'}" for s in rule.sources)
    fits = [r.receipt_id for r in receipts if in_scope(rule, r)]
    have = _short(fits, _MAX_IDS) if fits else "none yet"
    return (
        f"- slot {slot.slot}: cite {count} receipt(s) from {sources}; entity in "
        f"[{_short(rule.entities)}], attribute in [{_short(rule.attributes)}], level in "
        f"[{_short(rule.levels)}], date in [{_short(rule.dates)}]. In the ledger now: {have}."
    )


def feedback_text(
    decision: Decision,
    requirements: Requirements,
    receipts: Sequence[Receipt],
    *,
    verdict: Verdict,
    refusals: int,
    max_refusals: int,
) -> str:
    """The message a model gets back for one submission (see the module docstring)."""
    if verdict is Verdict.COMPLETE:
        return "Accepted: the certificate supports every required slot and the answer is certified."
    head = (
        f"Refused (the gate's verdict: {verdict.value}; refusal {refusals} of {max_refusals}). "
        "The harness fills in the task id and both digests; you write only the claims and the "
        "answer."
    )
    lines = [head, "Reasons:"]
    for finding in decision.findings[:_MAX_FINDINGS]:
        detail = ""
        if finding.expected is not None:
            detail += f" expected {finding.expected}"
        if finding.got is not None:
            detail += f" got {finding.got}"
        lines.append(f"- {finding.code.value} at {finding.path}{detail}")
    if len(decision.findings) > _MAX_FINDINGS:
        lines.append(f"- ... {len(decision.findings) - _MAX_FINDINGS} more")
    # A claim refused only because the answer differs from it rests on good evidence.
    supported = {c.slot for c in decision.claims if not set(c.codes) - _ANSWER_CODES}
    missing = [slot for slot in requirements.slots if slot.slot not in supported]
    if missing:
        lines.append("Evidence the contract asks for, per unsupported slot:")
        lines.extend(_need(slot, receipts) for slot in missing)
    if verdict is Verdict.STUCK:
        lines.append("The refusal budget is spent: the run stops as stuck.")
    text = "\n".join(lines)
    if len(text) > MAX_FEEDBACK_CHARS:
        text = text[: MAX_FEEDBACK_CHARS - 13] + "\n[truncated]"
    return text


def instructions(requirements: Requirements) -> str:
    """What a gated model is told once: how to submit, and what each slot must rest on."""
    lines = [
        "You finish only through the gate. Tool results carry receipts (ids like c01.0); cite "
        "them. To finish, submit `claims` - a JSON array with one object per required slot: "
        '{"slot": name, "value": value, "evidence": [receipt ids], "transform": {"op": ...}} - '
        "and `answer` - a JSON object mapping each slot to the same value. The harness adds "
        "the task id and digests. A refused submission comes back with the reasons; fix them "
        "and submit again.",
        "Required slots and the transforms each allows:",
    ]
    for slot in requirements.slots:
        ops = "; ".join(json.dumps(msgspec.to_builtins(t), sort_keys=True) for t in slot.transforms)
        lines.append(f"- {slot.slot}: {ops}")
    return "\n".join(lines)
