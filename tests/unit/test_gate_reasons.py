"""The gate's reason codes are stable wire strings that collide with no other code."""

from __future__ import annotations

from harness.ect import ReasonCode
from harness.gate import GateReason
from harness.policies.reasons import PolicyReason


def test_the_gate_codes_are_pinned() -> None:
    assert [code.value for code in GateReason] == [
        "GATE_REFUSAL_BUDGET_SPENT",
        "GATE_RUN_ENDED_UNCERTIFIED",
    ]


def test_no_gate_code_is_a_verifier_or_policy_code() -> None:
    others = {c.value for c in ReasonCode} | {c.value for c in PolicyReason}
    assert not {c.value for c in GateReason} & others
