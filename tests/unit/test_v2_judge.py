"""The gold judge: the oracle answer and required evidence, independent of the verifier."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
import pytest

from harness.ect import Certificate, Claim, Ledger, verify
from harness.studies.v2.judge import judge_proposal, missing_evidence, same_value
from harness.tools.adapter import build_ledger
from harness.worlds import (
    Task,
    build_tasks,
    certificate_for,
    clean_trace,
    find_support,
    generate_world,
    run_calls,
)
from harness.worlds.tasks import CallSpec


@cache
def _case(task_id: str) -> tuple[Task, Ledger, Certificate, dict[str, Any]]:
    world = generate_world(task_id[1:3])
    plain = world.to_plain()
    task = next(t for t in build_tasks(world) if t.task_id == task_id)
    ledger = build_ledger(task.task_id, clean_trace(task, plain))
    support = find_support(task, ledger)
    assert support is not None
    claims = [
        Claim(slot=p.slot, value=task.gold[p.slot], evidence=support[p.slot], transform=p.transform)
        for p in task.plan
    ]
    return task, ledger, certificate_for(task, ledger, claims), plain


def _with_claim(certificate: Certificate, index: int, **changes: Any) -> Certificate:
    claims = list(certificate.claims)
    claims[index] = msgspec.structs.replace(claims[index], **changes)
    return msgspec.structs.replace(certificate, claims=tuple(claims))


TASK = "w10-temporal_comparison"


def test_v2_judge_supports_the_clean_certificate() -> None:
    task, ledger, certificate, _ = _case(TASK)
    verdict = judge_proposal(task, ledger, dict(task.gold), certificate)
    assert verdict.supported
    assert verdict.answer_correct
    assert verdict.problems == ()


def test_v2_judge_is_not_the_verifier_digests_and_transforms_are_not_judged() -> None:
    # A certificate copying a stale ledger digest: ECT says continue, the trace supports it.
    task, ledger, certificate, _ = _case(TASK)
    stale = msgspec.structs.replace(certificate, ledger_digest="blake3:" + "0" * 64)
    assert not verify(task.descriptor, task.requirements, ledger, stale)
    assert judge_proposal(task, ledger, dict(task.gold), stale).supported


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ("value", "claimed value differs"),
        ("evidence_fewer", "not exactly the required evidence"),
        ("evidence_absent", "not in the ledger"),
        ("drop_claim", "0 claims"),
        ("extra_slot", "slots the task does not require"),
    ],
    ids=["value", "fewer-receipts", "absent-receipt", "missing-claim", "extra-slot"],
)
def test_v2_judge_refuses_unsupported_certificates(change: str, problem: str) -> None:
    task, ledger, certificate, _ = _case(TASK)
    first = certificate.claims[0]
    if change == "value":
        bad = _with_claim(certificate, 0, value=first.value + 1)
    elif change == "evidence_fewer":
        bad = _with_claim(certificate, 0, evidence=first.evidence[:-1])
    elif change == "evidence_absent":
        bad = _with_claim(certificate, 0, evidence=("c99.0", *first.evidence[1:]))
    elif change == "drop_claim":
        bad = msgspec.structs.replace(certificate, claims=certificate.claims[1:])
    else:
        extra = msgspec.structs.replace(first, slot="bonus")
        bad = msgspec.structs.replace(certificate, claims=(*certificate.claims, extra))
    verdict = judge_proposal(task, ledger, dict(task.gold), bad)
    assert not verdict.supported
    assert any(problem in p for p in verdict.problems), verdict.problems


def test_v2_judge_refuses_a_failed_receipt_even_with_the_right_scope() -> None:
    task, ledger, certificate, plain = _case(TASK)
    item = task.plan[0].evidence[0]
    failing = CallSpec(tool_id="get_metric", args={**item.call.args, "period": "2024/02"})
    trace = run_calls(plain, [failing], first=50)
    failed = build_ledger(task.task_id, trace).receipts
    combined = Ledger(task_id=task.task_id, receipts=(*ledger.receipts, *failed))
    bad = _with_claim(
        certificate, 0, evidence=(failed[0].receipt_id, *certificate.claims[0].evidence[1:])
    )
    verdict = judge_proposal(task, combined, dict(task.gold), bad)
    assert not verdict.supported


def test_v2_judge_wrong_answer_with_good_certificate_is_unsupported() -> None:
    task, ledger, certificate, _ = _case(TASK)
    answer = {**task.gold, "change": task.gold["change"] + 1}
    verdict = judge_proposal(task, ledger, answer, certificate)
    assert not verdict.supported
    assert not verdict.answer_correct
    assert not judge_proposal(task, ledger, None, None).supported


def test_v2_judge_missing_evidence_counts_planned_scopes() -> None:
    task, ledger, _, _ = _case(TASK)
    assert missing_evidence(task, ledger) == ((), ())
    empty = Ledger(task_id=task.task_id, receipts=())
    scopes, calls = missing_evidence(task, empty)
    assert len(scopes) == 6
    assert len(calls) == 6


@pytest.mark.parametrize(
    ("got", "want", "abs_tol", "rel_tol", "same"),
    [
        (1, 1, 0.0, 0.0, True),
        (1.0, 1, 0.0, 0.0, True),
        (True, 1, 0.0, 0.0, False),
        (0.8877, 0.8878, 0.0, 1e-3, True),
        (0.8877, 0.8878, 0.0, 1e-9, False),
        (["a", 2], ["a", 2], 0.0, 0.0, True),
        (["a", 2], ["a", 3], 0.0, 0.0, False),
        ({"k": 1}, {"k": 1}, 0.0, 0.0, True),
        (None, None, 0.0, 0.0, True),
        (None, 0, 0.0, 0.0, False),
        ("2024-06", "2024-06", 0.0, 0.0, True),
        (float("nan"), 1.0, 1.0, 0.0, False),
    ],
)
def test_v2_same_value(got: Any, want: Any, abs_tol: float, rel_tol: float, same: bool) -> None:
    assert same_value(got, want, abs_tol, rel_tol) is same
