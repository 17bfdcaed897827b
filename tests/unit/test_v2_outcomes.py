"""CellResult: the type the analysis reads back; its invariants refuse inconsistent outcomes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness.studies.v2.outcomes import CellResult, StepRecord

STEP = StepRecord(decision=1, action="complete", ledger_digest="blake3:" + "0" * 64)


def _result(**changes: Any) -> CellResult:
    fields: dict[str, Any] = {
        "cell_id": "w10-lookup.incomplete.ect.s1",
        "task_id": "w10-lookup",
        "world_id": "10",
        "family": "lookup",
        "checkpoint": "incomplete",
        "policy": "ect",
        "seed": 1,
        "fault": "F1",
        "primary": True,
        "provider": "simulated",
        "simulated": True,
        "terminal": "complete",
        "terminal_decision": 1,
        "final_answer": {"value": 1},
        "supported_completion": True,
        "unsupported_completion": False,
        "premature_unsupported_termination": False,
        "clean_false_continuation": False,
        "recoverable_stuck": False,
        "recovery_event": False,
        "recovery_decision": None,
        "completed_after_recovery": False,
        "missing_at_checkpoint": 1,
        "missing_at_end": 0,
        "proposals": 1,
        "supported_proposals": 1,
        "rejected_supported_proposals": 0,
        "turns": 1,
        "tool_calls": 0,
        "failed_tool_calls": 0,
        "refused_tool_calls": 0,
        "provider_calls": 1,
        "planner_calls": 1,
        "critic_calls": 0,
        "provider_failures": 0,
        "prompt_tokens": 10,
        "output_tokens": 5,
        "thought_tokens": 0,
        "tokens": 15,
        "provider_latency_ms": 0.0,
        "cost_usd": 0.0,
        "cost_known": True,
        "steps": (STEP,),
    }
    fields.update(changes)
    return CellResult(**fields)


def test_v2_result_round_trips_and_refuses_unknown_fields() -> None:
    result = _result()
    data = msgspec.json.encode(result)
    assert msgspec.json.decode(data, type=CellResult) == result
    doc = msgspec.json.decode(data)
    doc["gold"] = 1
    with pytest.raises(msgspec.ValidationError, match="unknown field `gold`"):
        msgspec.convert(doc, CellResult)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"unsupported_completion": True}, "either supported or unsupported"),
        ({"terminal": "stuck", "final_answer": None}, "exactly a complete trajectory"),
        (
            {
                "supported_completion": False,
                "unsupported_completion": True,
                "premature_unsupported_termination": False,
            },
            "premature unsupported termination",
        ),
        ({"clean_false_continuation": True}, "clean checkpoints only"),
        ({"recoverable_stuck": True}, "only a stuck trajectory"),
        ({"recovery_event": True}, "recovery_decision is set exactly"),
        ({"completed_after_recovery": True}, "needs a recovery"),
        ({"turns": 2}, "turns must equal"),
        ({"tokens": 14}, "tokens must be the sum"),
        ({"critic_calls": 1}, "provider_calls must be"),
        (
            {
                "terminal": "budget_exhausted",
                "supported_completion": False,
                "final_answer": None,
            },
            "terminal_decision is None exactly",
        ),
    ],
)
def test_v2_result_invariants(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _result(**changes)
