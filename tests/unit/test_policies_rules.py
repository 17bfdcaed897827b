"""Deterministic policies: completion token, self-check, heuristic, postcondition oracle, ECT.

Views come from the real benchmark's development snapshots, edited only where a case needs it.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness import policies
from harness.benchmark.build import benchmark
from harness.ect import Check, ReasonCode, Verdict
from harness.policies import (
    ABLATION_CHECKS,
    MIN_RESPONSE_CHARS,
    Ablation,
    CompletionToken,
    DecisionSource,
    EctPolicy,
    PermissiveHeuristic,
    PolicyReason,
    PostconditionOracle,
    SelfCheck,
)
from harness.policies.signals import trailing_repeats
from harness.worlds import RecoveryState, Snapshot, SnapshotView

PUBLIC = {
    "ABLATION_CHECKS",
    "MIN_PRIOR_CALLS",
    "MIN_RESPONSE_CHARS",
    "RECOVERY_ATTEMPTS",
    "STAGNATION_REPEATS",
    "STUCK_REPEATS",
    "Ablation",
    "CompletionToken",
    "Controller",
    "CriticCore",
    "DecisionSource",
    "EctPolicy",
    "FullTraceCritic",
    "ModelPolicy",
    "PermissiveHeuristic",
    "Policy",
    "PolicyDecision",
    "PolicyReason",
    "PostconditionOracle",
    "RecoveryState",
    "SelfCheck",
    "SnapshotView",
    "attempt_id",
    "fast_path",
    "view_digest",
}


def _snapshot(snapshot_id: str) -> Snapshot:
    return benchmark().snapshot(snapshot_id)


def _view(snapshot_id: str, **changes: Any) -> SnapshotView:
    return msgspec.structs.replace(_snapshot(snapshot_id).view(), **changes)


def test_policies_public_api_is_pinned() -> None:
    assert set(policies.__all__) == PUBLIC
    for name in policies.__all__:
        assert hasattr(policies, name)


def test_policy_reason_wire_strings_are_pinned_and_disjoint_from_verifier_codes() -> None:
    assert all(reason.value == reason.name for reason in PolicyReason)
    assert not {r.value for r in PolicyReason} & {c.value for c in ReasonCode}
    assert [r.value for r in PolicyReason] == [
        "TOKEN_DONE",
        "TOKEN_ABSENT",
        "SELF_CHECK_APPROVED",
        "SELF_CHECK_NOT_APPROVED",
        "HEURISTIC_ACCEPTED",
        "HEURISTIC_NO_FINAL_RESPONSE",
        "HEURISTIC_SHORT_RESPONSE",
        "HEURISTIC_NO_PRIOR_CALL",
        "CRITIC_FAST_REPEATED_CALLS",
        "CRITIC_FAST_COMPLETION_SIGNAL",
        "CRITIC_MODEL_COMPLETE",
        "CRITIC_MODEL_CONTINUE",
        "CRITIC_MODEL_STUCK",
        "PROVIDER_FAILURE",
        "PARSE_FAILURE",
        "CONTROLLER_RECOVERY_ATTEMPT",
        "ORACLE_MATCH",
        "ORACLE_NO_ANSWER",
        "ORACLE_MISMATCH",
        "RECOVERY_AVAILABLE",
        "RECOVERY_UNAVAILABLE",
        "RECOVERY_CHECK_ABLATED",
    ]


@pytest.mark.parametrize(
    ("message", "complete"),
    [
        ("Answer: 3\nDONE", True),
        ("All done. DONE.", True),
        ("done", False),
        ("UNDONE work", False),
        ("DONEX", False),
        ("", False),
    ],
    ids=["line", "in-sentence", "lowercase", "inside-word", "prefix", "empty"],
)
def test_completion_token_is_the_whole_word_done(message: str, complete: bool) -> None:
    decided = CompletionToken().decide(_view("w00-lookup.C0", message=message))
    assert (decided.decision is Verdict.COMPLETE) == complete
    assert decided.source is DecisionSource.RULE
    expected = PolicyReason.TOKEN_DONE if complete else PolicyReason.TOKEN_ABSENT
    assert decided.reason_codes == (expected.value,)


@pytest.mark.parametrize(
    ("message", "complete"),
    [
        ("Self-check: all slots filled. APPROVED", True),
        ("  self check - APPROVED", True),
        ("APPROVED", False),
        ("Self-check: two values are unverified.", False),
        ("Note: APPROVED\nSelf-check: pending", False),
    ],
    ids=["checklist", "spacing-and-case", "no-checklist-line", "not-approved", "other-line"],
)
def test_self_check_reads_only_its_checklist_line(message: str, complete: bool) -> None:
    decided = SelfCheck().decide(_view("w00-lookup.C0", message=message))
    assert (decided.decision is Verdict.COMPLETE) == complete


def test_heuristic_accepts_a_long_final_response_after_a_call() -> None:
    view = _view("w00-top_k.C0")
    decided = PermissiveHeuristic().decide(view)
    assert decided.decision is Verdict.COMPLETE
    assert decided.reason_codes == (PolicyReason.HEURISTIC_ACCEPTED.value,)


def test_heuristic_accepts_an_empty_answer_object_with_a_long_message() -> None:
    # F1: the final response has no claimed values but a long message - the rule is shallow.
    decided = PermissiveHeuristic().decide(_snapshot("w00-top_k.F1").view())
    assert decided.decision is Verdict.COMPLETE


@pytest.mark.parametrize(
    ("changes", "reasons"),
    [
        ({"answer": None}, [PolicyReason.HEURISTIC_NO_FINAL_RESPONSE]),
        ({"message": "x" * (MIN_RESPONSE_CHARS - 1)}, [PolicyReason.HEURISTIC_SHORT_RESPONSE]),
        ({"trace": ()}, [PolicyReason.HEURISTIC_NO_PRIOR_CALL]),
        (
            {"answer": None, "message": "  ", "trace": ()},
            [
                PolicyReason.HEURISTIC_NO_FINAL_RESPONSE,
                PolicyReason.HEURISTIC_SHORT_RESPONSE,
                PolicyReason.HEURISTIC_NO_PRIOR_CALL,
            ],
        ),
    ],
    ids=["no-final-response", "short", "no-call", "all-three"],
)
def test_heuristic_names_every_failed_condition(
    changes: dict[str, Any], reasons: list[PolicyReason]
) -> None:
    decided = PermissiveHeuristic().decide(_view("w00-top_k.C0", **changes))
    assert decided.decision is Verdict.CONTINUE
    assert decided.reason_codes == tuple(r.value for r in reasons)


def test_heuristic_length_threshold_is_exact() -> None:
    view = _view("w00-top_k.C0", message="y" * MIN_RESPONSE_CHARS)
    assert PermissiveHeuristic().decide(view).decision is Verdict.COMPLETE


def _oracle() -> PostconditionOracle:
    return PostconditionOracle({t.task_id: t.gold for t in benchmark().tasks})


def test_postcondition_oracle_completes_on_the_gold_answer_only() -> None:
    oracle = _oracle()
    assert oracle.decide(_snapshot("w01-aggregation.C0").view()).decision is Verdict.COMPLETE
    # F2 keeps the claimed values: right answer, broken support - the oracle cannot tell.
    assert oracle.decide(_snapshot("w01-aggregation.F2").view()).decision is Verdict.COMPLETE
    for fault, reason in (
        ("F1", PolicyReason.ORACLE_MISMATCH),
        ("F5", PolicyReason.ORACLE_MISMATCH),
        ("F6", PolicyReason.ORACLE_MISMATCH),
        ("F8", PolicyReason.ORACLE_NO_ANSWER),
    ):
        decided = oracle.decide(_snapshot(f"w01-aggregation.{fault}").view())
        assert decided.decision is Verdict.CONTINUE, fault
        assert decided.reason_codes == (reason.value,)
        assert decided.source is DecisionSource.REFERENCE


def test_postcondition_oracle_uses_the_contract_tolerance() -> None:
    task = next(t for t in benchmark().tasks if t.family == "aggregation")
    slot = next(s for s in task.requirements.slots if isinstance(task.gold[s.slot], float))
    view = _snapshot(f"{task.task_id}.C0").view()
    assert view.answer is not None
    gold = task.gold[slot.slot]
    allowed = max(slot.abs_tol, slot.rel_tol * abs(gold))
    assert allowed > 0
    near = {**view.answer, slot.slot: gold + allowed / 2}
    far = {**view.answer, slot.slot: gold + 2 * allowed}
    oracle = _oracle()
    near_view = msgspec.structs.replace(view, answer=near)
    far_view = msgspec.structs.replace(view, answer=far)
    assert oracle.decide(near_view).decision is Verdict.COMPLETE
    assert oracle.decide(far_view).decision is Verdict.CONTINUE


def test_postcondition_oracle_without_gold_for_the_task_is_misuse() -> None:
    with pytest.raises(KeyError):
        PostconditionOracle({}).decide(_snapshot("w00-lookup.C0").view())


def test_ect_completes_the_clean_snapshot_with_no_reason() -> None:
    decided = EctPolicy().decide(_snapshot("w00-lookup.C0").view())
    assert decided.decision is Verdict.COMPLETE
    assert decided.reason_codes == ()
    assert decided.source is DecisionSource.VERIFIER


@pytest.mark.parametrize("fault", ["F1", "F2", "F3", "F4", "F5", "F6", "F7"])
def test_ect_continues_on_every_certificate_fault_with_verifier_codes(fault: str) -> None:
    decided = EctPolicy().decide(_snapshot(f"w00-hierarchy_join.{fault}").view())
    assert decided.decision is Verdict.CONTINUE
    assert decided.reason_codes
    assert all(code in ReasonCode.__members__ for code in decided.reason_codes)
    assert decided.feedback.startswith("The certificate does not license complete: ")


def test_ect_recovery_check_continues_when_a_recovery_is_available() -> None:
    snapshot = _snapshot("w00-lookup.F8")
    assert trailing_repeats(snapshot.trace, failing_only=True) == 2
    decided = EctPolicy().decide(snapshot.view())
    assert decided.decision is Verdict.CONTINUE
    assert decided.reason_codes[-1] == PolicyReason.RECOVERY_AVAILABLE.value
    assert ReasonCode.ADAPTER_CERTIFICATE_MISSING.value in decided.reason_codes


def test_ect_recovery_check_stops_as_stuck_without_a_recovery() -> None:
    view = _snapshot("w00-lookup.F8").view()
    assert view.recovery.repeated_call is not None
    hopeless = RecoveryState(
        repeated_call=view.recovery.repeated_call,
        repeats=view.recovery.repeats,
        last_error=view.recovery.last_error,
    )
    decided = EctPolicy().decide(msgspec.structs.replace(view, recovery=hopeless))
    assert decided.decision is Verdict.STUCK
    assert decided.reason_codes[-1] == PolicyReason.RECOVERY_UNAVAILABLE.value


def test_ect_without_the_recovery_check_is_stuck_on_stagnation() -> None:
    decided = EctPolicy(Ablation.RECOVERY_CHECK).decide(_snapshot("w00-lookup.F8").view())
    assert decided.decision is Verdict.STUCK
    assert decided.reason_codes[-1] == PolicyReason.RECOVERY_CHECK_ABLATED.value


def test_ect_ablation_mapping_is_pinned() -> None:
    assert {a: set(c) for a, c in ABLATION_CHECKS.items()} == {
        Ablation.CLAIM_COVERAGE: {Check.COVERAGE},
        Ablation.TASK_SCOPE: {Check.SCOPE},
        Ablation.OUTCOME_VALIDATION: {Check.OUTCOME},
        Ablation.LEDGER_REFERENCE: {Check.REFERENCE},
        Ablation.VALUE_REPLAY: {Check.REPLAY},
        Ablation.EXACT_TRANSFORM: {Check.TRANSFORM},
        Ablation.RECOVERY_CHECK: set(),
    }
    # Adapter and binding are never ablated.
    assert not any({Check.ADAPTER, Check.BINDING} & c for c in ABLATION_CHECKS.values())
    assert [EctPolicy(a).name for a in Ablation] == [
        "ect-no-claim_coverage",
        "ect-no-task_scope",
        "ect-no-outcome_validation",
        "ect-no-ledger_reference",
        "ect-no-value_replay",
        "ect-no-exact_transform",
        "ect-no-recovery_check",
    ]
    assert EctPolicy().name == "ect"


@pytest.mark.parametrize(
    ("ablation", "fault"),
    [(Ablation.CLAIM_COVERAGE, "F5"), (Ablation.VALUE_REPLAY, "F6")],
    ids=["coverage-F5", "replay-F6"],
)
def test_ect_ablation_lets_its_matched_fault_through(ablation: Ablation, fault: str) -> None:
    view = _snapshot(f"w01-top_k.{fault}").view()
    assert EctPolicy().decide(view).decision is Verdict.CONTINUE
    assert EctPolicy(ablation).decide(view).decision is Verdict.COMPLETE


def test_trailing_repeats_counts_identical_requests_at_the_end() -> None:
    clean = _snapshot("w00-lookup.C0").trace
    stagnating = _snapshot("w00-lookup.F8").trace
    assert trailing_repeats(()) == 0
    assert trailing_repeats(clean) == 1
    assert trailing_repeats(stagnating) == 2
    assert trailing_repeats((*clean, clean[-1], clean[-1])) == 3
    # The clean calls succeeded, so they are not failing repeats.
    assert trailing_repeats((*clean, clean[-1]), failing_only=True) == 0
