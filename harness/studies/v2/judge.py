"""The gold judge: is a completion proposal supported, judged against the oracle (not by ECT)?

A proposal is *supported* when, for every required slot of the task,

1. the proposed answer holds the oracle's value (numbers within the slot's planned absolute or
   relative tolerance, everything else exactly; lists element-wise, objects key-wise);
2. the certificate has exactly one claim for the slot, claiming that same value; and
3. the claim cites exactly the oracle's required evidence for the slot - one receipt per
   planned scope, every planned scope covered, no other - and every cited receipt is in the
   ledger, belongs to the task, recorded a successful, validated call, and comes from a
   legitimate source of the slot (``harness.worlds.tasks.legitimate_sources``: the one
   definition the contract shares, e.g. the metric lookup or the matching series point).

The certificate must claim no slot the task does not require. Nothing else of the
certificate is judged: its digests and declared transforms are the verifier's business, and
this judge shares no code with the verifier (it compares values itself, and reads scopes and
statuses straight off the receipts). It sees gold, so it scores trajectories and is never
shown to a planner or a policy. Pure functions; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import msgspec

from harness.ect.model import Certificate, Ledger, Receipt, Scope
from harness.worlds.tasks import CallSpec, SlotPlan, Task, legitimate_sources

__all__ = ["GoldJudgement", "judge_proposal", "missing_evidence", "same_value"]


class GoldJudgement(msgspec.Struct, frozen=True, kw_only=True):
    """The gold judge's verdict on one completion proposal.

    Attributes:
        supported: the proposal is supported (see the module docstring).
        answer_correct: every required slot's proposed answer equals the oracle's.
        problems: why it is not supported, one short line per finding (empty when supported).
    """

    supported: bool
    answer_correct: bool
    problems: tuple[str, ...]


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_value(got: Any, want: Any, abs_tol: float = 0.0, rel_tol: float = 0.0) -> bool:
    """``got`` equals the oracle value ``want`` (numbers within tolerance), recursively.

    Numbers compare by exact rational value whatever their JSON type (``3.0`` is 3; ``true``
    and ``"3"`` are not numbers): a float subtraction could round a difference away, and
    ``int - float`` overflows for integers beyond the float range.
    """
    if _number(want):
        if not _number(got) or (isinstance(got, float) and not math.isfinite(got)):
            return False
        if got == want:
            return True
        exact = Fraction(want)
        return abs(Fraction(got) - exact) <= max(Fraction(abs_tol), Fraction(rel_tol) * abs(exact))
    if isinstance(want, (list, tuple)):
        return (
            isinstance(got, (list, tuple))
            and len(got) == len(want)
            and all(same_value(g, w, abs_tol, rel_tol) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(same_value(got[k], want[k], abs_tol, rel_tol) for k in want)
        )
    return type(got) is type(want) and bool(got == want)


def _scope(receipt: Receipt) -> tuple[str, str, str, str | None]:
    s = receipt.scope
    return (s.entity, s.attribute, s.level, s.date)


def _evidence_problems(
    plan: SlotPlan, cited: tuple[str, ...], by_id: Mapping[str, Receipt]
) -> list[str]:
    wanted = {
        (i.scope.entity, i.scope.attribute, i.scope.level, i.scope.date) for i in plan.evidence
    }
    sources = {(s.tool_id, s.source_path) for s in legitimate_sources(plan.evidence)}
    problems: list[str] = []
    scopes = []
    for rid in cited:
        receipt = by_id.get(rid)
        if receipt is None:
            problems.append(f"{plan.slot}: cites {rid}, which is not in the ledger")
            continue
        if receipt.exec_status != "ok" or receipt.validation != "validated":
            problems.append(f"{plan.slot}: cites {rid}, which records a failed or invalid call")
        if (receipt.tool_id, receipt.source_path) not in sources:
            problems.append(f"{plan.slot}: cites {rid}, which is not from a source of the slot")
        scopes.append(_scope(receipt))
    if len(scopes) == len(cited) and (set(scopes) != wanted or len(scopes) != len(wanted)):
        problems.append(f"{plan.slot}: cited scopes are not exactly the required evidence")
    return problems


def judge_proposal(
    task: Task,
    ledger: Ledger,
    answer: Mapping[str, Any] | None,
    certificate: Certificate | None,
) -> GoldJudgement:
    """Judge one completion proposal against the oracle answer and evidence plan."""
    problems: list[str] = []
    answer_correct = answer is not None
    for plan in task.plan:
        want = task.gold[plan.slot]
        if answer is None or plan.slot not in answer:
            answer_correct = False
            problems.append(f"{plan.slot}: no answer")
        elif not same_value(answer[plan.slot], want, plan.abs_tol, plan.rel_tol):
            answer_correct = False
            problems.append(f"{plan.slot}: answer differs from the oracle's")
    if certificate is None:
        problems.append("no certificate")
        return GoldJudgement(
            supported=False, answer_correct=answer_correct, problems=tuple(problems)
        )
    if certificate.task_id != task.task_id:
        problems.append("certificate names another task")
    by_id = {r.receipt_id: r for r in ledger.receipts if r.task_id == task.task_id}
    required = {plan.slot for plan in task.plan}
    extra = sorted({c.slot for c in certificate.claims} - required)
    if extra:
        problems.append(f"claims for slots the task does not require: {', '.join(extra)}")
    for plan in task.plan:
        claims = [c for c in certificate.claims if c.slot == plan.slot]
        if len(claims) != 1:
            problems.append(f"{plan.slot}: {len(claims)} claims")
            continue
        claim = claims[0]
        if not same_value(claim.value, task.gold[plan.slot], plan.abs_tol, plan.rel_tol):
            problems.append(f"{plan.slot}: claimed value differs from the oracle's")
        problems.extend(_evidence_problems(plan, claim.evidence, by_id))
    return GoldJudgement(
        supported=not problems, answer_correct=answer_correct, problems=tuple(problems)
    )


def _key(scope: Scope) -> tuple[str, str, str, str | None]:
    return (scope.entity, scope.attribute, scope.level, scope.date)


def missing_evidence(task: Task, ledger: Ledger) -> tuple[tuple[Scope, ...], tuple[CallSpec, ...]]:
    """The oracle's required scopes without a successful, validated receipt in ``ledger``
    (in plan order, each once), and the distinct planned calls that would supply them."""
    have = {
        _scope(r) for r in ledger.receipts if r.exec_status == "ok" and r.validation == "validated"
    }
    scopes: dict[tuple[str, str, str, str | None], Scope] = {}
    calls: dict[bytes, CallSpec] = {}
    for plan in task.plan:
        for item in plan.evidence:
            key = _key(item.scope)
            if key not in have and key not in scopes:
                scopes[key] = item.scope
                calls.setdefault(msgspec.json.encode(item.call, order="sorted"), item.call)
    return tuple(scopes.values()), tuple(calls.values())
