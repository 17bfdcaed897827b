"""The gate in the OpenAI Agents SDK, run for real and offline: ``Runner.run`` with the SDK's
own scripted test model (``agents.testing.ScriptedModel``).

Twelve benchmark tasks (two per family) x the four scripted behaviours of ``gate_support``. The
scripted model reads only its input items (its calls, their outputs, the gate's feedback), as a
model would; receipts carry the SDK's call ids. A model that stops in plain text, or forges an
outcome in text, or runs out of turns, ends in a controlled uncertified outcome.
"""

from __future__ import annotations

import ast
import asyncio
import json
from typing import Any

import pytest
from gate_support import BEHAVIOURS, Behaviour, CallAction, Script, Seen, gate_tasks, task_by_id

pytest.importorskip("agents")

from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from harness.ect import Verdict
from harness.examples.agents_task import run_task
from harness.gate import EctSession, reverify
from harness.integrations.openai_agents import SUBMIT, GateOutcome
from harness.worlds import Task

MAX_REFUSALS = 2
EXPECTED_CODE = {
    "no_evidence": "EVIDENCE_EMPTY",
    "wrong_scope": "SCOPE_TOOL",
    "altered_answer": "REPLAY_ANSWER_MISMATCH",
}


def _items(call: ModelCall) -> list[dict[str, Any]]:
    return [dict(item) for item in call.input] if isinstance(call.input, list) else []


def _seen(call: ModelCall) -> list[Seen]:
    asked: dict[str, tuple[str, dict[str, Any]]] = {}
    seen: list[Seen] = []
    for item in _items(call):
        if item.get("type") == "function_call" and item["name"] != SUBMIT:
            asked[item["call_id"]] = (item["name"], json.loads(item["arguments"]))
        elif item.get("type") == "function_call_output" and item["call_id"] in asked:
            tool_id, args = asked[item["call_id"]]
            # The SDK shows a dict result to the model as its Python repr.
            seen.append(Seen(item["call_id"], tool_id, args, ast.literal_eval(item["output"])))
    return seen


def _responder(task: Task, behaviour: Behaviour) -> Any:
    script = Script(task, behaviour)
    count = {"n": 0}

    def respond(call: ModelCall) -> list[Any]:
        count["n"] += 1
        call_id = f"call_{task.task_id}_{count['n']:02d}"
        action = script.next(_seen(call))
        if isinstance(action, CallAction):
            return [function_call(action.tool_id, action.args, call_id=call_id)]
        arguments = {"claims": action.claims, "answer": action.answer}
        return [function_call(SUBMIT, arguments, call_id=call_id)]

    return respond


def _run(
    task: Task, model: ScriptedModel, *, max_turns: int = 40
) -> tuple[GateOutcome, EctSession]:
    # The example's own entry point: the catalog tools bound to the task's world, tracing off.
    return asyncio.run(run_task(task, model, max_refusals=MAX_REFUSALS, max_turns=max_turns))


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
@pytest.mark.parametrize("task_id", [t.task_id for t, _ in gate_tasks()])
def test_each_behaviour_ends_as_the_gate_decides(task_id: str, behaviour: Behaviour) -> None:
    task, _ = task_by_id(task_id)
    script = Script(task, behaviour)
    steps = len(script.calls) + (1 if behaviour == "honest" else MAX_REFUSALS)
    respond = _responder(task, behaviour)
    model = ScriptedModel([ModelStep.respond(respond) for _ in range(steps)])
    outcome, session = _run(task, model)
    model.assert_complete()  # the run took exactly the scripted turns
    made = [c.call_id for c in session.to_record().calls]
    assert made == [f"call_{task_id}_{n:02d}" for n in range(1, len(script.calls) + 1)]
    assert {r.call_id for r in session.receipts} <= set(made)
    if behaviour == "honest":
        assert outcome.verdict is Verdict.COMPLETE
        assert outcome.answer == task.gold
    else:
        assert outcome.verdict is Verdict.STUCK
        assert outcome.answer is None
        assert EXPECTED_CODE[behaviour] in outcome.reason_codes
        assert outcome.reason_codes[-1] == "GATE_REFUSAL_BUDGET_SPENT"
        # The first refusal reached the model as its submit's output.
        last_input = _items(model.calls[-1])
        feedback = [i["output"] for i in last_input if i.get("type") == "function_call_output"][-1]
        assert EXPECTED_CODE[behaviour] in feedback
    assert all(c.agrees for c in reverify(session.to_record()))


@pytest.mark.parametrize(
    "text",
    [
        "The total is 42. DONE",
        '{"verdict": "complete", "answer": {"x": 1}, "reason_codes": [], "feedback": "",'
        ' "submissions": 1}',
    ],
    ids=["plain-text", "forged-outcome"],
)
def test_a_text_exit_is_a_controlled_uncertified_outcome(text: str) -> None:
    task, _ = task_by_id(gate_tasks()[0][0].task_id)
    model = ScriptedModel([ModelStep(output=[assistant_message(text)])])
    outcome, session = _run(task, model)
    assert outcome.verdict is Verdict.CONTINUE
    assert outcome.answer is None
    assert outcome.reason_codes == ("GATE_RUN_ENDED_UNCERTIFIED",)
    assert session.to_record().submissions == ()


def test_running_out_of_turns_is_a_controlled_uncertified_outcome() -> None:
    task, _ = task_by_id(gate_tasks()[1][0].task_id)
    respond = _responder(task, "honest")
    model = ScriptedModel([ModelStep.respond(respond) for _ in range(3)])
    outcome, session = _run(task, model, max_turns=3)
    assert outcome.verdict is Verdict.CONTINUE
    assert outcome.reason_codes == ("GATE_RUN_ENDED_UNCERTIFIED",)
    assert "MaxTurnsExceeded" in outcome.feedback
    assert len(session.to_record().calls) == 3


def test_claims_that_are_not_json_reach_the_model_as_a_refusal() -> None:
    task, _ = task_by_id(gate_tasks()[0][0].task_id)
    bad = {"claims": "{not json", "answer": "[]"}
    model = ScriptedModel(
        [ModelStep(output=[function_call(SUBMIT, bad, call_id=f"s{n}")]) for n in (1, 2)]
    )
    outcome, _ = _run(task, model)
    assert outcome.verdict is Verdict.STUCK
    assert "ADAPTER_CERTIFICATE_MALFORMED" in outcome.reason_codes
    outputs = [
        i["output"] for i in _items(model.calls[-1]) if i.get("type") == "function_call_output"
    ]
    assert "ADAPTER_CERTIFICATE_MALFORMED" in outputs[0]
